//! Free-list primitives and the buddy merge/split of mm/page_alloc.c.

use largo_types::MigrateType;

use super::{Fpi, PageAlloc};
use crate::memmap::PageFlags;
use crate::stats::VmEvent;

impl PageAlloc {
    /// `account_freepages`: NR_FREE_PAGES counts everything but isolated
    /// blocks; NR_FREE_CMA_PAGES the CMA ones among them.
    #[inline]
    pub(crate) fn account_freepages(&mut self, zi: usize, nr_pages: i64, mt: MigrateType) {
        if mt == MigrateType::Isolate {
            return;
        }
        let zone = &mut self.zones[zi];
        zone.stat.nr_free_pages += nr_pages;
        if mt == MigrateType::Cma {
            zone.stat.nr_free_cma += nr_pages;
        } else if mt == MigrateType::HighAtomic {
            zone.nr_free_highatomic = (zone.nr_free_highatomic as i64 + nr_pages).max(0) as u64;
        }
    }

    /// `__add_to_free_list` with `set_buddy_order`: `pfn` becomes the head
    /// of a free block of `order` on the `mt` list, at its head or tail.
    #[inline]
    pub(crate) fn add_to_free_list(&mut self, zi: usize, pfn: u64, order: u32, mt: MigrateType, tail: bool) {
        debug_assert_eq!(
            self.pageblocks.migratetype(pfn),
            mt,
            "free block {pfn:#x} order {order} goes to a list of another type than its pageblock"
        );
        let page = self.memmap.page_mut(pfn);
        page.set_flags(PageFlags::BUDDY);
        page.set_order(order);
        page.set_private(0);
        let area = &mut self.zones[zi].free_area[order as usize];
        let list = &mut area.free_list[mt.index()];
        if tail {
            list.push_back(&mut self.memmap.pages, pfn);
        } else {
            list.push_front(&mut self.memmap.pages, pfn);
        }
        area.nr_free += 1;
        if order >= self.geo.pageblock_order && mt != MigrateType::Isolate {
            self.zones[zi].stat.nr_free_pages_blocks += 1 << order;
        }
    }

    /// `__del_page_from_free_list`: unlinks a free block head and clears its
    /// buddy state, including `PG_reported`.
    #[inline]
    pub(crate) fn del_page_from_free_list(&mut self, zi: usize, pfn: u64, order: u32, mt: MigrateType) {
        let area = &mut self.zones[zi].free_area[order as usize];
        area.free_list[mt.index()].remove(&mut self.memmap.pages, pfn);
        area.nr_free -= 1;
        let page = self.memmap.page_mut(pfn);
        if page.flags().contains(PageFlags::REPORTED) {
            area.nr_reported -= 1;
        }
        page.clear();
        if order >= self.geo.pageblock_order && mt != MigrateType::Isolate {
            self.zones[zi].stat.nr_free_pages_blocks -= 1 << order;
        }
    }

    /// `move_to_free_list`: moves a free block to the tail of another
    /// type's list; isolation changes what counts as free.
    pub(crate) fn move_to_free_list(
        &mut self,
        zi: usize,
        pfn: u64,
        order: u32,
        old_mt: MigrateType,
        new_mt: MigrateType,
    ) {
        let area = &mut self.zones[zi].free_area[order as usize];
        area.free_list[old_mt.index()].remove(&mut self.memmap.pages, pfn);
        area.free_list[new_mt.index()].push_back(&mut self.memmap.pages, pfn);
        let nr = 1i64 << order;
        self.account_freepages(zi, -nr, old_mt);
        self.account_freepages(zi, nr, new_mt);
        let (old_iso, new_iso) = (old_mt == MigrateType::Isolate, new_mt == MigrateType::Isolate);
        if order >= self.geo.pageblock_order && old_iso != new_iso {
            self.zones[zi].stat.nr_free_pages_blocks += if new_iso { -nr } else { nr };
        }
    }

    /// `page_is_buddy`: `buddy_pfn` heads a free block of exactly `order`
    /// in the same zone.
    #[inline]
    pub(crate) fn page_is_buddy(&self, zi: usize, buddy_pfn: u64, order: u32) -> bool {
        if buddy_pfn >= self.memmap.len() || !self.zones[zi].spans(buddy_pfn) {
            return false;
        }
        let page = self.memmap.page(buddy_pfn);
        page.is_buddy() && page.order() == order
    }

    /// `__free_one_page`: puts a block on the free lists, merging with its
    /// free buddies up to MAX_PAGE_ORDER. At pageblock order and above,
    /// buddies of a different type merge only if both types are mergeable,
    /// and the buddy's pageblocks are retyped to match (v6.10+).
    pub(crate) fn __free_one_page(&mut self, zi: usize, mut pfn: u64, mut order: u32, mt: MigrateType, fpi: Fpi) {
        debug_assert!(
            pfn & ((1 << order) - 1) == 0,
            "unaligned free of {pfn:#x} order {order}"
        );
        self.account_freepages(zi, 1 << order, mt);
        let mut buddy_pfn = 0;
        while order < self.geo.max_page_order {
            if self.compaction_capture(zi, pfn, order, mt) {
                self.account_freepages(zi, -(1i64 << order), mt);
                return;
            }
            buddy_pfn = pfn ^ (1 << order);
            if !self.page_is_buddy(zi, buddy_pfn, order) {
                break;
            }
            let mut buddy_mt = mt;
            if order >= self.geo.pageblock_order {
                buddy_mt = self.pageblocks.migratetype(buddy_pfn);
                if mt != buddy_mt && (!mt.is_mergeable() || !buddy_mt.is_mergeable()) {
                    break;
                }
            }
            self.del_page_from_free_list(zi, buddy_pfn, order, buddy_mt);
            if buddy_mt != mt {
                self.change_pageblock_range(buddy_pfn, order, mt);
            }
            pfn &= buddy_pfn;
            order += 1;
            self.work.buddy_levels += 1;
        }
        let to_tail = fpi.to_tail || self.buddy_merge_likely(zi, pfn, buddy_pfn, order);
        self.add_to_free_list(zi, pfn, order, mt, to_tail);
        if !fpi.skip_report_notify {
            let area = &self.zones[zi].free_area[order as usize];
            self.reporting.notify_free(order, area, self.geo.pageblock_order);
        }
    }

    /// `compaction_capture`: a direct compactor waiting in this zone for a
    /// block of exactly this order takes it (not from isolated blocks, and
    /// a movable pageblock only for a movable request below pageblock order).
    #[inline]
    fn compaction_capture(&mut self, zi: usize, pfn: u64, order: u32, mt: MigrateType) -> bool {
        let captured = self
            .compaction
            .try_capture(zi, pfn, order, mt, self.geo.pageblock_order);
        self.work.compaction_captures += captured as u64;
        captured
    }

    /// `buddy_merge_likely`: if the block one order up has a free buddy,
    /// this block is likely to merge soon; queue it at the tail so it is
    /// not handed out before that.
    fn buddy_merge_likely(&self, zi: usize, pfn: u64, buddy_pfn: u64, order: u32) -> bool {
        if order + 1 >= self.geo.max_page_order {
            return false;
        }
        let higher_pfn = buddy_pfn & pfn;
        let higher_buddy = higher_pfn ^ (1 << (order + 1));
        self.page_is_buddy(zi, higher_buddy, order + 1)
    }

    /// `split_large_buddy`: frees a block larger than a pageblock one
    /// pageblock at a time, each with its own pageblock's type.
    pub(crate) fn split_large_buddy(&mut self, zi: usize, mut pfn: u64, order: u32, fpi: Fpi) {
        let end = pfn + (1 << order);
        let order = order.min(self.geo.pageblock_order);
        loop {
            let mt = self.pageblocks.migratetype(pfn);
            self.__free_one_page(zi, pfn, order, mt, fpi);
            pfn += 1 << order;
            if pfn == end {
                break;
            }
        }
    }

    /// `free_one_page`: the non-pcp free path, under the zone lock.
    pub(crate) fn free_one_page(&mut self, zi: usize, pfn: u64, order: u32, fpi: Fpi) {
        self.split_large_buddy(zi, pfn, order, fpi);
        self.count_event(VmEvent::Pgfree, 1 << order);
        self.work.zone_lock += 1;
        self.work.free_buddy += 1;
    }

    /// `expand`: returns the upper halves of a block split from `high`
    /// down to `low` to the free lists. Returns the pages returned.
    #[inline]
    pub(crate) fn expand(&mut self, zi: usize, pfn: u64, low: u32, mut high: u32, mt: MigrateType) -> u64 {
        let mut size = 1u64 << high;
        let mut nr_added = 0;
        self.work.buddy_levels += (high - low) as u64;
        while high > low {
            high -= 1;
            size >>= 1;
            self.add_to_free_list(zi, pfn + size, high, mt, false);
            nr_added += size;
        }
        nr_added
    }

    /// `page_del_and_expand`: takes a free block of order `high` and keeps
    /// its first `1 << low` pages.
    #[inline]
    pub(crate) fn page_del_and_expand(&mut self, zi: usize, pfn: u64, low: u32, high: u32, mt: MigrateType) {
        self.del_page_from_free_list(zi, pfn, high, mt);
        let nr_pages = (1i64 << high) - self.expand(zi, pfn, low, high, mt) as i64;
        self.account_freepages(zi, -nr_pages, mt);
    }
}
