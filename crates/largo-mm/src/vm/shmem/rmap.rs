//! File rmap counts of shmem folios (mm/rmap.c v6.18
//! `folio_add_file_rmap_ptes/pmd`, `folio_remove_rmap_ptes/pmd` for a
//! non-anonymous folio: NR_FILE_MAPPED and NR_SHMEM_PMDMAPPED, no
//! deferred split) and unmapping shmem ranges (`zap_pte_range`,
//! `zap_huge_pmd`, and `__split_huge_pmd_locked`, which for a file PMD
//! only zaps it: the pages refault).

use super::super::pgtable::{Pte, Slot};
use super::super::types::{MmId, VmaId};
use super::super::{Ctx, Vm};
use crate::page_alloc::PageAlloc;
use crate::stats::VmEvent;

/// What a shmem mapping's young bit leaves on its folio when the mapping
/// goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShmemUnmap {
    /// `zap_present_folio_ptes` and `zap_huge_pmd` (munmap, exit,
    /// MADV_DONTNEED, a hole's `unmap_mapping_range`): a young entry marks
    /// the folio accessed (`folio_mark_accessed`; the model has no
    /// `VM_SEQ_READ`/`VM_RAND_READ`, so every VMA has recency).
    Zap,
    /// `__split_huge_pmd_locked` of a file PMD, which zaps it: a young PMD
    /// sets PG_referenced only.
    Split,
    /// `try_to_unmap_one` (reclaim, a split's `unmap_folio`): young bits
    /// are dropped.
    Unmap,
}

impl Vm {
    /// `folio_add_file_rmap_ptes`: pages mapped for the first time count
    /// in NR_FILE_MAPPED unless a PMD maps the folio already.
    pub(crate) fn add_file_rmap_ptes(&mut self, pa: &mut PageAlloc, key: usize, first_pfn: u64, nr: u64) {
        self.work.rmap_calls += 1;
        self.work.rmap_pages += nr;
        let mut first = 0;
        for p in first_pfn..first_pfn + nr {
            let page = pa.memmap.page_mut(p);
            let mc = page.mapcount();
            page.set_mapcount(mc + 1);
            first += i32::from(mc == 0);
        }
        let nid = self.node_of(pa, first_pfn);
        let f = &mut self.shmem.folios[key];
        f.nr_pages_mapped += first;
        if f.entire_mapcount == 0 {
            self.node_stat[nid].file_mapped += first as i64;
        }
    }

    /// `folio_remove_rmap_ptes` for a shmem folio.
    pub(crate) fn remove_file_rmap_ptes(&mut self, pa: &mut PageAlloc, key: usize, first_pfn: u64, nr: u64) {
        self.work.rmap_calls += 1;
        self.work.rmap_pages += nr;
        let mut last = 0;
        for p in first_pfn..first_pfn + nr {
            let page = pa.memmap.page_mut(p);
            let mc = page.mapcount() - 1;
            page.set_mapcount(mc);
            last += i32::from(mc == 0);
        }
        let nid = self.node_of(pa, first_pfn);
        let f = &mut self.shmem.folios[key];
        f.nr_pages_mapped -= last;
        if f.entire_mapcount == 0 {
            self.node_stat[nid].file_mapped -= last as i64;
        }
    }

    /// `folio_add_file_rmap_pmd`: the first PMD mapping counts the pages
    /// not already mapped by PTEs, and the folio in NR_SHMEM_PMDMAPPED.
    pub(crate) fn add_file_rmap_pmd(&mut self, pa: &mut PageAlloc, key: usize) {
        self.work.rmap_calls += 1;
        self.work.rmap_pages += 1;
        let nid = self.node_of(pa, self.shmem.folios[key].pfn);
        let f = &mut self.shmem.folios[key];
        f.entire_mapcount += 1;
        if f.entire_mapcount == 1 {
            let nr = f.nr_pages() as i64;
            let s = &mut self.node_stat[nid];
            s.file_mapped += nr - f.nr_pages_mapped as i64;
            s.shmem_pmdmapped += nr;
        }
    }

    /// `folio_remove_rmap_pmd` for a shmem folio.
    pub(crate) fn remove_file_rmap_pmd(&mut self, pa: &mut PageAlloc, key: usize) {
        self.work.rmap_calls += 1;
        self.work.rmap_pages += 1;
        let nid = self.node_of(pa, self.shmem.folios[key].pfn);
        let f = &mut self.shmem.folios[key];
        f.entire_mapcount -= 1;
        if f.entire_mapcount == 0 {
            let nr = f.nr_pages() as i64;
            let s = &mut self.node_stat[nid];
            s.file_mapped -= nr - f.nr_pages_mapped as i64;
            s.shmem_pmdmapped -= nr;
        }
    }

    /// Unmaps `[start, end)` of a shmem VMA: PMD mappings wholly inside go
    /// whole, those across an edge are split (zapped), PTEs a folio batch
    /// at a time. Page tables stay.
    pub(crate) fn zap_shmem_range(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64) {
        let mm = self.vmas[vma].mm;
        let mut addr = start;
        while addr < end {
            let next = self.pmd_addr_end(addr, end);
            if let Some(pmd) = self.pmd_slot(mm, addr) {
                let entry = self.pt.entry(pmd);
                if entry.present() && entry.is_huge() {
                    let how = if next - addr != self.pmd_size() {
                        ctx.pa.events.count(VmEvent::ThpSplitPmd, 1);
                        ShmemUnmap::Split
                    } else {
                        ShmemUnmap::Zap
                    };
                    self.zap_shmem_pmd(ctx, mm, pmd, how);
                } else if entry.is_table() {
                    self.zap_shmem_ptes(ctx, mm, entry.table_idx(), addr, next, ShmemUnmap::Zap);
                }
            }
            addr = next;
        }
    }

    /// `zap_huge_pmd` (`how` [`ShmemUnmap::Zap`]) or
    /// `__split_huge_pmd_locked` ([`ShmemUnmap::Split`]) of a shmem PMD.
    pub(crate) fn zap_shmem_pmd(&mut self, ctx: &mut Ctx, mm: MmId, pmd: Slot, how: ShmemUnmap) {
        let entry = self.pt.entry(pmd);
        self.pt.set_slot(pmd, Pte::NONE);
        let key = self
            .shmem_key_of_pfn(ctx.pa, entry.pfn())
            .expect("a shmem PMD maps a shmem folio");
        if entry.has(Pte::DIRTY) {
            self.shmem_mark_dirty(ctx.pa, key);
        }
        if entry.has(Pte::YOUNG) {
            self.shmem_unmapped_young(ctx, key, how);
        }
        self.remove_file_rmap_pmd(ctx.pa, key);
        self.mms[mm].rss_shmem -= 1 << self.pmd_order();
        self.shmem_folio_put_refs(ctx, key, 1);
    }

    /// The recency a young mapping leaves as it goes (see [`ShmemUnmap`]).
    fn shmem_unmapped_young(&mut self, ctx: &mut Ctx, key: usize, how: ShmemUnmap) {
        let r = super::super::lru::FolioRef::Shmem(key);
        match how {
            ShmemUnmap::Zap => self.folio_mark_accessed(ctx.pa, ctx.cpu, r),
            ShmemUnmap::Split => self.lru_state_mut(r).referenced = true,
            ShmemUnmap::Unmap => {}
        }
    }

    /// `zap_pte_range` (`how` [`ShmemUnmap::Zap`]) or `try_to_unmap_one`
    /// ([`ShmemUnmap::Unmap`]) of shmem pages within one PTE table, a
    /// folio's batch of entries at a time (its young and dirty bits ORed,
    /// as `get_and_clear_full_ptes` does).
    pub(crate) fn zap_shmem_ptes(
        &mut self,
        ctx: &mut Ctx,
        mm: MmId,
        table: usize,
        start: u64,
        end: u64,
        how: ShmemUnmap,
    ) {
        let first = self.pt.shape.index(0, start);
        let limit = first + ((end - start) >> self.page_shift()) as usize;
        let mut i = first;
        while i < limit {
            let pte = self.pt.get(table, i);
            if pte.is_none() {
                i += 1;
                continue;
            }
            let pfn = pte.pfn();
            let key = self
                .shmem_key_of_pfn(ctx.pa, pfn)
                .expect("a shmem PTE maps a shmem folio");
            let f = &self.shmem.folios[key];
            let nr = self.pt.folio_pte_batch(table, i, limit, pfn, f.pfn + f.nr_pages());
            // zap_present_folio_ptes (get_and_clear_full_ptes): the
            // batch's entries cleared, their bits ORed; a dirty one
            // dirties the folio, a young one leaves its recency.
            let mut bits = 0;
            for j in i..i + nr {
                bits |= self.pt.get(table, j).0;
                self.pt.set(table, j, Pte::NONE);
            }
            if bits & Pte::DIRTY != 0 {
                self.shmem_mark_dirty(ctx.pa, key);
            }
            if bits & Pte::YOUNG != 0 {
                self.shmem_unmapped_young(ctx, key, how);
            }
            self.remove_file_rmap_ptes(ctx.pa, key, pfn, nr as u64);
            self.mms[mm].rss_shmem -= nr as u64;
            self.shmem_folio_put_refs(ctx, key, nr as u32);
            i += nr;
        }
    }
}

impl Vm {
    /// `rmap_walk_file` for a shmem folio: its PMD mapping or the PTE
    /// ranges mapping its pages in every VMA of its inode.
    pub(crate) fn shmem_rmap_walk(&self, key: usize) -> super::super::rmap::Mappings {
        let f = &self.shmem.folios[key];
        let (inode, index, nr_pages, pfn) = (f.inode, f.index, f.nr_pages(), f.pfn);
        let shift = self.page_shift();
        let mut out = super::super::rmap::Mappings::new();
        for (vma_id, vma) in self.vmas.iter().filter(|(_, v)| v.shmem == Some(inode)) {
            // Only the folio's pages inside this VMA are looked up.
            let Some((mut off, end_off)) = vma.index_range(index, nr_pages, shift) else {
                continue;
            };
            let root = self.mms[vma.mm].pgd;
            while off < end_off {
                let Some(addr) = vma.address_of(index + off, shift) else {
                    off += 1;
                    continue;
                };
                match self.pt.leaf(root, addr) {
                    Some((table, idx, 1)) => {
                        let e = self.pt.get(table, idx);
                        if e.present() && e.pfn() == pfn {
                            out.push(super::super::rmap::Mapping {
                                vma: vma_id,
                                mm: vma.mm,
                                addr: addr & !(self.pmd_size() - 1),
                                slot: Slot { table, index: idx },
                                level: 1,
                                nr: nr_pages,
                                page_offset: 0,
                            });
                        }
                        off = nr_pages;
                    }
                    Some((table, idx, 0)) => {
                        let entries = self.pt.shape.entries_at(0);
                        let mut n = 0;
                        while off + n < nr_pages && idx + (n as usize) < entries {
                            let e = self.pt.get(table, idx + n as usize);
                            if !e.present() || e.pfn() != pfn + off + n || addr + (n << shift) >= vma.end {
                                break;
                            }
                            n += 1;
                        }
                        if n > 0 {
                            out.push(super::super::rmap::Mapping {
                                vma: vma_id,
                                mm: vma.mm,
                                addr,
                                slot: Slot { table, index: idx },
                                level: 0,
                                nr: n,
                                page_offset: off,
                            });
                            off += n;
                        } else {
                            off += 1;
                        }
                    }
                    _ => off += 1,
                }
            }
        }
        out
    }
}
