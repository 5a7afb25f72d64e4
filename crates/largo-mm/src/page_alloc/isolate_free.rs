//! Taking a free block off the lists for someone else, and giving it
//! back (mm/page_alloc.c `__isolate_free_page`, `__putback_isolated_page`):
//! how free page reporting and compaction's free scanner reach the free
//! lists.

use largo_types::MigrateType;

use super::{AllocFlags, Fpi, PageAlloc};

impl PageAlloc {
    /// `__isolate_free_page`: takes a free block off its list if the zone
    /// stays above its min watermark; a block of at least half a
    /// pageblock turns its mergeable pageblocks MOVABLE, with the other
    /// free blocks in them (`move_freepages_block`).
    pub(crate) fn __isolate_free_page(&mut self, zi: usize, pfn: u64, order: u32) -> bool {
        let mt = self.pageblocks.migratetype(pfn);
        if mt != MigrateType::Isolate {
            let watermark = self.zones[zi].min_wmark_pages() + (1 << order);
            if !self.zone_watermark_ok(zi, 0, watermark, 0, AllocFlags::CMA) {
                return false;
            }
        }
        self.del_page_from_free_list(zi, pfn, order, mt);
        self.account_freepages(zi, -(1i64 << order), mt);
        // With mobility grouping disabled every pageblock stays UNMOVABLE
        // (`set_pageblock_migratetype`), so there is nothing to retype.
        if order + 1 >= self.geo.pageblock_order && !self.mobility_disabled {
            let end = pfn + (1 << order);
            let mut at = pfn;
            while at < end {
                let block_mt = self.pageblocks.migratetype(at);
                if block_mt.is_mergeable() {
                    self.move_freepages_block(zi, at, block_mt, MigrateType::Movable);
                }
                at += 1 << self.geo.pageblock_order;
            }
        }
        true
    }

    /// `__putback_isolated_page`: back through `__free_one_page` at the
    /// tail, without notifying reporting (it may merge).
    pub(crate) fn __putback_isolated_page(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        let zi = self.zone_of(pfn);
        self.__free_one_page(
            zi,
            pfn,
            order,
            mt,
            Fpi {
                skip_report_notify: true,
                to_tail: true,
            },
        );
    }
}
