//! `shrink_folio_list` (mm/vmscan.c, v6.18) for the anonymous folios
//! reclaim isolated, oldest first: the reference check, swap space
//! (splitting a large folio that cannot get contiguous slots), unmapping,
//! writing out, and freeing (`__remove_mapping`); the rest are kept or
//! activated. Shmem folios go through `shmem/swap.rs`.

use std::collections::VecDeque;

use super::super::lru::FolioRef;
use super::super::stats::MthpStat;
use super::super::{Ctx, Vm};
use super::pageout::Pageout;
use super::references::Verdict;
use super::ScanControl;
use crate::memmap::PageFlags;
use crate::page_alloc::PageAlloc;
use crate::stats::VmEvent;

/// `struct reclaim_stat` and what the pass leaves for its caller.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReclaimStat {
    pub nr_reclaimed: u64,
    /// Pages activated, anon and file.
    pub nr_activate: [u64; 2],
    pub nr_pageout: u64,
    pub nr_unmap_fail: u64,
    /// Folios going back to the LRU, in the order they were processed
    /// (each holds the isolation reference).
    pub survivors: Vec<FolioRef>,
    /// Folios under asynchronous writeback.
    pub writeback: Vec<usize>,
}

/// What happens to one folio.
enum Outcome {
    Free,
    Keep,
    Activate,
}

impl Vm {
    /// `shrink_folio_list`: each folio of `list` (holding an isolation
    /// reference) is reclaimed, kept or activated; large folios split
    /// here put their pieces at the front of the list, processed next.
    pub(crate) fn shrink_folio_list(
        &mut self,
        ctx: &mut Ctx,
        list: VecDeque<FolioRef>,
        sc: &mut ScanControl,
        ignore_references: bool,
    ) -> ReclaimStat {
        let mut list = list;
        let mut stat = ReclaimStat::default();
        self.reclaiming_in_background = sc.reclaimer.is_kernel_thread();
        self.reclaim_work_mut().folios += list.len() as u64;
        while let Some(r) = list.pop_front() {
            let nr_pages = self.folio_nr_pages(r);
            sc.nr_scanned += nr_pages;
            let key = match r {
                FolioRef::Anon(k) => k,
                FolioRef::Shmem(k) => {
                    use crate::vm::shmem::swap::ShmemReclaim;
                    match self.shrink_shmem_one(ctx, k, sc, ignore_references, &mut stat) {
                        ShmemReclaim::Freed(nr) => stat.nr_reclaimed += nr,
                        ShmemReclaim::Keep(r) => stat.survivors.push(r),
                        ShmemReclaim::Activate(r) => {
                            self.lru_state_mut(r).active = true;
                            stat.nr_activate[0] += self.folio_nr_pages(r);
                            stat.survivors.push(r);
                        }
                    }
                    continue;
                }
            };
            let (outcome, key) = self.shrink_one(ctx, key, &mut list, sc, ignore_references, &mut stat);
            // A split leaves the head in hand (maybe under a new key).
            let nr = self.folios[key].nr_pages();
            if nr < nr_pages {
                sc.nr_scanned -= nr_pages - nr;
            }
            match outcome {
                Outcome::Free => {
                    stat.nr_reclaimed += nr;
                    if self.folios[key].deferred.is_some() {
                        self.deferred_remove(ctx.pa, key);
                    }
                    self.folio_put_refs(ctx, key, 1);
                }
                Outcome::Activate => {
                    if self.folios[key].swap.is_some() && self.swap.vm_swap_full() {
                        self.folio_free_swap(ctx, key);
                    }
                    self.folios[key].lru.active = true;
                    let file = usize::from(self.folios[key].lazyfree);
                    stat.nr_activate[file] += nr;
                    stat.survivors.push(FolioRef::Anon(key));
                }
                Outcome::Keep => stat.survivors.push(FolioRef::Anon(key)),
            }
        }
        ctx.pa
            .events
            .count(VmEvent::Pgactivate, stat.nr_activate[0] + stat.nr_activate[1]);
        stat
    }

    /// One anonymous folio's pass; also returns the folio's key, which a
    /// split may have changed.
    fn shrink_one(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        list: &mut VecDeque<FolioRef>,
        sc: &mut ScanControl,
        ignore_references: bool,
        stat: &mut ReclaimStat,
    ) -> (Outcome, usize) {
        let r = FolioRef::Anon(key);
        if !ignore_references {
            match self.folio_check_references(r, sc.target_memcg) {
                Verdict::Activate => return (Outcome::Activate, key),
                Verdict::Keep => return (Outcome::Keep, key),
                Verdict::Reclaim | Verdict::ReclaimClean => {}
            }
        }
        let mut key = key;
        if !self.folios[key].lazyfree && self.folios[key].swap.is_none() {
            match self.add_to_swap(ctx, key, list) {
                Ok(k) => key = k,
                Err(k) => return (Outcome::Activate, k.unwrap_or(key)),
            }
        }
        if self.folio_mapcount(ctx.pa, key) > 0 && !self.try_to_unmap(ctx, key) {
            stat.nr_unmap_fail += self.folios[key].nr_pages();
            return (Outcome::Activate, key);
        }
        let pfn = self.folios[key].pfn;
        let dirty = ctx.pa.memmap.page(pfn).flags().contains(PageFlags::DIRTY);
        if dirty && !self.folios[key].lazyfree {
            // pageout: a folio something else still holds is not written.
            if !self.cache_freeable(ctx.pa, FolioRef::Anon(key)) {
                return (Outcome::Keep, key);
            }
            let nr = self.folios[key].nr_pages();
            match self.swap_writeout(ctx, key) {
                Pageout::SwapFreed => {
                    stat.nr_pageout += nr;
                    return (Outcome::Keep, key);
                }
                Pageout::Writeback => {
                    stat.nr_pageout += nr;
                    stat.writeback.push(key);
                    return (Outcome::Keep, key);
                }
                Pageout::Done => stat.nr_pageout += nr,
            }
        }
        if self.folios[key].lazyfree {
            // folio_ref_freeze(folio, 1): only reclaim's reference may be
            // left (a cpu batch's entry is one the memmap does not count).
            if self.folio_refcount(ctx.pa, key) != 1 || self.folios[key].lru.held_by_batch() {
                return (Outcome::Keep, key);
            }
            ctx.pa.events.count(VmEvent::Pglazyfreed, self.folios[key].nr_pages());
            return (Outcome::Free, key);
        }
        if self.remove_mapping(ctx, key, sc.target_memcg) {
            (Outcome::Free, key)
        } else {
            (Outcome::Keep, key)
        }
    }

    /// `folio_alloc_swap` with reclaim's fallback: a large folio that is
    /// partially mapped is split first; one without contiguous slots is
    /// split to order 0 (`swpout_fallback`) and its head tried again.
    /// `Ok(key)` is the folio (maybe a new key for the head) now in the
    /// swap cache; `Err` asks for activation (with the head's new key).
    fn add_to_swap(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        list: &mut VecDeque<FolioRef>,
    ) -> Result<usize, Option<usize>> {
        let mut key = key;
        let order = self.folios[key].order;
        if order > 0 {
            if !self.can_split_folio(ctx.pa, key, 1) {
                return Err(None);
            }
            let partially = ctx
                .pa
                .memmap
                .page(self.folios[key].pfn)
                .flags()
                .contains(PageFlags::PARTIALLY_MAPPED);
            if self.folios[key].deferred.is_some() && partially {
                key = self.split_to_list(ctx, key, list).ok_or(None)?;
            }
        }
        let order = self.folios[key].order;
        if let Some(entry) = self.swap.folio_alloc_swap(ctx.cpu, order) {
            self.swap_cache_add(ctx, key, entry);
            ctx.pa
                .memmap
                .page_mut(self.folios[key].pfn)
                .insert_flags(PageFlags::DIRTY);
            return Ok(key);
        }
        if order == 0 {
            return Err(Some(key));
        }
        let head = self.split_to_list(ctx, key, list).ok_or(None)?;
        if order >= self.pmd_order() {
            ctx.pa.events.count(VmEvent::ThpSwpoutFallback, 1);
        }
        self.mthp.add(order, MthpStat::SwpoutFallback, 1);
        match self.swap.folio_alloc_swap(ctx.cpu, 0) {
            Some(entry) => {
                self.swap_cache_add(ctx, head, entry);
                ctx.pa
                    .memmap
                    .page_mut(self.folios[head].pfn)
                    .insert_flags(PageFlags::DIRTY);
                Ok(head)
            }
            None => Err(Some(head)),
        }
    }

    /// `split_folio_to_list`: the head stays in hand (its key returned),
    /// the other pieces go where `shrink_folio_list` takes its next folio
    /// from (6.18's `__folio_split` adds each tail in page order with
    /// `list_add_tail`, and `lru_to_folio` takes the list's tail): reclaim
    /// meets them right after the head, the last page first.
    fn split_to_list(&mut self, ctx: &mut Ctx, key: usize, list: &mut VecDeque<FolioRef>) -> Option<usize> {
        let pieces = self.split_anon_folio_to(ctx, key, 1)?;
        let (&head, tails) = pieces.split_first()?;
        for &t in tails {
            list.push_front(FolioRef::Anon(t));
        }
        Some(head)
    }

    /// `is_page_cache_freeable` of an isolated cache folio (the swap
    /// cache's, or a shmem file's): only reclaim's reference and the
    /// cache's hold it. An entry in a cpu batch is a reference too
    /// (another cpu's `lru_lazyfree`, deactivate or activate batch:
    /// MADV_PAGEOUT drains only its own cpu's), which the memmap's count
    /// does not carry: such a folio stays, unwritten.
    pub(crate) fn cache_freeable(&self, pa: &PageAlloc, r: FolioRef) -> bool {
        let (pfn, order) = self.folio_pfn_order(r);
        pa.memmap.page(pfn).refcount() == 1 + (1u32 << order) && !self.lru_state(r).held_by_batch()
    }

    /// `__remove_mapping` of a swap-cache folio: only when nothing but
    /// reclaim and the swap cache holds it; it leaves the cache with a
    /// shadow and its memory charge moves to swap (`memcg1_swapout`).
    pub(crate) fn remove_mapping(&mut self, ctx: &mut Ctx, key: usize, target_memcg: Option<usize>) -> bool {
        let Some(entry) = self.folios[key].swap else {
            return false;
        };
        let nr = self.folios[key].nr_pages();
        let pfn = self.folios[key].pfn;
        let dirty = ctx.pa.memmap.page(pfn).flags().contains(PageFlags::DIRTY);
        if !self.cache_freeable(ctx.pa, FolioRef::Anon(key)) || dirty || self.folios[key].writeback {
            return false;
        }
        let shadow = self.workingset_eviction(ctx, key, target_memcg);
        let memcg = self.folios[key].memcg;
        self.swap.device_mut(entry).set_cgroup_id(entry.offset, nr, memcg);
        self.memcg_swapout(ctx, key);
        self.swap_cache_del(ctx, key, Some(shadow));
        true
    }
}
