//! One zone's compaction run (mm/compaction.c `compact_zone`,
//! `compaction_suitable`, `compaction_suit_allocation_order`,
//! `__compact_finished`).

use largo_types::{MigrateType, PAGE_ALLOC_COSTLY_ORDER};

use super::control::{CompactControl, CompactResult};
use super::extfrag::fragmentation_index;
use super::proactive::fragmentation_score_wmark;
use super::proactive::fragmentation_score_zone;
use super::Compactor;
use crate::page_alloc::{AllocFlags, Fallback, MigrationTarget, Reclaim};
use crate::stats::VmEvent;

/// `compact_gap`: free pages compaction needs beyond the watermark
/// (migration targets exist while their sources are still held).
pub(crate) fn compact_gap(order: u32) -> u64 {
    2 << order
}

impl Compactor<'_> {
    /// `compaction_suitable`: enough order-0 free pages above `watermark`
    /// to migrate, and, for costly orders, a fragmentation index saying
    /// the failure is fragmentation rather than lack of memory.
    pub(crate) fn compaction_suitable(&self, zi: usize, order: u32, watermark: u64, highest_zoneidx: usize) -> bool {
        let mark = watermark + compact_gap(order);
        if !self.pa.zone_watermark_ok(zi, 0, mark, highest_zoneidx, AllocFlags::CMA) {
            return false;
        }
        if order > PAGE_ALLOC_COSTLY_ORDER {
            let index = fragmentation_index(&self.pa.zones[zi], order);
            if (0..=self.pa.tunables.extfrag_threshold as i32).contains(&index) {
                return false;
            }
        }
        true
    }

    /// `compaction_suit_allocation_order`: `Success` if the allocation
    /// would already succeed, `Skipped` if compaction cannot help. A costly
    /// async request that may not use CMA is skipped unless the memory
    /// outside CMA pageblocks (a watermark check without ALLOC_CMA) could
    /// hold it: compaction might otherwise build the block inside CMA.
    pub(crate) fn compaction_suit_allocation_order(
        &self,
        zi: usize,
        order: u32,
        highest_zoneidx: usize,
        alloc_flags: AllocFlags,
        async_mode: bool,
    ) -> CompactResult {
        let mark = self.pa.zones[zi].wmark_pages(alloc_flags.wmark());
        if self.pa.zone_watermark_ok(zi, order, mark, highest_zoneidx, alloc_flags) {
            return CompactResult::Success;
        }
        if order > PAGE_ALLOC_COSTLY_ORDER
            && async_mode
            && !alloc_flags.contains(AllocFlags::CMA)
            && !self
                .pa
                .zone_watermark_ok(zi, 0, mark + compact_gap(order), highest_zoneidx, AllocFlags::empty())
        {
            return CompactResult::Skipped;
        }
        if !self.compaction_suitable(zi, order, mark, highest_zoneidx) {
            return CompactResult::Skipped;
        }
        CompactResult::Continue
    }

    /// `__compact_finished`.
    fn compact_finished(&mut self, cc: &CompactControl) -> CompactResult {
        if cc.migrate_pfn >= cc.free_pfn || cc.free_exhausted && cc.nr_freepages == 0 {
            let zone = &mut self.pa.zones[cc.zi];
            zone.compact.cached_migrate_pfn = 0;
            zone.compact.cached_free_pfn = 0;
            return CompactResult::Complete;
        }
        let Some(order) = cc.order else {
            // Proactive compaction stops once the zone is defragmented enough.
            if cc.proactive {
                let wmark_low = fragmentation_score_wmark(self.pa.tunables.compaction_proactiveness, true);
                if fragmentation_score_zone(&self.pa.geo, &self.pa.zones[cc.zi]) <= wmark_low {
                    return CompactResult::Success;
                }
            }
            return CompactResult::Continue;
        };
        if cc.migrate_pfn & (self.pa.geo.pageblock_nr_pages() - 1) != 0 {
            return CompactResult::Continue;
        }
        for o in order..self.pa.geo.nr_page_orders() as u32 {
            let area = &self.pa.zones[cc.zi].free_area[o as usize];
            if !area.is_empty(cc.migratetype) {
                return CompactResult::Success;
            }
            if cc.migratetype == MigrateType::Movable && !area.is_empty(MigrateType::Cma) {
                return CompactResult::Success;
            }
            if matches!(
                self.pa.find_suitable_fallback(cc.zi, o, cc.migratetype, true),
                Fallback::Found(_)
            ) {
                return CompactResult::Success;
            }
        }
        CompactResult::Continue
    }

    /// The scanners' start positions (`compact_zone`'s setup): cached
    /// positions, or the zone's ends for a whole-zone run.
    fn compact_start(&self, cc: &mut CompactControl) {
        let zone = &self.pa.zones[cc.zi];
        let pb = self.pa.geo.pageblock_nr_pages();
        let start = zone.zone_start_pfn;
        let last_block = (zone.zone_end_pfn() - 1) & !(pb - 1);
        let (m, f) = (zone.compact.cached_migrate_pfn, zone.compact.cached_free_pfn);
        cc.migrate_pfn = if cc.whole_zone || !zone.spans(m) { start } else { m };
        cc.free_pfn = if cc.whole_zone || !zone.spans(f) { last_block } else { f };
    }

    /// `compact_zone`: runs both scanners until `__compact_finished`
    /// says stop, migrating each isolated batch through `reclaim`.
    pub fn compact_zone(&mut self, cc: &mut CompactControl, cpu: usize, reclaim: &mut dyn Reclaim) -> CompactResult {
        if let Some(order) = cc.order {
            let async_mode = cc.mode == super::control::MigrateMode::Async;
            let r = self.compaction_suit_allocation_order(cc.zi, order, cc.highest_zoneidx, cc.alloc_flags, async_mode);
            if r != CompactResult::Continue {
                return r;
            }
        }
        // lru_add_drain: this cpu's batched folios are on the LRU now.
        reclaim.lru_add_drain_all(self.pa);
        self.compact_start(cc);
        if cc.whole_zone {
            self.reset_isolation_suitable(cc.zi);
        }
        let entered = self.pa.compaction.enter();
        let mut ret;
        loop {
            ret = self.compact_finished(cc);
            if ret != CompactResult::Continue {
                break;
            }
            if !self.isolate_migratepages(cc) {
                continue;
            }
            let pfns = std::mem::take(&mut cc.migratepages);
            let failed = reclaim.migrate_folios(self.pa, cpu, &pfns, &mut MigrationTarget::Compaction(cc));
            let failed_pages: u64 = failed.iter().map(|&p| 1u64 << self.pa.memmap.page(p).order()).sum();
            cc.nr_migrated += cc.nr_migratepages - failed_pages;
            cc.nr_migratepages = 0;
            // A captured block ends the run.
            if self.pa.compaction.captured() {
                ret = CompactResult::Success;
                break;
            }
        }
        self.pa.compaction.leave(entered);
        self.release_freepages(cc);
        if ret == CompactResult::Complete {
            // compact_blockskip_flush: the kernel clears the zone's skip
            // hints when kswapd next sleeps after a complete pass; the
            // model clears them at once.
            self.reset_isolation_suitable(cc.zi);
        } else {
            let zone = &mut self.pa.zones[cc.zi];
            zone.compact.cached_migrate_pfn = cc.migrate_pfn;
            zone.compact.cached_free_pfn = cc.free_pfn;
        }
        self.pa.count_event(VmEvent::CompactFreeScanned, cc.total_free_scanned);
        ret
    }

    /// `__reset_isolation_suitable`: clears the skip hints of a zone.
    pub(crate) fn reset_isolation_suitable(&mut self, zi: usize) {
        let pb = self.pa.geo.pageblock_nr_pages();
        let zone = &self.pa.zones[zi];
        let (start, end) = (zone.zone_start_pfn & !(pb - 1), zone.zone_end_pfn());
        let mut pfn = start;
        while pfn < end {
            self.pa.pageblocks.set_skip(pfn, false);
            pfn += pb;
        }
    }
}
