//! Running a workload on a machine: build each task's script, schedule
//! the tasks to completion, and collect counters, peaks and the resolved
//! operations.

use largo_mm::Machine;
use serde::Serialize;

use crate::builtin::{BuildCtx, WorkloadDef};
use crate::op::ResolvedOp;
use crate::report::Counters;
use crate::sched::{pages_in, Problems, Scheduler, TaskMode};
use crate::spec::WorkloadSpec;

/// How to run a workload.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub nr_tasks: usize,
    pub mode: TaskMode,
    pub seed: u64,
    /// Run both invariant checkers every this many scheduling rounds (0: never).
    pub check_every: u64,
    /// Pages a task touches before the next task runs.
    pub quantum: u64,
    /// Stop with the memory still mapped: tasks skip their final munmaps
    /// and do not exit (for `largo show FILE WORKLOAD`).
    pub keep_mapped: bool,
    /// `KEY=VALUE,...` changes to the preset's TLB for the user-time model
    /// (`--tlb`; see `TlbGeometry::with_overrides`).
    pub tlb_overrides: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            nr_tasks: 1,
            mode: TaskMode::Process,
            seed: 0,
            check_every: 0,
            quantum: 64,
            keep_mapped: false,
            tlb_overrides: None,
        }
    }
}

/// Maxima seen during the run, in kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Peak {
    /// `NR_ANON_MAPPED`: anonymous memory mapped (the bloat measure).
    pub anon_kb: u64,
    /// Anonymous memory in large folios (the per-size `nr_anon` gauges
    /// times their sizes) when `anon_kb` peaked; at most `anon_kb`.
    pub anon_large_kb: u64,
    /// `NR_PAGETABLE`.
    pub pagetables_kb: u64,
    /// MemTotal - MemFree.
    pub used_kb: u64,
    /// How the anonymous memory was mapped when `anon_kb` peaked (the
    /// TLB coverage estimate's input; see [`crate::tlb`]).
    #[serde(skip)]
    pub layout: crate::tlb::MappedLayout,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Counters at the end (the machine booted fresh, so the events are
    /// the workload's own).
    pub counters: Counters,
    pub peak: Peak,
    /// TLB reach and contiguity coverage when anonymous memory peaked.
    pub tlb: crate::tlb::TlbReport,
    /// The cost model's work by kernel entry.
    pub entries: crate::entry::EntryCounts,
    /// Free page reporting, if the machine has a reporting device.
    pub reporting: Option<crate::reporting::ReportingReport>,
    pub problems: Problems,
    /// Per root task, the operations with the model's addresses (for a
    /// host replay).
    pub resolved: Vec<Vec<ResolvedOp>>,
    pub rounds: u64,
}

/// A run that could not proceed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("cannot start a task: {0}")]
    Start(#[from] largo_mm::vm::VmError),
    #[error("after scheduling round {round}: {error}")]
    Invariant { round: u64, error: largo_mm::CheckError },
    #[error("--tlb: {0}")]
    Tlb(String),
}

/// Runs `spec` on `m`; `progress(done, total)` is called with pages touched.
pub fn run(
    m: &mut Machine,
    def: &WorkloadDef,
    spec: &WorkloadSpec,
    opts: &RunOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RunOutcome, RunError> {
    let page_size = m.geometry().page_size();
    let scripts: Vec<_> = (0..opts.nr_tasks.max(1))
        .map(|task| {
            let ctx = BuildCtx {
                page_size,
                task,
                nr_tasks: opts.nr_tasks.max(1),
                seed: opts.seed,
            };
            def.script(spec, &ctx)
        })
        .collect();
    let total: u64 = scripts.iter().map(|s| pages_in(s)).sum();
    let mut sched = Scheduler::new(m, scripts, opts.mode, opts.quantum, opts.keep_mapped).map_err(RunError::Start)?;
    if let Some(spec) = &opts.tlb_overrides {
        sched.tlb = sched.tlb.clone().with_overrides(spec).map_err(RunError::Tlb)?;
    }
    let mut peak = Peak::default();
    let mut rounds = 0;
    let busy_ns_per_fault = busy_ns_per_fault();
    let mut faults = pgfault(m);
    while sched.round(m) {
        rounds += 1;
        // Simulated time passes with the work: each fault costs what the
        // default cost profile says a fault and its zeroing take.
        let now = pgfault(m);
        // Kernel threads woken by the time passing work for no task (the
        // ledger changes entry only when some work falls due: closing an
        // entry reads every cost counter).
        let ns = (now - faults) * busy_ns_per_fault;
        if m.delayed_work_due(ns) {
            sched.ledger.enter(m, crate::entry::Entry::Kthreads);
        }
        m.advance_time(ns);
        faults = now;
        update_peak(m, &mut peak);
        if opts.check_every > 0 && rounds % opts.check_every == 0 {
            m.check()
                .map_err(|error| RunError::Invariant { round: rounds, error })?;
        }
        if rounds % 256 == 0 {
            progress(sched.pages_touched, total);
        }
    }
    progress(total, total);
    if opts.check_every > 0 {
        m.check()
            .map_err(|error| RunError::Invariant { round: rounds, error })?;
    }
    let entries = std::mem::replace(&mut sched.ledger, crate::entry::EntryLedger::new(m)).finish(m);
    Ok(RunOutcome {
        entries,
        counters: Counters::read(m),
        tlb: crate::tlb::TlbReport::at_peak(m, &peak, &sched.tlb).with_streams(sched.streams),
        peak,
        reporting: crate::reporting::ReportingReport::read(m, sched.first_free),
        resolved: sched.resolved(),
        problems: sched.problems.clone(),
        rounds,
    })
}

fn pgfault(m: &Machine) -> u64 {
    m.page_alloc().events.get(largo_mm::stats::VmEvent::Pgfault)
}

/// Simulated ns per page fault while a workload runs: a hot fault and the
/// zeroing of its base page under the default cost profile.
fn busy_ns_per_fault() -> u64 {
    static NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        let p = crate::cost::Profile::default_profile();
        (p.cost_at("fault", crate::cost::Faults::Hot) + p.cost_at("page_zero", crate::cost::Faults::Hot)).round() as u64
    })
}

pub(crate) fn update_peak(m: &Machine, peak: &mut Peak) {
    let kb = |pages: i64| (pages.max(0) as u64) << (m.geometry().page_shift - 10);
    let stats = m.vm().node_stats();
    let anon: i64 = stats.iter().map(|s| s.anon_mapped).sum();
    let tables: i64 = stats.iter().map(|s| s.pagetable).sum();
    let pa = m.page_alloc();
    let used = pa.managed_pages() as i64 - pa.nr_free_pages() as i64;
    if kb(anon) > peak.anon_kb {
        peak.anon_kb = kb(anon);
        let mthp = &m.vm().mthp;
        let large_pages: i64 = m
            .geometry()
            .anon_orders()
            .map(|order| mthp.get(order, largo_mm::vm::stats::MthpStat::NrAnon) << order)
            .sum();
        peak.anon_large_kb = kb(large_pages).min(peak.anon_kb);
        peak.layout = crate::tlb::MappedLayout::read(m);
    }
    peak.pagetables_kb = peak.pagetables_kb.max(kb(tables));
    peak.used_kb = peak.used_kb.max(kb(used));
}
