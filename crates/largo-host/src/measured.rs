//! A command's cost measured natively under several THP configurations:
//! interleaved runs ([`run_interleaved`]) after one warm-up run, each
//! configuration's kernel, user and wall time as means with 95%
//! confidence intervals, and its kernel-time change from the first
//! configuration as a paired mean.
//!
//! Kernel time without a PMU is rusage's stime, which the kernel keeps by
//! sampling: each timer tick (4 ms at HZ=250) is charged to the mode it
//! interrupts, and the total is scaled to the precisely measured runtime.
//! One run's value is a sample on a 4 ms lattice, so medians of a few runs
//! are biased toward lattice points; the mean of runs is unbiased (a tick
//! lands in kernel mode with the probability the task is in the kernel),
//! and its interval comes from the runs' spread. With a PMU, kernel time
//! is the exact kernel-cycle share ([`HostClock`]).

use std::process::Command;

use serde::Serialize;

use crate::interleave::{measure_command, run_interleaved, RunCost};
use crate::kernel_time::HostClock;
use crate::stats::{paired_change_pct, Summary};
use crate::validate::ValidateError;

/// One configuration's runs.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub sys_ns: Summary,
    pub user_ns: Summary,
    pub wall_ns: Summary,
    /// Kernel time change from the first configuration, percent.
    pub sys_change_pct: Summary,
    pub runs: Vec<RunCost>,
}

/// Runs `launcher()`'s command `runs` times under each of `knob_sets`
/// (interleaved), after one unmeasured warm-up run under the first.
/// `progress(done, total)` counts finished runs.
pub fn measure_configs(
    knob_sets: &[Vec<(String, String)>],
    launcher: &dyn Fn() -> Command,
    runs: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Measured>, &'static str), ValidateError> {
    let mut clock = HostClock::best();
    let total = runs * knob_sets.len() + 1;
    let mut done = 0;
    let warm = run_interleaved(&knob_sets[..1], 1, &mut |_, _| {}, &mut |_| {
        measure_command(&mut clock, &mut launcher())
    })?;
    done += warm.len();
    progress(done, total);
    let all = run_interleaved(
        knob_sets,
        runs,
        &mut |_, _| {
            progress(done, total);
            done += 1;
        },
        &mut |_| measure_command(&mut clock, &mut launcher()),
    )?;
    // A program that ends differently under one configuration (crashes,
    // runs out of memory) is not measured, it is reported.
    let warm_exit = warm[0][0].exit;
    for (config, rs) in all.iter().enumerate() {
        if let Some(r) = rs.iter().find(|r| r.exit != warm_exit) {
            return Err(ValidateError::ExitChanged {
                config,
                warm: warm_exit,
                now: r.exit,
            });
        }
    }
    let field = |rs: &[RunCost], f: fn(&RunCost) -> u64| rs.iter().map(|r| f(r) as f64).collect::<Vec<_>>();
    let base_sys = field(&all[0], |r| r.sys_ns);
    let measured = all
        .into_iter()
        .map(|rs| Measured {
            sys_ns: Summary::of(&field(&rs, |r| r.sys_ns)),
            user_ns: Summary::of(&field(&rs, |r| r.user_ns)),
            wall_ns: Summary::of(&field(&rs, |r| r.wall_ns)),
            sys_change_pct: paired_change_pct(&base_sys, &field(&rs, |r| r.sys_ns)),
            runs: rs,
        })
        .collect();
    Ok((measured, clock.source()))
}
