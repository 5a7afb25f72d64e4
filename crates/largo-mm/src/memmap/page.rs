//! One base page's metadata record.

use bitflags::bitflags;

/// The "no page" link value of the intrusive lists.
pub const NIL: u32 = u32::MAX;

bitflags! {
    /// Page flags, named after the kernel's `PG_*` bits and page types.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct PageFlags: u16 {
        /// Head of a free buddy block on a zone free list (`PageBuddy`).
        const BUDDY = 1 << 0;
        /// First page of an allocated folio of order > 0 (`PG_head`).
        const HEAD = 1 << 1;
        /// The user wrote this page since it was zeroed (largo bookkeeping:
        /// on the sim backing it stands in for "the contents are not all
        /// zero", which `thp_underused` checks).
        const USER_WRITTEN = 1 << 2;
        /// Never handed to the buddy allocator (`PG_reserved`).
        const RESERVED = 1 << 3;
        /// Free block already reported to the host (`PG_reported`).
        const REPORTED = 1 << 4;
        /// On an LRU list: counts as movable for pageblock stealing (`PG_lru`).
        const LRU = 1 << 5;
        /// Anonymous memory (`PageAnon`).
        const ANON = 1 << 6;
        /// `PG_swapbacked`.
        const SWAPBACKED = 1 << 7;
        /// `PG_dirty`.
        const DIRTY = 1 << 8;
        /// Large folio with some pages unmapped, queued for deferred split
        /// (`PG_partially_mapped`).
        const PARTIALLY_MAPPED = 1 << 9;
        /// `PG_anon_exclusive`.
        const ANON_EXCLUSIVE = 1 << 10;
        /// Taken out of the allocator by hotplug or a balloon (`PageOffline`).
        const OFFLINE = 1 << 11;
        /// `PG_locked`.
        const LOCKED = 1 << 12;
        /// `PG_uptodate`.
        const UPTODATE = 1 << 13;
        /// On a per-cpu page list (largo bookkeeping; the kernel knows this
        /// only from which list the page is on).
        const PCP = 1 << 14;
        /// A page-table page (`PageTable` page type).
        const PGTABLE = 1 << 15;
    }
}

/// The kernel's `struct page`, in 16 bytes.
///
/// The three words change meaning with the page's state, as the kernel's
/// unions do:
///
/// | state | `w[0]` | `w[1]` | `w[2]` |
/// |---|---|---|---|
/// | free (buddy or pcp list head) | list prev pfn | list next pfn | 0 |
/// | allocated head / order-0 | `_refcount` | mapcount | owner word |
/// | allocated tail | 0 | mapcount | folio field slot |
///
/// `order` is the buddy order of a free block head, the pcp list order of a
/// pcp page, or the folio order of an allocated head.
///
/// Unlike the kernel, tails do not record their head: the allocator never
/// touches them, so allocating or freeing a folio of any order costs O(1),
/// and [`Memmap::folio_head`](super::Memmap::folio_head) finds the head by
/// probing the naturally aligned candidates. Mapcounts are stored
/// unbiased (the kernel keeps `_mapcount = mapcount - 1`) so that an
/// all-zero record is an unmapped tail.
#[derive(Clone, Copy, Default, PartialEq, Eq, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C)]
pub struct Page {
    flags: u16,
    order: u8,
    aux: u8,
    w: [u32; 3],
}

// The memmap must stay within 16 bytes per base page so a 1 TiB machine's
// metadata fits in 4 GiB.
const _: () = assert!(std::mem::size_of::<Page>() <= 16);

impl Page {
    #[inline]
    pub fn flags(&self) -> PageFlags {
        PageFlags::from_bits_retain(self.flags)
    }

    #[inline]
    pub fn set_flags(&mut self, flags: PageFlags) {
        self.flags = flags.bits();
    }

    #[inline]
    pub fn insert_flags(&mut self, flags: PageFlags) {
        self.flags |= flags.bits();
    }

    #[inline]
    pub fn remove_flags(&mut self, flags: PageFlags) {
        self.flags &= !flags.bits();
    }

    #[inline]
    pub fn is_buddy(&self) -> bool {
        self.flags & PageFlags::BUDDY.bits() != 0
    }

    #[inline]
    pub fn order(&self) -> u32 {
        self.order as u32
    }

    #[inline]
    pub fn set_order(&mut self, order: u32) {
        self.order = order as u8;
    }

    /// True when every field is zero (a hole, or the inside of a free block).
    #[inline]
    pub fn is_clear(&self) -> bool {
        *self == Page::default()
    }

    #[inline]
    pub fn clear(&mut self) {
        *self = Page::default();
    }

    // --- free pages: intrusive list links (`buddy_list` / `pcp_list`) ---

    #[inline]
    pub fn prev(&self) -> u32 {
        self.w[0]
    }

    #[inline]
    pub fn next(&self) -> u32 {
        self.w[1]
    }

    #[inline]
    pub fn set_prev(&mut self, pfn: u32) {
        self.w[0] = pfn;
    }

    #[inline]
    pub fn set_next(&mut self, pfn: u32) {
        self.w[1] = pfn;
    }

    // --- allocated heads and order-0 pages ---

    #[inline]
    pub fn refcount(&self) -> u32 {
        self.w[0]
    }

    #[inline]
    pub fn set_refcount(&mut self, refcount: u32) {
        self.w[0] = refcount;
    }

    /// `page_mapcount`: the number of page-table entries mapping this page.
    #[inline]
    pub fn mapcount(&self) -> i32 {
        self.w[1] as i32
    }

    #[inline]
    pub fn set_mapcount(&mut self, mapcount: i32) {
        self.w[1] = mapcount as u32;
    }

    /// The word upper layers own (`page->private` / folio fields).
    #[inline]
    pub fn private(&self) -> u32 {
        self.w[2]
    }

    #[inline]
    pub fn set_private(&mut self, value: u32) {
        self.w[2] = value;
    }

    /// Spare byte for upper layers.
    #[inline]
    pub fn aux(&self) -> u8 {
        self.aux
    }

    #[inline]
    pub fn set_aux(&mut self, value: u8) {
        self.aux = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Page>(), 16);
    }

    #[test]
    fn a_zero_record_is_an_unmapped_page() {
        let mut page = Page::default();
        assert_eq!(page.mapcount(), 0);
        page.set_mapcount(3);
        assert_eq!(page.mapcount(), 3);
        page.set_mapcount(0);
        assert!(page.is_clear());
    }
}
