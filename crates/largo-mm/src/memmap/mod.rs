//! The memmap: one compact record per base page frame (the kernel's
//! `struct page` array, `mem_map`/vmemmap).

mod array;
mod folio;
mod page;

pub use array::PageArray;

pub use folio::Folio;
pub use page::{Page, PageFlags, NIL};

/// Flags of records that are not allocated folio heads.
const NOT_A_FOLIO: PageFlags = PageFlags::BUDDY.union(PageFlags::PCP).union(PageFlags::RESERVED);

/// The per-pfn metadata array, indexed by pfn from 0 to `max_pfn`.
///
/// Allocated zeroed and lazily: a record nobody has written costs no host
/// memory, so a 1 TiB machine only pays for the records boot and the
/// workload touch (and boot's, the heads of the free blocks, are stored
/// densely: [`PageArray`]). Invariants (checked by `check`): every record of a memory
/// hole, and every record inside a free block other than the block's head,
/// is all-zero.
pub struct Memmap {
    pub(crate) pages: PageArray,
    /// Largest folio order (`MAX_FOLIO_ORDER`): bounds the head search.
    max_order: u32,
}

impl Memmap {
    /// A memmap of `nr_pfns` zeroed records; the records of pfns aligned to
    /// `block_order` (pageblock_order: boot frees MAX_PAGE_ORDER blocks a
    /// pageblock at a time) are stored apart ([`PageArray`]).
    pub fn new(nr_pfns: u64, max_order: u32, block_order: u32) -> Memmap {
        Memmap {
            pages: PageArray::new(nr_pfns as usize, block_order),
            max_order,
        }
    }

    /// Touches every host page of the array so later accesses do not take
    /// first-touch page faults (what `MAP_POPULATE` would do). Costs the
    /// whole array in host memory: for benchmarks and `ram` machines.
    pub fn populate(&mut self) {
        self.pages.populate();
    }

    #[inline]
    pub fn len(&self) -> u64 {
        self.pages.len() as u64
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    #[inline]
    pub fn page(&self, pfn: u64) -> &Page {
        &self.pages[pfn as usize]
    }

    #[inline]
    pub fn page_mut(&mut self, pfn: u64) -> &mut Page {
        &mut self.pages[pfn as usize]
    }

    /// True when `pfn` heads an allocated folio (or is an order-0 one).
    #[inline]
    pub fn is_folio_head(&self, pfn: u64) -> bool {
        let page = self.page(pfn);
        page.refcount() > 0 && !page.flags().intersects(NOT_A_FOLIO)
    }

    /// The head of the allocated folio `pfn` belongs to (`page_folio`), or
    /// `None` if `pfn` is free, reserved or a hole. Probes the naturally
    /// aligned candidates from the smallest order up; the first folio head
    /// whose order covers `pfn` is the answer, because the records inside
    /// a folio never carry allocator state.
    pub fn folio_head(&self, pfn: u64) -> Option<u64> {
        if self.is_folio_head(pfn) {
            return Some(pfn);
        }
        for order in 1..=self.max_order {
            let candidate = pfn & !((1u64 << order) - 1);
            let page = self.page(candidate);
            if page.order() >= order {
                if self.is_folio_head(candidate) {
                    return Some(candidate);
                }
                if page.flags().intersects(PageFlags::BUDDY | PageFlags::PCP) {
                    return None;
                }
            }
        }
        None
    }
}
