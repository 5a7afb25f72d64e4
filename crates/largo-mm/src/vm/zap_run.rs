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
//! stretch ends ([`Vm::lru_forget_order0_going`]): nothing the run does
//! reads the lists before that.

use super::folio::NO_ANON_VMA;
use super::lru::{FolioRef, LruCut, LruState};
use super::types::{AnonVmaId, MmId};
use super::vma::AnonVma;
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
        let mut puts = AnonVmaPuts::NONE;
        let one_node = self.node_stat.len() == 1;
        while i < limit {
            let pte = self.pt.get(table, i);
            if !pte.present() || pte.is_special() {
                break;
            }
            let pfn = pte.pfn();
            let Some(folio) = self.sole_order0_folio(ctx.pa, pfn) else {
                break;
            };
            self.unmap_last_order0(ctx, folio, pfn, one_node, &mut cut, &mut frees, &mut puts);
            i += 1;
        }
        self.put_anon_vma_folios(&mut puts);
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

    /// The order-0 anonymous folio at `pfn` when a zap of its one mapping
    /// frees it: mapped once and referenced once (by that mapping), on an
    /// LRU list with no cpu batch holding it. So it is in no swap cache
    /// (which holds a reference of its own), and, of order 0, on no
    /// deferred split queue.
    #[inline]
    fn sole_order0_folio(&self, pa: &PageAlloc, pfn: u64) -> Option<SoleOrder0> {
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
        (f.lru.list.is_some() && !f.lru.held_by_batch()).then_some(SoleOrder0 {
            key,
            anon_vma: f.anon_vma,
            memcg: f.memcg as usize,
            lru: f.lru,
        })
    }

    /// The zap of the one mapping of the sole order-0 folio at `pfn`:
    /// `folio_remove_rmap_ptes` of one page, then the last `folio_put`
    /// (`free_anon_folio` with nothing but the LRU, the memcg and the
    /// pages to let go of).
    /// The folio leaves its LRU list as part of the run's `cut`, and its
    /// anon_vma's count of folios drops with the run's `puts`.
    /// The run counts the rmap call, the node's `anon_mapped` (on a
    /// machine of `one_node`), the PTE and the lru lock of each unmap
    /// together ([`Vm::zap_order0_run`]).
    #[allow(clippy::too_many_arguments)] // a zap run's per-page call: no struct to fill per page
    fn unmap_last_order0(
        &mut self,
        ctx: &mut Ctx,
        folio: SoleOrder0,
        pfn: u64,
        one_node: bool,
        cut: &mut Option<LruCut>,
        frees: &mut RunFrees,
        puts: &mut AnonVmaPuts,
    ) {
        let zi = ctx.pa.zone_of(pfn);
        let nid = if one_node {
            0
        } else {
            let nid = ctx.pa.zones()[zi].nid;
            self.node_stat[nid].anon_mapped -= 1;
            nid
        };
        let SoleOrder0 {
            key,
            anon_vma,
            memcg,
            lru,
        } = folio;
        if !puts.take_one(anon_vma) {
            self.put_anon_vma_folios(puts);
            if self.anon_vma_freed_by_put(anon_vma) {
                // Its free may free a slab page: after the pages before it.
                frees.flush(ctx);
                self.put_anon_vma_folio(anon_vma);
            } else {
                *puts = AnonVmaPuts::first(anon_vma, &self.anon_vmas[anon_vma]);
            }
        }
        let lv = memcg * self.node_stat.len() + nid;
        self.lru_forget_order0_going(FolioRef::Anon(key), &lru, lv, zi, cut);
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

/// What a zap run reads of a sole order-0 folio's record, in one look.
#[derive(Clone, Copy)]
struct SoleOrder0 {
    key: usize,
    anon_vma: AnonVmaId,
    memcg: usize,
    /// Its LRU state (on a list, in no cpu batch).
    lru: LruState,
}

/// The folio puts (`put_anon_vma_folio`) a zap run owes one anon_vma,
/// made together when a folio of another anon_vma comes, before a put of
/// this one that would free it, and when the run ends: nothing else the
/// run does reads an anon_vma's count of folios (the two reads below,
/// [`Vm::anon_vma_freed_by_put`] and [`AnonVmaPuts::first`], both through
/// [`AnonVma::puts_it_outlives`], come after the owed puts are made). A put that frees the anon_vma is never owed:
/// it is made in its turn.
#[derive(Clone, Copy)]
struct AnonVmaPuts {
    anon_vma: AnonVmaId,
    /// Puts owed.
    owed: u64,
    /// The most puts that leave it a folio (its folios less one when no
    /// VMA links it, else no limit).
    most: u64,
}

impl AnonVmaPuts {
    const NONE: AnonVmaPuts = AnonVmaPuts {
        anon_vma: NO_ANON_VMA,
        owed: 0,
        most: 0,
    };

    /// The first put owed to `anon_vma` (`av`), which that put leaves
    /// linked or with a folio ([`AnonVma::puts_it_outlives`], which
    /// [`Vm::anon_vma_freed_by_put`] reads too).
    fn first(anon_vma: AnonVmaId, av: &AnonVma) -> AnonVmaPuts {
        let most = av.puts_it_outlives();
        debug_assert!(most >= 1, "a put that frees the anon_vma owed");
        AnonVmaPuts {
            anon_vma,
            owed: 1,
            most,
        }
    }

    /// Owes one more put to `anon_vma` if it is the one owed puts and
    /// that put leaves it a folio.
    #[inline]
    fn take_one(&mut self, anon_vma: AnonVmaId) -> bool {
        let more = self.anon_vma == anon_vma && self.owed < self.most;
        self.owed += more as u64;
        more
    }
}

impl Vm {
    /// Makes the puts a zap run owes ([`AnonVmaPuts`]).
    fn put_anon_vma_folios(&mut self, puts: &mut AnonVmaPuts) {
        if puts.owed > 0 {
            self.anon_vmas[puts.anon_vma].nr_folios -= puts.owed;
        }
        *puts = AnonVmaPuts::NONE;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn anon_vma(nr_folios: u64, vmas: Vec<usize>) -> AnonVma {
        AnonVma {
            vmas,
            nr_folios,
            ..AnonVma::default()
        }
    }

    #[test]
    fn puts_owed_never_include_the_one_that_frees() {
        // Unlinked, three folios: two puts may be owed, the third frees.
        let av = anon_vma(3, Vec::new());
        let mut puts = AnonVmaPuts::first(7, &av);
        assert_eq!((puts.owed, puts.most), (1, 2));
        assert!(puts.take_one(7));
        assert!(!puts.take_one(7), "the put that frees the anon_vma was owed");
        assert_eq!(puts.owed, 2);
        // Another anon_vma's put is never owed to this one.
        assert!(!puts.take_one(8));
        assert_eq!(puts.owed, 2);
    }

    #[test]
    fn a_linked_anon_vma_is_owed_every_put() {
        let av = anon_vma(10, vec![0]);
        let mut puts = AnonVmaPuts::first(3, &av);
        for _ in 0..5 {
            assert!(puts.take_one(3));
        }
        assert_eq!(puts.owed, 6);
        let mut none = AnonVmaPuts::NONE;
        assert!(!none.take_one(3));
    }
}
