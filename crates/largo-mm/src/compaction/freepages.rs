//! The free scanner (mm/compaction.c `isolate_freepages`,
//! `isolate_freepages_block`, `suitable_migration_target`) and the
//! migration target callback `compaction_alloc`.

use largo_types::Pfn;

use super::control::{CompactControl, MigrateMode};
use super::Compactor;
use crate::memmap::Folio;
use crate::stats::VmEvent;

impl Compactor<'_> {
    /// `suitable_migration_target`: a pageblock the free scanner may take
    /// pages from: not one starting with a free block of the requested
    /// order (a pageblock when compacting everything) — splitting that
    /// would undo the work — and of a movable type (MOVABLE or CMA).
    fn suitable_migration_target(&self, cc: &CompactControl, pfn: u64) -> bool {
        let page = self.pa.memmap.page(pfn);
        if page.is_buddy() && page.order() >= cc.order.unwrap_or(self.pa.geo.pageblock_order) {
            return false;
        }
        self.pa.pageblocks.migratetype(pfn).is_movable()
    }

    /// `isolate_freepages_block`: every free block of `[start, end)`;
    /// returns pages isolated.
    fn isolate_freepages_block(&mut self, cc: &mut CompactControl, start: u64, end: u64) -> u64 {
        let mut pfn = start;
        let mut isolated = 0;
        while pfn < end {
            cc.total_free_scanned += 1;
            let page = self.pa.memmap.page(pfn);
            if !page.is_buddy() {
                pfn += 1;
                continue;
            }
            let order = page.order();
            if !self.pa.__isolate_free_page(cc.zi, pfn, order) {
                break;
            }
            cc.freepages[order as usize].push(pfn);
            cc.nr_freepages += 1 << order;
            isolated += 1 << order;
            pfn += 1 << order;
        }
        isolated
    }

    /// `isolate_freepages`: walks pageblocks down from `cc.free_pfn`,
    /// above the migrate scanner, until as many free pages are isolated
    /// as folio pages wait to migrate.
    pub(crate) fn isolate_freepages(&mut self, cc: &mut CompactControl) {
        let pb = self.pa.geo.pageblock_nr_pages();
        let low_pfn = (cc.migrate_pfn + pb) & !(pb - 1);
        let zone_end = self.pa.zones[cc.zi].zone_end_pfn();
        let mut block = cc.free_pfn;
        let mut isolated_total = 0;
        cc.free_exhausted = true;
        while block >= low_pfn && block >= self.pa.zones[cc.zi].zone_start_pfn {
            let end = (block + pb).min(zone_end);
            let next = block.checked_sub(pb);
            if self.block_in_zone(cc.zi, block, end) && self.suitable_migration_target(cc, block) {
                let skip = !cc.ignore_skip_hint && cc.mode == MigrateMode::Async && self.pa.pageblocks.skip(block);
                if !skip {
                    // The whole block is scanned: it gets the skip hint
                    // (update_pageblock_skip), whatever it yielded.
                    isolated_total += self.isolate_freepages_block(cc, block, end);
                    if !cc.ignore_skip_hint {
                        self.pa.pageblocks.set_skip(block, true);
                    }
                }
            }
            let Some(n) = next else { break };
            block = n;
            if cc.nr_freepages >= cc.nr_migratepages {
                cc.free_exhausted = false;
                break;
            }
        }
        cc.free_pfn = block;
        self.pa.count_event(VmEvent::CompactIsolated, isolated_total);
    }

    /// The pageblock `[start, end)` lies in the zone (`pageblock_pfn_to_page`).
    pub(crate) fn block_in_zone(&self, zi: usize, start: u64, end: u64) -> bool {
        let zone = &self.pa.zones[zi];
        zone.spans(start) && zone.spans(end - 1) && self.pa.page_zone_index(start) == Some(zi)
    }

    /// `compaction_alloc`: a destination of `order` from the isolated free
    /// pages, splitting a larger one (its halves go back to the lists);
    /// when none is left the free scanner runs once more.
    pub(crate) fn compaction_alloc(&mut self, cc: &mut CompactControl, order: u32) -> Option<Folio> {
        let mut scanned_again = false;
        loop {
            let found = (order as usize..cc.freepages.len()).find(|&o| !cc.freepages[o].is_empty());
            let Some(start_order) = found else {
                if scanned_again || cc.free_exhausted {
                    return None;
                }
                self.isolate_freepages(cc);
                scanned_again = true;
                continue;
            };
            let pfn = cc.freepages[start_order].pop()?;
            let mut o = start_order as u32;
            while o > order {
                o -= 1;
                cc.freepages[o as usize].push(pfn + (1 << o));
            }
            cc.nr_freepages -= 1 << order;
            self.pa.prep_new_page(pfn, order);
            return Some(Folio { pfn: Pfn(pfn), order });
        }
    }

    /// `release_free_list`: the isolated free pages compaction did not use
    /// go back to the buddy lists.
    pub(crate) fn release_freepages(&mut self, cc: &mut CompactControl) {
        for order in 0..cc.freepages.len() {
            for pfn in std::mem::take(&mut cc.freepages[order]) {
                self.pa
                    .free_one_page(cc.zi, pfn, order as u32, crate::page_alloc::Fpi::NONE);
            }
        }
        cc.nr_freepages = 0;
    }
}
