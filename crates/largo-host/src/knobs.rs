//! The host's THP knobs (sysfs) and vm sysctls, written under a
//! machine-wide lock and restored on every exit path: when the guard is
//! dropped (also on panic), and, if the process died holding it, by the
//! next user from the journal it left.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Lock serialising every user of the host knobs (tests and commands).
pub const LOCK_PATH: &str = "/tmp/largo-host-knobs.lock";
/// Original values of the knobs a guard changed, while it holds them.
pub const JOURNAL_PATH: &str = "/tmp/largo-host-knobs.journal";

/// A knob write the host refused, or a missing file.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{0}")]
    Unsupported(String),
    /// The host kernel has no such knob (a knob of another kernel build):
    /// a case that sets it cannot run on this host.
    #[error("the host has no {} (model value {value})", path.display())]
    Absent { path: PathBuf, value: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> KnobError + '_ {
    move |source| KnobError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The file of a knob given by its kernel path (`transparent_hugepage/...`
/// and `swap/...` under /sys/kernel/mm, `vm/...` under /proc/sys,
/// `zswap/...` under /sys/module/zswap/parameters, `tracing/...` under
/// /sys/kernel/tracing).
pub fn knob_file(knob: &str) -> PathBuf {
    if let Some(rest) = knob.strip_prefix("vm/") {
        Path::new("/proc/sys/vm").join(rest)
    } else if let Some(rest) = knob.strip_prefix("zswap/") {
        Path::new("/sys/module/zswap/parameters").join(rest)
    } else if let Some(rest) = knob.strip_prefix("tracing/") {
        Path::new(TRACEFS).join(rest)
    } else {
        Path::new("/sys/kernel/mm").join(knob)
    }
}

/// The current value: the bracketed choice of `always [madvise] never`,
/// the first number of tracefs' `7 (expanded: 1408)`, the comment-free
/// lines of tracefs lists, or the whole trimmed contents.
pub fn read_knob(knob: &str) -> Result<String, KnobError> {
    let path = knob_file(knob);
    let text = fs::read_to_string(&path).map_err(io_err(&path))?;
    if knob.ends_with("buffer_size_kb") {
        return Ok(text.split_whitespace().next().unwrap_or("").to_string());
    }
    if knob.starts_with("tracing/") {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect();
        return Ok(lines.join("\n"));
    }
    Ok(selected(&text))
}

/// `always [madvise] never` -> `madvise`; `511` -> `511`.
pub fn selected(text: &str) -> String {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .map_or_else(|| text.trim().to_string(), str::to_string)
}

/// A special journal entry: tracefs was mounted by a guard and is
/// unmounted on restore.
pub const UNMOUNT_TRACEFS: &str = "!umount /sys/kernel/tracing";
/// The same for debugfs (read for the extfrag indices).
pub const UNMOUNT_DEBUGFS: &str = "!umount /sys/kernel/debug";

/// Where debugfs is mounted.
pub const DEBUGFS: &str = "/sys/kernel/debug";

fn write_knob(knob: &str, value: &str) -> Result<(), KnobError> {
    if let Some(dev) = knob.strip_prefix("!zram-off ") {
        return crate::hostswap::zram_off(dev);
    }
    if let Some(pid) = knob.strip_prefix("!affinity ") {
        let pid = pid
            .parse()
            .map_err(|_| KnobError::Unsupported(format!("journal entry !affinity {pid}")))?;
        return crate::hostswap::set_cpus_allowed(pid, value);
    }
    if let Some(dir) = knob.strip_prefix("!rmdir ") {
        return crate::hostswap::remove_cgroup(Path::new(dir));
    }
    if let Some(dir) = knob.strip_prefix("!umount ") {
        let p = Path::new(dir);
        return nix::mount::umount(p).map_err(|e| KnobError::Io {
            path: p.to_path_buf(),
            source: io::Error::from_raw_os_error(e as i32),
        });
    }
    let path = knob_file(knob);
    // O_TRUNC: tracefs lists (set_event, set_event_pid) are cleared
    // before the saved list is written back; sysfs and sysctl files
    // ignore it.
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(io_err(&path))?;
    if !value.is_empty() {
        f.write_all(value.as_bytes()).map_err(io_err(&path))?;
    }
    Ok(())
}

/// Where tracefs lives.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Why the host cannot be used, if it cannot: not root, no mTHP sysfs
/// controls, or a base page size the model run would not match.
pub fn unavailable_reason() -> Option<String> {
    let euid = effective_uid();
    if euid != 0 {
        return Some(format!("not root (euid {euid}): the THP sysfs knobs are not writable"));
    }
    let probe = knob_file("transparent_hugepage/hugepages-64kB/enabled");
    if !probe.exists() {
        return Some(format!(
            "{} does not exist: the kernel has no mTHP controls",
            probe.display()
        ));
    }
    None
}

fn effective_uid() -> u32 {
    // /proc/self/status has the effective uid as the second Uid: field.
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(u32::MAX)
}

/// Holds the knob lock; every knob it changed is restored when dropped.
///
/// The lock is an `flock` on [`LOCK_PATH`], held by an open file
/// description: a process forked while some thread holds a guard inherits
/// the lock, so such a child must not take a guard of its own (it would
/// wait on itself).
pub struct KnobGuard {
    lock: File,
    /// Original values, in the order first changed.
    saved: Vec<(String, String)>,
}

impl KnobGuard {
    /// Waits for the lock, then restores what a dead previous holder left.
    pub fn acquire() -> Result<KnobGuard, KnobError> {
        let path = Path::new(LOCK_PATH);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        flock(&lock).map_err(io_err(path))?;
        let mut guard = KnobGuard {
            lock,
            saved: Vec::new(),
        };
        guard.recover_journal()?;
        Ok(guard)
    }

    /// A previous holder died (SIGKILL, power) with knobs changed: put
    /// them back before anything else.
    fn recover_journal(&mut self) -> Result<(), KnobError> {
        let Ok(text) = fs::read_to_string(JOURNAL_PATH) else {
            return Ok(());
        };
        let saved: Vec<(String, String)> = serde_json::from_str(&text).unwrap_or_default();
        for (knob, value) in saved.iter().rev() {
            write_knob(knob, value)?;
        }
        let _ = fs::remove_file(JOURNAL_PATH);
        Ok(())
    }

    fn write_journal(&self) -> Result<(), KnobError> {
        let path = Path::new(JOURNAL_PATH);
        let text = serde_json::to_string(&self.saved).expect("strings serialise");
        fs::write(path, text).map_err(io_err(path))
    }

    /// Writes a knob, remembering its original value first.
    pub fn set(&mut self, knob: &str, value: &str) -> Result<(), KnobError> {
        if !self.saved.iter().any(|(k, _)| k == knob) {
            let original = read_knob(knob)?;
            self.saved.push((knob.to_string(), original));
            self.write_journal()?;
        }
        write_knob(knob, value)
    }

    /// Mounts tracefs if it is not mounted; the restore unmounts it.
    pub fn mount_tracefs(&mut self) -> Result<(), KnobError> {
        self.mount_fs("tracefs", TRACEFS, "trace", UNMOUNT_TRACEFS)
    }

    /// Mounts debugfs if it is not mounted; the restore unmounts it.
    pub fn mount_debugfs(&mut self) -> Result<(), KnobError> {
        self.mount_fs("debugfs", DEBUGFS, "extfrag", UNMOUNT_DEBUGFS)
    }

    /// Mounts `fstype` at `dir` unless `dir/probe` exists already,
    /// journaling `undo` so every exit path unmounts it.
    fn mount_fs(&mut self, fstype: &str, dir: &str, probe: &str, undo: &str) -> Result<(), KnobError> {
        if Path::new(dir).join(probe).exists() {
            return Ok(());
        }
        nix::mount::mount(
            Some("nodev"),
            Path::new(dir),
            Some(fstype),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| KnobError::Unsupported(format!("{fstype} is not mounted and mounting it at {dir} failed: {e}")))?;
        self.saved.push((undo.to_string(), String::new()));
        self.write_journal()
    }

    /// Sets up zram device `dev` (`zram0`) of `bytes` as this host's swap
    /// (reset, disksize, mkswap, swapon); the restore swaps it off and
    /// resets it. Refused when the host swaps already.
    pub fn swapon_zram(&mut self, dev: &str, bytes: u64) -> Result<(), KnobError> {
        crate::hostswap::check_no_swap()?;
        self.saved.push((format!("!zram-off {dev}"), String::new()));
        self.write_journal()?;
        crate::hostswap::zram_on(dev, bytes)
    }

    /// Binds the kernel thread `name` (khugepaged) to `cpu`; the restore
    /// gives it back its cpus. Nothing to do if it is not running.
    pub fn pin_kthread(&mut self, name: &str, cpu: usize) -> Result<(), KnobError> {
        let Some(pid) = crate::hostswap::kthread_pid(name) else {
            return Ok(());
        };
        let Some(allowed) = crate::hostswap::cpus_allowed(pid) else {
            return Ok(());
        };
        self.saved.push((format!("!affinity {pid}"), allowed));
        self.write_journal()?;
        crate::hostswap::set_cpus_allowed(pid, &cpu.to_string())
    }

    /// Creates a memory cgroup (v1) with `memory.limit_in_bytes` = `bytes`;
    /// the restore removes it. Returns its directory.
    pub fn create_memcg(&mut self, bytes: u64) -> Result<PathBuf, KnobError> {
        let dir = crate::hostswap::new_cgroup_dir()?;
        self.saved.push((format!("!rmdir {}", dir.display()), String::new()));
        self.write_journal()?;
        crate::hostswap::make_cgroup(&dir, bytes)?;
        Ok(dir)
    }

    /// Writes several knobs in order.
    pub fn set_all(&mut self, knobs: &[(String, String)]) -> Result<(), KnobError> {
        for (k, v) in knobs {
            self.set(k, v)?;
        }
        Ok(())
    }

    /// Restores every knob changed so far (newest first) and forgets them.
    pub fn restore(&mut self) -> Result<(), KnobError> {
        let mut first_err = None;
        for (knob, value) in self.saved.iter().rev() {
            if let Err(e) = write_knob(knob, value) {
                first_err.get_or_insert(e);
            }
        }
        if first_err.is_none() {
            self.saved.clear();
            let _ = fs::remove_file(JOURNAL_PATH);
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The knobs changed and their original values.
    pub fn saved(&self) -> BTreeMap<String, String> {
        self.saved.iter().cloned().collect()
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("largo: could not restore a host knob: {e} (the journal {JOURNAL_PATH} keeps the originals)");
        }
        let _ = &self.lock; // released when the file closes
    }
}

/// Waits for an exclusive `flock` on the lock file.
fn flock(f: &File) -> io::Result<()> {
    largo_physmem::host::flock_exclusive(f.as_raw_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_choice_and_plain_values() {
        assert_eq!(selected("always [madvise] never\n"), "madvise");
        assert_eq!(selected("[always] inherit madvise never"), "always");
        assert_eq!(selected("511\n"), "511");
        assert_eq!(
            knob_file("vm/min_free_kbytes"),
            Path::new("/proc/sys/vm/min_free_kbytes")
        );
        assert_eq!(
            knob_file("transparent_hugepage/hugepages-64kB/enabled"),
            Path::new("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled")
        );
    }
}
