//! The `page_reporting` section of a run's report: what free page
//! reporting did (the machine's device counters), the blocks in the
//! Reported state at the end per zone and order, and on `ram` the host
//! arena's resident memory before the workload's first free and at the end.

use std::collections::BTreeMap;

use largo_mm::reporting::TimelineSample;
use largo_mm::Machine;
use serde::Serialize;

/// The moment a workload first freed memory (munmap).
#[derive(Clone, Copy, Debug, Default)]
pub struct FirstFree {
    /// `ram` only: the arena's resident bytes.
    pub resident_bytes: Option<u64>,
    /// Reported kB so far; `None` if nothing was freed.
    pub reported_kib: Option<u64>,
    /// The simulated time, ms.
    pub t_ms: u64,
}

impl FirstFree {
    /// Records it if it is the first.
    pub fn note(&mut self, m: &Machine) {
        if self.reported_kib.is_none() {
            self.resident_bytes = m.backing().resident_bytes();
            self.reported_kib = Some(m.reporting().stats.reported_kib);
            self.t_ms = m.now_ns() / 1_000_000;
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportingReport {
    /// `page_reporting_order` in force.
    pub page_reporting_order: u32,
    pub trigger: String,
    pub passes: u64,
    pub reported_kib: u64,
    pub report_calls: u64,
    /// Blocks reported, by order (orders with none left out).
    pub reported_pages_by_order: BTreeMap<u32, u64>,
    /// Pages the host had discarded that the guest allocated again.
    pub host_refault_pages: u64,
    /// Free-list entries the passes looked at.
    pub walked: u64,
    /// One sample per pass.
    pub timeline: Vec<TimelineSample>,
    /// Free blocks in the Reported state at the end, `"Node 0, zone Normal"`
    /// -> one count per order.
    pub reported_free_blocks: BTreeMap<String, Vec<u64>>,
    /// Host memory discarded at the end (pages reported and not
    /// allocated since), in kB.
    pub discarded_kib: u64,
    /// Reported kB when the workload first freed memory (what was
    /// reported since is `reported_kib` less this).
    pub reported_kib_before_free: u64,
    /// When the workload first freed memory, simulated ms.
    pub first_free_t_ms: u64,
    /// `ram` only: the arena's resident bytes before the first free.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_bytes_before: Option<u64>,
    /// `ram` only: the arena's resident bytes at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_bytes_after: Option<u64>,
}

impl ReportingReport {
    /// The section, if the machine has a reporting device.
    pub fn read(m: &Machine, before_free: FirstFree) -> Option<ReportingReport> {
        let FirstFree {
            resident_bytes: resident_before,
            reported_kib: reported_before,
            t_ms: free_t_ms,
        } = before_free;
        let r = m.reporting();
        if !r.registered {
            return None;
        }
        let geo = m.geometry();
        let page_kib = geo.page_size() >> 10;
        let s = &r.stats;
        let reported_free_blocks = m
            .page_alloc()
            .zones()
            .iter()
            .filter(|z| z.populated())
            .map(|z| {
                (
                    format!("Node {}, zone {}", z.nid, z.name()),
                    z.free_area.iter().map(|a| a.nr_reported).collect(),
                )
            })
            .collect();
        Some(ReportingReport {
            page_reporting_order: r.order(geo.pageblock_order),
            trigger: format!("{:?}", r.trigger).to_lowercase(),
            passes: s.passes,
            reported_kib: s.reported_kib,
            report_calls: s.report_calls,
            reported_pages_by_order: s
                .reported_pages_by_order
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(o, &n)| (o as u32, n))
                .collect(),
            host_refault_pages: s.host_refault_pages,
            walked: s.walked,
            timeline: s.timeline.clone(),
            reported_free_blocks,
            discarded_kib: r.discarded.nr_pages() * page_kib,
            reported_kib_before_free: reported_before.unwrap_or(s.reported_kib),
            first_free_t_ms: free_t_ms,
            resident_bytes_before: resident_before,
            resident_bytes_after: resident_before.and(m.backing().resident_bytes()),
        })
    }
}
