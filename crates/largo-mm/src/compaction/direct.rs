//! Who runs compaction: allocating tasks (mm/compaction.c
//! `try_to_compact_pages`, `compact_zone_order`), kcompactd
//! (`kcompactd_do_work`) and `/proc/sys/vm/compact_memory`
//! (`compact_node`).

use largo_types::MigrateType;

use super::control::{CompactControl, CompactPriority, CompactResult, MigrateMode};
use super::Compactor;
use crate::page_alloc::{AllocFlags, Reclaim};
use crate::stats::VmEvent;

/// One direct compaction request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompactRequest {
    pub order: u32,
    pub alloc_flags: AllocFlags,
    pub highest_zoneidx: usize,
    pub migratetype: MigrateType,
    pub prio: CompactPriority,
}

impl Compactor<'_> {
    /// `compact_zone_order`: a direct compactor's run of one zone.
    fn compact_zone_order(
        &mut self,
        zi: usize,
        req: CompactRequest,
        cpu: usize,
        reclaim: &mut dyn Reclaim,
    ) -> (CompactResult, Option<u64>) {
        let mode = if req.prio == CompactPriority::Async {
            MigrateMode::Async
        } else {
            MigrateMode::SyncLight
        };
        let mut cc = CompactControl::new(zi, Some(req.order), mode, self.pa.geo.nr_page_orders());
        cc.migratetype = req.migratetype;
        cc.highest_zoneidx = req.highest_zoneidx;
        cc.alloc_flags = req.alloc_flags;
        cc.direct_compaction = true;
        cc.whole_zone = req.prio == CompactPriority::SyncFull;
        cc.ignore_skip_hint = req.prio == CompactPriority::SyncFull;
        // current->capture_control for the run.
        self.pa.compaction.arm_capture(zi, req.order, req.migratetype);
        let status = self.compact_zone(&mut cc, cpu, reclaim);
        match self.pa.compaction.take_capture() {
            Some(pfn) => (CompactResult::Success, Some(pfn)),
            None => (status, None),
        }
    }

    /// `try_to_compact_pages`: compacts the zones of `zones` (a zonelist,
    /// preferred first) until one reports success; deferral skips zones
    /// that failed recently, and a failed synchronous run defers the zone.
    /// Returns the result and the block a run captured, if any.
    pub(crate) fn try_to_compact_pages(
        &mut self,
        zones: &[usize],
        req: CompactRequest,
        cpu: usize,
        reclaim: &mut dyn Reclaim,
    ) -> (CompactResult, Option<u64>) {
        let mut rc = CompactResult::Skipped;
        for &zi in zones {
            if self.pa.zones[zi].zone_type.index() > req.highest_zoneidx {
                continue;
            }
            if req.prio > CompactPriority::SyncFull && self.pa.zones[zi].compact.deferred(req.order) {
                rc = rc.max(CompactResult::Deferred);
                continue;
            }
            let (status, captured) = self.compact_zone_order(zi, req, cpu, reclaim);
            rc = rc.max(status);
            if status == CompactResult::Success {
                self.pa.zones[zi].compact.defer_reset(req.order, false);
                if captured.is_some() {
                    return (rc, captured);
                }
                break;
            }
            if req.prio != CompactPriority::Async
                && matches!(status, CompactResult::Complete | CompactResult::PartialSkipped)
            {
                self.pa.zones[zi].compact.defer(req.order);
            }
        }
        (rc, None)
    }

    /// `kcompactd_do_work`: background compaction of a node for `order`
    /// after kswapd, zone by zone (synchronous light mode).
    pub(crate) fn kcompactd_do_work(
        &mut self,
        nid: usize,
        order: u32,
        highest_zoneidx: usize,
        reclaim: &mut dyn Reclaim,
    ) {
        self.pa.count_event(VmEvent::CompactDaemonWake, 1);
        let cpu = self.pa.nodes[nid].cpus.first().copied().unwrap_or(0);
        for zt in 0..=highest_zoneidx {
            let zi = nid * largo_types::MAX_NR_ZONES + zt;
            if !self.pa.zones[zi].populated() || self.pa.zones[zi].compact.deferred(order) {
                continue;
            }
            if self.compaction_suit_allocation_order(zi, order, zt, AllocFlags::empty(), false)
                != CompactResult::Continue
            {
                continue;
            }
            let mut cc = CompactControl::new(zi, Some(order), MigrateMode::SyncLight, self.pa.geo.nr_page_orders());
            cc.highest_zoneidx = zt;
            let status = self.compact_zone(&mut cc, cpu, reclaim);
            if status == CompactResult::Success {
                self.pa.zones[zi].compact.defer_reset(order, false);
            } else if status == CompactResult::Complete {
                self.pa.zones[zi].compact.defer(order);
            }
            self.pa
                .count_event(VmEvent::CompactDaemonMigrateScanned, cc.total_migrate_scanned);
            self.pa
                .count_event(VmEvent::CompactDaemonFreeScanned, cc.total_free_scanned);
        }
    }

    /// `compact_node` (`echo 1 > /proc/sys/vm/compact_memory`): every zone
    /// of every node compacted whole, synchronously. Returns base pages
    /// migrated.
    pub fn compact_memory(&mut self, reclaim: &mut dyn Reclaim) -> u64 {
        let mut migrated = 0;
        for zi in 0..self.pa.zones.len() {
            if !self.pa.zones[zi].populated() || self.pa.zones[zi].managed_pages == 0 {
                continue;
            }
            let cpu = self.pa.nodes[self.pa.zones[zi].nid].cpus.first().copied().unwrap_or(0);
            let mut cc = CompactControl::new(zi, None, MigrateMode::Sync, self.pa.geo.nr_page_orders());
            cc.whole_zone = true;
            cc.ignore_skip_hint = true;
            self.compact_zone(&mut cc, cpu, reclaim);
            migrated += cc.nr_migrated;
        }
        migrated
    }
}
