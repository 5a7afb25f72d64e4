//! `try_to_unmap` for reclaim (mm/rmap.c `try_to_unmap_one`, v6.18): a
//! swap-cache anonymous folio's PTEs become swap entries one by one; a
//! PMD mapping is split first (`TTU_SPLIT_HUGE_PMD`); a clean lazyfree
//! folio's mappings are discarded, and a re-dirtied one becomes
//! swap-backed again and stays mapped.

use super::super::pgtable::Pte;
use super::super::{Ctx, Vm};
use crate::memmap::PageFlags;

impl Vm {
    /// Unmaps an anonymous folio for reclaim; returns whether nothing maps
    /// it any more.
    pub(crate) fn try_to_unmap(&mut self, ctx: &mut Ctx, key: usize) -> bool {
        if !self.folios[key].is_anon() {
            return true;
        }
        // Only a PMD mapping is split first, and only a PMD-mapped folio
        // has one: the others skip that walk.
        if self.folios[key].entire_mapcount > 0 {
            for m in self.rmap_walk(key) {
                if m.level == 1 {
                    self.split_huge_pmd(ctx, m.mm, m.slot);
                }
            }
        }
        if self.folios[key].lazyfree {
            return self.unmap_lazyfree(ctx, key);
        }
        let entry = self.folios[key]
            .swap
            .expect("reclaim unmaps only swap-cache folios here");
        let folio_pfn = self.folios[key].pfn;
        for m in self.rmap_walk(key) {
            for i in 0..m.nr {
                let idx = m.slot.index + i as usize;
                let e = self.pt.get(m.slot.table, idx);
                let page = folio_pfn + m.page_offset + i;
                if e.has(Pte::DIRTY) {
                    ctx.pa.memmap.page_mut(folio_pfn).insert_flags(PageFlags::DIRTY);
                }
                let slot = entry.plus(m.page_offset + i);
                self.swap.dup_for_unmap(slot);
                let exclusive = ctx.pa.memmap.page(page).flags().contains(PageFlags::ANON_EXCLUSIVE);
                self.pt.set(m.slot.table, idx, Pte::swap(slot, exclusive));
                let mm = &mut self.mms[m.mm];
                mm.rss_anon -= 1;
                mm.swap_ents += 1;
                self.remove_rmap_ptes(ctx.pa, key, page, 1, m.mm);
                self.folio_put_refs(ctx, key, 1);
            }
        }
        self.folio_mapcount(ctx.pa, key) == 0
    }

    /// A lazyfree folio: discarded where every PTE is clean; a dirty PTE
    /// (written since MADV_FREE) makes it swap-backed again and nothing
    /// is unmapped; a reference beyond the mappings and reclaim's own (a
    /// fault copying it, a pin, another cpu's batch entry) leaves it
    /// mapped for now (`try_to_unmap_one`: `ref_count != 1 + map_count`).
    fn unmap_lazyfree(&mut self, ctx: &mut Ctx, key: usize) -> bool {
        let mappings = self.rmap_walk(key);
        let dirty = mappings
            .iter()
            .any(|m| (0..m.nr as usize).any(|j| self.pt.get(m.slot.table, m.slot.index + j).has(Pte::DIRTY)));
        if dirty {
            self.folio_set_swapbacked(ctx, key);
            return false;
        }
        if self.folio_refcount(ctx.pa, key) as u64 != 1 + self.folio_mapcount(ctx.pa, key) as u64
            || self.folios[key].lru.held_by_batch()
        {
            return false;
        }
        let pfn = self.folios[key].pfn;
        for m in mappings {
            for j in 0..m.nr as usize {
                self.pt.set(m.slot.table, m.slot.index + j, Pte::NONE);
            }
            self.mms[m.mm].rss_anon -= m.nr;
            self.remove_rmap_ptes(ctx.pa, key, pfn + m.page_offset, m.nr, m.mm);
            self.folio_put_refs(ctx, key, m.nr as u32);
        }
        true
    }

    /// `folio_set_swapbacked` of a lazyfree folio that was written again:
    /// anonymous memory once more (it belongs on the anon lists).
    pub(crate) fn folio_set_swapbacked(&mut self, ctx: &mut Ctx, key: usize) {
        let pfn = self.folios[key].pfn;
        let r = super::super::lru::FolioRef::Anon(key);
        let on = self.lru_state(r).list.is_some();
        if on {
            self.lruvec_del(ctx.pa, r);
        }
        self.folios[key].lazyfree = false;
        ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::SWAPBACKED);
        if on {
            self.lruvec_add(ctx.pa, r, false);
        }
    }
}
