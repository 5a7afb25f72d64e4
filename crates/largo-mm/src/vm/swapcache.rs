//! The swap cache of anonymous folios (mm/swap_state.c, mm/swapfile.c,
//! mm/workingset.c, v6.18): adding a folio with its slots, deleting it
//! (leaving a shadow when reclaim evicts it), freeing slots nothing
//! references any more, and the zap of swap entries
//! (`free_swap_and_cache_nr`).

use super::lru::FolioRef;
use super::{Ctx, Vm};
use crate::memmap::PageFlags;
use crate::swap::{CacheSlot, SwapEntry, SWAP_HAS_CACHE};

/// A shadow entry (`pack_shadow`): the memcg and node whose lruvec aged,
/// its `nonresident_age` at eviction, and whether the folio was in the
/// workingset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shadow {
    pub memcg: u16,
    pub nid: u8,
    pub eviction: u64,
    pub workingset: bool,
}

impl Shadow {
    fn pack(self) -> u64 {
        (self.eviction << 25) | ((self.memcg as u64) << 9) | ((self.nid as u64) << 1) | self.workingset as u64
    }

    fn unpack(v: u64) -> Shadow {
        Shadow {
            eviction: v >> 25,
            memcg: ((v >> 9) & 0xffff) as u16,
            nid: ((v >> 1) & 0xff) as u8,
            workingset: v & 1 != 0,
        }
    }
}

impl Vm {
    /// `swap_cache_add_folio`: the folio takes `entry`'s slots (which
    /// hold `SWAP_HAS_CACHE` already), one reference per page.
    pub(crate) fn swap_cache_add(&mut self, ctx: &mut Ctx, key: usize, entry: SwapEntry) {
        let (pfn, nr) = (self.folios[key].pfn, self.folios[key].nr_pages());
        let token = FolioRef::Anon(key).token();
        let dev = self.swap.device_mut(entry);
        for i in 0..nr {
            dev.cache.insert(entry.offset + i, CacheSlot::Folio(token));
        }
        self.folios[key].swap = Some(entry);
        self.folio_ref_add(ctx.pa, key, nr as u32);
        let nid = self.node_of(ctx.pa, pfn);
        self.node_stat[nid].swapcache += nr as i64;
    }

    /// `__swap_cache_del_folio` then `put_swap_folio`: the folio leaves
    /// the swap cache (its slots keep `shadow` if reclaim evicted it), its
    /// references go, and the slots lose their cache bit.
    pub(crate) fn swap_cache_del(&mut self, ctx: &mut Ctx, key: usize, shadow: Option<Shadow>) {
        let (pfn, nr) = (self.folios[key].pfn, self.folios[key].nr_pages());
        let entry = self.folios[key].swap.take().expect("the folio is in the swap cache");
        let dev = self.swap.device_mut(entry);
        for i in 0..nr {
            match shadow {
                Some(s) => dev.cache.insert(entry.offset + i, CacheSlot::Shadow(s.pack())),
                None => dev.cache.remove(&(entry.offset + i)),
            };
        }
        let nid = self.node_of(ctx.pa, pfn);
        self.node_stat[nid].swapcache -= nr as i64;
        self.swap.put_cache(entry, nr);
        let page = ctx.pa.memmap.page_mut(pfn);
        page.set_refcount(page.refcount() - nr as u32);
    }

    /// The anonymous folio the swap cache holds for `entry`.
    pub(crate) fn swap_cache_folio(&self, entry: SwapEntry) -> Option<usize> {
        match self.swap.device(entry).cache_slot(entry.offset)? {
            CacheSlot::Folio(t) => match FolioRef::from_token(t) {
                FolioRef::Anon(k) => Some(k),
                FolioRef::Shmem(_) => None,
            },
            CacheSlot::Shadow(_) => None,
        }
    }

    /// The shadow reclaim left for `entry`, if any.
    pub(crate) fn swap_cache_shadow(&self, entry: SwapEntry) -> Option<Shadow> {
        match self.swap.device(entry).cache_slot(entry.offset)? {
            CacheSlot::Shadow(v) => Some(Shadow::unpack(v)),
            CacheSlot::Folio(_) => None,
        }
    }

    /// `folio_swapped`: a page table still references one of its slots.
    fn folio_swapped(&self, key: usize) -> bool {
        let Some(entry) = self.folios[key].swap else {
            return false;
        };
        let nr = self.folios[key].nr_pages();
        (0..nr).any(|i| self.swap.swap_count(entry.plus(i)) > 0)
    }

    /// `folio_free_swap`: a swap-cache folio whose slots no page table
    /// references leaves the cache (slots freed) and is dirty again.
    pub(crate) fn folio_free_swap(&mut self, ctx: &mut Ctx, key: usize) -> bool {
        if self.folios[key].swap.is_none() || self.folios[key].writeback || self.folio_swapped(key) {
            return false;
        }
        self.swap_cache_del(ctx, key, None);
        let pfn = self.folios[key].pfn;
        ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::DIRTY);
        true
    }

    /// `free_swap_cache`: after an unmap, a swap-cache folio nothing maps
    /// any more gives its slots up.
    pub(crate) fn free_swap_cache(&mut self, ctx: &mut Ctx, key: usize) {
        if self.folios[key].swap.is_some() && self.folio_mapcount(ctx.pa, key) == 0 {
            self.folio_free_swap(ctx, key);
        }
    }

    /// `workingset_eviction`: the shadow of a folio reclaim evicts for
    /// `target_memcg` (the root for global reclaim); that lruvec ages.
    pub(crate) fn workingset_eviction(&mut self, ctx: &Ctx, key: usize, target_memcg: Option<usize>) -> Shadow {
        let nid = self.node_of(ctx.pa, self.folios[key].pfn);
        let memcg = target_memcg.unwrap_or(0);
        let lv = self.lruvec_index(nid, memcg);
        let eviction = self.lruvecs[lv].nonresident_age;
        let workingset = self.folios[key].lru.workingset;
        self.workingset_age_nonresident(nid, memcg, self.folios[key].nr_pages());
        Shadow {
            memcg: memcg as u16,
            nid: nid as u8,
            eviction,
            workingset,
        }
    }

    /// `workingset_age_nonresident`: the lruvec and its parents age.
    pub(crate) fn workingset_age_nonresident(&mut self, nid: usize, memcg: usize, nr: u64) {
        let lv = self.lruvec_index(nid, memcg);
        self.lruvecs[lv].nonresident_age += nr;
        if memcg != 0 {
            let root = self.lruvec_index(nid, 0);
            self.lruvecs[root].nonresident_age += nr;
        }
    }

    /// `__try_to_reclaim_swap` for `TTRS_UNMAPPED | TTRS_FULL`: the cached
    /// folio holding `entry` leaves the cache if nothing maps it (or swap
    /// is full) and its slots hold only the cache bit. Returns its size
    /// (negative when it stayed), 0 when the cache holds none.
    fn try_to_reclaim_swap(&mut self, ctx: &mut Ctx, entry: SwapEntry) -> i64 {
        let Some(key) = self.swap_cache_folio(entry) else {
            return 0;
        };
        let nr = self.folios[key].nr_pages();
        let first = self.folios[key].swap.expect("cached");
        let unmapped = self.folio_mapcount(ctx.pa, key) == 0;
        let wanted = unmapped || self.swap.vm_swap_full();
        if !wanted || self.folios[key].writeback || !self.swap.device(first).only_has_cache(first.offset, nr) {
            return -(nr as i64);
        }
        self.swap_cache_del(ctx, key, None);
        let pfn = self.folios[key].pfn;
        ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::DIRTY);
        if self.folio_refcount(ctx.pa, key) == 0 {
            self.free_anon_folio(ctx, key);
        }
        nr as i64
    }

    /// `free_swap_and_cache_nr`: the zap of `nr` swap entries from
    /// `entry`: one map reference each; slots left with only a cached
    /// folio's reference free it when nothing maps it.
    pub(crate) fn free_swap_and_cache_nr(&mut self, ctx: &mut Ctx, entry: SwapEntry, nr: u64) {
        if !self.swap.swap_free_nr(entry, nr) {
            return;
        }
        let mut offset = entry.offset;
        let end = entry.offset + nr;
        while offset < end {
            let e = SwapEntry::new(entry.ty, offset);
            let mut step = 1;
            if self.swap.device(e).map_byte(offset) == SWAP_HAS_CACHE {
                let n = self.try_to_reclaim_swap(ctx, e).unsigned_abs().max(1);
                step = (offset + 1).next_multiple_of(n) - offset;
            }
            offset += step;
        }
    }
}
