//! The machine side of free page reporting: the device's sink, the
//! simulated clock that runs the delayed pass, and the knobs.

use largo_physmem::BackingKind;

use super::{CountingSink, DiscardingSink, PageReporting, ReportSink, Trigger};
use crate::knobs::{self, KnobError, KnobInfo};
use crate::machine::Machine;

/// The sink of a backing: `ram` really discards, `sim` counts.
pub(crate) fn sink_for(backing: BackingKind) -> Box<dyn ReportSink> {
    match backing {
        BackingKind::Ram => Box::new(DiscardingSink::default()),
        _ => Box::new(CountingSink::default()),
    }
}

const TRIGGER_CHOICES: [(&str, Trigger); 2] = [("mainline", Trigger::Mainline), ("seed", Trigger::Seed)];

impl Machine {
    /// The simulated clock, ns since boot.
    pub fn now_ns(&self) -> u64 {
        self.page_alloc.reporting().now_ns
    }

    /// Lets `ns` of simulated time pass: delayed work that falls due
    /// (the reporting pass, kcompactd's timer) runs at its time, in order.
    pub fn advance_time(&mut self, ns: u64) {
        let target = self.now_ns().saturating_add(ns);
        loop {
            let report = self.page_alloc.reporting().due_ns.filter(|&d| d <= target);
            let kcompactd = Some(self.page_alloc.kcompactd.next_ns).filter(|&d| d <= target);
            let due = match (report, kcompactd) {
                (None, None) => break,
                (a, b) => a.unwrap_or(u64::MAX).min(b.unwrap_or(u64::MAX)),
            };
            let r = self.page_alloc.reporting_mut();
            r.now_ns = r.now_ns.max(due);
            if report == Some(due) {
                self.page_alloc
                    .page_reporting_process(self.report_sink.as_mut(), self.backing.as_mut());
            } else {
                self.page_alloc.kcompactd.next_ns = due + crate::compaction::proactive::HPAGE_FRAG_CHECK_INTERVAL_NS;
                self.with_reclaim(|pa, r| pa.kcompactd_timer(r));
            }
        }
        let r = self.page_alloc.reporting_mut();
        r.now_ns = r.now_ns.max(target);
    }

    pub fn reporting(&self) -> &PageReporting {
        self.page_alloc.reporting()
    }

    /// `page_reporting/page_reporting_order` (the module parameter,
    /// 0..=MAX_PAGE_ORDER), and largo's `page_reporting/trigger`
    /// (mainline | seed) and `page_reporting/retain_kbytes`.
    pub(crate) fn set_reporting_knob(&mut self, path: &str, value: &str) -> Result<(), KnobError> {
        let max_order = self.geometry().max_page_order as u64;
        let page_kib = self.geometry().page_size() >> 10;
        let r = self.page_alloc.reporting_mut();
        match path {
            "page_reporting/page_reporting_order" => {
                r.order_param = Some(knobs::parse_int(path, value, 0, max_order)? as u32);
            }
            "page_reporting/trigger" => r.trigger = knobs::parse_choice(path, value, &TRIGGER_CHOICES)?,
            "page_reporting/retain_kbytes" => {
                r.retain_pages = knobs::parse_int(path, value, 0, u64::MAX >> 12)? / page_kib;
            }
            _ => return Err(KnobError::Unknown { path: path.into() }),
        }
        Ok(())
    }

    pub(crate) fn reporting_knobs(&self) -> Vec<KnobInfo> {
        let r = self.reporting();
        let page_kib = self.geometry().page_size() >> 10;
        vec![
            KnobInfo {
                path: "page_reporting/page_reporting_order".into(),
                value: r.order_param.map_or("-1".to_string(), |o| o.to_string()),
                help: "smallest free block order reported to the host (-1: the device's order once one registers)",
            },
            KnobInfo {
                path: "page_reporting/trigger".into(),
                value: knobs::sysfs_choice(&TRIGGER_CHOICES, r.trigger),
                help: "largo: mainline (any free at the order) or seed (32 unreported blocks of an order)",
            },
            KnobInfo {
                path: "page_reporting/retain_kbytes".into(),
                value: (r.retain_pages * page_kib).to_string(),
                help: "largo: free memory reporting leaves unreported for reuse (0: off; not in Linux)",
            },
        ]
    }
}
