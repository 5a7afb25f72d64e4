//! An activated CMA area (`struct cma` with one range, `order_per_bit`
//! 0: one bit per page) and its activation (`cma_activate_area`,
//! `init_cma_reserved_pageblock`).

use largo_types::MigrateType;

use crate::memmap::PageFlags;
use crate::page_alloc::{Fpi, PageAlloc};

/// One area.
///
/// Invariant: `available_count` is `count` less the set bits of
/// `bitmap`; every pageblock of `[base_pfn, base_pfn + count)` is
/// MIGRATE_CMA (or isolated over CMA) once activated.
#[derive(Clone, Debug)]
pub struct CmaArea {
    /// `cma->name`: `reserved`, `numaN`.
    pub name: String,
    pub base_pfn: u64,
    /// Pages (`cma->count`); 0 when activation failed.
    pub count: u64,
    pub available_count: u64,
    /// One bit per page: set while `cma_alloc` holds it.
    bitmap: Vec<u64>,
    pub nid: Option<usize>,
    /// /sys/kernel/mm/cma/NAME/ statistics, in pages.
    pub alloc_pages_success: u64,
    pub alloc_pages_fail: u64,
    pub release_pages_success: u64,
}

impl CmaArea {
    fn new(name: String, base_pfn: u64, count: u64, nid: Option<usize>) -> CmaArea {
        CmaArea {
            name,
            base_pfn,
            count,
            available_count: count,
            bitmap: vec![0; count.div_ceil(64) as usize],
            nid,
            alloc_pages_success: 0,
            alloc_pages_fail: 0,
            release_pages_success: 0,
        }
    }

    /// Whether bit `i` is set.
    #[inline]
    pub fn test(&self, i: u64) -> bool {
        self.bitmap[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// `bitmap_set` / `cma_clear_bitmap` over `[i, i + nr)`, with the
    /// available count.
    pub(crate) fn set_range(&mut self, i: u64, nr: u64, set: bool) {
        for b in i..i + nr {
            let (w, bit) = ((b / 64) as usize, 1u64 << (b % 64));
            debug_assert_eq!(self.bitmap[w] & bit != 0, !set, "CMA bit {b} flipped twice");
            if set {
                self.bitmap[w] |= bit;
            } else {
                self.bitmap[w] &= !bit;
            }
        }
        if set {
            self.available_count -= nr;
        } else {
            self.available_count += nr;
        }
    }

    /// `bitmap_find_next_zero_area_off`: the first index at or after
    /// `start` whose pfn (`index + offset`, `offset` being
    /// `cma_bitmap_aligned_offset`) is a multiple of `mask + 1`, with `nr`
    /// clear bits; `None` past the end.
    pub(crate) fn find_zero_area(&self, start: u64, nr: u64, mask: u64, offset: u64) -> Option<u64> {
        let mut index = start;
        loop {
            while index < self.count && self.test(index) {
                index += 1;
            }
            index = ((index + offset + mask) & !mask) - offset;
            if index + nr > self.count {
                return None;
            }
            match (index..index + nr).rev().find(|&b| self.test(b)) {
                Some(b) => index = b + 1,
                None => return Some(index),
            }
        }
    }

    /// Whether `[pfn, pfn + nr)` lies in the area (`cma_pages_valid`).
    pub fn contains(&self, pfn: u64, nr: u64) -> bool {
        pfn >= self.base_pfn && pfn + nr <= self.base_pfn + self.count
    }
}

impl PageAlloc {
    /// `cma_activate_area` for each reservation: an area inside one zone
    /// becomes MIGRATE_CMA pageblocks freed to the buddy allocator
    /// (`init_cma_reserved_pageblock`: managed and `cma_pages` grow); one
    /// that spans zones fails ("CMA area could not be activated") and its
    /// pages are freed as ordinary memory.
    pub(crate) fn activate_cma_areas(&mut self, reservations: &[crate::cma::CmaReservation]) {
        let pb = self.geo.pageblock_nr_pages();
        for r in reservations {
            let (start, end) = (r.range.start, r.range.end);
            for pfn in start..end {
                self.memmap.page_mut(pfn).remove_flags(PageFlags::RESERVED);
            }
            let zi = self.page_zone_index(start);
            let one_zone = zi.is_some() && self.page_zone_index(end - 1) == zi;
            let Some(zi) = zi.filter(|_| one_zone) else {
                for (pfn, order) in crate::page_alloc::max_order_chunks(self.geo.max_page_order, start, end) {
                    let zi = self.zone_of(pfn);
                    self.__free_pages_core(zi, pfn, order);
                }
                self.cma.push(CmaArea::new(r.name.clone(), start, 0, r.nid));
                continue;
            };
            for block in (start..end).step_by(pb as usize) {
                self.pageblocks.set_migratetype(block, MigrateType::Cma);
                self.zones[zi].cma_pages += pb;
                for (pfn, order) in crate::page_alloc::max_order_chunks(self.geo.max_page_order, block, block + pb) {
                    self.zones[zi].managed_pages += 1 << order;
                    self.free_one_page(zi, pfn, order, Fpi::NONE);
                }
            }
            self.totalcma_pages += end - start;
            self.cma.push(CmaArea::new(r.name.clone(), start, end - start, r.nid));
        }
    }

    /// The CMA areas, in declaration order.
    pub fn cma_areas(&self) -> &[CmaArea] {
        &self.cma
    }

    /// `totalcma_pages`: every activated area's pages.
    pub fn totalcma_pages(&self) -> u64 {
        self.totalcma_pages
    }

    /// Whether the machine has CMA areas, i.e. models a CONFIG_CMA kernel.
    pub fn cma_configured(&self) -> bool {
        !self.cma.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bitmap_search_is_first_fit_and_aligned() {
        let mut a = CmaArea::new("t".into(), 0, 256, None);
        assert_eq!(a.find_zero_area(0, 16, 0, 0), Some(0));
        a.set_range(0, 3, true);
        assert_eq!(a.available_count, 253);
        assert_eq!(a.find_zero_area(0, 16, 0, 0), Some(3));
        assert_eq!(a.find_zero_area(0, 16, 15, 0), Some(16), "aligned to 16");
        a.set_range(20, 1, true);
        assert_eq!(a.find_zero_area(0, 16, 15, 0), Some(32));
        assert_eq!(a.find_zero_area(0, 300, 0, 0), None);
        // A base 4 pages past an alignment boundary: index 12 is the
        // first aligned pfn.
        assert_eq!(a.find_zero_area(0, 4, 15, 4), Some(12));
        assert_eq!(
            a.find_zero_area(0, 12, 15, 4),
            Some(28),
            "bit 20 is set: the next aligned slot"
        );
        a.set_range(0, 3, false);
        assert_eq!(a.find_zero_area(0, 4, 0, 0), Some(0));
        assert_eq!(a.find_zero_area(0, 4, 15, 4), Some(12));
    }
}
