//! The host's swap devices and memory cgroups for validation runs: a zram
//! swap device set up and torn down, and a cgroup v1 memory group with a
//! limit, created and removed. `KnobGuard` journals each before it acts,
//! so every exit path (and the next holder, after a kill) undoes it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::knobs::KnobError;

/// Where the cgroup v1 memory controller is mounted on the host.
pub const MEMCG_ROOT: &str = "/sys/fs/cgroup/memory";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KnobError + '_ {
    move |source| KnobError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, value: &str) -> Result<(), KnobError> {
    fs::write(path, value).map_err(io(path))
}

/// Runs a system tool (util-linux), failing with its message.
fn run(tool: &str, args: &[&str]) -> Result<(), KnobError> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| KnobError::Unsupported(format!("running {tool}: {e}")))?;
    if !out.status.success() {
        return Err(KnobError::Unsupported(format!(
            "{tool} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The host's active swap devices (`/proc/swaps` past its header).
pub fn active_swaps() -> Vec<String> {
    fs::read_to_string("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// A validation run owns the host's swap: it must have none already.
pub fn check_no_swap() -> Result<(), KnobError> {
    let active = active_swaps();
    if !active.is_empty() {
        return Err(KnobError::Unsupported(format!(
            "the host swaps to {} already; swap validation needs a host without swap",
            active.join(", ")
        )));
    }
    Ok(())
}

/// zram device `dev` as swap of `bytes`: reset, sized, formatted, on.
pub fn zram_on(dev: &str, bytes: u64) -> Result<(), KnobError> {
    let sys = Path::new("/sys/block").join(dev);
    if !sys.exists() {
        return Err(KnobError::Unsupported(format!(
            "{} does not exist: no zram device",
            sys.display()
        )));
    }
    write(&sys.join("reset"), "1")?;
    write(&sys.join("disksize"), &bytes.to_string())?;
    let node = format!("/dev/{dev}");
    run("mkswap", &[&node])?;
    run("swapon", &[&node])
}

/// Swaps `dev` off (if it is on) and resets it.
pub fn zram_off(dev: &str) -> Result<(), KnobError> {
    let node = format!("/dev/{dev}");
    if active_swaps().iter().any(|s| *s == node) {
        run("swapoff", &[&node])?;
    }
    write(&Path::new("/sys/block").join(dev).join("reset"), "1")
}

/// A fresh cgroup directory name under the memory controller.
pub fn new_cgroup_dir() -> Result<PathBuf, KnobError> {
    let root = Path::new(MEMCG_ROOT);
    if !root.join("memory.limit_in_bytes").exists() {
        return Err(KnobError::Unsupported(format!(
            "{MEMCG_ROOT} is not a cgroup v1 memory controller"
        )));
    }
    for n in 0.. {
        let dir = root.join(format!("largo-{}-{n}", std::process::id()));
        if !dir.exists() {
            return Ok(dir);
        }
    }
    unreachable!("some name is free")
}

/// `mkdir` of the cgroup and its limit (`u64::MAX`: none).
pub fn make_cgroup(dir: &Path, bytes: u64) -> Result<(), KnobError> {
    fs::create_dir(dir).map_err(io(dir))?;
    if bytes == u64::MAX {
        return Ok(());
    }
    write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())
}

/// `rmdir` of a cgroup whose tasks are gone (tried for a second while
/// they finish exiting).
pub fn remove_cgroup(dir: &Path) -> Result<(), KnobError> {
    if !dir.exists() {
        return Ok(());
    }
    let mut last = None;
    for _ in 0..100 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(KnobError::Io {
        path: dir.to_path_buf(),
        source: last.expect("tried"),
    })
}

/// The pid of the kernel thread named `name` (`/proc/PID/comm`).
pub fn kthread_pid(name: &str) -> Option<u32> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim() == name).then_some(pid)
    })
}

/// khugepaged's pid, remembered between calls: a scan of /proc costs
/// about half a millisecond, and validation asks before every native
/// process. The thread keeps its pid until THP is turned off; a
/// remembered pid is checked by its `comm` before it is used.
pub fn khugepaged_pid() -> Option<u32> {
    static REMEMBERED: std::sync::Mutex<Option<u32>> = std::sync::Mutex::new(None);
    let mut remembered = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
    let alive = |pid: u32| fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "khugepaged");
    if let Some(pid) = remembered.filter(|&pid| alive(pid)) {
        return Some(pid);
    }
    *remembered = kthread_pid("khugepaged");
    *remembered
}

/// The cpus `pid` may run on (`Cpus_allowed_list`).
pub fn cpus_allowed(pid: u32) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// Binds `pid` to the cpus of `list` (`taskset -pc`); a thread that has
/// gone meanwhile (khugepaged stops when THP is turned off) is fine.
pub fn set_cpus_allowed(pid: u32, list: &str) -> Result<(), KnobError> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Ok(());
    }
    run("taskset", &["-pc", list, &pid.to_string()])
}

/// Whether zswap was ever set up on this boot (its debugfs directory
/// exists once it was, or it is enabled): large folios then never swap in
/// whole, and the model must be told.
pub fn zswap_ever_enabled() -> bool {
    let enabled = fs::read_to_string("/sys/module/zswap/parameters/enabled").unwrap_or_default();
    enabled.trim() == "Y" || Path::new("/sys/kernel/debug/zswap").exists()
}

/// The NUMA nodes online (`/sys/devices/system/node/online`, `0-1,3`);
/// 1 where it cannot be read.
pub fn nr_online_nodes() -> usize {
    let Ok(text) = fs::read_to_string("/sys/devices/system/node/online") else {
        return 1;
    };
    let last = text
        .trim()
        .split(',')
        .filter_map(|r| r.rsplit('-').next()?.parse::<usize>().ok())
        .max();
    last.map_or(1, |n| n + 1)
}

/// `khugepaged/full_scans`, if khugepaged's files are there.
fn khugepaged_full_scans() -> Option<u64> {
    crate::knobs::read_knob("transparent_hugepage/khugepaged/full_scans")
        .ok()?
        .parse()
        .ok()
}

/// Wakes khugepaged (a write of its `scan_sleep_millisecs`) and waits up
/// to `timeout` for the pass that follows to end (`full_scans` moves):
/// the knob writes that set up a case wake it too, and its scan starts
/// with `lru_add_drain_all`, which must not land inside the case's run.
/// Returns whether a pass ended; nothing to wait for when khugepaged
/// does not run (no PMD THP).
pub fn settle_khugepaged(timeout: std::time::Duration) -> bool {
    if kthread_pid("khugepaged").is_none() {
        return true;
    }
    let Some(before) = khugepaged_full_scans() else {
        return true;
    };
    if !largo_physmem::native::khugepaged_wake() {
        return false;
    }
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if khugepaged_full_scans().is_some_and(|n| n > before) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    false
}

/// Waits up to `timeout` for khugepaged (pid `pid`) to sleep between
/// passes: state `S` with its wait channel in `khugepaged_wait_work` (on
/// this host inlined into the thread's function, `khugepaged`), not
/// preempted (`R`) or blocked on a lock or in reclaim. With a process on its list it then
/// sleeps out `scan_sleep_millisecs` (an hour in validation) and only a
/// write of that file starts a pass: a case's own wake then starts one
/// pass that scans the case's mm. A pass still in flight at the wake (one
/// a registration on an empty list started, at nice 19 behind busy tasks)
/// would swallow it (mm/khugepaged.c `khugepaged_wait_work` rearms the
/// sleep after the pass). Returns false if it was not seen asleep within
/// `timeout` (true also when the thread is gone: nothing to wait for).
pub fn wait_khugepaged_asleep(pid: u32, timeout: std::time::Duration) -> bool {
    let asleep = || {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let wchan = fs::read_to_string(format!("/proc/{pid}/wchan")).ok()?;
        Some(khugepaged_between_passes(&stat, &wchan))
    };
    let start = std::time::Instant::now();
    loop {
        match asleep() {
            Some(true) => return true,
            // Gone (THP turned off meanwhile): nothing to wait for.
            None => return true,
            Some(false) if start.elapsed() >= timeout => return false,
            Some(false) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// Whether khugepaged's `/proc/PID/stat` and `wchan` show it asleep
/// between passes: in `khugepaged_wait_work`, or in the thread's own
/// function where the compiler inlined that.
fn khugepaged_between_passes(stat: &str, wchan: &str) -> bool {
    // `PID (comm) STATE ...`: the state follows the last ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    state == Some("S") && matches!(wchan.trim(), "khugepaged" | "khugepaged_wait_work")
}

/// This process bound to one cpu while it lives; its former cpus come
/// back on drop. A validation whose tasks run on another cpu keeps the
/// validator (and the tools it starts) off theirs: folios it faults or
/// reads in would go through that cpu's LRU batches and drain the tasks'.
pub struct CpuPin {
    saved: Option<nix::sched::CpuSet>,
}

impl CpuPin {
    pub fn to(cpu: usize) -> CpuPin {
        let me = nix::unistd::Pid::from_raw(0);
        let saved = nix::sched::sched_getaffinity(me).ok();
        let mut set = nix::sched::CpuSet::new();
        let pinned = set.set(cpu).is_ok() && nix::sched::sched_setaffinity(me, &set).is_ok();
        CpuPin {
            saved: saved.filter(|_| pinned),
        }
    }
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        if let Some(set) = self.saved.take() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::khugepaged_between_passes;

    #[test]
    fn khugepaged_is_between_passes_only_asleep_in_its_own_function() {
        let stat = |state: &str| format!("15523 (khugepaged) {state} 2 0 0 0 -1 2129984 0 0");
        assert!(khugepaged_between_passes(&stat("S"), "khugepaged\n"));
        assert!(khugepaged_between_passes(&stat("S"), "khugepaged_wait_work"));
        // Preempted inside a pass, or blocked on an mm's lock.
        assert!(!khugepaged_between_passes(&stat("R"), "0"));
        assert!(!khugepaged_between_passes(&stat("D"), "rwsem_down_read_slowpath"));
        assert!(!khugepaged_between_passes(&stat("S"), "rwsem_down_read_slowpath"));
        // A ')' in the name does not move the state field.
        assert!(khugepaged_between_passes("7 (a) b) S 2", "khugepaged"));
        assert!(!khugepaged_between_passes("", "khugepaged"));
    }
}
