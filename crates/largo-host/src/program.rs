//! A whole program on both sides: the host runs the command natively under
//! a configuration's THP settings (ASLR off, as when it was recorded) while
//! the model replays its recorded trace. Per-size `anon_fault_alloc` are
//! compared within a tolerance: the host counters are global, and a
//! program never runs twice exactly alike.

use std::process::{Command, Stdio};

use largo_mm::{Machine, MachineConfig};
use largo_trace::Trace;
use largo_workloads::replay::{replay, ReplayOptions, ReplayStats};
use largo_workloads::report::Counters;
use serde::Serialize;

use crate::counters::HostCounters;
use crate::interleave::run_interleaved;
use crate::kernel_time::HostClock;
use crate::validate::{host_knobs, ValidateError};

/// The tolerance of `anon_fault_alloc` per size: |host - largo| within
/// this share of the host's count (or within `MIN_SLACK` allocations).
pub const TOLERANCE: f64 = 0.03;
pub const MIN_SLACK: i64 = 3;

/// Per-size stats compared: anonymous and shmem folio allocations.
pub const PROGRAM_STATS: [&str; 2] = ["anon_fault_alloc", "shmem_alloc"];

/// One size's allocations on both sides.
#[derive(Clone, Debug, Serialize)]
pub struct SizeRow {
    pub size: String,
    /// `anon_fault_alloc` or `shmem_alloc`.
    pub stat: &'static str,
    pub largo: i64,
    pub host: i64,
}

impl SizeRow {
    /// |host - largo| as a share of the host's count.
    pub fn error(&self) -> f64 {
        if self.host == 0 {
            return if self.largo == 0 { 0.0 } else { 1.0 };
        }
        (self.largo - self.host).abs() as f64 / self.host as f64
    }

    pub fn within(&self) -> bool {
        (self.largo - self.host).abs() <= MIN_SLACK || self.error() <= TOLERANCE
    }
}

/// The comparison of one program under one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramValidation {
    pub rows: Vec<SizeRow>,
    /// The host's kernel time for the command's process tree (median run).
    pub host_kernel_ns: u64,
    /// Every run's kernel time, in the order run.
    pub host_kernel_runs_ns: Vec<u64>,
    /// How it was measured ([`HostClock::source`]).
    pub host_clock: &'static str,
    pub host_exit: Option<i32>,
    #[serde(skip)]
    pub largo: Counters,
    pub replay: ReplayStats,
}

impl ProgramValidation {
    pub fn within(&self) -> bool {
        self.rows.iter().all(SizeRow::within)
    }
}

/// Replays `trace` under each configuration, then runs the command
/// (`launcher()` builds it) natively under each configuration's THP
/// settings, `rounds` times, interleaved ([`run_interleaved`]: ASLR off,
/// as when recorded) so slow drifts of the host hit them alike; compares
/// the counters of the run with the median kernel time.
pub fn validate_programs(
    configs: &[MachineConfig],
    trace: &Trace,
    launcher: &dyn Fn() -> Command,
    rounds: usize,
) -> Result<Vec<ProgramValidation>, ValidateError> {
    let mut models = Vec::new();
    for config in configs {
        let mut m = Machine::new(config.clone())?;
        let knobs = host_knobs(&m)?;
        let out = replay(&mut m, &trace.events, &ReplayOptions::default(), &mut |_, _| {})?;
        models.push((knobs, out));
    }
    let knob_sets: Vec<Vec<(String, String)>> = models.iter().map(|(k, _)| k.clone()).collect();
    let mut clock = HostClock::best();
    let runs = run_interleaved(&knob_sets, rounds, &mut |_, _| {}, &mut |_| {
        native_run(&mut clock, &mut launcher())
    })?;
    Ok(models
        .into_iter()
        .zip(runs)
        .map(|((_, out), mut runs)| {
            let all_ns = runs.iter().map(|r| r.1).collect();
            runs.sort_by_key(|r| r.1);
            let (d, sys, exit) = runs.swap_remove(runs.len() / 2);
            let c = &out.run.counters;
            let d = &d;
            let rows = PROGRAM_STATS
                .iter()
                .flat_map(|&stat| {
                    c.mthp.keys().map(move |size| SizeRow {
                        size: size.clone(),
                        stat,
                        largo: c.mthp(size, stat),
                        host: d.mthp(size, stat),
                    })
                })
                .collect();
            ProgramValidation {
                rows,
                host_kernel_ns: sys,
                host_kernel_runs_ns: all_ns,
                host_clock: clock.source(),
                host_exit: exit,
                largo: out.run.counters,
                replay: out.stats,
            }
        })
        .collect())
}

/// One native run: the counter deltas, the kernel time of the process
/// tree, the exit status.
fn native_run(clock: &mut HostClock, cmd: &mut Command) -> Result<(HostCounters, u64, Option<i32>), ValidateError> {
    let _ = HostCounters::read();
    let before = HostCounters::read();
    let (status, kernel_ns) = clock
        .measure(|| cmd.stdout(Stdio::null()).stderr(Stdio::null()).status())
        .map_err(ValidateError::Clock)?;
    let status = status.map_err(ValidateError::Command)?;
    let after = HostCounters::read();
    Ok((after.minus(&before), kernel_ns, status.code()))
}
