//! The storage of the memmap's records, laid out so that boot touches as
//! little host memory as possible.

use std::ops::{Index, IndexMut};

use super::page::Page;

/// The largest record array advised onto host huge pages: 256 MiB, the
/// memmap of a 64 GiB machine of 4K pages.
pub const HUGE_MEMMAP_BYTES: usize = 256 << 20;

/// One record per pfn, stored in two zero-initialised arrays: the records
/// of pfns aligned to `1 << head_order` (pageblock_order: the pageblock
/// heads) densely in `heads`, every other record at its pfn in `rest`
/// (whose slots at aligned pfns stay unused, all-zero).
///
/// Why: boot frees each MAX_PAGE_ORDER block a pageblock at a time
/// (`split_large_buddy`): it reads the record of each pageblock's buddy
/// and writes the merged block's head. With a single array those records
/// are 8 KiB apart at 4K pages, so boot faults in one host page per
/// block (4 GiB of host memory for a 4 TiB machine, its boot mostly the
/// host kernel zeroing them) and reads one more. Kept apart they fill
/// 32 MiB; `rest` is touched only where the workload allocates. Contiguous pfns other than block heads stay
/// contiguous in memory, so a folio's records share cache lines as before.
pub struct PageArray {
    heads: Vec<Page>,
    rest: Vec<Page>,
    /// `(1 << head_order) - 1`: a pfn whose bits under it are all zero has
    /// its record in `heads`.
    head_mask: usize,
    head_order: u32,
}

impl PageArray {
    /// `nr_pfns` zeroed records, the heads of `1 << head_order`-page blocks
    /// kept apart. Allocated lazily (zeroed pages cost no host memory until
    /// written).
    ///
    /// A machine of up to [`HUGE_MEMMAP_BYTES`] of records has its `rest`
    /// on host huge pages: a workload writes much of so small a memmap,
    /// and one host fault per 2 MiB of records costs less than 512. A
    /// larger one keeps base pages, so that a TiB machine's host memory is
    /// what its workload touches.
    pub fn new(nr_pfns: usize, head_order: u32) -> PageArray {
        let mut rest: Vec<Page> = bytemuck::allocation::zeroed_vec(nr_pfns);
        if std::mem::size_of_val(rest.as_slice()) <= HUGE_MEMMAP_BYTES {
            largo_physmem::advise_huge_pages(&mut rest);
        }
        PageArray {
            heads: bytemuck::allocation::zeroed_vec(nr_pfns.div_ceil(1 << head_order)),
            rest,
            head_mask: (1 << head_order) - 1,
            head_order,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.rest.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Touches every host page of both arrays (see `Memmap::populate`).
    pub fn populate(&mut self) {
        const RECORDS_PER_HOST_PAGE: usize = 4096 / std::mem::size_of::<Page>();
        for v in [&mut self.heads, &mut self.rest] {
            for chunk in v.chunks_mut(RECORDS_PER_HOST_PAGE) {
                let record = std::hint::black_box(&mut chunk[0]);
                let aux = record.aux();
                record.set_aux(aux ^ 1);
                std::hint::black_box(&*record);
                record.set_aux(aux);
            }
        }
    }
}

impl PageArray {
    /// The records of pfns `start..end` back to all-zero, the state of
    /// free memory: a slice fill between block heads.
    #[inline]
    pub fn clear_range(&mut self, start: usize, end: usize) {
        self.for_each_run(start, end, |run| run.fill(Page::default()));
    }

    /// `f` on the record of each pfn of `start..end`, in pfn order:
    /// through slices of `rest` between block heads, without a branch
    /// per record.
    #[inline]
    pub fn for_each_mut(&mut self, start: usize, end: usize, mut f: impl FnMut(&mut Page)) {
        self.for_each_run(start, end, |run| run.iter_mut().for_each(&mut f));
    }

    /// `f` on the records of `start..end` as contiguous runs, in pfn order.
    #[inline]
    fn for_each_run(&mut self, start: usize, end: usize, mut f: impl FnMut(&mut [Page])) {
        if end == start + 1 {
            return f(std::slice::from_mut(&mut self[start]));
        }
        let mut pfn = start;
        while pfn < end {
            if pfn & self.head_mask == 0 {
                f(std::slice::from_mut(&mut self.heads[pfn >> self.head_order]));
                pfn += 1;
                continue;
            }
            let stop = ((pfn | self.head_mask) + 1).min(end);
            f(&mut self.rest[pfn..stop]);
            pfn = stop;
        }
    }
}

impl Index<usize> for PageArray {
    type Output = Page;

    #[inline]
    fn index(&self, pfn: usize) -> &Page {
        if pfn & self.head_mask == 0 {
            &self.heads[pfn >> self.head_order]
        } else {
            &self.rest[pfn]
        }
    }
}

impl IndexMut<usize> for PageArray {
    #[inline]
    fn index_mut(&mut self, pfn: usize) -> &mut Page {
        if pfn & self.head_mask == 0 {
            &mut self.heads[pfn >> self.head_order]
        } else {
            &mut self.rest[pfn]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pfn_has_its_own_record() {
        let mut a = PageArray::new(100, 3);
        for pfn in 0..100 {
            a[pfn].set_aux((pfn % 251) as u8);
        }
        for pfn in 0..100 {
            assert_eq!(a[pfn].aux(), (pfn % 251) as u8, "pfn {pfn}");
        }
        assert_eq!(a.len(), 100);
        // Aligned pfns live apart: their slots in `rest` stay zero.
        assert!((0..100).step_by(8).all(|pfn| a.rest[pfn].aux() == 0));
    }

    #[test]
    fn clear_range_clears_exactly_its_records_on_both_sides_of_block_heads() {
        let mut a = PageArray::new(64, 3);
        for pfn in 0..64 {
            a[pfn].set_aux(1);
        }
        a.clear_range(5, 27);
        for pfn in 0..64 {
            let cleared = (5..27).contains(&pfn);
            assert_eq!(a[pfn].is_clear(), cleared, "pfn {pfn}");
        }
        a.clear_range(40, 40);
        assert!(!a[40].is_clear(), "an empty range clears nothing");
    }

    #[test]
    fn for_each_mut_visits_every_record_once_in_pfn_order() {
        let mut a = PageArray::new(64, 3);
        let mut seen = 0u8;
        a.for_each_mut(3, 30, |p| {
            seen += 1;
            p.set_aux(seen);
        });
        assert_eq!(seen, 27);
        for pfn in 0..64 {
            let want = if (3..30).contains(&pfn) { (pfn - 2) as u8 } else { 0 };
            assert_eq!(a[pfn].aux(), want, "pfn {pfn}");
        }
    }
}
