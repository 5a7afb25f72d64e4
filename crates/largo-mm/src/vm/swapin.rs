//! The swap-in fault (mm/memory.c `do_swap_page`, `alloc_swap_folio`,
//! `can_swapin_thp`; mm/swap_state.c readahead; mm/page_io.c
//! `swap_read_folio`, v6.18). A swap entry with one reference on a
//! synchronous device (zram) is read into a fresh folio that bypasses the
//! swap cache, as large as the mTHP settings, the alignment and the
//! neighbouring entries allow; any other goes through the swap cache with
//! readahead of order-0 folios around it. The folio is mapped writable
//! when it is exclusive, even on a read fault.

use largo_physmem::BackingKind;

use super::fault::{Fault, VmFault};
use super::folio::{AnonFolio, NO_ANON_VMA};
use super::lru::FolioRef;
use super::order::highest_order;
use super::pgtable::{Pte, Slot};
use super::stats::MthpStat;
use super::types::VmFlags;
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::GFP_HIGHUSER_MOVABLE;
use crate::stats::VmEvent;
use crate::swap::SwapEntry;

/// The most hits a VMA's readahead state keeps (`SWAP_RA_HITS_MAX`).
const SWAP_RA_HITS_MAX: u32 = 63;
/// `SWAP_RA_ORDER_CEILING`.
const SWAP_RA_ORDER_CEILING: u32 = 5;

/// A VMA's swap readahead state (`vma->swap_readahead_info`): the last
/// fault address, the window and the readahead hits since. A fresh VMA
/// reads as 4 hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapRa {
    pub addr: u64,
    pub win: u32,
    pub hits: u32,
}

impl Default for SwapRa {
    fn default() -> Self {
        SwapRa {
            addr: 0,
            win: 0,
            hits: 4,
        }
    }
}

/// `__swapin_nr_pages`: the readahead window from the hits since the last
/// one (or adjacency when there were none), at most `max_pages`, never
/// below half the last window.
fn swapin_nr_pages(prev: u64, cur: u64, hits: u32, max_pages: u32, prev_win: u32) -> u32 {
    let mut pages = hits + 2;
    if pages == 2 {
        if cur != prev.wrapping_add(1) && cur != prev.wrapping_sub(1) {
            pages = 1;
        }
    } else {
        let mut roundup = 4;
        while roundup < pages {
            roundup <<= 1;
        }
        pages = roundup;
    }
    pages.min(max_pages).max(prev_win / 2)
}

impl Vm {
    /// `do_swap_page` for the swap PTE at `pte` (orig value `orig`).
    pub(crate) fn do_swap_page(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, orig: Pte) -> Fault {
        let entry = orig.swap_entry();
        if let Some(key) = self.swap_cache_folio(entry) {
            self.swap_update_readahead(ctx, key, vmf.vma, vmf.address);
            return self.map_swapcache_folio(ctx, vmf, pte, orig, key);
        }
        if self.swap.synchronous(entry) && self.swap.swap_count(entry) == 1 {
            return self.swapin_skip_cache(ctx, vmf, pte, orig);
        }
        let Some(key) = self.swapin_readahead(ctx, vmf, pte, entry) else {
            return Fault::Oom;
        };
        ctx.pa.events.count(VmEvent::Pgmajfault, 1);
        self.map_swapcache_folio(ctx, vmf, pte, orig, key)
    }

    /// The `SWP_SYNCHRONOUS_IO` path: a new folio (large if possible), its
    /// slots pinned with the cache bit while it is read, mapped whole, the
    /// slots freed when the fault ends.
    fn swapin_skip_cache(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, orig: Pte) -> Fault {
        let Some((folio, memcg)) = self.alloc_swap_folio(ctx, vmf, pte, orig) else {
            return Fault::Oom;
        };
        let nr = folio.nr_pages();
        let orig_entry = orig.swap_entry();
        let entry = SwapEntry::new(orig_entry.ty, orig_entry.offset & !(nr - 1));
        if self.swap.swapcache_prepare(entry, nr).is_err() {
            self.free_new_folio(ctx, folio, memcg);
            return Fault::Done;
        }
        self.memcg_swapin(ctx, entry, nr);
        let shadow = self.swap_cache_shadow(entry);
        self.swap_read_folio(ctx, folio, entry);
        ctx.pa.events.count(VmEvent::Pgmajfault, 1);
        let haddr = vmf.address & !((self.page_size() << folio.order) - 1);
        let first = Slot {
            table: pte.table,
            index: pte.index - ((vmf.address - haddr) >> self.page_shift()) as usize,
        };
        let (active, workingset) = self.workingset_refault(ctx, folio, memcg, shadow);
        let flags = self.swapin_pte_flags(vmf, true);
        self.swap.swap_free_nr(entry, nr);
        let new = super::rmap::NewAnon {
            exclusive: true,
            active,
            workingset,
            memcg,
        };
        let key = self.add_new_anon_rmap_with(ctx, folio, vmf.vma, haddr, false, new);
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(nr as u32);
        self.mms[vmf.mm].rss_anon += nr;
        self.mms[vmf.mm].swap_ents -= nr;
        let dirty = flags & Pte::DIRTY != 0;
        for i in 0..nr {
            self.pt
                .set(first.table, first.index + i as usize, Pte::leaf(folio.pfn.0 + i, flags));
        }
        if dirty {
            ctx.pa.memmap.page_mut(folio.pfn.0).insert_flags(PageFlags::DIRTY);
        }
        let _ = key;
        self.swap.put_cache(entry, nr);
        Fault::Done
    }

    /// The PTE bits of a folio mapped exclusively by a swap-in: young,
    /// writable in a writable VMA (dirty too on a write fault).
    fn swapin_pte_flags(&self, vmf: &VmFault, exclusive: bool) -> u64 {
        let mut flags = Pte::YOUNG;
        if exclusive && self.vmas[vmf.vma].flags.contains(VmFlags::WRITE) {
            flags |= Pte::WRITE;
            if vmf.write {
                flags |= Pte::DIRTY;
            }
        }
        flags
    }

    /// `alloc_swap_folio`: the largest enabled order whose range is all
    /// swap entries contiguous on the device (same type, swap bits, memcg
    /// record, zero-map state, none in the swap cache) and aligned as the
    /// address is; each allocation or charge failure counts
    /// `swpin_fallback`; order 0 last. None once zswap was ever enabled.
    fn alloc_swap_folio(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, orig: Pte) -> Option<(Folio, usize)> {
        let entry = orig.swap_entry();
        let mut orders = 0u64;
        if self.swap.zswap.never_enabled() {
            orders = self.allowable_orders(vmf.vma, (1 << self.pmd_order()) - 1);
            orders = self.suitable_orders(vmf.vma, vmf.address, orders);
            orders = self.swap_suitable_orders(entry.offset, vmf.address, orders);
        }
        while orders != 0 {
            let order = highest_order(orders);
            if self.can_swapin_thp(vmf.address, pte, orig, order) {
                break;
            }
            orders &= !(1 << order);
        }
        let gfp = self.thp_gfp_mask(vmf.vma);
        while orders != 0 {
            let order = highest_order(orders);
            orders &= !(1 << order);
            if let Some(folio) = self.alloc_folio(ctx, gfp, order) {
                let memcg = self.swapin_memcg(entry, Some(vmf.mm));
                if self.mem_cgroup_charge(ctx, folio, memcg, gfp) {
                    return Some((folio, memcg));
                }
                self.mthp.add(order, MthpStat::SwpinFallbackCharge, 1);
                self.free_new_folio_uncharged(ctx, folio);
            }
            self.mthp.add(order, MthpStat::SwpinFallback, 1);
        }
        let folio = self.alloc_folio(ctx, GFP_HIGHUSER_MOVABLE, 0)?;
        let memcg = self.swapin_memcg(entry, Some(vmf.mm));
        if !self.mem_cgroup_charge(ctx, folio, memcg, crate::page_alloc::gfp::GFP_KERNEL) {
            self.free_new_folio_uncharged(ctx, folio);
            return None;
        }
        Some((folio, memcg))
    }

    /// `thp_swap_suitable_orders`: drop orders from the highest until the
    /// address and the swap offset agree modulo the folio size.
    fn swap_suitable_orders(&self, offset: u64, addr: u64, mut orders: u64) -> u64 {
        while orders != 0 {
            let order = highest_order(orders);
            let nr = 1u64 << order;
            if (addr >> self.page_shift()) % nr == offset % nr {
                break;
            }
            orders &= !(1 << order);
        }
        orders
    }

    /// `can_swapin_thp` for the `1 << order` PTEs around the fault.
    fn can_swapin_thp(&self, addr: u64, pte: Slot, orig: Pte, order: u32) -> bool {
        let nr = 1u64 << order;
        let idx = (addr >> self.page_shift()) & (nr - 1);
        let first = pte.index - idx as usize;
        let entry = orig.swap_entry();
        if entry.offset < idx {
            return false;
        }
        let start = SwapEntry::new(entry.ty, entry.offset - idx);
        if first + nr as usize > self.pt.shape.entries_at(0) {
            return false;
        }
        let dev = self.swap.device(start);
        if start.offset + nr > dev.max {
            return false;
        }
        let cgroup = dev.cgroup_id(start.offset);
        let zero = dev.zeromap(start.offset);
        (0..nr).all(|i| {
            let e = self.pt.get(pte.table, first + i as usize);
            let slot = start.plus(i);
            e.is_swap()
                && e.swap_entry() == slot
                && e.swp_exclusive() == orig.swp_exclusive()
                && dev.cgroup_id(slot.offset) == cgroup
                && dev.zeromap(slot.offset) == zero
                && !dev.has_cache(slot.offset)
        })
    }

    /// `swap_read_folio`: the zero map (`swpin_zero`), zswap (`zswpin`,
    /// order 0 only), or the device (`pswpin`, the per-size `swpin`); on
    /// the ram backing the bytes come back.
    pub(crate) fn swap_read_folio(&mut self, ctx: &mut Ctx, folio: Folio, entry: SwapEntry) {
        let nr = folio.nr_pages();
        let page_size = self.page_size() as usize;
        for i in 0..nr {
            let slot = entry.plus(i);
            let pfn = folio.pfn.0 + i;
            let dev = self.swap.device(slot);
            let written = dev.written(slot.offset);
            if ctx.backing.kind() == BackingKind::Ram {
                let data = dev.data.get(&slot.offset).cloned();
                match data {
                    Some(bytes) => ctx.backing.write(largo_types::Pfn(pfn), 0, &bytes),
                    None => ctx.backing.zero(largo_types::Pfn(pfn), 1),
                }
                .unwrap_or_else(|e| unreachable!("swap-in page outside the backing: {e}"));
                let _ = page_size;
            }
            let page = ctx.pa.memmap.page_mut(pfn);
            if written {
                page.insert_flags(PageFlags::USER_WRITTEN);
            } else {
                page.remove_flags(PageFlags::USER_WRITTEN);
            }
        }
        let dev = self.swap.device(entry);
        if dev.zeromap(entry.offset) {
            ctx.pa.events.count(VmEvent::SwpinZero, nr);
            return;
        }
        if nr == 1 && self.swap.zswap.contains(entry) {
            ctx.pa.events.count(VmEvent::Zswpin, 1);
            return;
        }
        self.mthp.add(folio.order, MthpStat::Swpin, 1);
        ctx.pa.events.count(VmEvent::Pswpin, nr);
        ctx.pa.events.count(VmEvent::Pgpgin, nr * (self.page_size() >> 10));
        self.swap.device_mut(entry).reads += nr;
    }

    /// `workingset_refault` of a folio swapped in where reclaim left a
    /// shadow: it goes to the active list when its refault distance fits
    /// in the workingset, and keeps `PG_workingset` if it had it. Returns
    /// (active, workingset).
    pub(crate) fn workingset_refault(
        &mut self,
        ctx: &mut Ctx,
        folio: Folio,
        memcg: usize,
        shadow: Option<super::swapcache::Shadow>,
    ) -> (bool, bool) {
        let Some(s) = shadow else {
            return (false, false);
        };
        let nr = folio.nr_pages();
        let nid = self.node_of(ctx.pa, folio.pfn.0);
        let lv = self.lruvec_index(nid, memcg);
        ctx.pa.events.count(VmEvent::WorkingsetRefaultAnon, nr);
        let evict_lv = self.lruvec_index(s.nid as usize, s.memcg as usize);
        if evict_lv >= self.lruvecs.len() {
            return (false, false);
        }
        let distance = self.lruvecs[evict_lv].nonresident_age.wrapping_sub(s.eviction);
        let mut size = self.lruvec_page_state(evict_lv, super::lru::LruList::ActiveFile)
            + self.lruvec_page_state(evict_lv, super::lru::LruList::InactiveFile);
        // The machine's page cache outside the model is the root's (node 0).
        if evict_lv == 0 {
            size += self.page_cache_pages;
        }
        if self.swap.free_pages() > 0 {
            size += self.lruvec_page_state(evict_lv, super::lru::LruList::ActiveAnon);
        }
        if distance > size {
            return (false, false);
        }
        self.workingset_age_nonresident(nid, memcg, nr);
        self.lruvecs[lv].workingset_activate[0] += nr;
        ctx.pa.events.count(VmEvent::WorkingsetActivateAnon, nr);
        if s.workingset {
            ctx.pa.events.count(VmEvent::WorkingsetRestoreAnon, nr);
            self.lru_note_cost(lv, false, nr, 0);
        }
        (true, s.workingset)
    }

    /// `swapin_readahead`: VMA readahead (or by swap offset when a
    /// rotational device is on); returns the target's folio, now in the
    /// swap cache.
    fn swapin_readahead(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, entry: SwapEntry) -> Option<usize> {
        if self.swap.use_vma_readahead() {
            self.swap_vma_readahead(ctx, vmf, pte, entry)
        } else {
            self.swap_cluster_readahead(ctx, entry)
        }
    }

    /// `swap_vma_readahead`.
    fn swap_vma_readahead(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, target: SwapEntry) -> Option<usize> {
        let shift = self.page_shift();
        let max_win = 1u32 << self.swap.page_cluster.min(SWAP_RA_ORDER_CEILING);
        let ra = self.vmas[vmf.vma].swap_ra;
        let faddr = vmf.address & !(self.page_size() - 1);
        let win = if max_win == 1 {
            1
        } else {
            swapin_nr_pages(ra.addr >> shift, faddr >> shift, ra.hits, max_win, ra.win)
        };
        if max_win > 1 {
            self.vmas[vmf.vma].swap_ra = SwapRa {
                addr: faddr,
                win,
                hits: 0,
            };
        }
        if win > 1 {
            let win_bytes = (win as u64) << shift;
            let left = if faddr == ra.addr.wrapping_add(self.page_size()) {
                faddr
            } else if ra.addr == faddr + self.page_size() {
                (faddr + self.page_size()).saturating_sub(win_bytes)
            } else {
                faddr.saturating_sub(((win as u64 - 1) / 2) << shift)
            };
            let right = left + win_bytes;
            let pmd_start = faddr & !(self.pmd_size() - 1);
            let v = &self.vmas[vmf.vma];
            let start = left.max(v.start).max(pmd_start);
            let end = right.min(v.end).min(pmd_start + self.pmd_size());
            let base = pte.index - ((faddr - start) >> shift) as usize;
            for (i, addr) in (start..end).step_by(self.page_size() as usize).enumerate() {
                let e = self.pt.get(pte.table, base + i);
                if !e.is_swap() {
                    continue;
                }
                let entry = e.swap_entry();
                if let Some(key) = self.read_swap_cache_async(ctx, entry, vmf.mm) {
                    if addr != faddr {
                        self.folios[key].readahead = true;
                        ctx.pa.events.count(VmEvent::SwapRa, 1);
                    }
                }
            }
            self.lru_add_drain(ctx);
        }
        self.swap_cache_folio(target)
            .or_else(|| self.read_swap_cache_async(ctx, target, vmf.mm))
    }

    /// `swap_cluster_readahead`: the aligned block of `swapin_nr_pages`
    /// slots around the target (global hit statistics).
    fn swap_cluster_readahead(&mut self, ctx: &mut Ctx, target: SwapEntry) -> Option<usize> {
        let max_pages = 1u32 << self.swap.page_cluster;
        let mask = if max_pages <= 1 {
            0
        } else {
            let ra = &mut self.swap.cluster_ra;
            let hits = std::mem::replace(&mut ra.hits, 0);
            let pages = swapin_nr_pages(ra.prev_offset, target.offset, hits, max_pages, ra.last_pages);
            if hits == 0 {
                ra.prev_offset = target.offset;
            }
            ra.last_pages = pages;
            pages as u64 - 1
        };
        if mask > 0 {
            let dev_max = self.swap.device(target).max;
            let start = (target.offset & !mask).max(1);
            let end = (target.offset | mask).min(dev_max - 1);
            let mm = usize::MAX;
            for offset in start..=end {
                let entry = SwapEntry::new(target.ty, offset);
                let fresh = self.swap_cache_folio(entry).is_none();
                if let Some(key) = self.read_swap_cache_async(ctx, entry, mm) {
                    if fresh && offset != target.offset {
                        self.folios[key].readahead = true;
                        ctx.pa.events.count(VmEvent::SwapRa, 1);
                    }
                }
            }
            self.lru_add_drain(ctx);
        }
        self.swap_cache_folio(target)
            .or_else(|| self.read_swap_cache_async(ctx, target, usize::MAX))
    }

    /// `__read_swap_cache_async` + `swap_read_folio`: the folio of a
    /// swapped slot, read into a new order-0 folio in the swap cache (not
    /// anonymous until a fault maps it) unless it is there already.
    /// `None` for a free slot or when memory ran out.
    fn read_swap_cache_async(&mut self, ctx: &mut Ctx, entry: SwapEntry, mm: usize) -> Option<usize> {
        if let Some(key) = self.swap_cache_folio(entry) {
            return Some(key);
        }
        if self.swap.swap_count(entry) == 0 {
            return None;
        }
        let folio = self.alloc_folio(ctx, GFP_HIGHUSER_MOVABLE, 0)?;
        if self.swap.swapcache_prepare(entry, 1).is_err() {
            self.free_new_folio_uncharged(ctx, folio);
            return None;
        }
        let memcg = self.swapin_memcg(entry, (mm != usize::MAX).then_some(mm));
        if !self.mem_cgroup_charge(ctx, folio, memcg, GFP_HIGHUSER_MOVABLE) {
            self.swap.put_cache(entry, 1);
            self.free_new_folio_uncharged(ctx, folio);
            return None;
        }
        let shadow = self.swap_cache_shadow(entry);
        let mut meta = AnonFolio::new(folio.pfn.0, 0, NO_ANON_VMA, 0);
        meta.memcg = memcg as u16;
        let key = self.folios.insert(meta);
        let head = ctx.pa.memmap.page_mut(folio.pfn.0);
        head.insert_flags(PageFlags::SWAPBACKED);
        head.set_private(key as u32 + 1);
        head.set_refcount(0);
        self.swap_cache_add(ctx, key, entry);
        self.memcg_swapin(ctx, entry, 1);
        let (active, workingset) = self.workingset_refault(ctx, folio, memcg, shadow);
        self.folios[key].lru.active = active;
        self.folios[key].lru.workingset = workingset;
        self.folio_add_lru(ctx.pa, ctx.cpu, FolioRef::Anon(key));
        self.swap_read_folio(ctx, folio, entry);
        Some(key)
    }

    /// `swap_update_readahead`: a swap-cache hit on a folio readahead
    /// brought in counts `swap_ra_hit` and feeds the VMA's window.
    fn swap_update_readahead(&mut self, ctx: &mut Ctx, key: usize, vma: usize, addr: u64) {
        if self.folios[key].order > 0 {
            return;
        }
        let readahead = std::mem::replace(&mut self.folios[key].readahead, false);
        let vma_ra = self.swap.use_vma_readahead();
        if vma_ra {
            let ra = self.vmas[vma].swap_ra;
            let hits = if readahead {
                (ra.hits + 1).min(SWAP_RA_HITS_MAX)
            } else {
                ra.hits
            };
            self.vmas[vma].swap_ra = SwapRa {
                addr: addr & !(self.page_size() - 1),
                win: ra.win,
                hits,
            };
        }
        if readahead {
            ctx.pa.events.count(VmEvent::SwapRaHit, 1);
            if !vma_ra {
                self.swap.cluster_ra.hits += 1;
            }
        }
    }

    /// Maps a folio the swap cache holds (the readahead path, or a hit):
    /// the whole folio if it is large and its range is still this folio's
    /// swap entries, else the one page; the slots lose a reference, and the
    /// folio leaves the cache when swap is full or a write fault finds it
    /// otherwise unreferenced.
    fn map_swapcache_folio(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, orig: Pte, key: usize) -> Fault {
        if vmf.write && self.lru_state(FolioRef::Anon(key)).batched {
            self.lru_add_drain(ctx);
        }
        let entry = orig.swap_entry();
        let folio_entry = self.folios[key].swap.expect("a swap-cache folio");
        let (pfn, order) = (self.folios[key].pfn, self.folios[key].order);
        let folio_nr = 1u64 << order;
        let idx = entry.offset - folio_entry.offset;
        let mut nr_pages = 1u64;
        let mut first_slot = pte;
        let mut first_entry = entry;
        let mut page = pfn + idx;
        if order > 0 {
            let start_addr = vmf.address.wrapping_sub(idx << self.page_shift());
            let v = &self.vmas[vmf.vma];
            let same_pmd = start_addr & !(self.pmd_size() - 1) == vmf.address & !(self.pmd_size() - 1);
            if start_addr >= v.start && start_addr + (folio_nr << self.page_shift()) <= v.end && same_pmd {
                let fi = pte.index - idx as usize;
                let whole = (0..folio_nr).all(|i| {
                    let e = self.pt.get(pte.table, fi + i as usize);
                    e.is_swap() && e.swap_entry() == folio_entry.plus(i) && e.swp_exclusive() == orig.swp_exclusive()
                });
                if whole {
                    nr_pages = folio_nr;
                    first_slot = Slot {
                        table: pte.table,
                        index: fi,
                    };
                    first_entry = folio_entry;
                    page = pfn;
                }
            }
        }
        let exclusive = orig.swp_exclusive();
        let was_anon = self.folios[key].is_anon();
        self.swap.swap_free_nr(first_entry, nr_pages);
        if self.should_try_to_free_swap(ctx, key, vmf) {
            self.folio_free_swap(ctx, key);
        }
        let lone = self.folio_refcount(ctx.pa, key) == 0;
        let flags = self.swapin_pte_flags(vmf, exclusive || lone);
        let excl = exclusive || lone;
        self.folio_ref_add(ctx.pa, key, nr_pages as u32);
        if was_anon {
            self.add_rmap_ptes(ctx.pa, key, page, nr_pages, vmf.mm, excl);
        } else {
            self.adopt_anon_folio(ctx, key, vmf.vma, vmf.address, excl);
        }
        self.mms[vmf.mm].rss_anon += nr_pages;
        self.mms[vmf.mm].swap_ents -= nr_pages;
        for i in 0..nr_pages {
            self.pt.set(
                first_slot.table,
                first_slot.index + i as usize,
                Pte::leaf(page + i, flags),
            );
        }
        if flags & Pte::DIRTY != 0 {
            ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::DIRTY);
        }
        if vmf.write && flags & Pte::WRITE == 0 {
            return self.do_wp_page_at(ctx, vmf);
        }
        Fault::Done
    }

    /// `should_try_to_free_swap`: swap is over half full, or a write fault
    /// finds nothing else referencing the folio.
    fn should_try_to_free_swap(&self, ctx: &Ctx, key: usize, vmf: &VmFault) -> bool {
        if self.folios[key].swap.is_none() {
            return false;
        }
        if self.swap.vm_swap_full() {
            return true;
        }
        vmf.write && self.folio_refcount(ctx.pa, key) == self.folios[key].nr_pages() as u32
    }

    /// A charged folio allocated for a swap-in that will not be used.
    fn free_new_folio(&mut self, ctx: &mut Ctx, folio: Folio, memcg: usize) {
        self.mem_cgroup_uncharge(ctx, memcg, folio.nr_pages());
        self.free_new_folio_uncharged(ctx, folio);
    }

    /// A folio allocated for a swap-in and not charged.
    fn free_new_folio_uncharged(&mut self, ctx: &mut Ctx, folio: Folio) {
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(1);
        ctx.pa
            .free_folio(ctx.cpu, folio)
            .unwrap_or_else(|e| unreachable!("unused swap-in folio not freeable: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readahead_window_follows_the_kernels_heuristic() {
        // A fresh VMA (4 hits) reads 8 pages.
        assert_eq!(swapin_nr_pages(0, 1000, 4, 8, 0), 8);
        // No hits and not adjacent: 1, but never below half the last window.
        assert_eq!(swapin_nr_pages(10, 1000, 0, 8, 0), 1);
        assert_eq!(swapin_nr_pages(10, 1000, 0, 8, 8), 4);
        // No hits but the next page: 2.
        assert_eq!(swapin_nr_pages(999, 1000, 0, 8, 0), 2);
        assert_eq!(swapin_nr_pages(999, 1000, 1, 8, 0), 4);
    }
}
