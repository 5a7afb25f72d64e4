//! MADV_COLD and MADV_PAGEOUT over a shmem VMA (mm/madvise.c
//! `madvise_cold_or_pageout_pte_range`, v6.18, for page-cache folios;
//! `can_do_file_pageout` holds for the owner of a memfd or shared
//! anonymous mapping): a folio mapped only by this range is deactivated
//! (COLD, its young bits cleared) or isolated for reclaim (PAGEOUT); a
//! large folio the range covers in part is split to order 0 first unless
//! it may be mapped by another process (`split_folio`, which unmaps it:
//! the pages fault back in).

use super::super::lru::FolioRef;
use super::super::pgtable::{Pte, Slot};
use super::super::{Ctx, Vm};

impl Vm {
    /// `folio_maybe_mapped_shared` for a shmem folio: a small one mapped
    /// more than once, a large one mapped by more than one process.
    fn shmem_maybe_mapped_shared(&self, ctx: &Ctx, key: usize) -> bool {
        let f = &self.shmem.folios[key];
        if f.order == 0 {
            return ctx.pa.memmap.page(f.pfn).mapcount() > 1;
        }
        let mut mms = self.shmem_rmap_walk(key).into_iter().map(|m| m.mm);
        let first = mms.next();
        mms.any(|mm| Some(mm) != first)
    }

    /// `folio_mapcount` of a shmem folio.
    fn shmem_mapcount(&self, ctx: &Ctx, key: usize) -> u64 {
        let f = &self.shmem.folios[key];
        self.shmem_pte_mapcount(ctx, key) + f.entire_mapcount as u64 * f.nr_pages()
    }

    /// The shmem PMD mapping at `pmd` for `[addr, next)`: split when the
    /// range covers it in part (nothing is left mapped to walk), else the
    /// whole folio made cold or isolated into `list`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn shmem_cold_pmd(
        &mut self,
        ctx: &mut Ctx,
        pmd: Slot,
        addr: u64,
        next: u64,
        pageout: bool,
        list: &mut Vec<FolioRef>,
    ) {
        let entry = self.pt.entry(pmd);
        let Some(key) = self.shmem_key_of_pfn(ctx.pa, entry.pfn()) else {
            return;
        };
        if self.shmem_maybe_mapped_shared(ctx, key) {
            return;
        }
        if next - addr != self.pmd_size() {
            // Uniform: its nodes are charged to no memcg (any task's will do).
            let _ = self.shmem_split_folio(ctx, key, None, 0);
            return;
        }
        if !pageout && entry.has(Pte::YOUNG) {
            self.pt.set_slot(pmd, entry.without(Pte::YOUNG));
        }
        self.cold_folio(ctx, FolioRef::Shmem(key), pageout, list);
    }

    /// The shmem PTEs of `[start, end)` in one table.
    pub(crate) fn shmem_cold_ptes(
        &mut self,
        ctx: &mut Ctx,
        table: usize,
        start: u64,
        end: u64,
        pageout: bool,
        list: &mut Vec<FolioRef>,
    ) {
        let first = self.pt.shape.index(0, start);
        let limit = first + ((end - start) >> self.page_shift()) as usize;
        let mut i = first;
        while i < limit {
            let pte = self.pt.get(table, i);
            let key = pte
                .present()
                .then(|| self.shmem_key_of_pfn(ctx.pa, pte.pfn()))
                .flatten();
            let Some(key) = key else {
                i += 1;
                continue;
            };
            let (pfn, nr_pages) = (self.shmem.folios[key].pfn, self.shmem.folios[key].nr_pages());
            let nr = self.pt.folio_pte_batch(table, i, limit, pte.pfn(), pfn + nr_pages);
            if (nr as u64) < nr_pages {
                // Split, the entries are none now: look at them again.
                if self.shmem_maybe_mapped_shared(ctx, key) || self.shmem_split_folio(ctx, key, None, 0).is_none() {
                    i += nr;
                }
                continue;
            }
            let alone = self.shmem_mapcount(ctx, key) == nr_pages;
            self.cold_mapped_folio(ctx, FolioRef::Shmem(key), alone, (table, i, nr), pageout, list);
            i += nr;
        }
    }
}
