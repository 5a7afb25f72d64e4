//! The cost model against the host kernel's time: workloads run natively
//! under each configuration (interleaved, after one warm-up round) with
//! their kernel time taken by [`HostClock`], next to the kernel time the
//! cost model estimates for the same run on the model.

use largo_mm::{Machine, MachineConfig};
use largo_trace::Event;
use largo_workloads::cost::Profile;
use largo_workloads::replay::{replay, ReplayOptions};

use crate::kernel_time::HostClock;
use crate::knobs::KnobGuard;
use crate::native;
use crate::validate::{host_knobs, ValidateError};

/// One (workload, configuration) to time.
pub struct CostCase {
    pub workload: String,
    pub config: String,
    pub machine: MachineConfig,
    pub events: Vec<Event>,
}

/// Its kernel time on both sides.
#[derive(Clone, Debug)]
pub struct CostResult {
    pub workload: String,
    pub config: String,
    /// Host kernel ns of every measured run, in the order run.
    pub host_ns: Vec<u64>,
    /// The cost model's estimate for the model's run.
    pub largo_ns: f64,
}

impl CostResult {
    pub fn host_median_ns(&self) -> f64 {
        let mut v = self.host_ns.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0) as f64
    }
}

/// Times every case `repeats` times on the host (all cases interleaved
/// in each round, a warm-up round first) and estimates each on the
/// model. `should_stop` is polled between runs.
pub fn measure(
    cases: &[CostCase],
    repeats: usize,
    profile: &Profile,
    clock: &mut HostClock,
    should_stop: &dyn Fn() -> bool,
) -> Result<Vec<CostResult>, ValidateError> {
    let mut prepared = Vec::new();
    let mut results = Vec::new();
    for c in cases {
        let mut m = Machine::new(c.machine.clone())?;
        let knobs = host_knobs(&m)?;
        let out = replay(&mut m, &c.events, &ReplayOptions::default(), &mut |_, _| {})?;
        let plan = native::plan(&c.events)?;
        prepared.push((knobs, plan, m.geometry().page_size()));
        results.push(CostResult {
            workload: c.workload.clone(),
            config: c.config.clone(),
            host_ns: Vec::new(),
            largo_ns: profile.estimate(&out.run.counters).kernel_ns,
        });
    }
    let mut guard = KnobGuard::acquire()?;
    for round in 0..=repeats {
        for (i, (knobs, plan, page_size)) in prepared.iter().enumerate() {
            if should_stop() {
                return Err(ValidateError::Interrupted);
            }
            guard.set_all(knobs)?;
            let mut placement = native::place(plan, *page_size)?;
            let ns = clock.per_run_ns(|| native::run(&mut placement, plan, false).map(|_| ()))?;
            if round > 0 {
                results[i].host_ns.push(ns.round() as u64);
            }
        }
    }
    guard.restore()?;
    Ok(results)
}
