//! Reverse mapping and mapcounts (mm/rmap.c, include/linux/rmap.h, v6.15+
//! with CONFIG_MM_ID and per-page mapcounts).

use largo_types::Pfn;

use super::folio::{AnonFolio, MM_ID_DUMMY};
use super::lru::FolioRef;
use super::pgtable::Slot;
use super::stats::MthpStat;
use super::types::{AnonVmaId, MmId, VmaId};
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::PageAlloc;

/// What a new anonymous folio starts with (`rmap_flags`, the LRU flags a
/// refault sets, the memcg charged).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewAnon {
    pub exclusive: bool,
    pub active: bool,
    pub workingset: bool,
    pub memcg: usize,
}

/// What [`Vm::add_new_anon_rmap_order0_uncounted`] writes into the page's
/// record besides the rmap's own: its first reference, more flags.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NewPage {
    pub first_ref: bool,
    pub flags: PageFlags,
}

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

/// The mappings an rmap walk finds: almost always one (an exclusive
/// folio), held inline so that the walk, made for every folio reclaim
/// looks at, allocates nothing.
pub(crate) type Mappings = smallvec::SmallVec<[Mapping; 2]>;

impl Vm {
    /// `folio_add_new_anon_rmap(RMAP_EXCLUSIVE)` then `folio_add_lru_vma`:
    /// a freshly faulted folio becomes anonymous, exclusively mapped by
    /// PTEs, or by one PMD when it is PMD-sized, charged to its mm's memcg.
    /// Creates the folio's metadata; returns its key.
    pub(crate) fn add_new_anon_rmap(&mut self, ctx: &mut Ctx, folio: Folio, vma: VmaId, addr: u64, pmd: bool) -> usize {
        let memcg = self.mm_memcg(self.vmas[vma].mm);
        let new = NewAnon {
            exclusive: true,
            active: false,
            workingset: false,
            memcg,
        };
        self.add_new_anon_rmap_with(ctx, folio, vma, addr, pmd, new)
    }

    /// `folio_add_new_anon_rmap` with the flags a swap-in gives: exclusive
    /// or not, active and workingset from a refault; the folio joins the
    /// LRU through the cpu's batch.
    pub(crate) fn add_new_anon_rmap_with(
        &mut self,
        ctx: &mut Ctx,
        folio: Folio,
        vma: VmaId,
        addr: u64,
        pmd: bool,
        new: NewAnon,
    ) -> usize {
        if folio.order == 0 {
            // The head is the folio (and `pmd` needs a PMD-sized one).
            debug_assert!(!pmd, "an order-0 folio mapped by a PMD");
            return self.add_new_anon_rmap_order0(ctx, folio.pfn.0, vma, addr, new);
        }
        self.count_rmap(if pmd { 1 } else { folio.nr_pages() });
        self.work.folios_new += 1;
        let v = &self.vmas[vma];
        let anon_vma = v.anon_vma.expect("anon_vma_prepare ran");
        let index = v.page_index(addr, self.page_shift());
        let mm = v.mm;
        let mut meta = AnonFolio::new(folio.pfn.0, folio.order, anon_vma, index);
        meta.memcg = new.memcg as u16;
        meta.lru.active = new.active;
        meta.lru.workingset = new.workingset;
        let nr = folio.nr_pages() as i64;
        let nr_pmdmapped = if pmd {
            meta.entire_mapcount = 1;
            meta.large_mapcount = 1;
            meta.mm_id = [self.mms[mm].mm_id, MM_ID_DUMMY];
            meta.mm_id_mapcount = [1, 0];
            nr
        } else {
            meta.large_mapcount = nr as i32;
            meta.nr_pages_mapped = nr as i32;
            meta.mm_id = [self.mms[mm].mm_id, MM_ID_DUMMY];
            meta.mm_id_mapcount = [nr as i32, 0];
            0
        };
        let key = self.folios.insert(meta);
        self.anon_vmas[anon_vma].nr_folios += 1;
        let excl = anon_exclusive_flag(new.exclusive);
        let memmap = &mut ctx.pa.memmap;
        let head = memmap.page_mut(folio.pfn.0);
        head.insert_flags(PageFlags::ANON | PageFlags::SWAPBACKED | excl);
        head.set_private(key as u32 + 1);
        if !pmd {
            memmap
                .pages
                .for_each_mut(folio.pfn.0 as usize, folio.end_pfn().0 as usize, |page| {
                    page.set_mapcount(1);
                    page.insert_flags(excl);
                });
        }
        let nid = self.node_of(ctx.pa, folio.pfn.0);
        let stat = &mut self.node_stat[nid];
        stat.anon_mapped += nr;
        stat.anon_thps += nr_pmdmapped;
        self.folio_add_lru(ctx.pa, ctx.cpu, FolioRef::Anon(key));
        self.mthp.add(folio.order, MthpStat::NrAnon, 1);
        key
    }

    /// [`Vm::add_new_anon_rmap_with`] of an order-0 folio at `pfn`, mapped
    /// by the PTE of `addr`: the case of most faults, and of every fault
    /// of a fault run. Its record is made already batched, as
    /// `folio_add_lru` always batches an order-0 folio, and goes to the
    /// cpu's `lru_add` batch without being looked up again. An order-0
    /// folio has no per-size statistics and no large mapcounts.
    #[inline]
    pub(crate) fn add_new_anon_rmap_order0(
        &mut self,
        ctx: &mut Ctx,
        pfn: u64,
        vma: VmaId,
        addr: u64,
        new: NewAnon,
    ) -> usize {
        let anon_vma = self.vmas[vma].anon_vma.expect("anon_vma_prepare ran");
        self.count_rmap(1);
        self.work.folios_new += 1;
        self.anon_vmas[anon_vma].nr_folios += 1;
        let nid = self.node_of(ctx.pa, pfn);
        self.node_stat[nid].anon_mapped += 1;
        let index = self.vmas[vma].page_index(addr, self.page_shift());
        self.add_new_anon_rmap_order0_uncounted(ctx, pfn, anon_vma, index, new, NewPage::default())
    }

    /// [`Vm::add_new_anon_rmap_order0`] without its counts (the rmap
    /// call, the new folio, the anon_vma's folios and the node's
    /// `anon_mapped`), which a run of faults makes for its folios
    /// together. `anon_vma` is the VMA's, `index` the page's offset in it
    /// (`linear_page_index` of the fault's address).
    /// `page` is what the caller's record write would add to it (a fault
    /// run's reference and store), made in the same write.
    #[inline(always)]
    pub(crate) fn add_new_anon_rmap_order0_uncounted(
        &mut self,
        ctx: &mut Ctx,
        pfn: u64,
        anon_vma: AnonVmaId,
        index: u64,
        new: NewAnon,
        page: NewPage,
    ) -> usize {
        let mut meta = AnonFolio::new(pfn, 0, anon_vma, index);
        meta.memcg = new.memcg as u16;
        meta.lru.active = new.active;
        meta.lru.workingset = new.workingset;
        meta.lru.batched = true;
        let key = self.folios.insert(meta);
        let head = ctx.pa.memmap.page_mut(pfn);
        if page.first_ref {
            head.set_refcount(1);
        }
        head.insert_flags(PageFlags::ANON | PageFlags::SWAPBACKED | anon_exclusive_flag(new.exclusive) | page.flags);
        head.set_private(key as u32 + 1);
        head.set_mapcount(1);
        self.lru_batch_push(ctx.pa, ctx.cpu, FolioRef::Anon(key), false);
        key
    }

    /// `folio_add_new_anon_rmap` of an order-0 folio readahead left in the
    /// swap cache: it becomes anonymous as a fault maps it at `addr`.
    pub(crate) fn adopt_anon_folio(&mut self, ctx: &mut Ctx, key: usize, vma: VmaId, addr: u64, exclusive: bool) {
        self.count_rmap(1);
        self.work.folios_new += 1;
        let v = &self.vmas[vma];
        // __folio_set_anon: a folio that may not be exclusive takes the
        // family's oldest anon_vma, which every VMA of it is chained to.
        let anon_vma = if exclusive {
            v.anon_vma.expect("anon_vma_prepare ran")
        } else {
            v.chain[0]
        };
        let index = v.page_index(addr, self.page_shift());
        let meta = &mut self.folios[key];
        debug_assert_eq!(meta.order, 0, "readahead folios are order 0");
        meta.anon_vma = anon_vma;
        meta.index = index;
        self.anon_vmas[anon_vma].nr_folios += 1;
        let pfn = meta.pfn;
        let page = ctx.pa.memmap.page_mut(pfn);
        page.insert_flags(PageFlags::ANON);
        page.set_mapcount(1);
        if exclusive {
            page.insert_flags(PageFlags::ANON_EXCLUSIVE);
        }
        let nid = self.node_of(ctx.pa, pfn);
        self.node_stat[nid].anon_mapped += 1;
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
        pa.memmap
            .pages
            .for_each_mut(first_pfn as usize, (first_pfn + nr) as usize, |page| {
                let mc = page.mapcount() - 1;
                page.set_mapcount(mc);
                if mc == 0 {
                    last += 1;
                    page.remove_flags(PageFlags::ANON_EXCLUSIVE);
                }
            });
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
    pub(super) fn count_rmap(&mut self, pages: u64) {
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

    /// `folio_expected_ref_count`: one reference per mapping and, in the
    /// swap cache, one per page.
    pub(crate) fn folio_expected_refs(&self, pa: &PageAlloc, key: usize) -> u32 {
        let swapcache = if self.folios[key].swap.is_some() {
            self.folios[key].nr_pages() as u32
        } else {
            0
        };
        self.folio_mapcount(pa, key) as u32 + swapcache
    }

    /// References beyond the mappings and the swap cache: a caller holds
    /// the folio.
    pub(crate) fn folio_has_extra_refs(&self, pa: &PageAlloc, key: usize) -> bool {
        self.folio_refcount(pa, key) != self.folio_expected_refs(pa, key)
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

    /// The end of an anon folio: off the deferred split queue, off the LRU
    /// (or its batch), uncharged, per-page state cleared, metadata
    /// released, pages freed.
    pub(crate) fn free_anon_folio(&mut self, ctx: &mut Ctx, key: usize) {
        let (pfn, order, anon_vma, memcg) = {
            let m = &self.folios[key];
            (m.pfn, m.order, m.anon_vma, m.memcg as usize)
        };
        debug_assert!(self.folios[key].swap.is_none(), "freeing a swap-cache folio");
        if self.folios[key].deferred.is_some() {
            self.deferred_remove(ctx.pa, key);
        }
        if anon_vma != super::folio::NO_ANON_VMA {
            self.put_anon_vma_folio(anon_vma);
            self.folios[key].anon_vma = super::folio::NO_ANON_VMA;
        }
        if self.lru_state(FolioRef::Anon(key)).held_by_batch() {
            return self.release_to_batch(ctx.pa, FolioRef::Anon(key));
        }
        self.lru_forget(ctx.pa, FolioRef::Anon(key));
        self.mem_cgroup_uncharge(ctx, memcg, 1 << order);
        if !self.folios[key].from_shmem {
            self.mthp.add(order, MthpStat::NrAnon, -1);
        }
        self.folios.remove(key);
        free_user_folio(ctx, pfn, order);
    }

    /// A reference on a folio the LRU holds (reclaim's isolation).
    pub(crate) fn folio_ref_get(&mut self, ctx: &mut Ctx, r: FolioRef) {
        let (pfn, _) = self.folio_pfn_order(r);
        let page = ctx.pa.memmap.page_mut(pfn);
        page.set_refcount(page.refcount() + 1);
    }

    /// Drops one reference; returns whether it was the last (the folio is
    /// freed).
    pub(crate) fn folio_ref_put(&mut self, ctx: &mut Ctx, r: FolioRef) -> bool {
        let (pfn, _) = self.folio_pfn_order(r);
        let last = ctx.pa.memmap.page(pfn).refcount() == 1;
        match r {
            FolioRef::Anon(k) => self.folio_put_refs(ctx, k, 1),
            FolioRef::Shmem(k) => self.shmem_folio_put_refs(ctx, k, 1),
        }
        last
    }

    /// A folio of `anon_vma` went away; free the anon_vma if nothing uses it.
    pub(crate) fn put_anon_vma_folio(&mut self, anon_vma: usize) {
        let freed = self.anon_vma_freed_by_put(anon_vma);
        self.anon_vmas[anon_vma].nr_folios -= 1;
        if freed {
            self.free_anon_vma(anon_vma);
        }
    }

    /// Whether [`Vm::put_anon_vma_folio`] frees the anon_vma: it loses
    /// its last folio and no VMA links it.
    #[inline]
    pub(crate) fn anon_vma_freed_by_put(&self, anon_vma: usize) -> bool {
        self.anon_vmas[anon_vma].puts_it_outlives() == 0
    }

    /// `rmap_walk_anon`: every PTE range and PMD mapping the folio, found
    /// through the VMAs on its anon_vma.
    pub(crate) fn rmap_walk(&self, key: usize) -> Mappings {
        let meta = &self.folios[key];
        let shift = self.page_shift();
        let nr_pages = meta.nr_pages();
        let mut out = Mappings::new();
        let Some(av) = self.anon_vmas.get(meta.anon_vma) else {
            return out;
        };
        for pos in self.anon_vma_positions(av, meta.index, nr_pages) {
            let vma_id = av.vmas[pos as usize];
            let vma = &self.vmas[vma_id];
            // Only the folio's pages inside this VMA are looked up.
            let Some((mut off, end_off)) = vma.index_range(meta.index, nr_pages, shift) else {
                continue;
            };
            let root = self.mms[vma.mm].pgd;
            while off < end_off {
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
    let head = ctx.pa.memmap.page_mut(pfn);
    head.remove_flags(!PageFlags::HEAD);
    head.set_mapcount(0);
    head.set_private(0);
    head.set_refcount(1);
    let tails = (pfn + 1) as usize..(pfn + (1 << order)) as usize;
    ctx.pa.memmap.pages.clear_range(tails.start, tails.end);
    ctx.pa
        .free_folio(ctx.cpu, Folio { pfn: Pfn(pfn), order })
        .unwrap_or_else(|e| unreachable!("user folio {pfn:#x} not freeable: {e}"));
}

/// `PG_anon_exclusive` when the mapping is exclusive (`RMAP_EXCLUSIVE`).
#[inline]
fn anon_exclusive_flag(exclusive: bool) -> PageFlags {
    if exclusive {
        PageFlags::ANON_EXCLUSIVE
    } else {
        PageFlags::empty()
    }
}
