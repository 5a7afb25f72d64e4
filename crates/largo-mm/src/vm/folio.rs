//! Anonymous folio state beyond the memmap record: what the kernel keeps in
//! a large folio's first tail pages (`_large_mapcount`, `_entire_mapcount`,
//! `_nr_pages_mapped`, `_mm_id[]`, `_deferred_list`) plus `mapping`/`index`.
//! Every anon folio has one entry; the head record's private word holds its
//! key + 1.

use super::lru::LruState;
use super::types::AnonVmaId;
use crate::swap::SwapEntry;

/// `MM_ID_DUMMY`.
pub const MM_ID_DUMMY: u32 = 0;
/// The "no folio" link of the deferred split list.
pub const NO_LINK: usize = usize::MAX;
/// The `anon_vma` of a folio that is not anonymous yet: one swap-in
/// readahead read into the swap cache, which no page table maps.
pub const NO_ANON_VMA: AnonVmaId = usize::MAX;

/// [`NO_LINK`] in a [`DeferredLinks`] half.
const NO_LINK_32: u32 = u32::MAX;
/// The `prev` of a folio on no deferred split queue (no key reaches it).
const OFF_QUEUE_32: u32 = u32::MAX - 1;

/// A folio's place on its node's deferred split queue (`_deferred_list`):
/// its neighbours there ([`NO_LINK`] at an end), or none. One word, where
/// `Option<(usize, usize)>` took three, in a record every zap reads: each
/// neighbour's key in 32 bits (a machine has fewer folios than pages, and
/// 2^32 - 2 order-0 folio records alone would take 512 GiB of host memory).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeferredLinks {
    prev: u32,
    next: u32,
}

/// A neighbour's key (or [`NO_LINK`]) in 32 bits.
fn link_32(key: usize) -> u32 {
    if key == NO_LINK {
        return NO_LINK_32;
    }
    match u32::try_from(key) {
        Ok(k) if k < OFF_QUEUE_32 => k,
        _ => panic!("folio key {key} does not fit a deferred split link"),
    }
}

/// ... and back.
#[inline]
fn link_usize(link: u32) -> usize {
    if link == NO_LINK_32 {
        NO_LINK
    } else {
        link as usize
    }
}

impl DeferredLinks {
    /// On no queue.
    pub const NONE: DeferredLinks = DeferredLinks {
        prev: OFF_QUEUE_32,
        next: NO_LINK_32,
    };

    /// On a queue between `prev` and `next`.
    pub fn queued(prev: usize, next: usize) -> DeferredLinks {
        DeferredLinks {
            prev: link_32(prev),
            next: link_32(next),
        }
    }

    #[inline]
    pub fn is_some(&self) -> bool {
        self.prev != OFF_QUEUE_32
    }

    #[inline]
    pub fn is_none(&self) -> bool {
        !self.is_some()
    }

    /// The neighbours (previous, next), if queued.
    #[inline]
    pub fn get(&self) -> Option<(usize, usize)> {
        self.is_some().then(|| (link_usize(self.prev), link_usize(self.next)))
    }

    /// Off the queue; returns the neighbours it had.
    pub fn take(&mut self) -> Option<(usize, usize)> {
        let links = self.get();
        *self = DeferredLinks::NONE;
        links
    }

    pub fn set_prev(&mut self, prev: usize) {
        debug_assert!(self.is_some(), "relinking a folio on no queue");
        self.prev = link_32(prev);
    }

    pub fn set_next(&mut self, next: usize) {
        debug_assert!(self.is_some(), "relinking a folio on no queue");
        self.next = link_32(next);
    }
}

impl std::fmt::Debug for DeferredLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[derive(Clone, Debug)]
pub struct AnonFolio {
    pub pfn: u64,
    pub order: u32,
    /// `folio->mapping`: the anon_vma of the VMA it was faulted in.
    pub anon_vma: AnonVmaId,
    /// `folio->index`: page offset of the head in that anon_vma.
    pub index: u64,
    /// `folio_large_mapcount`: PTE mappings plus one per PMD mapping.
    pub large_mapcount: i32,
    /// `folio_entire_mapcount`: PMD mappings.
    pub entire_mapcount: i32,
    /// Pages mapped by at least one PTE (`_nr_pages_mapped` without
    /// `ENTIRELY_MAPPED`).
    pub nr_pages_mapped: i32,
    /// CONFIG_MM_ID: the (up to) two mms mapping the folio, their
    /// mapcounts, and whether it may be mapped by more than one mm.
    pub mm_id: [u32; 2],
    pub mm_id_mapcount: [i32; 2],
    pub maybe_mapped_shared: bool,
    /// On the deferred split queue: its neighbours there.
    pub deferred: DeferredLinks,
    /// `folio_mark_lazyfree`: MADV_FREE cleared PG_swapbacked.
    pub lazyfree: bool,
    /// The memcg it is charged to (`folio->memcg_data`; 0: the root).
    pub memcg: u16,
    /// Its LRU list, links and LRU flags.
    pub lru: LruState,
    /// `folio->swap` while it is in the swap cache (`PG_swapcache`).
    pub swap: Option<SwapEntry>,
    /// `PG_writeback`: an asynchronous swap write is in flight.
    pub writeback: bool,
    /// `PG_readahead`: swap readahead brought it in, no fault asked yet.
    pub readahead: bool,
    /// A shmem folio on its way out through the swap cache (not
    /// anonymous: no anon_vma, not in the per-size `nr_anon`).
    pub from_shmem: bool,
}

// Two cache lines: every fault writes a record and every zap reads one.
const _: () = assert!(std::mem::size_of::<AnonFolio>() <= 128);

impl AnonFolio {
    pub fn new(pfn: u64, order: u32, anon_vma: AnonVmaId, index: u64) -> AnonFolio {
        AnonFolio {
            pfn,
            order,
            anon_vma,
            index,
            large_mapcount: 0,
            entire_mapcount: 0,
            nr_pages_mapped: 0,
            mm_id: [MM_ID_DUMMY; 2],
            mm_id_mapcount: [0; 2],
            maybe_mapped_shared: false,
            deferred: DeferredLinks::NONE,
            lazyfree: false,
            memcg: 0,
            lru: LruState::default(),
            swap: None,
            writeback: false,
            readahead: false,
            from_shmem: false,
        }
    }

    /// `folio_test_anon`: it has an anon_vma (a folio swapped in by
    /// readahead and not mapped yet has none).
    #[inline]
    pub fn is_anon(&self) -> bool {
        self.anon_vma != NO_ANON_VMA
    }

    #[inline]
    pub fn nr_pages(&self) -> u64 {
        1 << self.order
    }

    #[inline]
    pub fn is_large(&self) -> bool {
        self.order > 0
    }
}

#[cfg(test)]
mod tests {
    use super::{DeferredLinks, NO_LINK};

    #[test]
    fn deferred_links_keep_every_key_and_the_ends() {
        let top = u32::MAX as usize - 2;
        for (prev, next) in [(NO_LINK, NO_LINK), (0, NO_LINK), (NO_LINK, top), (7, top)] {
            let mut l = DeferredLinks::queued(prev, next);
            assert_eq!(l.get(), Some((prev, next)));
            l.set_prev(top);
            l.set_next(NO_LINK);
            assert_eq!(l.take(), Some((top, NO_LINK)));
            assert!(l.is_none() && l.get().is_none());
        }
    }

    #[test]
    #[should_panic(expected = "does not fit a deferred split link")]
    fn a_key_that_reads_as_off_queue_is_refused() {
        DeferredLinks::queued(u32::MAX as usize - 1, NO_LINK);
    }

    #[test]
    #[should_panic(expected = "does not fit a deferred split link")]
    fn a_key_past_32_bits_is_refused() {
        DeferredLinks::queued(3, 1 << 33);
    }
}
