//! Native runs of one command under several THP configurations,
//! interleaved: every round runs each configuration once, the order
//! rotated from round to round (so no configuration always follows the
//! same one, and none always runs first after a pause), with the knobs
//! set through [`KnobGuard`] and ASLR off for the command, as when a
//! program was recorded.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::kernel_time::HostClock;
use crate::knobs::KnobGuard;
use crate::validate::ValidateError;

/// Set by a Ctrl-C or SIGTERM handler: interleaved runs stop before the
/// next run (the knobs are then restored as on any other exit).
static STOP: AtomicBool = AtomicBool::new(false);

/// Asks running measurements to stop; for a signal handler.
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether [`request_stop`] was called.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The order of round `round` over `n` configurations: a rotation.
pub fn round_order(round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + round) % n.max(1))
}

/// Runs `run(config)` for `rounds` rounds over `knob_sets`, the knobs of
/// each configuration set first; returns each configuration's results in
/// round order. The process takes ADDR_NO_RANDOMIZE for the runs
/// (children inherit it) and gives it back after; the knobs are restored
/// on every exit path. `progress(round, config)` is called before each run.
pub fn run_interleaved<T>(
    knob_sets: &[Vec<(String, String)>],
    rounds: usize,
    progress: &mut dyn FnMut(usize, usize),
    run: &mut dyn FnMut(usize) -> Result<T, ValidateError>,
) -> Result<Vec<Vec<T>>, ValidateError> {
    let mut guard = KnobGuard::acquire()?;
    let persona = nix::sys::personality::get().ok();
    if let Some(p) = persona {
        let _ = nix::sys::personality::set(p | nix::sys::personality::Persona::ADDR_NO_RANDOMIZE);
    }
    let mut out: Vec<Vec<T>> = knob_sets.iter().map(|_| Vec::new()).collect();
    let mut failure = None;
    'rounds: for round in 0..rounds.max(1) {
        for i in round_order(round, knob_sets.len()) {
            if stop_requested() {
                failure = Some(ValidateError::Interrupted);
                break 'rounds;
            }
            progress(round, i);
            match guard
                .set_all(&knob_sets[i])
                .map_err(ValidateError::from)
                .and_then(|_| run(i))
            {
                Ok(r) => out[i].push(r),
                Err(e) => {
                    failure = Some(e);
                    break 'rounds;
                }
            }
        }
    }
    if let Some(p) = persona {
        let _ = nix::sys::personality::set(p);
    }
    guard.restore()?;
    match failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// What one native run of a command cost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RunCost {
    /// Kernel time of the process tree ([`HostClock`]).
    pub sys_ns: u64,
    /// User time (rusage of the waited-for tree).
    pub user_ns: u64,
    pub wall_ns: u64,
    pub exit: Option<i32>,
}

/// Runs `cmd` once (output discarded) and measures it.
pub fn measure_command(clock: &mut HostClock, cmd: &mut Command) -> Result<RunCost, ValidateError> {
    let before = largo_physmem::host::rusage_children();
    let start = Instant::now();
    let (status, sys_ns) = clock
        .measure(|| {
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .stdin(Stdio::null())
                .status()
        })
        .map_err(ValidateError::Clock)?;
    let wall_ns = start.elapsed().as_nanos() as u64;
    let after = largo_physmem::host::rusage_children();
    let status = status.map_err(ValidateError::Command)?;
    Ok(RunCost {
        sys_ns,
        user_ns: after.utime_ns.saturating_sub(before.utime_ns),
        wall_ns,
        exit: status.code(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_each_configuration_once_starting_elsewhere() {
        let rounds: Vec<Vec<usize>> = (0..3).map(|r| round_order(r, 3).collect()).collect();
        assert_eq!(rounds, vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]);
    }
}
