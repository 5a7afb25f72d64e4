//! Splitting anonymous large folios and the deferred split queue
//! (mm/huge_memory.c `deferred_split_folio`, `deferred_split_scan`,
//! `thp_underused`, `split_huge_page_to_list_to_order`, v6.12+).

use largo_physmem::BackingKind;

use super::folio::{AnonFolio, DeferredLinks, NO_LINK};
use super::lru::FolioRef;
use super::pgtable::Pte;
use super::stats::MthpStat;
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::PageAlloc;
use crate::stats::VmEvent;
use crate::swap::CacheSlot;

impl Vm {
    /// `deferred_split_folio`: queue a large folio, marking it partially
    /// mapped if it is (counted once), or as an underused-THP candidate.
    pub(crate) fn deferred_split_folio(&mut self, pa: &mut PageAlloc, key: usize, partially_mapped: bool) {
        let (pfn, order) = (self.folios[key].pfn, self.folios[key].order);
        // A swap-cache folio is on its way out (reclaim unmaps it).
        if order <= 1 || (!partially_mapped && !self.thp.shrink_underused) || self.folios[key].swap.is_some() {
            return;
        }
        self.locks.deferred_split += 1;
        if partially_mapped {
            let head = pa.memmap.page_mut(pfn);
            if !head.flags().contains(PageFlags::PARTIALLY_MAPPED) {
                head.insert_flags(PageFlags::PARTIALLY_MAPPED);
                if order == self.pmd_order() {
                    pa.events.count(VmEvent::ThpDeferredSplitPage, 1);
                }
                self.mthp.add(order, MthpStat::SplitDeferred, 1);
                self.mthp.add(order, MthpStat::NrAnonPartiallyMapped, 1);
            }
        }
        if self.folios[key].deferred.is_none() {
            let nid = self.node_of(pa, pfn);
            self.deferred_push_tail(nid, key);
        }
    }

    pub(super) fn deferred_push_tail(&mut self, nid: usize, key: usize) {
        // set_shrinker_bit(memcg, nid, deferred_split_shrinker): a folio
        // charged to a memcg other than the root makes memcg reclaim's
        // shrink_slab_memcg call the shrinker for that (memcg, node).
        let memcg = usize::from(self.folios[key].memcg);
        if memcg != 0 {
            let lv = self.lruvec_index(nid, memcg);
            if let Some(l) = self.lruvecs.get_mut(lv) {
                l.deferred_split_shrinker_bit = true;
            }
        }
        let q = &mut self.deferred[nid];
        let tail = q.tail;
        self.folios[key].deferred = DeferredLinks::queued(tail, NO_LINK);
        if tail == NO_LINK {
            q.head = key;
        } else {
            self.folios[tail].deferred.set_next(key);
        }
        q.tail = key;
        q.len += 1;
    }

    pub(super) fn deferred_unlink(&mut self, nid: usize, key: usize) {
        let (prev, next) = self.folios[key].deferred.take().expect("queued");
        let q = &mut self.deferred[nid];
        if prev == NO_LINK {
            q.head = next;
        } else {
            self.folios[prev].deferred.set_next(next);
        }
        if next == NO_LINK {
            q.tail = prev;
        } else {
            self.folios[next].deferred.set_prev(prev);
        }
        q.len -= 1;
    }

    /// Off the queue, clearing the partially mapped state
    /// (`__folio_undo_large_rmappable`, the split's removal).
    pub(crate) fn deferred_remove(&mut self, pa: &mut PageAlloc, key: usize) {
        self.locks.deferred_split += 1;
        let (pfn, order) = (self.folios[key].pfn, self.folios[key].order);
        let nid = self.node_of(pa, pfn);
        self.deferred_unlink(nid, key);
        let head = pa.memmap.page_mut(pfn);
        if head.flags().contains(PageFlags::PARTIALLY_MAPPED) {
            head.remove_flags(PageFlags::PARTIALLY_MAPPED);
            self.mthp.add(order, MthpStat::NrAnonPartiallyMapped, -1);
        }
    }

    /// `deferred_split_scan` of node `nid` with `nr_to_scan`: partially
    /// mapped folios are split; underused PMD THPs are split; used ones
    /// leave the queue; others go back to its tail. Returns folios split.
    pub(crate) fn deferred_split_scan(&mut self, ctx: &mut Ctx, nid: usize, nr_to_scan: u64) -> u64 {
        self.locks.deferred_split += 1;
        let mut batch = Vec::new();
        let mut cur = self.deferred[nid].head;
        while cur != NO_LINK && (batch.len() as u64) < nr_to_scan {
            let next = self.folios[cur].deferred.get().expect("queued").1;
            batch.push(cur);
            cur = next;
        }
        self.deferred_split_batch(ctx, batch)
    }

    /// The queued folios charged to `memcg`, oldest first: the memcg's
    /// own `deferred_split_queue` (one for all nodes; the model keeps one
    /// queue per node, so a memcg's folios are taken node by node).
    fn deferred_memcg_folios(&self, memcg: usize) -> impl Iterator<Item = usize> + '_ {
        self.deferred.iter().flat_map(move |q| {
            std::iter::successors(Some(q.head), |&cur| {
                (cur != NO_LINK).then(|| self.folios[cur].deferred.get().expect("queued").1)
            })
            .take_while(|&cur| cur != NO_LINK)
            .filter(move |&cur| usize::from(self.folios[cur].memcg) == memcg)
        })
    }

    /// `deferred_split_count` with `sc->memcg` set: the length of the
    /// memcg's queue, whatever the node asked about.
    pub(crate) fn deferred_split_count_memcg(&self, memcg: usize) -> u64 {
        self.deferred_memcg_folios(memcg).count() as u64
    }

    /// `deferred_split_scan` with `sc->memcg` set: up to `nr_to_scan` of
    /// the memcg's queue. `None` is `SHRINK_STOP` (nothing split and the
    /// queue empty).
    pub(crate) fn deferred_split_scan_memcg(&mut self, ctx: &mut Ctx, memcg: usize, nr_to_scan: u64) -> Option<u64> {
        self.locks.deferred_split += 1;
        let batch = self.deferred_memcg_folios(memcg).take(nr_to_scan as usize).collect();
        let split = self.deferred_split_batch(ctx, batch);
        if split == 0 && self.deferred_split_count_memcg(memcg) == 0 {
            return None;
        }
        Some(split)
    }

    /// The second half of `deferred_split_scan`: the folios taken off the
    /// queue are split, dropped or queued again. Returns folios split.
    fn deferred_split_batch(&mut self, ctx: &mut Ctx, batch: Vec<usize>) -> u64 {
        let mut split = 0;
        for key in batch {
            let pfn = self.folios[key].pfn;
            let partially = ctx.pa.memmap.page(pfn).flags().contains(PageFlags::PARTIALLY_MAPPED);
            let underused = !partially && self.thp_underused(ctx.pa, &*ctx.backing, key);
            if !partially && !underused {
                self.deferred_remove(ctx.pa, key);
                continue;
            }
            if self.split_anon_folio(ctx, key) {
                if underused {
                    ctx.pa.events.count(VmEvent::ThpUnderusedSplitPage, 1);
                }
                split += 1;
            } else if partially {
                // Still partially mapped: back to the tail of the queue.
                let nid = self.node_of(ctx.pa, pfn);
                self.deferred_unlink(nid, key);
                self.deferred_push_tail(nid, key);
            } else {
                self.deferred_remove(ctx.pa, key);
            }
        }
        self.locks.deferred_split += 1;
        split
    }

    /// `thp_underused`: with `max_ptes_none` below HPAGE_PMD_NR - 1, a PMD
    /// THP with more than `max_ptes_none` zero-filled pages is underused.
    fn thp_underused(&self, pa: &PageAlloc, backing: &dyn largo_physmem::Backing, key: usize) -> bool {
        let pmd_nr = 1u64 << self.pmd_order();
        let max_none = self.thp.max_ptes_none as u64;
        if max_none >= pmd_nr - 1 {
            return false;
        }
        let m = &self.folios[key];
        let (mut zero, mut filled) = (0, 0);
        for p in m.pfn..m.pfn + m.nr_pages() {
            if self.page_is_zero(pa, backing, p) {
                zero += 1;
                if zero > max_none {
                    return true;
                }
            } else {
                filled += 1;
                if filled >= pmd_nr - max_none {
                    return false;
                }
            }
        }
        false
    }

    /// Are the page's contents all zero? Real bytes on ram; on sim, pages
    /// the user never wrote.
    pub(crate) fn page_is_zero(&self, pa: &PageAlloc, backing: &dyn largo_physmem::Backing, pfn: u64) -> bool {
        if backing.kind() == BackingKind::Ram {
            let mut buf = vec![0u8; self.page_size() as usize];
            return backing.read(largo_types::Pfn(pfn), 0, &mut buf).is_ok() && buf.iter().all(|&b| b == 0);
        }
        !pa.memmap.page(pfn).flags().contains(PageFlags::USER_WRITTEN)
    }

    /// `split_folio` of an anonymous folio to order 0 (`__split_huge_page`
    /// with `RMP_USE_SHARED_ZEROPAGE`): PMD mappings become PTE mappings,
    /// every page becomes its own folio, unmapped pages are freed, and
    /// mapped pages that are all zero are remapped to the shared zero
    /// page and freed. Counts `split` (and `thp_split_page` for PMD size).
    pub(crate) fn split_anon_folio(&mut self, ctx: &mut Ctx, key: usize) -> bool {
        self.split_anon_folio_to(ctx, key, 0).is_some()
    }

    /// [`Self::split_anon_folio`] for a caller holding `caller_pins`
    /// references of its own (reclaim's isolation), returning the keys of
    /// the folios that remain, by page index. A folio on an LRU list
    /// leaves its pieces in its place, the head oldest and the first tail
    /// youngest (`lru_add_split_folio`, as 6.18's `__folio_split` calls it);
    /// an isolated one's pieces inherit the caller's reference each (they go
    /// on the caller's list); a swap-cache folio's pieces keep their slots.
    pub(crate) fn split_anon_folio_to(&mut self, ctx: &mut Ctx, key: usize, caller_pins: u32) -> Option<Vec<usize>> {
        let (pfn, order) = (self.folios[key].pfn, self.folios[key].order);
        if order == 0 {
            return None;
        }
        if !self.can_split_folio(ctx.pa, key, caller_pins) {
            self.mthp.add(order, MthpStat::SplitFailed, 1);
            if order == self.pmd_order() {
                ctx.pa.events.count(VmEvent::ThpSplitPageFailed, 1);
            }
            return None;
        }
        // unmap_folio: a PMD mapping is frozen whole; PTEs go one at a
        // time, so a folio mapped by PTEs at two pages or more is partially
        // mapped on the way (`__folio_remove_rmap` queues it, counted).
        let pte_mapped = self.folios[key].entire_mapcount == 0 && self.folios[key].nr_pages_mapped >= 2;
        for m in self.rmap_walk(key) {
            if m.level == 1 {
                self.split_huge_pmd(ctx, m.mm, m.slot);
            }
        }
        if pte_mapped {
            self.deferred_split_folio(ctx.pa, key, true);
        }
        let mappings = self.rmap_walk(key);
        if self.folios[key].deferred.is_some() {
            self.deferred_remove(ctx.pa, key);
        }
        let old_ref = FolioRef::Anon(key);
        let on_list = self.lru_state(old_ref).list.is_some();
        let younger = if on_list { self.lru_prev(old_ref) } else { None };
        if on_list {
            self.lruvec_del(ctx.pa, old_ref);
        }
        self.mthp.add(order, MthpStat::NrAnon, -1);
        let old = self.folios.remove(key);
        let keep = ctx.pa.memmap.page(pfn).flags()
            & (PageFlags::ANON | PageFlags::SWAPBACKED | PageFlags::LRU | PageFlags::DIRTY);
        let mut kept = Vec::new();
        for i in 0..old.nr_pages() {
            let p = pfn + i;
            let mapcount = ctx.pa.memmap.page(p).mapcount();
            let zero_remap = mapcount > 0 && old.swap.is_none() && self.page_is_zero(ctx.pa, &*ctx.backing, p);
            if zero_remap {
                self.remap_to_zero_page(ctx.pa, &mappings, pfn, i);
            }
            let slot = old.swap.map(|e| e.plus(i));
            // A page nothing holds goes now; on a caller's list it goes
            // when the caller lets go of it.
            if caller_pins == 0 && ((mapcount == 0 && slot.is_none()) || zero_remap) {
                self.mem_cgroup_uncharge(ctx, old.memcg as usize, 1);
                self.release_split_page(ctx, p);
                continue;
            }
            let mapcount = ctx.pa.memmap.page(p).mapcount();
            let mut meta = AnonFolio {
                maybe_mapped_shared: old.maybe_mapped_shared && mapcount > 1,
                lazyfree: old.lazyfree,
                memcg: old.memcg,
                swap: slot,
                ..AnonFolio::new(p, 0, old.anon_vma, old.index + i)
            };
            meta.lru.active = old.lru.active;
            meta.lru.referenced = old.lru.referenced;
            meta.lru.workingset = old.lru.workingset;
            let new_key = self.folios.insert(meta);
            if let Some(slot) = slot {
                self.swap
                    .device_mut(slot)
                    .cache
                    .insert(slot.offset, CacheSlot::Folio(FolioRef::Anon(new_key).token()));
            }
            kept.push(new_key);
            let refs = mapcount as u32 + u32::from(slot.is_some()) + caller_pins;
            let page = ctx.pa.memmap.page_mut(p);
            page.remove_flags(PageFlags::HEAD | PageFlags::PARTIALLY_MAPPED | PageFlags::LRU);
            page.insert_flags(keep - PageFlags::LRU);
            page.set_order(0);
            page.set_refcount(refs);
            page.set_private(new_key as u32 + 1);
        }
        if old.is_anon() {
            self.anon_vmas[old.anon_vma].nr_folios += kept.len() as u64;
            self.put_anon_vma_folio(old.anon_vma);
        }
        if on_list {
            let head = kept.first().copied().filter(|&k| self.folios[k].pfn == pfn);
            let tails = kept.iter().filter(|&&k| Some(k) != head).map(|&k| FolioRef::Anon(k));
            self.lru_add_split_pieces(ctx.pa, younger, head.map(FolioRef::Anon), tails);
        }
        self.mthp.add(order, MthpStat::Split, 1);
        self.work.split_pages += old.nr_pages();
        self.work.folios_split += 1;
        if order == self.pmd_order() {
            ctx.pa.events.count(VmEvent::ThpSplitPage, 1);
        }
        Some(kept)
    }

    /// `can_split_folio`: every reference is a mapping, a swap-cache
    /// reference or one of the caller's `caller_pins`.
    pub(crate) fn can_split_folio(&self, pa: &PageAlloc, key: usize, caller_pins: u32) -> bool {
        self.folio_refcount(pa, key) == self.folio_expected_refs(pa, key) + caller_pins
    }

    /// Replaces every PTE mapping page `offset` of the split folio with the
    /// zero page (`try_to_map_unused_to_zeropage`).
    fn remap_to_zero_page(&mut self, pa: &mut PageAlloc, mappings: &[super::rmap::Mapping], pfn: u64, offset: u64) {
        for m in mappings.iter().filter(|m| m.level == 0) {
            if offset < m.page_offset || offset >= m.page_offset + m.nr {
                continue;
            }
            let index = m.slot.index + (offset - m.page_offset) as usize;
            self.pt
                .set(m.slot.table, index, Pte::leaf(self.zero_pfn, Pte::SPECIAL | Pte::YOUNG));
            self.mms[m.mm].rss_anon -= 1;
            let page = pa.memmap.page_mut(pfn + offset);
            page.set_mapcount(page.mapcount() - 1);
        }
        let nid = self.node_of(pa, pfn);
        self.node_stat[nid].anon_mapped -= 1;
    }

    /// Frees one page of a split folio.
    fn release_split_page(&mut self, ctx: &mut Ctx, pfn: u64) {
        let page = ctx.pa.memmap.page_mut(pfn);
        page.clear();
        page.set_refcount(1);
        ctx.pa
            .free_folio(
                ctx.cpu,
                Folio {
                    pfn: largo_types::Pfn(pfn),
                    order: 0,
                },
            )
            .unwrap_or_else(|e| unreachable!("split page {pfn:#x} not freeable: {e}"));
    }
}
