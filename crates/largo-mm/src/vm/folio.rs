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

/// The `prev` of a folio on no deferred split queue (no key reaches it).
const OFF_QUEUE: usize = usize::MAX - 1;

/// A folio's place on its node's deferred split queue (`_deferred_list`):
/// its neighbours there ([`NO_LINK`] at an end), or none. Two words, where
/// `Option<(usize, usize)>` took three, in a record every zap reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeferredLinks {
    prev: usize,
    next: usize,
}

impl DeferredLinks {
    /// On no queue.
    pub const NONE: DeferredLinks = DeferredLinks {
        prev: OFF_QUEUE,
        next: NO_LINK,
    };

    /// On a queue between `prev` and `next`.
    pub fn queued(prev: usize, next: usize) -> DeferredLinks {
        debug_assert_ne!(prev, OFF_QUEUE, "a folio key");
        DeferredLinks { prev, next }
    }

    #[inline]
    pub fn is_some(&self) -> bool {
        self.prev != OFF_QUEUE
    }

    #[inline]
    pub fn is_none(&self) -> bool {
        !self.is_some()
    }

    /// The neighbours (previous, next), if queued.
    #[inline]
    pub fn get(&self) -> Option<(usize, usize)> {
        self.is_some().then_some((self.prev, self.next))
    }

    /// Off the queue; returns the neighbours it had.
    pub fn take(&mut self) -> Option<(usize, usize)> {
        let links = self.get();
        *self = DeferredLinks::NONE;
        links
    }

    pub fn set_prev(&mut self, prev: usize) {
        debug_assert!(self.is_some() && prev != OFF_QUEUE, "relinking a folio on no queue");
        self.prev = prev;
    }

    pub fn set_next(&mut self, next: usize) {
        debug_assert!(self.is_some(), "relinking a folio on no queue");
        self.next = next;
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
