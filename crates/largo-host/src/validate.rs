//! A workload on the model and natively on the host under the same THP
//! settings, and their counters side by side: the per-size stats and the
//! `thp_*` events must be equal.

use largo_mm::{Machine, MachineConfig};
use largo_workloads::builtin::WorkloadDef;
use largo_workloads::{RunOptions, RunOutcome, WorkloadSpec};
use serde::Serialize;

use crate::counters::HostCounters;
use crate::knobs::{knob_file, selected, KnobError, KnobGuard};
use crate::native::{self, NativeError};

/// Per-size stats compared (every anonymous size of the machine).
pub const MTHP_STATS: &[&str] = &[
    "anon_fault_alloc",
    "anon_fault_fallback",
    "anon_fault_fallback_charge",
    "split",
    "split_failed",
    "split_deferred",
    "nr_anon",
    "nr_anon_partially_mapped",
];

/// /proc/vmstat events compared. `thp_zero_page_alloc` is left out: the
/// huge zero folio is global and the host's may exist already.
pub const VMSTAT_EVENTS: &[&str] = &[
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
    "thp_split_page",
    "thp_split_page_failed",
    "thp_deferred_split_page",
    "thp_split_pmd",
];

/// Tries of the host side before a difference is reported: another
/// process faulting THPs at the same time can only add to the host's
/// counts, so a run that shows more than the model is tried again.
pub const MAX_ATTEMPTS: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("model: {0}")]
    Model(String),
    #[error("host knobs: {0}")]
    Knob(#[from] KnobError),
    #[error("host run: {0}")]
    Native(#[from] NativeError),
}

/// One counter on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// `vmstat/thp_fault_alloc` or `hugepages-64kB/anon_fault_alloc`.
    pub counter: String,
    pub model: i64,
    pub host: i64,
}

impl Row {
    pub fn agrees(&self) -> bool {
        self.model == self.host
    }
}

/// The comparison of one workload under one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    /// Every compared counter, also those zero on both sides.
    pub rows: Vec<Row>,
    /// Page faults: the model's `pgfault` and the host task's minor and
    /// major faults (which also include a few faults of the forked
    /// process's own stack and data; reported, not compared).
    pub model_pgfault: u64,
    pub host_faults: u64,
    /// The host task's kernel (system) time.
    pub host_stime_ns: u64,
    pub attempts: u32,
}

impl Validation {
    pub fn agrees(&self) -> bool {
        self.rows.iter().all(Row::agrees)
    }

    /// Rows where either side is non-zero.
    pub fn nonzero(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.model != 0 || r.host != 0)
    }
}

/// The THP knob writes that give the host the model machine's complete
/// THP state (top level, defrag, zero page, underused shrinking,
/// max_ptes_none, every anonymous size). Knobs the host lacks are skipped
/// when the model has them at their default (`anon_beside_full` off).
pub fn host_knobs(m: &Machine) -> Result<Vec<(String, String)>, KnobError> {
    let mut out = Vec::new();
    for k in m.knobs() {
        if !k.path.starts_with("transparent_hugepage/") {
            continue;
        }
        let value = selected(&k.value);
        if !knob_file(&k.path).exists() {
            if k.path.ends_with("anon_beside_full") && value == "0" {
                continue;
            }
            return Err(KnobError::Unsupported(format!(
                "the host has no {} (model value {value})",
                knob_file(&k.path).display()
            )));
        }
        out.push((k.path, value));
    }
    Ok(out)
}

/// Runs the model, then the host (up to [`MAX_ATTEMPTS`] times while the
/// host counts more), holding the knob lock for the host runs.
pub fn validate(
    config: &MachineConfig,
    def: &WorkloadDef,
    spec: &WorkloadSpec,
    opts: &RunOptions,
) -> Result<(RunOutcome, Validation), ValidateError> {
    let mut m = Machine::new(config.clone()).map_err(|e| ValidateError::Model(e.to_string()))?;
    let knobs = host_knobs(&m)?;
    let outcome = largo_workloads::run(&mut m, def, spec, opts, &mut |_, _| {})
        .map_err(|e| ValidateError::Model(e.to_string()))?;
    let page_size = m.geometry().page_size();
    let anon_sizes: Vec<String> = outcome.counters.mthp.keys().cloned().collect();
    let mut guard = KnobGuard::acquire()?;
    guard.set_all(&knobs)?;
    let mut attempts = 0;
    let validation = loop {
        attempts += 1;
        let v = host_once(&outcome, page_size, &anon_sizes, attempts)?;
        let host_more = v.rows.iter().any(|r| r.host > r.model);
        if v.agrees() || !host_more || attempts >= MAX_ATTEMPTS {
            break v;
        }
    };
    guard.restore()?;
    Ok((outcome, validation))
}

fn host_once(
    outcome: &RunOutcome,
    page_size: u64,
    sizes: &[String],
    attempts: u32,
) -> Result<Validation, ValidateError> {
    let mut placement = native::place(&outcome.resolved, page_size)?;
    // Warm the reads up so the snapshots themselves fault nothing new.
    let _ = HostCounters::read();
    let before = HostCounters::read();
    let exits = native::run(&mut placement, &outcome.resolved)?;
    let after = HostCounters::read();
    let d = after.minus(&before);
    let c = &outcome.counters;
    let mut rows = Vec::new();
    for e in VMSTAT_EVENTS {
        rows.push(Row {
            counter: format!("vmstat/{e}"),
            model: c.vmstat(e) as i64,
            host: d.vmstat(e),
        });
    }
    for size in sizes {
        for s in MTHP_STATS {
            rows.push(Row {
                counter: format!("hugepages-{size}/{s}"),
                model: c.mthp(size, s),
                host: d.mthp(size, s),
            });
        }
    }
    Ok(Validation {
        rows,
        model_pgfault: c.vmstat("pgfault"),
        host_faults: exits.iter().map(|e| e.rusage.minflt + e.rusage.majflt).sum(),
        host_stime_ns: exits.iter().map(|e| e.rusage.stime_ns).sum(),
        attempts,
    })
}
