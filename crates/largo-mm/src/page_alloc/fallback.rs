//! Migratetype fallback (mm/page_alloc.c, v6.15+): when a type's own lists
//! are empty, first try to claim a whole foreign pageblock
//! (`__rmqueue_claim`, largest blocks first), and only then steal a single
//! block without claiming (`__rmqueue_steal`, smallest first).

use largo_types::MigrateType;

use super::gfp::AllocFlags;
use super::PageAlloc;
use crate::memmap::PageFlags;

/// `fallbacks[][]`: the order in which other types' lists are tried.
const FALLBACKS: [[MigrateType; 2]; 3] = [
    [MigrateType::Reclaimable, MigrateType::Movable],
    [MigrateType::Reclaimable, MigrateType::Unmovable],
    [MigrateType::Unmovable, MigrateType::Movable],
];

/// Result of `find_suitable_fallback` (the kernel returns a type, -1 or -2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    Found(MigrateType),
    /// -1: no block of a fallback type at this order.
    Empty,
    /// -2: the order is too small for claiming a whole block.
    NoClaim,
}

/// What `prep_move_freepages_block` counts in a pageblock.
struct BlockCensus {
    start_pfn: u64,
    free_pages: u64,
    movable_pages: u64,
}

impl PageAlloc {
    /// `should_try_claim_block`.
    fn should_try_claim_block(&self, order: u32, start_mt: MigrateType) -> bool {
        let pb = self.geo.pageblock_order;
        order >= pb
            || order >= pb / 2
            || start_mt == MigrateType::Reclaimable
            || start_mt == MigrateType::Unmovable
            || self.mobility_disabled
    }

    /// `find_suitable_fallback`.
    pub(crate) fn find_suitable_fallback(&self, zi: usize, order: u32, mt: MigrateType, claimable: bool) -> Fallback {
        if claimable && !self.should_try_claim_block(order, mt) {
            return Fallback::NoClaim;
        }
        let area = &self.zones[zi].free_area[order as usize];
        if area.nr_free == 0 {
            return Fallback::Empty;
        }
        FALLBACKS[mt.index()]
            .into_iter()
            .find(|fb| !area.is_empty(*fb))
            .map_or(Fallback::Empty, Fallback::Found)
    }

    /// `prep_move_freepages_block`: the pageblock of `pfn`, if it lies
    /// wholly inside the zone, with its free and movable page counts.
    fn prep_move_freepages_block(&self, zi: usize, pfn: u64, census: bool) -> Option<BlockCensus> {
        let pb_pages = self.geo.pageblock_nr_pages();
        let start = pfn & !(pb_pages - 1);
        let end = start + pb_pages;
        let zone = &self.zones[zi];
        if !zone.spans(start) || !zone.spans(end - 1) {
            return None;
        }
        let mut c = BlockCensus {
            start_pfn: start,
            free_pages: 0,
            movable_pages: 0,
        };
        if !census {
            return Some(c);
        }
        let mut p = start;
        // A folio larger than a pageblock may start before it.
        if let Some(head) = self.memmap.folio_head(start).filter(|&h| h < start) {
            let head_end = head + (1 << self.memmap.page(head).order());
            let nr = head_end.min(end) - start;
            if self.memmap.page(head).flags().contains(PageFlags::LRU) {
                c.movable_pages += nr;
            }
            p += nr;
        }
        while p < end {
            let page = self.memmap.page(p);
            let nr = (1u64 << page.order()).min(end - p);
            if page.is_buddy() {
                c.free_pages += nr;
            } else if self.memmap.is_folio_head(p) {
                if page.flags().contains(PageFlags::LRU) {
                    c.movable_pages += nr;
                }
            } else if !page.flags().contains(PageFlags::PCP) {
                p += 1;
                continue;
            }
            p += nr;
        }
        Some(c)
    }

    /// `__move_freepages_block`: moves every free block of the pageblock to
    /// the `new_mt` lists and retypes the pageblock. Returns pages moved.
    pub(crate) fn __move_freepages_block(
        &mut self,
        zi: usize,
        start_pfn: u64,
        old_mt: MigrateType,
        new_mt: MigrateType,
    ) -> u64 {
        let end = start_pfn + self.geo.pageblock_nr_pages();
        let mut pfn = start_pfn;
        let mut moved = 0;
        while pfn < end {
            let page = self.memmap.page(pfn);
            if !page.is_buddy() {
                pfn += 1;
                continue;
            }
            let order = page.order();
            self.move_to_free_list(zi, pfn, order, old_mt, new_mt);
            pfn += 1 << order;
            moved += 1 << order;
        }
        self.set_pageblock_migratetype(start_pfn, new_mt);
        moved
    }

    /// `move_freepages_block`: `None` when the pageblock straddles the zone.
    pub(crate) fn move_freepages_block(
        &mut self,
        zi: usize,
        pfn: u64,
        old_mt: MigrateType,
        new_mt: MigrateType,
    ) -> Option<u64> {
        let c = self.prep_move_freepages_block(zi, pfn, false)?;
        Some(self.__move_freepages_block(zi, c.start_pfn, old_mt, new_mt))
    }

    /// `boost_watermark`: a fallback raises the zone's watermarks by a
    /// pageblock (up to `watermark_boost_factor` of the high watermark) so
    /// kswapd reclaims and compacts ahead of further fallbacks.
    fn boost_watermark(&mut self, zi: usize) -> bool {
        let factor = self.tunables.watermark_boost_factor;
        let pb_pages = self.geo.pageblock_nr_pages();
        let zone = &mut self.zones[zi];
        if factor == 0 || pb_pages * 4 > zone.managed_pages {
            return false;
        }
        let max_boost = zone.watermark[super::Wmark::High as usize] * factor / 10000;
        if max_boost == 0 {
            return false;
        }
        let max_boost = max_boost.max(pb_pages);
        zone.watermark_boost = (zone.watermark_boost + pb_pages).min(max_boost);
        true
    }

    /// `try_to_claim_block`: takes ownership of the pageblock of a free
    /// block found on a foreign list if the block is large enough, or if at
    /// least half of the pageblock is free or of a compatible type.
    #[allow(clippy::too_many_arguments)] // the kernel function's parameters
    pub(crate) fn try_to_claim_block(
        &mut self,
        zi: usize,
        pfn: u64,
        current_order: u32,
        order: u32,
        start_type: MigrateType,
        block_type: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u64> {
        let pb = self.geo.pageblock_order;
        if current_order >= pb {
            self.del_page_from_free_list(zi, pfn, current_order, block_type);
            self.change_pageblock_range(pfn, current_order, start_type);
            let nr_added = self.expand(zi, pfn, order, current_order, start_type);
            self.account_freepages(zi, nr_added as i64, start_type);
            self.account_freepages(zi, -(1i64 << current_order), block_type);
            return Some(pfn);
        }
        if self.boost_watermark(zi) && alloc_flags.contains(AllocFlags::KSWAPD) {
            self.zones[zi].flags |= super::ZoneFlags::BOOSTED_WATERMARK;
        }
        let c = self.prep_move_freepages_block(zi, pfn, true)?;
        let alike_pages = if start_type == MigrateType::Movable {
            c.movable_pages
        } else if block_type == MigrateType::Movable {
            self.geo.pageblock_nr_pages() - (c.free_pages + c.movable_pages)
        } else {
            0
        };
        if c.free_pages + alike_pages >= 1 << (pb - 1) || self.mobility_disabled {
            self.__move_freepages_block(zi, c.start_pfn, block_type, start_type);
            return self.__rmqueue_smallest(zi, order, start_type);
        }
        None
    }

    /// The smallest block a claim may take: with ALLOC_NOFRAGMENT a whole pageblock.
    pub(crate) fn claim_min_order(&self, order: u32, alloc_flags: AllocFlags) -> u32 {
        let pb = self.geo.pageblock_order;
        if order < pb && alloc_flags.contains(AllocFlags::NOFRAGMENT) {
            pb
        } else {
            order
        }
    }

    /// `__rmqueue_claim`: from the largest order down, claim a foreign
    /// block and allocate from it. With ALLOC_NOFRAGMENT only whole
    /// pageblocks may be taken.
    pub(crate) fn __rmqueue_claim(
        &mut self,
        zi: usize,
        order: u32,
        start_mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u64> {
        if self.gigablocks.is_some() && start_mt != MigrateType::Movable {
            return self.gigablock_claim(zi, order, start_mt, alloc_flags);
        }
        let min_order = self.claim_min_order(order, alloc_flags);
        for current_order in (min_order..=self.geo.max_page_order).rev() {
            let fallback_mt = match self.find_suitable_fallback(zi, current_order, start_mt, true) {
                Fallback::Empty => continue,
                Fallback::NoClaim => break,
                Fallback::Found(mt) => mt,
            };
            let pfn = self.fallback_block(zi, current_order, start_mt, fallback_mt)?;
            if let Some(page) =
                self.try_to_claim_block(zi, pfn, current_order, order, start_mt, fallback_mt, alloc_flags)
            {
                return Some(page);
            }
        }
        None
    }

    /// `__rmqueue_steal`: from the requested order up, take the smallest
    /// foreign block, leaving its pageblock's type alone.
    pub(crate) fn __rmqueue_steal(&mut self, zi: usize, order: u32, start_mt: MigrateType) -> Option<u64> {
        for current_order in order..=self.geo.max_page_order {
            let Fallback::Found(fallback_mt) = self.find_suitable_fallback(zi, current_order, start_mt, false) else {
                continue;
            };
            let pfn = self.fallback_block(zi, current_order, start_mt, fallback_mt)?;
            self.page_del_and_expand(zi, pfn, order, current_order, fallback_mt);
            return Some(pfn);
        }
        None
    }
}
