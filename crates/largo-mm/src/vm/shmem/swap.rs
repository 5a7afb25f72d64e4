//! Shmem under reclaim (mm/vmscan.c `shrink_folio_list`, mm/shmem.c
//! `shmem_writeout`, `shmem_swapin_folio`, `shmem_swap_alloc_folio`,
//! `shmem_free_swap`, v6.18).
//!
//! A shmem folio reclaim isolates is unmapped from every VMA (a PMD
//! mapping split, `thp_split_pmd`), then:
//! - clean (never written): it simply leaves the page cache and is freed
//!   (a later fault finds a hole and allocates zeroes again);
//! - dirty: `shmem_writeout` gives it swap slots (whole when the device
//!   has contiguous ones), puts the swap entry in the page cache in its
//!   place and moves the folio to the swap cache, where the write and
//!   `__remove_mapping` are those of an anonymous folio (the model hands
//!   it to the anon folio table for that last stretch: `from_shmem`).
//!
//! A fault at a swapped index reads the folio back at the entry's order
//! (order 0 once zswap was ever enabled, or when the large allocation or
//! its charge fails, the large entry being split first), puts it back in
//! the page cache dirty and frees the slots.

use super::super::folio::{AnonFolio, NO_ANON_VMA};
use super::super::lru::FolioRef;
use super::super::vmscan::folio_list::ReclaimStat;
use super::super::vmscan::pageout::Pageout;
use super::super::vmscan::references::Verdict;
use super::super::vmscan::ScanControl;
use super::super::{Ctx, Vm};
use super::rmap::ShmemUnmap;
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::GFP_HIGHUSER_MOVABLE;
use crate::stats::VmEvent;
use crate::swap::SwapEntry;

/// What reclaim did with one shmem folio.
pub(crate) enum ShmemReclaim {
    /// Freed (clean, or written to swap): its pages.
    Freed(u64),
    /// Back to the LRU (under this identity: a folio still in the swap
    /// cache under writeback is an anon-table one).
    Keep(FolioRef),
    Activate(FolioRef),
}

impl Vm {
    /// Marks shmem folio `key` dirty (`folio_mark_dirty`; shmem's
    /// `dirty_folio` only sets the flag).
    pub(crate) fn shmem_mark_dirty(&self, pa: &mut crate::page_alloc::PageAlloc, key: usize) {
        pa.memmap
            .page_mut(self.shmem.folios[key].pfn)
            .insert_flags(PageFlags::DIRTY);
    }

    /// `shrink_folio_list` for an isolated shmem folio (holding the
    /// isolation reference).
    pub(crate) fn shrink_shmem_one(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        sc: &ScanControl,
        ignore_references: bool,
        stat: &mut ReclaimStat,
    ) -> ShmemReclaim {
        let r = FolioRef::Shmem(key);
        if !ignore_references {
            match self.folio_check_references(r, sc.target_memcg) {
                Verdict::Activate => return ShmemReclaim::Activate(r),
                Verdict::Keep => return ShmemReclaim::Keep(r),
                Verdict::Reclaim | Verdict::ReclaimClean => {}
            }
        }
        self.shmem_try_to_unmap(ctx, key);
        let f = &self.shmem.folios[key];
        let (pfn, nr) = (f.pfn, f.nr_pages());
        // is_page_cache_freeable / __remove_mapping (a cpu batch's entry
        // counts: such a folio stays).
        if !self.cache_freeable(ctx.pa, r) {
            return ShmemReclaim::Keep(r);
        }
        if !ctx.pa.memmap.page(pfn).flags().contains(PageFlags::DIRTY) {
            self.shmem_remove_clean(ctx, key);
            return ShmemReclaim::Freed(nr);
        }
        let Some(akey) = self.shmem_writeout(ctx, key) else {
            // AOP_WRITEPAGE_ACTIVATE: redirtied and activated.
            return ShmemReclaim::Activate(r);
        };
        stat.nr_pageout += nr;
        let ar = FolioRef::Anon(akey);
        match self.swap_writeout(ctx, akey) {
            Pageout::Done => {}
            Pageout::Writeback => {
                stat.writeback.push(akey);
                return ShmemReclaim::Keep(ar);
            }
            Pageout::SwapFreed => return ShmemReclaim::Keep(ar),
        }
        if self.remove_mapping(ctx, akey, sc.target_memcg) {
            self.folio_put_refs(ctx, akey, 1);
            return ShmemReclaim::Freed(nr);
        }
        ShmemReclaim::Keep(ar)
    }

    /// `try_to_unmap` of a shmem folio (`TTU_SPLIT_HUGE_PMD`): every PMD
    /// mapping split away (`thp_split_pmd`), every PTE cleared (a dirty
    /// one dirtying the folio).
    fn shmem_try_to_unmap(&mut self, ctx: &mut Ctx, key: usize) {
        let page = self.page_size();
        for m in self.shmem_rmap_walk(key) {
            if m.level == 1 {
                ctx.pa.events.count(VmEvent::ThpSplitPmd, 1);
                self.zap_shmem_pmd(ctx, m.mm, m.slot, ShmemUnmap::Split);
            } else {
                self.zap_shmem_ptes(ctx, m.mm, m.slot.table, m.addr, m.addr + m.nr * page, ShmemUnmap::Unmap);
            }
        }
    }

    /// `__remove_mapping` of a clean shmem folio: out of the page cache
    /// (no shadow: shmem is not on the file LRU) and freed.
    fn shmem_remove_clean(&mut self, ctx: &mut Ctx, key: usize) {
        let (inode, index, order) = {
            let f = &self.shmem.folios[key];
            (f.inode, f.index, f.order)
        };
        let nr = 1u32 << order;
        let i = &mut self.shmem.inodes[inode];
        i.cache.remove(&index);
        i.xa_count_entry(index, order, -1);
        self.shmem_cache_stats(ctx, key, -1);
        self.shmem_folio_put_refs(ctx, key, nr + 1);
        self.shmem_xa_update(inode, 0);
    }

    /// `shmem_writeout`: swap slots for the whole folio (a large one
    /// crossing `i_size`, or one without contiguous slots, would be split:
    /// the model activates it instead), the swap entry takes the folio's
    /// place in the page cache (`shmem_delete_from_page_cache`, shmem's
    /// reference on each slot: `swap_shmem_alloc`), and the folio enters
    /// the swap cache. Returns its key in the anon folio table.
    fn shmem_writeout(&mut self, ctx: &mut Ctx, key: usize) -> Option<usize> {
        if !self.swap.has_swap() {
            return None;
        }
        let f = &self.shmem.folios[key];
        let (inode, index, order, pfn, memcg) = (f.inode, f.index, f.order, f.pfn, f.memcg);
        let nr = f.nr_pages();
        let size_pages = self.shmem.inodes[inode].size_bytes.div_ceil(self.page_size());
        if order > 0 && size_pages > index && size_pages < index + nr {
            return None;
        }
        let entry = self.swap.folio_alloc_swap(ctx.cpu, order)?;
        for i in 0..nr {
            self.swap
                .swap_duplicate(entry.plus(i))
                .unwrap_or_else(|e| unreachable!("a new slot takes shmem's reference: {e:?}"));
        }
        let lru = self.shmem.folios[key].lru.clone();
        let i = &mut self.shmem.inodes[inode];
        i.cache.remove(&index);
        i.swapped.insert(index, (entry, order));
        self.shmem_cache_stats(ctx, key, -1);
        self.shmem.folios.remove(key);
        let mut a = AnonFolio::new(pfn, order, NO_ANON_VMA, index);
        a.memcg = memcg;
        a.lru = lru;
        a.from_shmem = true;
        let akey = self.folios.insert(a);
        let head = ctx.pa.memmap.page_mut(pfn);
        head.insert_flags(PageFlags::ANON);
        head.set_private(akey as u32 + 1);
        // The cache's references go; reclaim's stays; the swap cache's come.
        head.set_refcount(1);
        self.swap_cache_add(ctx, akey, entry);
        Some(akey)
    }

    /// The swap entry holding page `index` of `inode`, if it is swapped:
    /// (the entry's first index, its first slot, its order).
    pub(crate) fn shmem_swapped_at(&self, inode: usize, index: u64) -> Option<(u64, SwapEntry, u32)> {
        let (&first, &(entry, order)) = self.shmem.inodes[inode].swapped.range(..=index).next_back()?;
        (index < first + (1 << order)).then_some((first, entry, order))
    }

    /// `shmem_swapin_folio` for page `index` held by swap entry
    /// `(first, entry, order)`, read by a fault or a truncation (`by`):
    /// the folio back in the page cache, dirty, with the fault's
    /// reference; its key. `None`: no memory (OOM).
    pub(crate) fn shmem_swapin(
        &mut self,
        ctx: &mut Ctx,
        by: SwapinBy,
        inode: usize,
        index: u64,
        swapped: (u64, SwapEntry, u32),
    ) -> Option<usize> {
        let (mut first, mut entry, mut order) = swapped;
        let sub = entry.plus(index - first);
        // The swap cache first (`swap_cache_get_folio` of the page's own
        // slot): a cached folio smaller than the entry splits it
        // (`shmem_split_large_entry`); one as large or larger goes back
        // to the page cache whole, over every entry its slots are under.
        if let Some(akey) = self.swap_cache_folio(sub) {
            if order > self.folios[akey].order {
                let memcg = by.memcg(self);
                self.shmem_split_swap_entry(inode, first, entry, order);
                self.shmem_xa_update(inode, memcg);
            }
            if let Some(key) = self.shmem_take_back(ctx, akey, inode, index) {
                return Some(key);
            }
            (first, entry, order) = self.shmem_swapped_at(inode, index).expect("the page is still swapped");
        }
        // Not cached: a large entry is read whole only from a synchronous
        // device with none of its slots in the swap cache
        // (`shmem_swap_alloc_folio`'s `swapcache_prepare` of the whole
        // range); else it is split and the page at `index` read alone
        // (`shmem_swapin_cluster` reads order 0; the model reads it
        // directly, without readahead, from a disk too).
        let sub = entry.plus(index - first);
        let nr_entry = 1u64 << order;
        let any_cached = (0..nr_entry).any(|i| self.swap_cache_folio(entry.plus(i)).is_some());
        if order > 0 && (any_cached || !self.swap.synchronous(entry)) {
            let memcg = by.memcg(self);
            self.shmem_split_swap_entry(inode, first, entry, order);
            self.shmem_xa_update(inode, memcg);
            (first, entry, order) = (index, sub, 0);
        }
        let (folio, memcg) = loop {
            if order == 0 || self.swap.zswap.never_enabled() {
                let gfp = if order > 0 {
                    by.vma.map_or(self.thp_gfp_mask_unmadvised(), |v| self.thp_gfp_mask(v))
                } else {
                    GFP_HIGHUSER_MOVABLE
                };
                if let Some(folio) = self.alloc_folio(ctx, gfp, order) {
                    // mem_cgroup_swapin_charge_folio with the allocation's
                    // gfp: a large folio's cannot reclaim.
                    let memcg = self.swapin_memcg(entry, Some(by.mm));
                    let charged = if order > 0 {
                        self.shmem_charge_large(ctx, folio, memcg, gfp)
                    } else {
                        self.mem_cgroup_charge(ctx, folio, memcg, gfp)
                    };
                    if charged {
                        break (folio, memcg);
                    }
                    self.free_unused_folio(ctx, folio);
                }
            }
            if order == 0 {
                return None;
            }
            // shmem_split_large_entry: order-0 entries, the fault's read.
            self.shmem_split_swap_entry(inode, first, entry, order);
            let memcg = by.memcg(self) as u16;
            self.shmem_xa_update(inode, memcg as usize);
            (first, entry, order) = (index, sub, 0);
        };
        let nr = folio.nr_pages();
        if self.swap.swapcache_prepare(entry, nr).is_err() {
            // Checked above: no slot of the entry is cached.
            self.mem_cgroup_uncharge(ctx, memcg, nr);
            self.free_unused_folio(ctx, folio);
            return None;
        }
        self.memcg_swapin(ctx, entry, nr);
        let shadow = self.swap_cache_shadow(entry);
        let (active, workingset) = self.workingset_refault(ctx, folio, memcg, shadow);
        self.swap_read_folio(ctx, folio, entry);
        if by.vma.is_some() {
            // Only a fault counts (`fault_type`).
            ctx.pa.events.count(VmEvent::Pgmajfault, 1);
        }
        let i = &mut self.shmem.inodes[inode];
        i.swapped.remove(&first);
        i.xa_count_entry(first, order, -1);
        // PG_active and PG_workingset are set before the LRU add.
        let key = self.shmem_add_to_page_cache(ctx, folio, inode, first, memcg, (active, workingset));
        self.shmem_mark_dirty(ctx.pa, key);
        self.swap.swap_free_nr(entry, nr);
        self.swap.put_cache(entry, nr);
        Some(key)
    }

    /// A swapped shmem folio still in the swap cache (its write in flight
    /// or not yet reclaimed) goes back to the page cache as it is, at the
    /// index of its first page, in place of the swap entries of its slots
    /// (`shmem_swapin_folio` rounds index and entry down to the folio;
    /// `shmem_add_to_page_cache` wants the range wholly under entries
    /// `folio->swap`, `folio->swap + 1`, ...). Its key; `None` when the
    /// range no longer holds them (a hole punched into entries split
    /// under the cached folio): the kernel's `-EEXIST` retry would find
    /// the same folio again, so the model drops it from the swap cache
    /// instead (its slots keep their data) and the caller reads the page.
    fn shmem_take_back(&mut self, ctx: &mut Ctx, akey: usize, inode: usize, index: u64) -> Option<usize> {
        let (pfn, order, memcg, active) = {
            let a = &self.folios[akey];
            (a.pfn, a.order, a.memcg as usize, a.lru.active)
        };
        let nr = 1u64 << order;
        let first = index & !(nr - 1);
        let entry = self.folios[akey].swap.expect("a swap-cache folio has its entry");
        if self.folios[akey].writeback {
            self.end_swap_writeback(ctx, akey);
        }
        let covered = self.shmem_swapped_covering(inode, first, entry, nr);
        let Some(entries) = covered else {
            self.shmem_drop_stale_swap_cache(ctx, akey);
            return None;
        };
        self.lru_forget(ctx.pa, FolioRef::Anon(akey));
        self.swap_cache_del(ctx, akey, None);
        self.folios.remove(akey);
        let head = ctx.pa.memmap.page_mut(pfn);
        head.remove_flags(PageFlags::ANON);
        let i = &mut self.shmem.inodes[inode];
        for (at, entry_order) in entries {
            i.swapped.remove(&at);
            i.xa_count_entry(at, entry_order, -1);
        }
        let folio = Folio {
            pfn: largo_types::Pfn(pfn),
            order,
        };
        let key = self.shmem_add_to_page_cache(ctx, folio, inode, first, memcg, (active, false));
        self.shmem_mark_dirty(ctx.pa, key);
        self.swap.swap_free_nr(entry, nr);
        Some(key)
    }

    /// The swap entries of `inode` that tile pages `[first, first + nr)`
    /// with slots `entry`, `entry + 1`, ... in order (each entry's first
    /// index and order), or `None` if the range holds anything else.
    fn shmem_swapped_covering(&self, inode: usize, first: u64, entry: SwapEntry, nr: u64) -> Option<Vec<(u64, u32)>> {
        let swapped = &self.shmem.inodes[inode].swapped;
        let mut entries = Vec::new();
        let mut next = first;
        for (&at, &(e, entry_order)) in swapped.range(first..first + nr) {
            let len = 1u64 << entry_order;
            if at != next || e != entry.plus(at - first) || at + len > first + nr {
                return None;
            }
            entries.push((at, entry_order));
            next = at + len;
        }
        (next == first + nr).then_some(entries)
    }

    /// A cached shmem folio whose entries are no longer whole in the
    /// mapping leaves the swap cache (and is freed when nothing else
    /// holds it); its slots keep their shmem references and data.
    fn shmem_drop_stale_swap_cache(&mut self, ctx: &mut Ctx, akey: usize) {
        self.swap_cache_del(ctx, akey, None);
        if self.folio_refcount(ctx.pa, akey) == 0 {
            self.free_anon_folio(ctx, akey);
        }
    }

    /// `shmem_split_large_entry`: the swap entry of `2^order` pages at
    /// `first` becomes one entry per page.
    fn shmem_split_swap_entry(&mut self, inode: usize, first: u64, entry: SwapEntry, order: u32) {
        let ino = &mut self.shmem.inodes[inode];
        ino.swapped.remove(&first);
        ino.xa_count_entry(first, order, -1);
        for i in 0..1u64 << order {
            ino.swapped.insert(first + i, (entry.plus(i), 0));
            ino.xa_count_entry(first + i, 0, 1);
        }
    }

    /// `shmem_free_swap` for the swap entries lying wholly in `[first,
    /// end)` of `inode`: their slots are freed.
    pub(crate) fn shmem_free_swap_range(&mut self, ctx: &mut Ctx, inode: usize, first: u64, end: u64) {
        let entries: Vec<(u64, SwapEntry, u32)> = self.shmem.inodes[inode]
            .swapped
            .range(first..end)
            .filter(|&(&i, &(_, order))| i + (1 << order) <= end)
            .map(|(&i, &(e, o))| (i, e, o))
            .collect();
        for (index, entry, order) in entries {
            let i = &mut self.shmem.inodes[inode];
            i.swapped.remove(&index);
            i.xa_count_entry(index, order, -1);
            self.free_swap_and_cache_nr(ctx, entry, 1 << order);
        }
    }
}

/// Who reads a swapped shmem folio back: a fault (its mm and VMA) or a
/// truncation's partial folio (`shmem_get_partial_folio`: the truncating
/// task's mm, no VMA, no major fault counted).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SwapinBy {
    pub mm: super::super::types::MmId,
    pub vma: Option<super::super::types::VmaId>,
}

impl SwapinBy {
    /// The memcg new xarray nodes are charged to: the reading task's.
    fn memcg(self, vm: &Vm) -> usize {
        vm.mm_memcg(self.mm)
    }
}
