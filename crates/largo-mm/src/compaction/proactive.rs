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
use super::extfrag::extfrag_for_order;
use super::Compactor;
use crate::page_alloc::Reclaim;
use crate::page_alloc::Zone;
use crate::stats::VmEvent;
use largo_types::Geometry;

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

/// `fragmentation_score_zone`: `extfrag_for_order(zone,
/// COMPACTION_HPAGE_ORDER)`, percent of free memory in blocks below the
/// PMD order.
pub fn fragmentation_score_zone(geo: &Geometry, zone: &Zone) -> u32 {
    extfrag_for_order(zone, geo.pmd_order.min(geo.max_page_order))
}

/// `fragmentation_score_node`: the node's zone scores weighted by their
/// present pages.
pub fn fragmentation_score_node(geo: &Geometry, zones: &[Zone], nid: usize) -> u32 {
    let node_present: u64 = zones.iter().filter(|z| z.nid == nid).map(|z| z.present_pages).sum();
    zones
        .iter()
        .filter(|z| z.nid == nid && z.populated())
        .map(|z| (z.present_pages * fragmentation_score_zone(geo, z) as u64 / (node_present + 1)) as u32)
        .sum()
}

impl Compactor<'_> {
    /// One firing of kcompactd's timer on every node (`kcompactd`'s loop
    /// after its timeout): proactive compaction where it is due.
    pub fn kcompactd_timer(&mut self, reclaim: &mut dyn Reclaim) {
        let proactiveness = self.pa.tunables.compaction_proactiveness;
        if proactiveness == 0 {
            return;
        }
        let nr_nodes = self.pa.nodes.len();
        for nid in 0..nr_nodes {
            if self.pa.compaction.proactive_deferred(nid, nr_nodes) {
                continue;
            }
            let before = fragmentation_score_node(&self.pa.geo, &self.pa.zones, nid);
            if before <= fragmentation_score_wmark(proactiveness, false) {
                continue;
            }
            self.proactive_compact_node(nid, reclaim);
            if fragmentation_score_node(&self.pa.geo, &self.pa.zones, nid) >= before {
                self.pa.compaction.defer_proactive(nid);
            }
        }
    }

    /// `proactive_compact_node`: every populated zone compacted whole
    /// (synchronous light, skip hints ignored) until its score is low.
    fn proactive_compact_node(&mut self, nid: usize, reclaim: &mut dyn Reclaim) {
        let cpu = self.pa.nodes[nid].cpus.first().copied().unwrap_or(0);
        for zi in 0..self.pa.zones.len() {
            if self.pa.zones[zi].nid != nid || !self.pa.zones[zi].populated() {
                continue;
            }
            let mut cc = CompactControl::new(zi, None, MigrateMode::SyncLight, self.pa.geo.nr_page_orders());
            cc.proactive = true;
            cc.whole_zone = true;
            cc.ignore_skip_hint = true;
            self.compact_zone(&mut cc, cpu, reclaim);
            self.pa
                .count_event(VmEvent::CompactDaemonMigrateScanned, cc.total_migrate_scanned);
            self.pa
                .count_event(VmEvent::CompactDaemonFreeScanned, cc.total_free_scanned);
        }
    }
}
