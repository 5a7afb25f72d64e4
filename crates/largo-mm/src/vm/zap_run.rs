//! Runs of order-0 anonymous folios unmapped together: the common case
//! of `zap_pte_range` at munmap, exit and MADV_DONTNEED, where each
//! present entry maps a folio of one page that this entry alone maps and
//! references. Each entry is zapped exactly as the general loop of
//! [`Vm::zap_range`] zaps it (`zap_present_ptes` ->
//! `folio_remove_rmap_ptes`, then the last `folio_put`: off the LRU,
//! uncharged, freed to the pcp list), in the same order; what the run
//! saves is the general loop's questions whose answers the run's
//! condition fixes: no folio batch to measure (`folio_pte_batch` of one
//! page), no large-folio mapcounts, no swap cache to give up, no
//! deferred split queue, no cpu batch holding a reference, and none of
//! `free_folio`'s checks on the pages it frees.
//!
//! An entry that does not qualify ends the run; the general loop takes
//! it. The folios the run frees leave their LRU lists as they go, but
//! the neighbours around each stretch they leave are joined when the
//! stretch ends ([`Vm::lru_forget_listed_in`]): nothing the run does
//! reads the lists before that.

use super::folio::NO_ANON_VMA;
use super::lru::{FolioRef, LruCut};
use super::types::MmId;
use super::{Ctx, Vm};
use crate::memmap::PageFlags;
use crate::page_alloc::PageAlloc;

impl Vm {
    /// Whether zaps take runs of sole order-0 folios together (the
    /// default) or one by one through the general loop: the two give
    /// the same machine, which a test checks.
    pub fn set_zap_runs(&mut self, on: bool) {
        self.zap_runs = on;
    }

    /// Pages zapped in runs so far (diagnostics only: the modelled
    /// machine is the same with runs and without).
    pub fn zap_run_pages(&self) -> u64 {
        self.zap_run_pages
    }

    /// Zaps entries `start..` of `table` (stopping before `limit`) while
    /// each maps a sole order-0 folio ([`Vm::sole_order0_folio`]), and
    /// returns how many (0: `start` begins no run).
    pub(super) fn zap_order0_run(
        &mut self,
        ctx: &mut Ctx,
        mm: MmId,
        table: usize,
        start: usize,
        limit: usize,
    ) -> usize {
        if !self.zap_runs {
            return 0;
        }
        let mut i = start;
        let mut cut = None;
        let mut frees = std::mem::take(&mut self.zap_run_frees);
        let one_node = self.node_stat.len() == 1;
        while i < limit {
            let pte = self.pt.get(table, i);
            if !pte.present() || pte.is_special() {
                break;
            }
            let pfn = pte.pfn();
            let Some(key) = self.sole_order0_folio(ctx.pa, pfn) else {
                break;
            };
            self.unmap_last_order0(ctx, key, pfn, one_node, &mut cut, &mut frees);
            i += 1;
        }
        frees.flush(ctx);
        self.zap_run_frees = frees;
        if let Some(c) = cut {
            self.lru_cut_close(c);
        }
        let nr = i - start;
        if nr > 0 {
            // What each zap did alike, counted for the run: nothing in it
            // reads the entries, the rmap counts, the node's anon_mapped
            // or the lock counts.
            self.pt.clear_ptes(table, start, nr);
            self.work.rmap_calls += nr as u64;
            self.work.rmap_pages += nr as u64;
            if one_node {
                self.node_stat[0].anon_mapped -= nr as i64;
            }
            self.lru_lock_for_frees(nr as u64);
        }
        self.mms[mm].rss_anon -= nr as u64;
        self.zap_run_pages += nr as u64;
        nr
    }

    /// The key of the order-0 anonymous folio at `pfn` when a zap of its
    /// one mapping frees it: mapped once and referenced once (by that
    /// mapping), on an LRU list with no cpu batch holding it. So it is
    /// in no swap cache (which holds a reference of its own), and, of
    /// order 0, on no deferred split queue.
    fn sole_order0_folio(&self, pa: &PageAlloc, pfn: u64) -> Option<usize> {
        let page = pa.memmap.page(pfn);
        let flags = page.flags();
        let not_order0 = PageFlags::HEAD | PageFlags::BUDDY | PageFlags::PCP | PageFlags::RESERVED;
        if page.refcount() != 1
            || page.mapcount() != 1
            || page.order() != 0
            || !flags.contains(PageFlags::ANON)
            || flags.intersects(not_order0)
            || page.private() == 0
        {
            return None;
        }
        let key = page.private() as usize - 1;
        let f = &self.folios[key];
        // Mapped by a PTE of an anonymous VMA, it has an anon_vma and is
        // no shmem folio on its way to swap.
        debug_assert!(f.order == 0 && f.pfn == pfn && f.swap.is_none() && f.deferred.is_none());
        debug_assert!(f.anon_vma != NO_ANON_VMA && !f.from_shmem);
        // Isolation takes a reference, so with none but the mapping's the
        // folio is on its list; the general loop is left any that is not.
        (f.lru.list.is_some() && !f.lru.held_by_batch()).then_some(key)
    }

    /// The zap of the one mapping of the sole order-0 folio `key` at
    /// `pfn`: `folio_remove_rmap_ptes` of one page, then the last
    /// `folio_put` (`free_anon_folio` with nothing but the LRU, the
    /// memcg and the pages to let go of).
    /// The folio leaves its LRU list as part of the run's `cut`.
    /// The run counts the rmap call, the node's `anon_mapped` (on a
    /// machine of `one_node`), the PTE and the lru lock of each unmap
    /// together ([`Vm::zap_order0_run`]).
    fn unmap_last_order0(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        pfn: u64,
        one_node: bool,
        cut: &mut Option<LruCut>,
        frees: &mut RunFrees,
    ) {
        let zi = ctx.pa.zone_of(pfn);
        if !one_node {
            let nid = ctx.pa.zones()[zi].nid;
            self.node_stat[nid].anon_mapped -= 1;
        }
        let (anon_vma, memcg) = (self.folios[key].anon_vma, self.folios[key].memcg as usize);
        if self.anon_vma_freed_by_put(anon_vma) {
            // Its free may free a slab page: after the pages before it.
            frees.flush(ctx);
        }
        self.put_anon_vma_folio(anon_vma);
        self.lru_forget_listed_in(ctx.pa, FolioRef::Anon(key), zi, cut);
        self.mem_cgroup_uncharge(ctx, memcg, 1);
        self.folios.remove(key);
        // The page goes to this cpu's pcp list with the run's other pages.
        // Its record goes back to all zero there, at once: the mapcount,
        // PG_anon_exclusive and the reference the unmap drops, PG_lru that
        // leaving the LRU clears, and the rest that free_user_folio and
        // free_folio clear (nothing in the run reads it before).
        frees.push(ctx, zi, pfn);
    }
}

/// The pages a zap run frees, in the order it frees them, all of one
/// zone, not yet on the pcp lists (their records not yet cleared): they
/// go there together ([`PageAlloc::free_frozen_pages_run`]) when the run
/// ends, when a page of another zone comes, and before anything in the
/// run that may free a page itself (the put that frees an anon_vma).
/// Nothing else the run does reads the pcp lists, the buddy lists or
/// these pages' records.
///
/// [`PageAlloc::free_frozen_pages_run`]: crate::page_alloc::PageAlloc::free_frozen_pages_run
#[derive(Debug, Default)]
pub(super) struct RunFrees {
    zi: usize,
    pfns: Vec<u64>,
}

impl RunFrees {
    fn push(&mut self, ctx: &mut Ctx, zi: usize, pfn: u64) {
        if zi != self.zi {
            self.flush(ctx);
            self.zi = zi;
        }
        self.pfns.push(pfn);
    }

    fn flush(&mut self, ctx: &mut Ctx) {
        if !self.pfns.is_empty() {
            ctx.pa.free_frozen_pages_run(ctx.cpu, self.zi, &self.pfns);
            self.pfns.clear();
        }
    }
}
