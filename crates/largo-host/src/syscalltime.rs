//! Kernel time by system call on the host: a command run natively with the
//! memory system calls' enter and exit tracepoints on (and nothing else
//! traced, no ptrace), each call's duration the time between its enter and
//! its exit in the same task, summed per call. `largo validate entries`
//! compares these totals and their change between folio sizes with the
//! model's kernel time by entry.
//!
//! A duration is wall time inside the call: preemption and interrupts in
//! it count too, so it is an upper bound of the call's kernel time; the
//! runs are interleaved and averaged like the other host measurements.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid as NixPid;

use crate::knobs::{knob_file, KnobGuard};
use crate::record::{parse_line, pipe_reader, spawn_stopped, trace_events_of, RecordError};

/// The system calls timed (the model's entries of the same names).
pub const CALLS: [&str; 6] = ["mmap", "munmap", "mprotect", "mremap", "madvise", "brk"];

/// One run's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyscallTimes {
    /// By call: (calls, total ns inside them).
    pub by_call: BTreeMap<String, (u64, u64)>,
    /// The process tree's system time (rusage), ns.
    pub stime_ns: u64,
    /// Events the trace buffer lost (the totals are then low).
    pub lost: u64,
}

/// Pairs enters with exits per task and sums the durations.
pub fn durations(lines: &[String]) -> BTreeMap<String, (u64, u64)> {
    let mut open: std::collections::HashMap<u32, (String, u64)> = std::collections::HashMap::new();
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for l in lines.iter().filter_map(|l| parse_line(l)) {
        if let Some(call) = l.event.strip_prefix("sys_enter_") {
            open.insert(l.pid, (call.to_string(), l.ns));
        } else if let Some(call) = l.event.strip_prefix("sys_exit_") {
            if let Some((c, start)) = open.remove(&l.pid) {
                if c == call {
                    let e = out.entry(c).or_default();
                    e.0 += 1;
                    e.1 += l.ns.saturating_sub(start);
                }
            }
        }
    }
    out
}

/// Runs `launcher` (a command that stops itself before its exec, as
/// `largo record-exec` does) under the THP `knobs` with the memory system
/// calls traced; returns their durations.
pub fn measure(mut launcher: Command, knobs: &[(String, String)]) -> Result<SyscallTimes, RecordError> {
    let mut guard = KnobGuard::acquire()?;
    guard.mount_tracefs()?;
    guard.set_all(knobs)?;
    let root = spawn_stopped(&mut launcher)?;
    // Until it is waited for, an error kills the stopped command's group.
    let mut command = Running(Some(root));
    let events: Vec<String> = CALLS
        .iter()
        .flat_map(|c| [format!("syscalls:sys_enter_{c}"), format!("syscalls:sys_exit_{c}")])
        .collect();
    trace_events_of(&mut guard, root, &events)?;
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = pipe_reader(stop.0.clone(), lines.clone());
    guard.set("tracing/tracing_on", "1")?;
    let before = largo_physmem::host::rusage_children();
    kill(root, Signal::SIGCONT).map_err(|e| RecordError::Ptrace(format!("SIGCONT: {e}")))?;
    let status = waitpid(root, None);
    command.0 = None;
    let after = largo_physmem::host::rusage_children();
    let _ = std::fs::write(knob_file("tracing/tracing_on"), "0");
    std::thread::sleep(Duration::from_millis(20));
    stop.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let read = reader
        .join()
        .map_err(|_| RecordError::Ptrace("the trace reader panicked".into()))?;
    read.map_err(|e| RecordError::Io("trace_pipe".into(), e))?;
    let lost = crate::record::lost_events();
    guard.restore()?;
    match status {
        Ok(WaitStatus::Exited(_, 0)) => {}
        other => return Err(RecordError::Ptrace(format!("the command ended with {other:?}"))),
    }
    let lines = std::mem::take(&mut *lines.lock().expect("reader"));
    Ok(SyscallTimes {
        by_call: durations(&lines),
        stime_ns: after.stime_ns.saturating_sub(before.stime_ns),
        lost,
    })
}

/// A command not yet waited for: killed (its whole process group) and
/// reaped if the measurement ends early.
struct Running(Option<NixPid>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(root) = self.0 {
            let _ = kill(NixPid::from_raw(-root.as_raw()), Signal::SIGKILL);
            let _ = waitpid(root, None);
        }
    }
}

/// Tells the trace reader to stop however the measurement ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enters_pair_with_exits_per_task() {
        let lines: Vec<String> = [
            " a-10 [000] ..... 1.000000: sys_mmap(addr: 0, len: 0x2000, prot: 3, flags: 0x22, fd: 0xffffffff, off: 0)",
            " b-11 [001] ..... 1.000002: sys_brk(brk: 0)",
            " a-10 [000] ..... 1.000005: sys_mmap -> 0x7f0000000000",
            " b-11 [001] ..... 1.000009: sys_brk -> 0x555555559000",
            " a-10 [000] ..... 1.000010: sys_munmap(addr: 0x7f0000000000, len: 0x2000)",
            " a-10 [000] ..... 1.000013: sys_munmap -> 0x0",
            " a-10 [000] ..... 1.000020: sys_mmap(addr: 0, len: 0x2000, prot: 3, flags: 0x22, fd: 0xffffffff, off: 0)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let d = durations(&lines);
        assert_eq!(d["mmap"], (1, 5_000), "the unfinished call is not counted");
        assert_eq!(d["brk"], (1, 7_000));
        assert_eq!(d["munmap"], (1, 3_000));
    }
}
