//! The machine side of free page reporting: the device's sink and the
//! simulated clock that runs the delayed pass (its knobs are entries of
//! the knob registry).

use largo_physmem::BackingKind;

use super::{CountingSink, DiscardingSink, PageReporting, ReportSink};
use crate::machine::Machine;

/// The sink of a backing: `ram` really discards, `sim` counts.
pub(crate) fn sink_for(backing: BackingKind) -> Box<dyn ReportSink> {
    match backing {
        BackingKind::Ram => Box::new(DiscardingSink::default()),
        _ => Box::new(CountingSink::default()),
    }
}

impl Machine {
    /// The simulated clock, ns since boot.
    pub fn now_ns(&self) -> u64 {
        self.page_alloc.reporting().now_ns
    }

    /// Lets `ns` of simulated time pass: delayed work that falls due
    /// (khugepaged woken by a registration, the reporting pass,
    /// kcompactd's timer, khugepaged's next scan, the memcg statistics
    /// flush) runs at its time, in order (a flush first on a tie, then
    /// khugepaged, reporting, kcompactd).
    pub fn advance_time(&mut self, ns: u64) {
        if ns > 0 {
            // The cpus idle: queued RCU callbacks run.
            self.run_rcu_callbacks();
        }
        let now = self.now_ns();
        let target = now.saturating_add(ns);
        if self.vm.khugepaged.wake_now {
            self.vm.khugepaged.due_ns = Some(now);
            self.vm.khugepaged.wake_now = false;
        }
        loop {
            let [khugepaged, report, kcompactd, flush] = self.delayed_work_by(target);
            let Some(due) = [khugepaged, report, kcompactd, flush].into_iter().flatten().min() else {
                break;
            };
            let r = self.page_alloc.reporting_mut();
            r.now_ns = r.now_ns.max(due);
            if flush == Some(due) {
                self.vm.flush_memcg_stats();
                self.vm.stats_flush_due_ns = due + crate::vm::lru::STATS_FLUSH_NS;
            } else if khugepaged == Some(due) {
                self.vm.khugepaged.due_ns = None;
                let cpu = self.vm.khugepaged.cpu.min(self.config().nr_cpus.max(1) - 1);
                self.with_vm(cpu, |vm, ctx| vm.khugepaged_run(ctx, due));
            } else if report == Some(due) {
                self.page_alloc
                    .reporter()
                    .page_reporting_process(self.report_sink.as_mut(), self.backing.as_mut());
            } else {
                self.page_alloc.compaction.kcompactd_rearm(due);
                self.with_reclaim(|pa, r| pa.compactor().kcompactd_timer(r));
            }
        }
        let r = self.page_alloc.reporting_mut();
        r.now_ns = r.now_ns.max(target);
    }

    /// Whether letting `ns` pass ([`Machine::advance_time`]) would run
    /// delayed work: without it, the clock only moves and no counter
    /// changes.
    pub fn delayed_work_due(&self, ns: u64) -> bool {
        let target = self.now_ns().saturating_add(ns);
        self.vm.khugepaged.wake_now || self.delayed_work_by(target).iter().any(Option::is_some)
    }

    /// When each delayed work falls due, if by `target`: khugepaged's scan,
    /// the reporting pass, kcompactd's timer, the memcg statistics flush.
    fn delayed_work_by(&self, target: u64) -> [Option<u64>; 4] {
        let by = |d: u64| (d <= target).then_some(d);
        [
            self.vm.khugepaged.due_ns.and_then(by),
            self.page_alloc.reporting().due_ns.and_then(by),
            by(self.page_alloc.compaction.kcompactd_due()),
            by(self.vm.stats_flush_due_ns),
        ]
    }

    pub fn reporting(&self) -> &PageReporting {
        self.page_alloc.reporting()
    }
}
