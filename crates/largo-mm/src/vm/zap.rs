//! Unmapping (mm/memory.c `zap_page_range_single`, `zap_pte_range`,
//! `zap_present_ptes`, `free_pgtables`).

use super::pgtable::Pte;
use super::types::{MmId, VmaId};
use super::{Ctx, Vm};

impl Vm {
    /// Unmaps `[start, end)` of one VMA: PTEs are cleared a folio batch at
    /// a time (`folio_pte_batch`), PMD mappings zapped whole or split
    /// first when the range covers only part of them. Page tables stay.
    pub(crate) fn zap_range(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64) {
        if self.is_shmem_vma(vma) {
            return self.zap_shmem_range(ctx, vma, start, end);
        }
        let mm = self.vmas[vma].mm;
        let mut addr = start;
        while addr < end {
            let next = self.pmd_addr_end(addr, end);
            if let Some(pmd) = self.pmd_slot(mm, addr) {
                let entry = self.pt.entry(pmd);
                if entry.present() && entry.is_huge() {
                    if next - addr == self.pmd_size() {
                        self.zap_huge_pmd(ctx, mm, pmd);
                    } else {
                        self.split_huge_pmd(ctx, mm, pmd);
                        self.zap_ptes(ctx, mm, self.pt.entry(pmd).table_idx(), addr, next);
                    }
                } else if entry.is_table() {
                    self.zap_ptes(ctx, mm, entry.table_idx(), addr, next);
                }
            }
            addr = next;
        }
    }

    /// `zap_pte_range` within one PTE table.
    fn zap_ptes(&mut self, ctx: &mut Ctx, mm: MmId, table: usize, start: u64, end: u64) {
        let shift = self.page_shift();
        let first = self.pt.shape.index(0, start);
        let count = ((end - start) >> shift) as usize;
        let mut i = first;
        while i < first + count {
            let pte = self.pt.get(table, i);
            if pte.is_none() {
                i += 1;
                continue;
            }
            if pte.is_special() {
                self.pt.set(table, i, Pte::NONE);
                i += 1;
                continue;
            }
            if pte.is_swap() {
                let nr = self.swap_pte_batch(table, i, first + count, pte);
                self.pt.clear_ptes(table, i, nr);
                self.mms[mm].swap_ents -= nr as u64;
                self.free_swap_and_cache_nr(ctx, pte.swap_entry(), nr as u64);
                i += nr;
                continue;
            }
            let run = self.zap_order0_run(ctx, mm, table, i, first + count);
            if run > 0 {
                i += run;
                continue;
            }
            let (key, pfn, nr) = self.mapped_folio_batch(ctx, table, i, first + count);
            self.pt.clear_ptes(table, i, nr);
            self.mms[mm].rss_anon -= nr as u64;
            self.remove_rmap_ptes(ctx.pa, key, pfn, nr as u64, mm);
            let cached = self.folios[key].swap.is_some();
            self.folio_put_refs(ctx, key, nr as u32);
            if cached && self.folios.contains(key) {
                // free_pages_and_swap_cache: an unmapped swap-cache folio
                // gives its slots up.
                self.free_swap_cache(ctx, key);
                if self.folio_refcount(ctx.pa, key) == 0 {
                    self.free_anon_folio(ctx, key);
                }
            }
            i += nr;
        }
    }

    /// MADV_DONTNEED's page-table reclaim (`CONFIG_PT_RECLAIM`,
    /// mm/pt_reclaim.c): a PTE table whose whole PMD range the zap
    /// covered is freed once empty (`reclaim_pt_is_enabled`: the range
    /// within that PMD spans it all; `free_pte`).
    pub(crate) fn reclaim_empty_pte_tables(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64) {
        let mm = self.vmas[vma].mm;
        let pmd_size = self.pmd_size();
        let mut addr = start.next_multiple_of(pmd_size);
        while addr + pmd_size <= end {
            if let Some(pmd) = self.pmd_slot(mm, addr) {
                let entry = self.pt.entry(pmd);
                if entry.is_table() && !entry.is_huge() && self.pt.pages[entry.table_idx()].nr_used == 0 {
                    self.pt.set(pmd.table, pmd.index, Pte::NONE);
                    self.free_table_rcu(ctx, mm, entry.table_idx());
                }
            }
            addr += pmd_size;
        }
    }

    /// `free_pgtables` after unmapping `[start, end)`: frees every table
    /// whose whole range lies in `[floor, ceiling)`, the span no remaining
    /// VMA reaches into. `ceiling == 0` means the top of the address space.
    pub(crate) fn free_pgtables(&mut self, ctx: &mut Ctx, mm: MmId, start: u64, end: u64, floor: u64, ceiling: u64) {
        let top = self.pt.shape.levels - 1;
        let root = self.mms[mm].pgd;
        self.free_tables_below(ctx, mm, root, top, 0, start, end, floor, ceiling);
    }

    /// Recursive part of [`Self::free_pgtables`]: returns whether `table`
    /// (covering `[base, base + span)`) is now empty and freeable.
    #[allow(clippy::too_many_arguments)]
    fn free_tables_below(
        &mut self,
        ctx: &mut Ctx,
        mm: MmId,
        table: usize,
        level: u32,
        base: u64,
        start: u64,
        end: u64,
        floor: u64,
        ceiling: u64,
    ) {
        let entry_span = 1u64 << self.pt.shape.level_shift(level);
        let n = self.pt.shape.entries_at(level);
        let first = if start > base {
            ((start - base) / entry_span) as usize
        } else {
            0
        };
        // The entries in use not seen yet, at most: once none is left,
        // the rest of the table is empty (the kernel's walk skips none
        // entries one by one; stopping early changes nothing).
        let mut unseen = self.pt.pages[table].nr_used;
        for i in first..n {
            let lo = base + i as u64 * entry_span;
            if lo >= end || unseen == 0 {
                break;
            }
            let e = self.pt.get(table, i);
            if e.is_none() {
                continue;
            }
            unseen -= 1;
            if !e.is_table() {
                continue;
            }
            let child = e.table_idx();
            if level > 1 {
                self.free_tables_below(ctx, mm, child, level - 1, lo, start, end, floor, ceiling);
            }
            let hi = lo + entry_span;
            let inside = lo >= floor && (ceiling == 0 || hi <= ceiling);
            if inside && self.pt.pages[child].nr_used == 0 {
                self.pt.set(table, i, Pte::NONE);
                self.free_table_rcu(ctx, mm, child);
            }
        }
    }

    /// `swap_pte_batch`: how many entries from `i` (before `limit`) are
    /// swap entries continuing `pte`'s: same device, consecutive slots,
    /// the same exclusive bit.
    pub(crate) fn swap_pte_batch(&self, table: usize, i: usize, limit: usize, pte: Pte) -> usize {
        let entry = pte.swap_entry();
        let mut n = 1;
        while i + n < limit {
            let e = self.pt.get(table, i + n);
            if !e.is_swap() || e.swap_entry() != entry.plus(n as u64) || e.swp_exclusive() != pte.swp_exclusive() {
                break;
            }
            n += 1;
        }
        n
    }

    /// The anonymous folio the present entry `i` of `table` maps, that
    /// entry's pfn, and how many entries from `i` (below `limit`) map
    /// consecutive pages of it (`folio_pte_batch`).
    pub(super) fn mapped_folio_batch(&self, ctx: &Ctx, table: usize, i: usize, limit: usize) -> (usize, u64, usize) {
        let pfn = self.pt.get(table, i).pfn();
        let key = self.folio_key_of_pfn(ctx.pa, pfn).expect("mapped anonymous page");
        let folio_end = self.folios[key].pfn + self.folios[key].nr_pages();
        (key, pfn, self.pt.folio_pte_batch(table, i, limit, pfn, folio_end))
    }
}
