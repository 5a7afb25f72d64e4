//! Deferred struct page initialisation: memory present in a zone but not
//! yet handed to the buddy allocator grows the zone a section at a time
//! when an allocation would otherwise fail there (`_deferred_grow_zone`,
//! mm/mm_init.c). Mainline does this only until boot completes; the host
//! kernel here (`deferred_init=lazy`) keeps growing its Normal zone on
//! demand, which `--machine host` reproduces with the zone's not yet
//! managed memory.

use largo_types::MigrateType;

use super::{Fpi, PageAlloc};
use crate::memmap::PageFlags;

impl PageAlloc {
    /// `deferred_grow_zone`: hands at least `1 << order` pages, rounded up
    /// to whole sections, of the zone's deferred memory to the allocator,
    /// lowest first. False if the zone has none left.
    pub(crate) fn deferred_grow_zone(&mut self, zi: usize, order: u32) -> bool {
        if self.zones[zi].deferred.is_empty() {
            return false;
        }
        let section = self.geo.pages_per_section();
        let mut needed = (1u64 << order).div_ceil(section) * section;
        while needed > 0 {
            let Some(&(pfn, nr)) = self.zones[zi].deferred.first() else {
                break;
            };
            let take = nr.min(needed);
            if take == nr {
                self.zones[zi].deferred.remove(0);
            } else {
                self.zones[zi].deferred[0] = (pfn + take, nr - take);
            }
            self.deferred_free_pages(zi, pfn, take);
            needed -= take;
        }
        true
    }

    /// `deferred_free_pages` / `__free_pages_core`: the pages join the zone's
    /// managed memory and are freed in the largest aligned blocks.
    fn deferred_free_pages(&mut self, zi: usize, pfn: u64, nr: u64) {
        let max = self.geo.max_page_order;
        for p in pfn..pfn + nr {
            self.memmap.page_mut(p).remove_flags(PageFlags::RESERVED);
        }
        self.zones[zi].managed_pages += nr;
        // memmap_init marks every whole pageblock MOVABLE.
        let pb_pages = self.geo.pageblock_nr_pages();
        let mut block = pfn.next_multiple_of(pb_pages);
        while block + pb_pages <= pfn + nr {
            self.set_pageblock_migratetype(block, MigrateType::Movable);
            block += pb_pages;
        }
        let (mut at, end) = (pfn, pfn + nr);
        while at < end {
            let order = at.trailing_zeros().min(max).min(63 - (end - at).leading_zeros());
            let mt = self.pageblocks.migratetype(at);
            self.__free_one_page(zi, at, order, mt, Fpi::TO_TAIL);
            at += 1 << order;
        }
    }
}
