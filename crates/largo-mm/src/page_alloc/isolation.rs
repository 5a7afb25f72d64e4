//! Pageblock isolation (mm/page_isolation.c): taking pageblocks out of
//! allocation so a range can be emptied for `alloc_contig_range` or memory
//! offlining. An isolated pageblock reads as `MIGRATE_ISOLATE`; its free
//! pages sit on the ISOLATE lists, out of `NR_FREE_PAGES`, and pages freed
//! into it go there too, so nothing in the range is handed out again.

use largo_types::{MigrateType, ZoneType};

use super::{Fpi, PageAlloc};
use crate::memmap::PageFlags;

/// Why a range could not be isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IsolateError {
    /// `has_unmovable_pages` found a page that can neither move nor be freed.
    #[error("unmovable page at pfn {pfn:#x}")]
    Unmovable { pfn: u64 },
    /// The pageblock is already isolated by someone else (`-EBUSY`).
    #[error("pageblock at pfn {pfn:#x} is already isolated")]
    AlreadyIsolated { pfn: u64 },
    /// The range is not inside one zone (`-EINVAL`).
    #[error("pfn {pfn:#x} is outside the range's zone")]
    OutsideZone { pfn: u64 },
}

/// Who isolates: offlining also accepts `PageOffline` pages nobody holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolateMode {
    /// `MEMORY_OFFLINE`.
    MemoryOffline,
    /// `alloc_contig_range(ACR_FLAGS_NONE)`: CMA pageblocks are unmovable
    /// to it.
    ContigAlloc,
    /// `alloc_contig_range(ACR_FLAGS_CMA)` from `cma_alloc`: a CMA
    /// pageblock is taken without a scan.
    CmaAlloc,
}

impl PageAlloc {
    /// `has_unmovable_pages`: the first page of `[start, end)` (inside one
    /// pageblock) that is neither free, nor on the LRU, nor (offlining) an
    /// unheld `PageOffline` page. ZONE_MOVABLE is trusted to hold only
    /// movable pages, as the kernel does.
    pub fn has_unmovable_pages(&self, zi: usize, start: u64, end: u64, mode: IsolateMode) -> Option<u64> {
        if self.pageblocks.underlying_migratetype(start) == MigrateType::Cma {
            // Only cma_alloc may take CMA memory.
            return (mode != IsolateMode::CmaAlloc).then_some(start);
        }
        if self.zones[zi].zone_type == ZoneType::Movable {
            return None;
        }
        let mut pfn = start;
        while pfn < end {
            let page = self.memmap.page(pfn);
            let flags = page.flags();
            if flags.contains(PageFlags::RESERVED) {
                return Some(pfn);
            }
            if page.is_buddy() {
                pfn += 1 << page.order();
                continue;
            }
            if flags.contains(PageFlags::OFFLINE) && mode == IsolateMode::MemoryOffline && page.refcount() == 0 {
                pfn += 1;
                continue;
            }
            if self.memmap.is_folio_head(pfn) {
                if !flags.contains(PageFlags::LRU) {
                    return Some(pfn);
                }
                pfn += 1 << page.order();
                continue;
            }
            if flags.contains(PageFlags::OFFLINE) {
                return Some(pfn);
            }
            // A pcp page, a tail of a folio seen from its head, or a hole:
            // refcount 0, nothing to hold the range.
            pfn += 1;
        }
        None
    }

    /// `start_isolate_page_range`: isolates every pageblock of the
    /// pageblock-aligned `[start, end)`; on failure the ones already
    /// isolated are undone and the machine is as before.
    pub fn start_isolate_page_range(&mut self, start: u64, end: u64, mode: IsolateMode) -> Result<(), IsolateError> {
        let pb = self.geo.pageblock_nr_pages();
        debug_assert!(
            start.is_multiple_of(pb) && end.is_multiple_of(pb),
            "unaligned isolation"
        );
        let zi = self
            .page_zone_index(start)
            .ok_or(IsolateError::OutsideZone { pfn: start })?;
        let mut pfn = start;
        while pfn < end {
            if let Err(e) = self.set_migratetype_isolate(zi, pfn, mode) {
                self.undo_isolate_page_range(start, pfn);
                return Err(e);
            }
            pfn += pb;
        }
        Ok(())
    }

    /// `set_migratetype_isolate`: one pageblock.
    fn set_migratetype_isolate(&mut self, zi: usize, pfn: u64, mode: IsolateMode) -> Result<(), IsolateError> {
        let pb = self.geo.pageblock_nr_pages();
        if !self.zones[zi].spans(pfn) || !self.zones[zi].spans(pfn + pb - 1) {
            return Err(IsolateError::OutsideZone { pfn });
        }
        if self.pageblocks.migratetype(pfn) == MigrateType::Isolate {
            return Err(IsolateError::AlreadyIsolated { pfn });
        }
        if let Some(bad) = self.has_unmovable_pages(zi, pfn, pfn + pb, mode) {
            return Err(IsolateError::Unmovable { pfn: bad });
        }
        self.move_freepages_block_isolate(zi, pfn, MigrateType::Isolate);
        self.zones[zi].nr_isolate_pageblock += 1;
        Ok(())
    }

    /// `move_freepages_block_isolate`: retypes one pageblock (to or from
    /// ISOLATE) with its free pages. A free buddy larger than a pageblock
    /// that covers it is first split into pageblocks (`split_large_buddy`),
    /// each freed with its own block's type.
    fn move_freepages_block_isolate(&mut self, zi: usize, pfn: u64, new_mt: MigrateType) {
        if let Some((head, order)) = self.find_large_buddy(pfn) {
            let mt = self.pageblocks.migratetype(head);
            self.del_page_from_free_list(zi, head, order, mt);
            self.account_freepages(zi, -(1i64 << order), mt);
            self.set_pageblock_migratetype(pfn, new_mt);
            self.split_large_buddy(zi, head, order, Fpi::NONE);
            return;
        }
        let old_mt = self.pageblocks.migratetype(pfn);
        self.__move_freepages_block(zi, pfn, old_mt, new_mt);
    }

    /// `find_large_buddy`: the free block of order above pageblock order
    /// that contains the pageblock starting at `pfn`, if any.
    fn find_large_buddy(&self, pfn: u64) -> Option<(u64, u32)> {
        for order in self.geo.pageblock_order + 1..=self.geo.max_page_order {
            let head = pfn & !((1u64 << order) - 1);
            let page = self.memmap.page(head);
            if page.is_buddy() && page.order() >= order {
                return Some((head, page.order()));
            }
        }
        None
    }

    /// `undo_isolate_page_range`: every isolated pageblock of `[start, end)`
    /// gets its type back (`unset_migratetype_isolate`); free blocks of
    /// pageblock order or more are freed again so they merge with their
    /// buddies outside (`__putback_isolated_page`), smaller ones move lists.
    pub fn undo_isolate_page_range(&mut self, start: u64, end: u64) {
        let pb = self.geo.pageblock_nr_pages();
        let mut pfn = start;
        while pfn < end {
            if self.pageblocks.migratetype(pfn) == MigrateType::Isolate {
                let zi = self.zone_of(pfn);
                self.unset_migratetype_isolate(zi, pfn);
                self.zones[zi].nr_isolate_pageblock -= 1;
            }
            pfn += pb;
        }
    }

    /// `unset_migratetype_isolate`: a free block of exactly pageblock
    /// order is freed again so it can merge with its buddy outside
    /// (`__putback_isolated_page`); otherwise the block's free pages move
    /// lists, a larger buddy being split first.
    fn unset_migratetype_isolate(&mut self, zi: usize, start: u64) {
        // The free blocks go to the list of the type the pageblock will hold.
        let mt = self.stored_migratetype(self.pageblocks.underlying_migratetype(start));
        let head = self.memmap.page(start);
        if head.is_buddy() && head.order() == self.geo.pageblock_order {
            let order = head.order();
            self.del_page_from_free_list(zi, start, order, MigrateType::Isolate);
            self.set_pageblock_migratetype(start, mt);
            let fpi = Fpi {
                skip_report_notify: true,
                to_tail: false,
            };
            self.__free_one_page(zi, start, order, mt, fpi);
            return;
        }
        self.move_freepages_block_isolate(zi, start, mt);
    }

    /// `test_pages_isolated`: every page of `[start, end)` is a free page in
    /// an isolated pageblock (or, offlining, an unheld `PageOffline` page).
    /// Returns the first pfn that is not.
    pub fn test_pages_isolated(&self, start: u64, end: u64, mode: IsolateMode) -> Result<(), u64> {
        let pb = self.geo.pageblock_nr_pages();
        let mut pfn = start;
        while pfn < end {
            if self.pageblocks.migratetype(pfn) != MigrateType::Isolate {
                return Err(pfn);
            }
            pfn += pb;
        }
        let mut pfn = start;
        while pfn < end {
            let page = self.memmap.page(pfn);
            if page.is_buddy() {
                pfn += 1 << page.order();
            } else if mode == IsolateMode::MemoryOffline
                && page.flags().contains(PageFlags::OFFLINE)
                && page.refcount() == 0
            {
                pfn += 1;
            } else {
                return Err(pfn);
            }
        }
        Ok(())
    }

    /// The heads of the LRU (movable) folios from `pfn` on, until `end` or
    /// until they hold `max_pages` (`isolate_migratepages_range` with
    /// `alloc_contig`, `scan_movable_pages`); and where the scan stopped.
    pub(crate) fn lru_folio_heads(&self, mut pfn: u64, end: u64, max_pages: u64) -> (Vec<u64>, u64) {
        let mut heads = Vec::new();
        let mut nr = 0;
        while pfn < end && nr < max_pages {
            let page = self.memmap.page(pfn);
            if page.is_buddy() {
                pfn += 1 << page.order();
            } else if self.memmap.is_folio_head(pfn) && page.flags().contains(PageFlags::LRU) {
                heads.push(pfn);
                nr += 1 << page.order();
                pfn += 1 << page.order();
            } else {
                pfn += 1;
            }
        }
        (heads, pfn)
    }

    /// The free blocks inside `[start, end)` that lie on isolated lists,
    /// as `(pfn, order)`.
    pub(crate) fn isolated_free_blocks(&self, start: u64, end: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut pfn = start;
        while pfn < end {
            let page = self.memmap.page(pfn);
            if page.is_buddy() {
                out.push((pfn, page.order()));
                pfn += 1 << page.order();
            } else {
                pfn += 1;
            }
        }
        out
    }
}
