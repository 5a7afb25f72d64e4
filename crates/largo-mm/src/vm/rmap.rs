//! Reverse mapping and mapcounts (mm/rmap.c, include/linux/rmap.h, v6.15+
//! with CONFIG_MM_ID and per-page mapcounts).

use largo_types::Pfn;

use super::folio::{AnonFolio, MM_ID_DUMMY};
use super::pgtable::Slot;
use super::stats::MthpStat;
use super::types::{MmId, VmaId};
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::PageAlloc;

/// Where a folio is mapped: one entry per PTE range or PMD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub vma: VmaId,
    pub mm: MmId,
    /// Address of the folio's first mapped page in this range.
    pub addr: u64,
    /// The first PTE (level 0) or the PMD (level 1).
    pub slot: Slot,
    pub level: u32,
    /// Pages mapped by this range (PTEs), or the folio (PMD).
    pub nr: u64,
    /// Offset of the first mapped page in the folio.
    pub page_offset: u64,
}

impl Vm {
    /// `folio_add_new_anon_rmap(RMAP_EXCLUSIVE)`: a freshly faulted folio
    /// becomes anonymous, exclusively mapped by PTEs, or by one PMD when it
    /// is PMD-sized. Creates the folio's metadata; returns its key.
    pub(crate) fn add_new_anon_rmap(&mut self, ctx: &mut Ctx, folio: Folio, vma: VmaId, addr: u64, pmd: bool) -> usize {
        self.count_rmap(if pmd { 1 } else { folio.nr_pages() });
        self.work.folios_new += 1;
        let v = &self.vmas[vma];
        let anon_vma = v.anon_vma.expect("anon_vma_prepare ran");
        let index = v.page_index(addr, self.page_shift());
        let mm_id = self.mms[v.mm].mm_id;
        let mut meta = AnonFolio::new(folio.pfn.0, folio.order, anon_vma, index);
        let nr = folio.nr_pages() as i64;
        let nr_pmdmapped = if pmd {
            meta.entire_mapcount = 1;
            meta.large_mapcount = 1;
            meta.mm_id = [mm_id, MM_ID_DUMMY];
            meta.mm_id_mapcount = [1, 0];
            nr
        } else {
            if folio.order > 0 {
                meta.large_mapcount = nr as i32;
                meta.nr_pages_mapped = nr as i32;
                meta.mm_id = [mm_id, MM_ID_DUMMY];
                meta.mm_id_mapcount = [nr as i32, 0];
            }
            0
        };
        let key = self.folios.insert(meta);
        self.anon_vmas[anon_vma].nr_folios += 1;
        let memmap = &mut ctx.pa.memmap;
        let head = memmap.page_mut(folio.pfn.0);
        head.insert_flags(PageFlags::ANON | PageFlags::SWAPBACKED | PageFlags::LRU | PageFlags::ANON_EXCLUSIVE);
        head.set_private(key as u32 + 1);
        if !pmd {
            for p in folio.pfn.0..folio.end_pfn().0 {
                let page = memmap.page_mut(p);
                page.set_mapcount(1);
                page.insert_flags(PageFlags::ANON_EXCLUSIVE);
            }
        }
        let nid = self.node_of(ctx.pa, folio.pfn.0);
        let stat = &mut self.node_stat[nid];
        stat.anon_mapped += nr;
        stat.anon_thps += nr_pmdmapped;
        self.lru_add(ctx.pa, folio.pfn.0, false, nr);
        self.mthp.add(folio.order, MthpStat::NrAnon, 1);
        key
    }

    /// `folio_add_large_mapcount` / `folio_add_return_large_mapcount`.
    fn add_large_mapcount(meta: &mut AnonFolio, diff: i32, mm_id: u32) {
        let new = meta.large_mapcount + diff;
        meta.large_mapcount = new;
        if meta.mm_id[0] == mm_id {
            meta.mm_id_mapcount[0] += diff;
        } else if meta.mm_id[1] == mm_id {
            meta.mm_id_mapcount[1] += diff;
        } else if meta.mm_id[0] == MM_ID_DUMMY {
            meta.mm_id[0] = mm_id;
            meta.mm_id_mapcount[0] = diff;
            if new != diff {
                meta.maybe_mapped_shared = true;
            }
        } else if meta.mm_id[1] == MM_ID_DUMMY {
            meta.mm_id[1] = mm_id;
            meta.mm_id_mapcount[1] = diff;
            meta.maybe_mapped_shared = true;
        }
    }

    /// `folio_sub_large_mapcount` / `folio_sub_return_large_mapcount`.
    fn sub_large_mapcount(meta: &mut AnonFolio, diff: i32, mm_id: u32) {
        let new = meta.large_mapcount - diff;
        meta.large_mapcount = new;
        for slot in 0..2 {
            if meta.mm_id[slot] == mm_id {
                meta.mm_id_mapcount[slot] -= diff;
                if meta.mm_id_mapcount[slot] > 0 {
                    return;
                }
                meta.mm_id_mapcount[slot] = 0;
                meta.mm_id[slot] = MM_ID_DUMMY;
                break;
            }
        }
        // One slot owns every mapping: the folio is exclusive again.
        let owns_all = |s: usize| meta.mm_id[s] != MM_ID_DUMMY && meta.mm_id_mapcount[s] == new;
        if new == 0 || owns_all(0) || owns_all(1) {
            meta.maybe_mapped_shared = false;
        }
    }

    /// `folio_add_anon_rmap_ptes`: `nr` more PTEs map pages of an existing
    /// folio (a PMD split remapping it). Counts pages mapped for the first time.
    pub(crate) fn add_rmap_ptes(
        &mut self,
        pa: &mut PageAlloc,
        key: usize,
        first_pfn: u64,
        nr: u64,
        mm: MmId,
        exclusive: bool,
    ) {
        self.count_rmap(nr);
        let mm_id = self.mms[mm].mm_id;
        let meta = &mut self.folios[key];
        let mut first = 0;
        for p in first_pfn..first_pfn + nr {
            let page = pa.memmap.page_mut(p);
            let mc = page.mapcount();
            page.set_mapcount(mc + 1);
            if mc == 0 {
                first += 1;
            }
            if exclusive {
                page.insert_flags(PageFlags::ANON_EXCLUSIVE);
            }
        }
        if meta.order == 0 {
            if first > 0 {
                let nid = self.node_of(pa, first_pfn);
                self.node_stat[nid].anon_mapped += 1;
            }
            return;
        }
        Self::add_large_mapcount(meta, nr as i32, mm_id);
        let entirely = meta.entire_mapcount > 0;
        meta.nr_pages_mapped += first;
        if !entirely && first > 0 {
            let nid = self.node_of(pa, first_pfn);
            self.node_stat[nid].anon_mapped += first as i64;
        }
    }

    /// `folio_try_dup_anon_rmap_ptes` for fork: the child maps the same
    /// pages; they stop being exclusive. No counter changes.
    pub(crate) fn dup_rmap_ptes(&mut self, pa: &mut PageAlloc, key: usize, first_pfn: u64, nr: u64, child_mm: MmId) {
        self.count_rmap(nr);
        let mm_id = self.mms[child_mm].mm_id;
        for p in first_pfn..first_pfn + nr {
            let page = pa.memmap.page_mut(p);
            page.set_mapcount(page.mapcount() + 1);
            page.remove_flags(PageFlags::ANON_EXCLUSIVE);
        }
        let meta = &mut self.folios[key];
        if meta.order > 0 {
            Self::add_large_mapcount(meta, nr as i32, mm_id);
        }
    }

    /// `folio_try_dup_anon_rmap_pmd`.
    pub(crate) fn dup_rmap_pmd(&mut self, pa: &mut PageAlloc, key: usize, child_mm: MmId) {
        self.count_rmap(1);
        let mm_id = self.mms[child_mm].mm_id;
        let meta = &mut self.folios[key];
        meta.entire_mapcount += 1;
        Self::add_large_mapcount(meta, 1, mm_id);
        pa.memmap.page_mut(meta.pfn).remove_flags(PageFlags::ANON_EXCLUSIVE);
    }

    /// `folio_remove_rmap_ptes`: `nr` PTEs of `mm` no longer map pages
    /// from `first_pfn`. A large folio with some pages now unmapped while
    /// others stay mapped becomes partially mapped and is queued for
    /// deferred split.
    pub(crate) fn remove_rmap_ptes(&mut self, pa: &mut PageAlloc, key: usize, first_pfn: u64, nr: u64, mm: MmId) {
        self.count_rmap(nr);
        let mm_id = self.mms[mm].mm_id;
        let nid = self.node_of(pa, first_pfn);
        let meta = &mut self.folios[key];
        let mut last = 0;
        for p in first_pfn..first_pfn + nr {
            let page = pa.memmap.page_mut(p);
            let mc = page.mapcount() - 1;
            page.set_mapcount(mc);
            if mc == 0 {
                last += 1;
                page.remove_flags(PageFlags::ANON_EXCLUSIVE);
            }
        }
        if meta.order == 0 {
            self.node_stat[nid].anon_mapped -= last as i64;
            return;
        }
        Self::sub_large_mapcount(meta, nr as i32, mm_id);
        meta.nr_pages_mapped -= last;
        let unmapped = if meta.entire_mapcount > 0 { 0 } else { last };
        let partially_mapped = unmapped > 0 && meta.nr_pages_mapped > 0;
        self.node_stat[nid].anon_mapped -= unmapped as i64;
        if partially_mapped {
            self.deferred_split_folio(pa, key, true);
        }
    }

    /// `folio_remove_rmap_pmd`.
    pub(crate) fn remove_rmap_pmd(&mut self, pa: &mut PageAlloc, key: usize, mm: MmId) {
        self.count_rmap(1);
        let mm_id = self.mms[mm].mm_id;
        let nid = self.node_of(pa, self.folios[key].pfn);
        let meta = &mut self.folios[key];
        Self::sub_large_mapcount(meta, 1, mm_id);
        meta.entire_mapcount -= 1;
        if meta.entire_mapcount > 0 {
            return;
        }
        let nr_pmdmapped = meta.nr_pages() as i64;
        let nr = nr_pmdmapped - meta.nr_pages_mapped as i64;
        let partially_mapped = nr > 0 && nr < nr_pmdmapped;
        let stat = &mut self.node_stat[nid];
        stat.anon_mapped -= nr;
        stat.anon_thps -= nr_pmdmapped;
        if partially_mapped {
            self.deferred_split_folio(pa, key, true);
        }
    }

    /// `folio_ref_count`.
    #[inline]
    pub(crate) fn folio_refcount(&self, pa: &PageAlloc, key: usize) -> u32 {
        pa.memmap.page(self.folios[key].pfn).refcount()
    }

    /// One rmap call touching `pages` mapcounts (cost-model work).
    #[inline]
    fn count_rmap(&mut self, pages: u64) {
        self.work.rmap_calls += 1;
        self.work.rmap_pages += pages;
    }

    /// `folio_mapcount`: PTE mappings plus PMD mappings.
    pub(crate) fn folio_mapcount(&self, pa: &PageAlloc, key: usize) -> i32 {
        let meta = &self.folios[key];
        if meta.is_large() {
            meta.large_mapcount
        } else {
            pa.memmap.page(meta.pfn).mapcount()
        }
    }

    /// References beyond the mappings: a caller holds the folio.
    pub(crate) fn folio_has_extra_refs(&self, pa: &PageAlloc, key: usize) -> bool {
        self.folio_refcount(pa, key) as i32 != self.folio_mapcount(pa, key)
    }

    /// `folio_ref_add`.
    #[inline]
    pub(crate) fn folio_ref_add(&self, pa: &mut PageAlloc, key: usize, n: u32) {
        let page = pa.memmap.page_mut(self.folios[key].pfn);
        page.set_refcount(page.refcount() + n);
    }

    /// `folio_put_refs`: drops `n` references; the last frees the folio.
    pub(crate) fn folio_put_refs(&mut self, ctx: &mut Ctx, key: usize, n: u32) {
        let pfn = self.folios[key].pfn;
        let page = ctx.pa.memmap.page_mut(pfn);
        let rc = page.refcount() - n;
        page.set_refcount(rc);
        if rc == 0 {
            self.free_anon_folio(ctx, key);
        }
    }

    /// The end of an anon folio: off the deferred split queue, off the LRU,
    /// per-page state cleared, metadata released, pages freed.
    fn free_anon_folio(&mut self, ctx: &mut Ctx, key: usize) {
        let (pfn, order, anon_vma) = {
            let m = &self.folios[key];
            (m.pfn, m.order, m.anon_vma)
        };
        if self.folios[key].deferred.is_some() {
            self.deferred_remove(ctx.pa, key);
        }
        self.lru_del(ctx.pa, pfn, self.folios[key].lazyfree, 1 << order);
        self.mthp.add(order, MthpStat::NrAnon, -1);
        self.folios.remove(key);
        self.put_anon_vma_folio(anon_vma);
        free_user_folio(ctx, pfn, order);
    }

    /// Pages leave the LRU list they are on (lazyfree ones sit on the file LRU).
    pub(crate) fn lru_del(&mut self, pa: &PageAlloc, pfn: u64, lazyfree: bool, nr: i64) {
        self.lru_add(pa, pfn, lazyfree, -nr);
    }

    /// Pages join the LRU list of their zone (`lruvec_add_folio`).
    pub(crate) fn lru_add(&mut self, pa: &PageAlloc, pfn: u64, lazyfree: bool, nr: i64) {
        let zi = pa.page_zone_index(pfn).expect("anon folio in a zone");
        let stat = &mut self.zone_lru[zi];
        if lazyfree {
            stat.inactive_file += nr;
        } else {
            stat.inactive_anon += nr;
        }
    }

    /// A folio of `anon_vma` went away; free the anon_vma if nothing uses it.
    pub(crate) fn put_anon_vma_folio(&mut self, anon_vma: usize) {
        let av = &mut self.anon_vmas[anon_vma];
        av.nr_folios -= 1;
        if av.nr_folios == 0 && av.vmas.is_empty() {
            self.anon_vmas.remove(anon_vma);
        }
    }

    /// `rmap_walk_anon`: every PTE range and PMD mapping the folio, found
    /// through the VMAs on its anon_vma.
    pub(crate) fn rmap_walk(&self, key: usize) -> Vec<Mapping> {
        let meta = &self.folios[key];
        let shift = self.page_shift();
        let nr_pages = meta.nr_pages();
        let mut out = Vec::new();
        let Some(av) = self.anon_vmas.get(meta.anon_vma) else {
            return out;
        };
        for &vma_id in &av.vmas {
            let vma = &self.vmas[vma_id];
            let root = self.mms[vma.mm].pgd;
            let mut off = 0;
            while off < nr_pages {
                let Some(addr) = vma.address_of(meta.index + off, shift) else {
                    off += 1;
                    continue;
                };
                match self.pt.leaf(root, addr) {
                    Some((table, index, 1)) => {
                        let e = self.pt.get(table, index);
                        if e.pfn() == meta.pfn && !e.is_special() {
                            out.push(Mapping {
                                vma: vma_id,
                                mm: vma.mm,
                                addr: addr & !(self.pmd_size() - 1),
                                slot: Slot { table, index },
                                level: 1,
                                nr: nr_pages,
                                page_offset: 0,
                            });
                        }
                        off = nr_pages;
                    }
                    Some((table, index, 0)) => {
                        let mut n = 0;
                        let entries = self.pt.shape.entries_at(0);
                        while off + n < nr_pages && index + (n as usize) < entries {
                            let e = self.pt.get(table, index + n as usize);
                            let a = addr + (n << shift);
                            if !e.present() || e.is_special() || e.pfn() != meta.pfn + off + n || a >= vma.end {
                                break;
                            }
                            n += 1;
                        }
                        if n > 0 {
                            out.push(Mapping {
                                vma: vma_id,
                                mm: vma.mm,
                                addr,
                                slot: Slot { table, index },
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

/// The pages of a user folio whose last reference went: per-page state
/// cleared (the head keeps only PG_head), then freed to the allocator.
pub(crate) fn free_user_folio(ctx: &mut Ctx, pfn: u64, order: u32) {
    for p in pfn..pfn + (1 << order) {
        let page = ctx.pa.memmap.page_mut(p);
        if p == pfn {
            page.remove_flags(!PageFlags::HEAD);
            page.set_mapcount(0);
            page.set_private(0);
        } else {
            page.clear();
        }
    }
    ctx.pa.memmap.page_mut(pfn).set_refcount(1);
    ctx.pa
        .free_folio(ctx.cpu, Folio { pfn: Pfn(pfn), order })
        .unwrap_or_else(|e| unreachable!("user folio {pfn:#x} not freeable: {e}"));
}
