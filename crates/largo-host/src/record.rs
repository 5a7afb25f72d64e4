//! `largo record`: run a command on the host with every THP size off and
//! ASLR off, capture what its whole process tree does to memory through
//! tracefs (memory syscalls, clones, execs, exits and user page faults),
//! stop each new program image at its exec (ptrace) to read its initial
//! layout from /proc/PID/maps, and turn it all into a trace.
//!
//! Every tracefs and sysfs setting changed is restored when the recorder
//! ends, however it ends (the knob guard, its journal, and a Ctrl-C /
//! SIGTERM handler in the command line that stops the recording first).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use largo_trace::{CloneKind, Event, Header, MapFlags, Prot, ThpDisableMode, Trace, VmaKind};
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid as NixPid;

use crate::knobs::{knob_file, KnobError, KnobGuard, TRACEFS};

/// The tracepoints recorded.
pub const EVENTS: &[&str] = &[
    "syscalls:sys_enter_mmap",
    "syscalls:sys_exit_mmap",
    "syscalls:sys_enter_munmap",
    "syscalls:sys_exit_munmap",
    "syscalls:sys_enter_mremap",
    "syscalls:sys_exit_mremap",
    "syscalls:sys_enter_mprotect",
    "syscalls:sys_exit_mprotect",
    "syscalls:sys_enter_madvise",
    "syscalls:sys_exit_madvise",
    "syscalls:sys_enter_brk",
    "syscalls:sys_exit_brk",
    "syscalls:sys_enter_prctl",
    "syscalls:sys_exit_prctl",
    "syscalls:sys_enter_memfd_create",
    "syscalls:sys_exit_memfd_create",
    "syscalls:sys_enter_ftruncate",
    "syscalls:sys_exit_ftruncate",
    "syscalls:sys_enter_fallocate",
    "syscalls:sys_exit_fallocate",
    "syscalls:sys_enter_close",
    "syscalls:sys_exit_close",
    "syscalls:sys_enter_shmget",
    "syscalls:sys_exit_shmget",
    "syscalls:sys_enter_shmat",
    "syscalls:sys_exit_shmat",
    "syscalls:sys_enter_shmdt",
    "syscalls:sys_exit_shmdt",
    "syscalls:sys_enter_shmctl",
    "syscalls:sys_exit_shmctl",
    "syscalls:sys_enter_execve",
    "syscalls:sys_exit_execve",
    "syscalls:sys_enter_execveat",
    "syscalls:sys_exit_execveat",
    "task:task_newtask",
    "sched:sched_process_exec",
    "sched:sched_process_exit",
    "exceptions:page_fault_user",
    "exceptions:page_fault_kernel",
];

/// Kernel-mode faults below this address are on user memory (a syscall
/// writing into a buffer never touched before).
const USER_ADDRESS_LIMIT: u64 = 0x0000_8000_0000_0000;

/// Per-CPU trace buffer while recording.
const BUFFER_KB: &str = "131072";

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Knob(#[from] KnobError),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}")]
    Ptrace(String),
}

/// What a recording produced besides the trace.
#[derive(Clone, Debug, Default)]
pub struct RecordStats {
    pub lines: u64,
    pub events: u64,
    pub faults: u64,
    pub processes: u64,
    /// Events the kernel dropped because the buffer was full.
    pub lost: u64,
    pub exit_code: Option<i32>,
    /// Kernel time of the whole process tree (with tracing on).
    pub sys_time_ns: u64,
}

/// Why the host cannot record, if it cannot.
pub fn unavailable_reason() -> Option<String> {
    if let Some(r) = crate::knobs::unavailable_reason() {
        return Some(r);
    }
    for e in EVENTS {
        let (sys, name) = e.split_once(':').expect("system:event");
        let tracefs_has = std::path::Path::new(TRACEFS)
            .join("events")
            .join(sys)
            .join(name)
            .exists();
        let debugfs_has = std::path::Path::new("/sys/kernel/debug/tracing/events")
            .join(sys)
            .join(name)
            .exists();
        if std::path::Path::new(TRACEFS).join("trace").exists() && !tracefs_has && !debugfs_has {
            return Some(format!("the kernel has no tracepoint {e}"));
        }
    }
    None
}

/// One line of trace_pipe, parsed as far as the recorder needs.
pub(crate) struct Line {
    pub pid: u32,
    pub ns: u64,
    pub event: String,
    pub fields: String,
}

/// `  comm-123  [001] d.... 7578.155195: page_fault_user: address=...`
pub(crate) fn parse_line(line: &str) -> Option<Line> {
    let open = line.find(" [")?;
    let head = line[..open].trim();
    let pid: u32 = head.rsplit_once('-')?.1.parse().ok()?;
    let rest = &line[open + 2..];
    let after_cpu = &rest[rest.find(']')? + 1..];
    let mut parts = after_cpu.trim_start().splitn(2, ' ');
    let _flags = parts.next()?;
    let rest = parts.next()?.trim_start();
    let (ts, rest) = rest.split_once(": ")?;
    let (secs, frac) = ts.trim().split_once('.')?;
    let ns = secs.parse::<u64>().ok()? * 1_000_000_000 + frac.parse::<u64>().ok()? * 1000;
    // Syscall events print as `sys_mmap(addr: 0, len: 0x2000, ...)` and
    // `sys_mmap -> 0x7f9f10b63000`; the others as `name: fields`.
    let (event, fields) = if let Some(call) = rest.strip_prefix("sys_") {
        if let Some((name, ret)) = call.split_once(" -> ") {
            (format!("sys_exit_{}", name.trim()), ret.trim().to_string())
        } else {
            let (name, args) = call.split_once('(')?;
            (
                format!("sys_enter_{}", name.trim()),
                args.trim_end().trim_end_matches(')').to_string(),
            )
        }
    } else {
        let (e, f) = rest.split_once(": ").unwrap_or((rest, ""));
        (e.trim().to_string(), f.to_string())
    };
    Some(Line { pid, ns, event, fields })
}

/// `key: 0x10, other: 0x20` (syscalls) or `key=0x10 other=...` -> value of `key`.
fn field(fields: &str, key: &str) -> Option<u64> {
    let parse = |v: &str| {
        let v = v.trim().trim_end_matches(',');
        v.strip_prefix("0x")
            .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
    };
    for part in fields.split(", ") {
        if let Some((k, v)) = part.split_once(": ") {
            if k.trim() == key {
                return parse(v);
            }
        }
    }
    for part in fields.split_whitespace() {
        if let Some((k, v)) = part.split_once('=') {
            if k == key {
                return parse(v);
            }
        }
    }
    None
}

/// A program image at its exec: its mappings, its brk start, and the
/// anonymous pages the kernel already populated (the stack pages holding
/// the arguments and environment, written by exec itself, never faulted).
type Layout = (Vec<Mapping>, Option<u64>, Vec<u64>);

/// One line of /proc/PID/maps: start, end, protection, kind.
type Mapping = (u64, u64, Prot, VmaKind);

/// Pages of `[start, end)` of `pid` present in memory (pagemap bit 63).
fn present_pages(pid: u32, start: u64, end: u64) -> Vec<u64> {
    use std::os::unix::fs::FileExt;
    let Ok(f) = File::open(format!("/proc/{pid}/pagemap")) else {
        return Vec::new();
    };
    let n = ((end - start) / 4096) as usize;
    let mut buf = vec![0u8; n * 8];
    if f.read_exact_at(&mut buf, start / 4096 * 8).is_err() {
        return Vec::new();
    }
    buf.chunks_exact(8)
        .enumerate()
        .filter(|(_, c)| u64::from_le_bytes((*c).try_into().expect("8 bytes")) & (1 << 63) != 0)
        .map(|(i, _)| start + i as u64 * 4096)
        .collect()
}

/// A program image's layout from /proc/PID/maps, /proc/PID/stat and
/// /proc/PID/pagemap.
fn read_image(pid: u32) -> Layout {
    let (vmas, brk) = read_layout(pid);
    let populated = vmas
        .iter()
        .filter(|v| v.3.is_anonymous())
        .flat_map(|v| present_pages(pid, v.0, v.1))
        .collect();
    (vmas, brk, populated)
}

/// A program image's layout from /proc/PID/maps and /proc/PID/stat.
fn read_layout(pid: u32) -> (Vec<Mapping>, Option<u64>) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut out = Vec::new();
    for line in maps.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.len() < 5 {
            continue;
        }
        let Some((s, e)) = t[0].split_once('-') else { continue };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        let perms = t[1].as_bytes();
        let prot = Prot((perms[0] == b'r') as u8 | ((perms[1] == b'w') as u8) << 1 | ((perms[2] == b'x') as u8) << 2);
        let name = t.get(5).copied().unwrap_or("");
        let shared = perms.get(3) == Some(&b's');
        let kind = match name {
            "[stack]" => VmaKind::Stack,
            "[heap]" => VmaKind::Heap,
            n if n.starts_with('[') => VmaKind::Special,
            "" if t[4] == "0" && !shared => VmaKind::Anon,
            _ => VmaKind::File,
        };
        out.push((s, e, prot, kind));
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Field 47 is start_brk; fields after the parenthesised comm.
    let start_brk = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(47 - 3))
        .and_then(|v| v.parse().ok());
    (out, start_brk)
}

/// The ptrace side: every exec of the tree stops; its layout is read.
fn supervise(root: NixPid, layouts: &mut HashMap<u32, Vec<Layout>>) -> Result<Option<i32>, RecordError> {
    let mut exit_code = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                if pid == root {
                    exit_code = Some(code);
                }
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => {
                if pid == root {
                    exit_code = Some(128 + sig as i32);
                }
            }
            Ok(WaitStatus::PtraceEvent(pid, _, event)) => {
                if event == libc::PTRACE_EVENT_EXEC {
                    let layout = read_image(pid.as_raw() as u32);
                    layouts.entry(pid.as_raw() as u32).or_default().push(layout);
                }
                let _ = ptrace::cont(pid, None);
            }
            Ok(WaitStatus::Stopped(pid, sig)) => {
                // A signal on its way to the tracee: deliver it.
                let _ = ptrace::cont(pid, Some(sig));
            }
            Ok(WaitStatus::PtraceSyscall(pid)) => {
                let _ = ptrace::cont(pid, None);
            }
            Ok(_) => {}
            Err(nix::errno::Errno::ECHILD) => return Ok(exit_code),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(RecordError::Ptrace(format!("waitpid: {e}"))),
        }
    }
}

/// Reads trace_pipe (non-blocking) until told to stop and drained.
pub(crate) fn pipe_reader(
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Vec<String>>>,
) -> std::thread::JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let path = std::path::Path::new(TRACEFS).join("trace_pipe");
        let f = File::options().read(true).custom_flags_nonblock().open(&path)?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut buf = String::new();
        let mut batch = Vec::new();
        loop {
            buf.clear();
            match r.read_line(&mut buf) {
                Ok(0) => {}
                Ok(_) => {
                    batch.push(buf.trim_end().to_string());
                    if batch.len() >= 4096 {
                        out.lock().expect("reader").append(&mut batch);
                    }
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            out.lock().expect("reader").append(&mut batch);
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    })
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

/// The process group being recorded (0: none). Process-wide: a signal
/// handler must reach it.
static RECORDING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Kills the command being recorded (its whole process group), for a
/// Ctrl-C or SIGTERM handler: the recording then ends and every setting
/// is restored as usual.
pub fn interrupt() {
    let pgid = RECORDING.load(Ordering::SeqCst);
    if pgid > 0 {
        let _ = kill(NixPid::from_raw(-pgid), Signal::SIGKILL);
    }
}

/// The knob writes that turn every THP size off: the top level and each
/// `hugepages-*` size the host has. Shmem keeps its PMD size only where
/// MADV_HUGEPAGE asks (top level `advise`, the PMD size `inherit`, others
/// `never`): its faults are order 0 as well, but the kernel still aligns
/// shared mappings of 2M and more to 2M (`shmem_get_unmapped_area`), as
/// it does wherever shmem THPs are on, so the recorded addresses suit
/// every shmem size a replay may enable.
/// [`thp_off`], then anonymous faults of `folio_bytes` folios (`always`;
/// nothing more for 4 KiB): the knobs of a native run at one folio size.
pub fn thp_only(folio_bytes: u64) -> Result<Vec<(String, String)>, RecordError> {
    let mut knobs = thp_off()?;
    if folio_bytes > 4096 {
        knobs.push((
            format!("transparent_hugepage/hugepages-{}kB/enabled", folio_bytes >> 10),
            "always".into(),
        ));
    }
    Ok(knobs)
}

pub fn thp_off() -> Result<Vec<(String, String)>, RecordError> {
    let mut thp_off = vec![("transparent_hugepage/enabled".to_string(), "never".to_string())];
    let dir = std::path::Path::new("/sys/kernel/mm/transparent_hugepage");
    if dir.join("shmem_enabled").exists() {
        thp_off.push(("transparent_hugepage/shmem_enabled".into(), "advise".into()));
    }
    let pmd_kb = std::fs::read_to_string(dir.join("hpage_pmd_size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|bytes| bytes >> 10);
    for e in std::fs::read_dir(dir)
        .map_err(|e| RecordError::Io("sysfs".into(), e))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("hugepages-") {
            continue;
        }
        if e.path().join("enabled").exists() {
            thp_off.push((format!("transparent_hugepage/{name}/enabled"), "never".into()));
        }
        if e.path().join("shmem_enabled").exists() {
            let pmd = pmd_kb.is_some_and(|kb| name == format!("hugepages-{kb}kB"));
            let mode = if pmd { "inherit" } else { "never" };
            thp_off.push((format!("transparent_hugepage/{name}/shmem_enabled"), mode.into()));
        }
    }
    Ok(thp_off)
}

/// Records `launcher` (a command that stops itself with SIGSTOP, turns
/// ASLR off and execs the program: `largo record-exec -- CMD`).
/// `describe` is the command line for the header.
pub fn record(launcher: Command, describe: &str, stop_flag: &AtomicBool) -> Result<(Trace, RecordStats), RecordError> {
    record_with(launcher, describe, stop_flag, &RecordLimits::default())
}

/// Where a recorded program runs: in a memory cgroup of its own with
/// this limit, with a zram swap device of this size swapped on for the
/// recording (both made and removed under the knob guard).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordLimits {
    pub memcg_max_bytes: Option<u64>,
    pub zram_bytes: Option<u64>,
}

impl RecordLimits {
    /// The trace header keys a replay applies (see
    /// `Workload::machine_config`).
    fn write_to(&self, header: &mut Header) {
        if let Some(bytes) = self.memcg_max_bytes {
            header.set("memcg_max", bytes.to_string());
        }
        if let Some(bytes) = self.zram_bytes {
            header.set("swap", format!("{bytes}:zram"));
        }
    }
}

/// [`record`] under `limits`.
pub fn record_with(
    mut launcher: Command,
    describe: &str,
    stop_flag: &AtomicBool,
    limits: &RecordLimits,
) -> Result<(Trace, RecordStats), RecordError> {
    if let Some(reason) = unavailable_reason() {
        return Err(RecordError::Unavailable(reason));
    }
    let mut guard = KnobGuard::acquire()?;
    guard.mount_tracefs()?;
    // Every THP size off, so each first touch faults one base page.
    let thp_off = thp_off()?;
    guard.set_all(&thp_off)?;
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let root = spawn_stopped(&mut launcher)?;
    if let Some(bytes) = limits.zram_bytes {
        guard.swapon_zram(crate::validate::ZRAM_DEVICE, bytes)?;
    }
    if let Some(bytes) = limits.memcg_max_bytes {
        // The stopped launcher moves in; what it execs is charged there.
        let dir = guard.create_memcg(bytes)?;
        let procs = dir.join("cgroup.procs");
        std::fs::write(&procs, root.as_raw().to_string())
            .map_err(|e| RecordError::Io(format!("joining {}", procs.display()), e))?;
    }
    trace_events_of(&mut guard, root, EVENTS)?;
    let stop = Arc::new(AtomicBool::new(false));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = pipe_reader(stop.clone(), lines.clone());
    guard.set("tracing/tracing_on", "1")?;
    let before = largo_physmem::host::rusage_children();
    let opts = Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACECLONE;
    ptrace::seize(root, opts).map_err(|e| RecordError::Ptrace(format!("PTRACE_SEIZE: {e}")))?;
    kill(root, Signal::SIGCONT).map_err(|e| RecordError::Ptrace(format!("SIGCONT: {e}")))?;
    RECORDING.store(root.as_raw(), Ordering::SeqCst);
    if stop_flag.load(Ordering::SeqCst) {
        interrupt();
    }
    let mut layouts = HashMap::new();
    let result = supervise(root, &mut layouts);
    RECORDING.store(0, Ordering::SeqCst);
    let after = largo_physmem::host::rusage_children();
    let _ = std::fs::write(knob_file("tracing/tracing_on"), "0");
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::SeqCst);
    let read = reader
        .join()
        .map_err(|_| RecordError::Ptrace("the trace reader panicked".into()))?;
    read.map_err(|e| RecordError::Io("trace_pipe".into(), e))?;
    let lost = lost_events();
    guard.restore()?;
    let exit_code = result?;
    let lines = std::mem::take(&mut *lines.lock().expect("reader"));
    let mut stats = RecordStats {
        lines: lines.len() as u64,
        lost,
        exit_code,
        sys_time_ns: after.stime_ns.saturating_sub(before.stime_ns),
        ..RecordStats::default()
    };
    let mut trace = build(&lines, root.as_raw() as u32, &mut layouts, describe, &mut stats);
    limits.write_to(&mut trace.header);
    Ok((trace, stats))
}

/// Spawns `launcher` in its own process group (so it can be killed as a
/// whole) and waits for it to stop itself before its exec.
pub(crate) fn spawn_stopped(launcher: &mut Command) -> Result<NixPid, RecordError> {
    {
        use std::os::unix::process::CommandExt;
        launcher.process_group(0);
    }
    let child = launcher
        .spawn()
        .map_err(|e| RecordError::Io("starting the command".into(), e))?;
    let root = NixPid::from_raw(child.id() as i32);
    match waitpid(root, Some(WaitPidFlag::WUNTRACED)) {
        Ok(WaitStatus::Stopped(_, Signal::SIGSTOP)) => Ok(root),
        other => Err(RecordError::Ptrace(format!(
            "the launcher did not stop before exec: {other:?}"
        ))),
    }
}

/// Sets tracefs up (still off) for `events` of `root` and its descendants,
/// the buffer emptied.
pub(crate) fn trace_events_of<S: AsRef<str>>(
    guard: &mut KnobGuard,
    root: NixPid,
    events: &[S],
) -> Result<(), RecordError> {
    guard.set("tracing/tracing_on", "0")?;
    guard.set("tracing/buffer_size_kb", BUFFER_KB)?;
    guard.set("tracing/options/event-fork", "1")?;
    guard.set("tracing/set_event_pid", &root.as_raw().to_string())?;
    let list: Vec<&str> = events.iter().map(AsRef::as_ref).collect();
    guard.set("tracing/set_event", &list.join("\n"))?;
    let _ = std::fs::write(knob_file("tracing/trace"), "");
    Ok(())
}

/// Events the kernel could not store (`overrun` + `dropped events`).
pub(crate) fn lost_events() -> u64 {
    let mut lost = 0;
    let Ok(dirs) = std::fs::read_dir(std::path::Path::new(TRACEFS).join("per_cpu")) else {
        return 0;
    };
    for d in dirs.flatten() {
        let mut s = String::new();
        if File::open(d.path().join("stats"))
            .and_then(|mut f| f.read_to_string(&mut s))
            .is_ok()
        {
            for l in s.lines() {
                if let Some(v) = l.strip_prefix("overrun:").or_else(|| l.strip_prefix("dropped events:")) {
                    lost += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    lost
}

/// A syscall waiting for its exit: name and raw fields of the enter.
struct Pending {
    call: String,
    fields: String,
}

const PR_SET_THP_DISABLE: u64 = 41;

fn is_error(ret: u64) -> bool {
    ret > u64::MAX - 4096
}

fn page_up(len: u64) -> u64 {
    len.div_ceil(4096) * 4096
}

/// Turns trace_pipe lines into events, in order. Events of the root
/// before its first exec (the launcher) are dropped.
fn build(
    lines: &[String],
    root: u32,
    layouts: &mut HashMap<u32, Vec<Layout>>,
    describe: &str,
    stats: &mut RecordStats,
) -> Trace {
    let mut events = Vec::new();
    let mut pending: HashMap<u32, Pending> = HashMap::new();
    let mut live: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut started = false;
    let mut last_ns: Option<u64> = None;
    let mut layout_used: HashMap<u32, usize> = HashMap::new();
    // Faults of a task inside execve: after the point of no return they
    // touch the new image (the ELF loader clearing the end of the data
    // segments), before its exec event; they go after its layout.
    let mut in_exec: HashMap<u32, Vec<Event>> = HashMap::new();
    let mut memfds = Memfds::default();
    let mut segments = Segments::default();
    for raw in lines {
        let Some(l) = parse_line(raw) else { continue };
        if !started {
            if l.event == "sched_process_exec" && field(&l.fields, "pid").map(|p| p as u32) == Some(root) {
                started = true;
            } else {
                continue;
            }
        }
        if let Some(prev) = last_ns {
            if l.ns >= prev + 1_000_000 {
                events.push(Event::Tick { ns: l.ns - prev });
                last_ns = Some(l.ns);
            }
        } else {
            last_ns = Some(l.ns);
        }
        let pid = l.pid;
        match l.event.as_str() {
            "sched_process_exec" => {
                let p = field(&l.fields, "pid").map_or(pid, |v| v as u32);
                live.insert(p);
                events.push(Event::Exec { pid: p });
                let used = layout_used.entry(p).or_default();
                if let Some((vmas, brk, populated)) = layouts.get(&p).and_then(|v| v.get(*used)) {
                    for &(start, end, prot, kind) in vmas {
                        events.push(Event::Vma {
                            pid: p,
                            start,
                            end,
                            prot,
                            kind,
                        });
                    }
                    if let Some(b) = brk {
                        events.push(Event::BrkStart { pid: p, addr: *b });
                    }
                    // What exec itself wrote (arguments, environment), top down.
                    for &addr in populated.iter().rev() {
                        events.push(Event::ExecPage { pid: p, addr });
                    }
                }
                *used += 1;
                events.extend(in_exec.remove(&p).unwrap_or_default());
            }
            "task_newtask" => {
                let (Some(child), Some(flags)) = (field(&l.fields, "pid"), field_hex(&l.fields, "clone_flags")) else {
                    continue;
                };
                let kind = if flags & libc::CLONE_VFORK as u64 != 0 {
                    CloneKind::Vfork
                } else if flags & libc::CLONE_VM as u64 != 0 {
                    CloneKind::Thread
                } else {
                    CloneKind::Process
                };
                live.insert(child as u32);
                memfds.inherit(pid, child as u32);
                segments.inherit(pid, child as u32);
                events.push(Event::Clone {
                    pid,
                    child: child as u32,
                    kind,
                });
            }
            "sched_process_exit" => {
                let p = field(&l.fields, "pid").map_or(pid, |v| v as u32);
                if live.remove(&p) {
                    events.push(Event::Exit { pid: p });
                }
            }
            "page_fault_user" | "page_fault_kernel" => {
                let (Some(addr), Some(code)) = (field(&l.fields, "address"), field(&l.fields, "error_code")) else {
                    continue;
                };
                if addr >= USER_ADDRESS_LIMIT {
                    continue;
                }
                stats.faults += 1;
                let write = code & 2 != 0;
                let e = if l.event == "page_fault_kernel" {
                    Event::KernelFault { pid, addr, write }
                } else {
                    Event::Fault { pid, addr, write }
                };
                match in_exec.get_mut(&pid) {
                    Some(deferred) => deferred.push(e),
                    None => events.push(e),
                }
            }
            "sys_enter_execve" | "sys_enter_execveat" => {
                in_exec.insert(pid, Vec::new());
            }
            "sys_exit_execve" | "sys_exit_execveat" => {
                // A failed exec: its faults were on the old image.
                events.extend(in_exec.remove(&pid).unwrap_or_default());
            }
            e if e.starts_with("sys_enter_") => {
                pending.insert(
                    pid,
                    Pending {
                        call: e["sys_enter_".len()..].to_string(),
                        fields: l.fields.clone(),
                    },
                );
            }
            e if e.starts_with("sys_exit_") => {
                let Some(p) = pending.remove(&pid) else { continue };
                let r = l.fields.trim();
                let ret = r.strip_prefix("0x").map_or_else(
                    || r.parse::<i64>().ok().map(|v| v as u64),
                    |h| u64::from_str_radix(h, 16).ok(),
                );
                let ret = ret.unwrap_or(u64::MAX);
                let ev = memfds
                    .event(pid, &p, ret)
                    .or_else(|| segments.event(pid, &p, ret))
                    .or_else(|| syscall_event(pid, &p, ret));
                if let Some(ev) = ev {
                    events.push(ev);
                }
            }
            _ => {}
        }
    }
    stats.events = events.len() as u64;
    stats.processes = layouts.len() as u64;
    let mut header = Header::new();
    header.set(
        "kernel",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim(),
    );
    header.set("page_size", "4096");
    header.set(
        "captured",
        "largo record: tracefs syscalls, task_newtask, sched exec/exit, page_fault_user; every THP size off; ASLR off",
    );
    header.set("command", describe);
    header.set("sys_time_ns", stats.sys_time_ns.to_string());
    header.set("lost_events", stats.lost.to_string());
    Trace { header, events }
}

fn field_hex(fields: &str, key: &str) -> Option<u64> {
    fields.split_whitespace().find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k == key).then(|| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())?
    })
}

/// `FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE`.
const PUNCH_HOLE_MODE: u64 = 0x3;

/// The memfds each task has open: their creation, size changes, hole
/// punching, mappings and closing become the trace's memfd events (other
/// descriptors' calls are not recorded). A clone copies the table; a
/// thread's later changes are not shared back (threads rarely pass memfds).
#[derive(Default)]
struct Memfds {
    open: HashMap<u32, std::collections::HashSet<u32>>,
}

impl Memfds {
    fn inherit(&mut self, parent: u32, child: u32) {
        if let Some(fds) = self.open.get(&parent).cloned() {
            self.open.insert(child, fds);
        }
    }

    fn is_memfd(&self, pid: u32, fd: Option<u64>) -> Option<u32> {
        let fd = u32::try_from(fd?).ok()?;
        self.open.get(&pid)?.contains(&fd).then_some(fd)
    }

    /// The event of a finished call on a memfd, if it is one.
    fn event(&mut self, pid: u32, p: &Pending, ret: u64) -> Option<Event> {
        if is_error(ret) {
            return None;
        }
        let f = |k: &str| field(&p.fields, k);
        match p.call.as_str() {
            "memfd_create" => {
                let fd = u32::try_from(ret).ok()?;
                self.open.entry(pid).or_default().insert(fd);
                Some(Event::MemfdCreate { pid, fd })
            }
            "ftruncate" => {
                let fd = self.is_memfd(pid, f("fd"))?;
                Some(Event::Ftruncate {
                    pid,
                    fd,
                    len: f("length")?,
                })
            }
            "fallocate" if f("mode")? == PUNCH_HOLE_MODE => {
                let fd = self.is_memfd(pid, f("fd"))?;
                Some(Event::PunchHole {
                    pid,
                    fd,
                    offset: f("offset")?,
                    len: f("len")?,
                })
            }
            "close" => {
                let fd = self.is_memfd(pid, f("fd"))?;
                self.open.get_mut(&pid)?.remove(&fd);
                Some(Event::Close { pid, fd })
            }
            "mmap" if f("flags")? & MapFlags::ANONYMOUS as u64 == 0 => {
                let fd = self.is_memfd(pid, f("fd"))?;
                Some(Event::MmapFd {
                    pid,
                    addr: ret,
                    len: page_up(f("len")?),
                    prot: Prot(f("prot")? as u8 & 7),
                    flags: MapFlags(f("flags")? as u32),
                    fd,
                    offset: f("off")?,
                })
            }
            _ => None,
        }
    }
}

/// `shmctl` command `IPC_RMID` (glibc may add `IPC_64`, 0x100).
const IPC_RMID: u64 = 0;
/// `shmat` flag `SHM_RDONLY`.
const SHM_RDONLY: u64 = 0o10000;

/// The SysV segments made while recording (their sizes) and where each
/// task has them attached: their calls become the trace's SysV events.
/// Segments made before the recording started are not followed (their
/// attaches are not recorded). A clone copies the attachments.
#[derive(Default)]
struct Segments {
    sizes: HashMap<u32, u64>,
    attached: HashMap<u32, std::collections::HashSet<u64>>,
}

impl Segments {
    fn inherit(&mut self, parent: u32, child: u32) {
        if let Some(at) = self.attached.get(&parent).cloned() {
            self.attached.insert(child, at);
        }
    }

    /// The event of a finished SysV shared memory call, if it is one on
    /// a followed segment.
    fn event(&mut self, pid: u32, p: &Pending, ret: u64) -> Option<Event> {
        if is_error(ret) {
            return None;
        }
        let f = |k: &str| field(&p.fields, k);
        match p.call.as_str() {
            "shmget" => {
                let shmid = u32::try_from(ret).ok()?;
                let size = f("size")?;
                // A lookup of an existing segment (size 0 or one seen).
                if size == 0 || self.sizes.contains_key(&shmid) {
                    return None;
                }
                self.sizes.insert(shmid, size);
                Some(Event::ShmGet { pid, shmid, size })
            }
            "shmat" => {
                let shmid = u32::try_from(f("shmid")?).ok()?;
                let size = *self.sizes.get(&shmid)?;
                self.attached.entry(pid).or_default().insert(ret);
                let read_only = f("shmflg")? & SHM_RDONLY != 0;
                Some(Event::ShmAt {
                    pid,
                    shmid,
                    addr: ret,
                    len: page_up(size),
                    prot: Prot(if read_only {
                        Prot::READ
                    } else {
                        Prot::READ | Prot::WRITE
                    }),
                })
            }
            "shmdt" => {
                let addr = f("shmaddr")?;
                self.attached
                    .get_mut(&pid)?
                    .remove(&addr)
                    .then_some(Event::ShmDt { pid, addr })
            }
            "shmctl" if f("cmd")? & 0xff == IPC_RMID => {
                let shmid = u32::try_from(f("shmid")?).ok()?;
                self.sizes.contains_key(&shmid).then_some(Event::ShmRmid { pid, shmid })
            }
            _ => None,
        }
    }
}

fn syscall_event(pid: u32, p: &Pending, ret: u64) -> Option<Event> {
    if is_error(ret) && p.call != "brk" {
        return None;
    }
    let f = |k: &str| field(&p.fields, k);
    Some(match p.call.as_str() {
        "mmap" => Event::Mmap {
            pid,
            addr: ret,
            len: page_up(f("len")?),
            prot: Prot(f("prot")? as u8 & 7),
            flags: MapFlags(f("flags")? as u32),
        },
        "munmap" => Event::Munmap {
            pid,
            addr: f("addr")?,
            len: page_up(f("len")?),
        },
        "mremap" => Event::Mremap {
            pid,
            old_addr: f("addr")?,
            old_len: page_up(f("old_len")?),
            new_addr: ret,
            new_len: page_up(f("new_len")?),
        },
        "mprotect" => Event::Mprotect {
            pid,
            addr: f("start")?,
            len: page_up(f("len")?),
            prot: Prot(f("prot")? as u8 & 7),
        },
        "madvise" => Event::Madvise {
            pid,
            addr: f("start")?,
            len: page_up(f("len_in")?),
            advice: f("behavior")? as u32,
        },
        "brk" => Event::Brk { pid, addr: ret },
        "prctl" if f("option")? == PR_SET_THP_DISABLE => Event::PrctlThpDisable {
            pid,
            mode: match (f("arg2")?, f("arg3")?) {
                (0, _) => ThpDisableMode::Off,
                (_, 0) => ThpDisableMode::Completely,
                _ => ThpDisableMode::ExceptAdvised,
            },
        },
        _ => return None,
    })
}

/// The launcher side of a recording (`largo record-exec -- CMD`): turn
/// address-space randomisation off, stop until the recorder is ready
/// (`stop`), then exec the command. Returns only on failure.
pub fn exec_for_record(cmd: &[String], stop: bool) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let Some((prog, args)) = cmd.split_first() else {
        return std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command");
    };
    if let Ok(p) = nix::sys::personality::get() {
        let _ = nix::sys::personality::set(p | nix::sys::personality::Persona::ADDR_NO_RANDOMIZE);
    }
    if stop {
        if let Err(e) = nix::sys::signal::raise(Signal::SIGSTOP) {
            return std::io::Error::from_raw_os_error(e as i32);
        }
    }
    Command::new(prog).args(args).exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_pipe_lines_parse() {
        let l = parse_line("            bash-11376   [001] d....  7578.155195: page_fault_user: address=0x55ab9fc9b218 ip=0x7f531de085be error_code=0x7").unwrap();
        assert_eq!((l.pid, l.event.as_str()), (11376, "page_fault_user"));
        assert_eq!(l.ns, 7_578_155_195_000);
        assert_eq!(field(&l.fields, "address"), Some(0x55ab9fc9b218));
        assert_eq!(field(&l.fields, "error_code"), Some(7));
        let l = parse_line(" kworker/u4:1-events-99 [000] ..... 12.000001: sys_mmap(addr: 0, len: 0x2000, prot: 3, flags: 0x22, fd: 0xffffffff, off: 0)").unwrap();
        assert_eq!(l.pid, 99, "a comm with dashes");
        assert_eq!(field(&l.fields, "len"), Some(0x2000));
        assert_eq!(field(&l.fields, "flags"), Some(0x22));
        let l = parse_line("             cat-13461   [000] .....  7790.212169: sys_mmap(addr: 0, len: 0x2000, prot: 3, flags: 0x22, fd: 0xffffffff, off: 0)").unwrap();
        assert_eq!((l.pid, l.event.as_str()), (13461, "sys_enter_mmap"));
        assert_eq!(
            (
                field(&l.fields, "len"),
                field(&l.fields, "prot"),
                field(&l.fields, "flags")
            ),
            (Some(0x2000), Some(3), Some(0x22))
        );
        let l = parse_line("             cat-13461   [000] .....  7790.212180: sys_mmap -> 0x7f9f10b63000").unwrap();
        assert_eq!(
            (l.event.as_str(), l.fields.as_str()),
            ("sys_exit_mmap", "0x7f9f10b63000")
        );
        let l =
            parse_line("  sh-5 [001] ..... 1.000000: task_newtask: pid=6 comm=sh clone_flags=1200011 oom_score_adj=0")
                .unwrap();
        assert_eq!(field(&l.fields, "pid"), Some(6));
        assert_eq!(field_hex(&l.fields, "clone_flags"), Some(0x1200011));
    }

    #[test]
    fn sysv_calls_on_segments_made_while_recording_become_events() {
        let call = |call: &str, fields: &str| Pending {
            call: call.to_string(),
            fields: fields.to_string(),
        };
        let mut seg = Segments::default();
        let get = call("shmget", "key: 0, size: 0x2000001, shmflg: 0x780");
        assert_eq!(
            seg.event(1, &get, 28),
            Some(Event::ShmGet {
                pid: 1,
                shmid: 28,
                size: 0x2000001
            })
        );
        // A lookup of the same segment by key is not a new one.
        assert_eq!(seg.event(1, &call("shmget", "key: 0x42, size: 0, shmflg: 0"), 28), None);
        let at = call("shmat", "shmid: 0x1c, shmaddr: 0, shmflg: 0x1000");
        let Some(Event::ShmAt { len, prot, .. }) = seg.event(1, &at, 0x7f00_0000_0000) else {
            panic!("an attach of a followed segment");
        };
        assert_eq!(len, 0x2001000, "the size in whole pages");
        assert!(!prot.writable(), "SHM_RDONLY");
        seg.inherit(1, 2);
        let dt = call("shmdt", "shmaddr: 0x7f0000000000");
        assert_eq!(
            seg.event(2, &dt, 0),
            Some(Event::ShmDt {
                pid: 2,
                addr: 0x7f00_0000_0000
            })
        );
        assert_eq!(seg.event(2, &dt, 0), None, "detached once");
        let rmid = call("shmctl", "shmid: 0x1c, cmd: 0x100, buf: 0");
        assert_eq!(seg.event(1, &rmid, 0), Some(Event::ShmRmid { pid: 1, shmid: 28 }));
        let other = call("shmat", "shmid: 0x5, shmaddr: 0, shmflg: 0");
        assert_eq!(
            seg.event(1, &other, 0x1000),
            None,
            "a segment from before the recording"
        );
    }
}
