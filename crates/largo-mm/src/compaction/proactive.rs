//! Proactive compaction (mm/compaction.c `kcompactd` timer,
//! `fragmentation_score_node`, `should_proactive_compact_node`,
//! `proactive_compact_node`): every HPAGE_FRAG_CHECK_INTERVAL_MSEC of
//! simulated time kcompactd checks each node's fragmentation score (the
//! share of free memory in blocks smaller than a PMD, weighted by zone
//! size) and, above `100 - vm.compaction_proactiveness + 10`, compacts the
//! node's zones whole until each is at or below `100 - proactiveness`. A
//! run that does not lower the score defers the next
//! 1 << COMPACT_MAX_DEFER_SHIFT checks.

use super::control::{CompactControl, MigrateMode};
use super::COMPACT_MAX_DEFER_SHIFT;
use crate::page_alloc::{PageAlloc, Reclaim};
use crate::stats::VmEvent;

/// `HPAGE_FRAG_CHECK_INTERVAL_MSEC`: kcompactd's timer.
pub const HPAGE_FRAG_CHECK_INTERVAL_NS: u64 = 500_000_000;

/// `fragmentation_score_wmark`: the low (stop) or high (start) score.
pub fn fragmentation_score_wmark(proactiveness: u64, low: bool) -> u32 {
    let wmark_low = 100u32.saturating_sub(proactiveness as u32).max(5);
    if low {
        wmark_low
    } else {
        (wmark_low + 10).min(100)
    }
}

/// kcompactd's proactive state per node.
#[derive(Clone, Debug, Default)]
pub struct Kcompactd {
    /// When the timer fires next (simulated ns).
    pub next_ns: u64,
    /// Checks still skipped after a run that did not help (`proactive_defer`).
    pub proactive_defer: Vec<u32>,
}

impl PageAlloc {
    /// `extfrag_for_order(zone, COMPACTION_HPAGE_ORDER)`: percent of free
    /// memory in blocks below the PMD order.
    pub fn fragmentation_score_zone(&self, zi: usize) -> u32 {
        let order = self.geo.pmd_order.min(self.geo.max_page_order);
        self.extfrag_for_order(zi, order)
    }

    /// `fragmentation_score_node`: zone scores weighted by present pages.
    pub fn fragmentation_score_node(&self, nid: usize) -> u32 {
        let node_present: u64 = self
            .zones
            .iter()
            .filter(|z| z.nid == nid)
            .map(|z| z.present_pages)
            .sum();
        self.zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.nid == nid && z.populated())
            .map(|(zi, z)| (z.present_pages * self.fragmentation_score_zone(zi) as u64 / (node_present + 1)) as u32)
            .sum()
    }

    /// One firing of kcompactd's timer on every node (`kcompactd`'s loop
    /// after its timeout): proactive compaction where it is due.
    pub fn kcompactd_timer(&mut self, reclaim: &mut dyn Reclaim) {
        let proactiveness = self.tunables.compaction_proactiveness;
        if proactiveness == 0 {
            return;
        }
        let nr_nodes = self.nodes.len();
        self.kcompactd.proactive_defer.resize(nr_nodes, 0);
        for nid in 0..nr_nodes {
            if self.kcompactd.proactive_defer[nid] > 0 {
                self.kcompactd.proactive_defer[nid] -= 1;
                continue;
            }
            let before = self.fragmentation_score_node(nid);
            if before <= fragmentation_score_wmark(proactiveness, false) {
                continue;
            }
            self.proactive_compact_node(nid, reclaim);
            if self.fragmentation_score_node(nid) >= before {
                self.kcompactd.proactive_defer[nid] = 1 << COMPACT_MAX_DEFER_SHIFT;
            }
        }
    }

    /// `proactive_compact_node`: every populated zone compacted whole
    /// (synchronous light, skip hints ignored) until its score is low.
    fn proactive_compact_node(&mut self, nid: usize, reclaim: &mut dyn Reclaim) {
        let cpu = self.nodes[nid].cpus.first().copied().unwrap_or(0);
        for zi in 0..self.zones.len() {
            if self.zones[zi].nid != nid || !self.zones[zi].populated() {
                continue;
            }
            let mut cc = CompactControl::new(zi, None, MigrateMode::SyncLight, self.geo.nr_page_orders());
            cc.proactive = true;
            cc.whole_zone = true;
            cc.ignore_skip_hint = true;
            self.compact_zone(&mut cc, cpu, reclaim);
            self.count_event(VmEvent::CompactDaemonMigrateScanned, cc.total_migrate_scanned);
            self.count_event(VmEvent::CompactDaemonFreeScanned, cc.total_free_scanned);
        }
    }
}
