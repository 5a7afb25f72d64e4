//! MADV_COLD and MADV_PAGEOUT (mm/madvise.c
//! `madvise_cold_or_pageout_pte_range`, v6.18): folios mapped only by
//! this range are deactivated (COLD, clearing their young bits) or
//! isolated and reclaimed at once, references ignored (PAGEOUT, one page
//! table at a time); a large folio the range covers only in part is split
//! first unless it may be shared. Shmem VMAs walk their page-cache folios
//! the same way (`shmem/cold.rs`).

use super::lru::FolioRef;
use super::pgtable::Pte;
use super::types::VmaId;
use super::{Ctx, Vm};

impl Vm {
    /// `madvise_cold` / `madvise_pageout` of `[start, end)` in one VMA.
    pub(crate) fn madvise_cold_or_pageout(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64, pageout: bool) {
        let shmem = self.is_shmem_vma(vma);
        if !self.vmas[vma].is_anonymous() && !shmem {
            return;
        }
        self.lru_add_drain(ctx);
        let mm = self.vmas[vma].mm;
        let mut addr = start;
        while addr < end {
            let next = self.pmd_addr_end(addr, end);
            let mut list = Vec::new();
            if let Some(pmd) = self.pmd_slot(mm, addr) {
                let entry = self.pt.entry(pmd);
                let huge = entry.present() && entry.is_huge();
                if shmem && huge {
                    self.shmem_cold_pmd(ctx, pmd, addr, next, pageout, &mut list);
                } else if shmem && entry.is_table() {
                    self.shmem_cold_ptes(ctx, entry.table_idx(), addr, next, pageout, &mut list);
                } else if !shmem {
                    let pte_level = if huge {
                        self.cold_pmd(ctx, mm, pmd, addr, next, pageout, &mut list)
                    } else {
                        entry.is_table()
                    };
                    if pte_level {
                        let table = self.pt.entry(pmd).table_idx();
                        self.cold_ptes(ctx, table, addr, next, pageout, &mut list);
                    }
                }
            }
            if pageout {
                self.reclaim_pages(ctx, list);
            }
            addr = next;
        }
    }

    /// The PMD-mapped folio at `pmd`: whole (deactivated or isolated), or
    /// split when the range covers it only in part. Returns whether the
    /// range is to be walked at the PTE level now.
    #[allow(clippy::too_many_arguments)]
    fn cold_pmd(
        &mut self,
        ctx: &mut Ctx,
        mm: usize,
        pmd: super::pgtable::Slot,
        addr: u64,
        next: u64,
        pageout: bool,
        list: &mut Vec<FolioRef>,
    ) -> bool {
        let entry = self.pt.entry(pmd);
        if entry.is_special() {
            return false;
        }
        let key = self.folio_key(ctx.pa, entry.pfn());
        if self.folios[key].maybe_mapped_shared {
            return false;
        }
        if next - addr != self.pmd_size() {
            return self.split_anon_folio(ctx, key);
        }
        if !pageout && entry.has(Pte::YOUNG) {
            self.pt.set_slot(pmd, entry.without(Pte::YOUNG));
        }
        let _ = mm;
        self.cold_folio(ctx, FolioRef::Anon(key), pageout, list);
        false
    }

    /// The PTEs of `[start, end)` in one table.
    fn cold_ptes(
        &mut self,
        ctx: &mut Ctx,
        table: usize,
        start: u64,
        end: u64,
        pageout: bool,
        list: &mut Vec<FolioRef>,
    ) {
        let shift = self.page_shift();
        let first = self.pt.shape.index(0, start);
        let limit = first + ((end - start) >> shift) as usize;
        let mut i = first;
        while i < limit {
            let pte = self.pt.get(table, i);
            if !pte.present() || pte.is_special() {
                i += 1;
                continue;
            }
            let Some(key) = self.folio_key_of_pfn(ctx.pa, pte.pfn()) else {
                i += 1;
                continue;
            };
            let (folio_pfn, nr_pages) = (self.folios[key].pfn, self.folios[key].nr_pages());
            let mut nr = 1;
            if nr_pages > 1 {
                nr = self
                    .pt
                    .folio_pte_batch(table, i, limit, pte.pfn(), folio_pfn + nr_pages);
                if (nr as u64) < nr_pages {
                    if !self.folios[key].maybe_mapped_shared && self.split_anon_folio(ctx, key) {
                        continue;
                    }
                    i += nr;
                    continue;
                }
            }
            let alone = self.folio_mapcount(ctx.pa, key) as u64 == nr_pages;
            self.cold_mapped_folio(ctx, FolioRef::Anon(key), alone, (table, i, nr), pageout, list);
            i += nr;
        }
    }

    /// A folio wholly mapped by the `nr` PTEs of `table` from `first`:
    /// made cold (young bits cleared) or isolated, if it is on an LRU list
    /// and mapped by these PTEs `alone` (its mapcount its page count).
    pub(crate) fn cold_mapped_folio(
        &mut self,
        ctx: &mut Ctx,
        r: FolioRef,
        alone: bool,
        (table, first, nr): (usize, usize, usize),
        pageout: bool,
        list: &mut Vec<FolioRef>,
    ) {
        if self.lru_state(r).list.is_none() || !alone {
            return;
        }
        if !pageout {
            self.clear_young_ptes(table, first, nr);
        }
        self.cold_folio(ctx, r, pageout, list);
    }

    /// `ptep_test_and_clear_young` over `nr` PTEs of `table` from `first`:
    /// once one of them is young, each is rewritten old (the kernel
    /// clears and flushes each young one).
    pub(crate) fn clear_young_ptes(&mut self, table: usize, first: usize, nr: usize) {
        if (first..first + nr).any(|j| self.pt.get(table, j).has(Pte::YOUNG)) {
            for j in first..first + nr {
                let e = self.pt.get(table, j);
                self.pt.set(table, j, e.without(Pte::YOUNG));
            }
        }
    }

    /// One folio: `PG_referenced` cleared, `PG_workingset` set if it is
    /// active; then deactivated (COLD) or isolated for reclaim (PAGEOUT).
    pub(crate) fn cold_folio(&mut self, ctx: &mut Ctx, r: FolioRef, pageout: bool, list: &mut Vec<FolioRef>) {
        let s = self.lru_state_mut(r);
        s.referenced = false;
        if s.active {
            s.workingset = true;
        }
        if pageout {
            if self.lru_state(r).list.is_some() {
                self.lruvec_del(ctx.pa, r);
                self.folio_ref_get(ctx, r);
                list.push(r);
            }
        } else {
            self.folio_deactivate(ctx.pa, ctx.cpu, r);
        }
    }
}
