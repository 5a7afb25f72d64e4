//! The migrate scanner (mm/compaction.c `isolate_migratepages`,
//! `isolate_migratepages_block`, `suitable_migration_source`,
//! `skip_isolation_on_order`).

use largo_types::MigrateType;

use super::control::{CompactControl, MigrateMode};
use super::Compactor;
use super::COMPACT_CLUSTER_MAX;
use crate::memmap::PageFlags;
use crate::stats::VmEvent;

impl Compactor<'_> {
    /// `skip_isolation_on_order`: a folio at least as large as the target
    /// (unless compacting everything) or a pageblock would not help.
    fn skip_isolation_on_order(&self, order: u32, target: Option<u32>) -> bool {
        if let Some(t) = target {
            if order >= t {
                return true;
            }
        }
        order >= self.pa.geo.pageblock_order
    }

    /// `suitable_migration_source`: async direct compaction only takes from
    /// pageblocks of the request's mobility.
    fn suitable_migration_source(&self, cc: &CompactControl, pfn: u64) -> bool {
        if cc.mode != MigrateMode::Async || !cc.direct_compaction {
            return true;
        }
        let mt = self.pa.pageblocks.migratetype(pfn);
        if cc.migratetype == MigrateType::Movable {
            mt.is_movable()
        } else {
            mt == cc.migratetype
        }
    }

    /// `isolate_migratepages_block`: LRU folios of `[start, end)` into
    /// `cc.migratepages`, up to COMPACT_CLUSTER_MAX pages. Returns where
    /// the scan stopped.
    pub(crate) fn isolate_migratepages_block(&mut self, cc: &mut CompactControl, start: u64, end: u64) -> u64 {
        let mut pfn = start;
        let mut scanned = 0;
        let mut isolated = 0;
        // A folio that starts in an earlier block was seen there.
        if let Some(head) = self.pa.memmap.folio_head(pfn).filter(|&h| h < pfn) {
            pfn = (head + (1 << self.pa.memmap.page(head).order())).min(end);
        }
        while pfn < end {
            scanned += 1;
            let page = self.pa.memmap.page(pfn);
            if page.is_buddy() {
                pfn += 1 << page.order();
                continue;
            }
            if !self.pa.memmap.is_folio_head(pfn) || !page.flags().contains(PageFlags::LRU) {
                pfn += 1;
                continue;
            }
            let order = page.order();
            if self.skip_isolation_on_order(order, cc.order) {
                scanned += (1 << order) - 1;
                pfn += 1 << order;
                continue;
            }
            cc.migratepages.push(pfn);
            cc.nr_migratepages += 1 << order;
            isolated += 1 << order;
            pfn += 1 << order;
            if cc.nr_migratepages >= COMPACT_CLUSTER_MAX {
                break;
            }
        }
        cc.total_migrate_scanned += scanned;
        self.pa.count_event(VmEvent::CompactMigrateScanned, scanned);
        self.pa.count_event(VmEvent::CompactIsolated, isolated);
        pfn.min(end)
    }

    /// `isolate_migratepages`: from `cc.migrate_pfn`, the next suitable
    /// pageblock below the free scanner is scanned; an async scan that
    /// finds nothing marks the block skipped. Returns whether any folio
    /// was isolated.
    pub(crate) fn isolate_migratepages(&mut self, cc: &mut CompactControl) -> bool {
        let pb = self.pa.geo.pageblock_nr_pages();
        let mut low = cc.migrate_pfn.max(self.pa.zones[cc.zi].zone_start_pfn);
        while low < cc.free_pfn {
            let block = low & !(pb - 1);
            let end = (block + pb).min(self.pa.zones[cc.zi].zone_end_pfn());
            let usable = self.block_in_zone(cc.zi, block, end)
                && (cc.ignore_skip_hint || !self.pa.pageblocks.skip(block))
                && self.suitable_migration_source(cc, block);
            if !usable {
                low = block + pb;
                continue;
            }
            let stopped = self.isolate_migratepages_block(cc, low, end);
            if cc.nr_migratepages == 0 && cc.mode == MigrateMode::Async {
                self.pa.pageblocks.set_skip(block, true);
            }
            low = stopped;
            break;
        }
        cc.migrate_pfn = low;
        cc.nr_migratepages > 0
    }
}
