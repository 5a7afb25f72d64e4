//! Per-cpu page lists (`struct per_cpu_pages`): cached free blocks of the
//! orders 0..=PAGE_ALLOC_COSTLY_ORDER and pageblock order, refilled and
//! drained in batches, with the v6.7+ auto-tuned high limit.

use bitflags::bitflags;
use largo_types::{MigrateType, ZoneType, MIGRATE_PCPTYPES, PAGE_ALLOC_COSTLY_ORDER};

use super::gfp::AllocFlags;
use super::pcp_list::PcpList;
use super::{PageAlloc, Wmark, ZoneFlags};
use crate::memmap::{PageArray, PageFlags};
use crate::stats::VmEvent;

/// `NR_LOWORDER_PCP_LISTS`: one list per pcp type and cheap order.
pub const NR_LOWORDER_PCP_LISTS: usize = MIGRATE_PCPTYPES * (PAGE_ALLOC_COSTLY_ORDER as usize + 1);
/// `NR_PCP_THP`: pageblock-order lists, one for movable, one for the rest.
pub const NR_PCP_THP: usize = 2;
pub const NR_PCP_LISTS: usize = NR_LOWORDER_PCP_LISTS + NR_PCP_THP;
/// `CONFIG_PCP_BATCH_SCALE_MAX` (host: 5).
pub const PCP_BATCH_SCALE_MAX: u32 = 5;
/// `MIN_PERCPU_PAGELIST_HIGH_FRACTION`.
pub const MIN_PERCPU_PAGELIST_HIGH_FRACTION: u64 = 8;
const BOOT_PAGESET_HIGH: i32 = 0;
const BOOT_PAGESET_BATCH: i32 = 1;

bitflags! {
    /// `pcp->flags`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct PcpFlags: u8 {
        /// `PCPF_PREV_FREE_HIGH_ORDER`: the last free was of order 1..=3.
        const PREV_FREE_HIGH_ORDER = 1 << 0;
        /// `PCPF_FREE_HIGH_BATCH`: the cpu's cache slice holds > 3 batches.
        const FREE_HIGH_BATCH = 1 << 1;
    }
}

/// One cpu's cache of free pages for one zone.
///
/// Invariant: `count` is the number of base pages on `lists`.
#[derive(Clone, Debug)]
pub struct PerCpuPages {
    pub count: i32,
    /// Current high limit, auto-tuned between `high_min` and `high_max`.
    pub high: i32,
    pub high_min: i32,
    pub high_max: i32,
    pub batch: i32,
    pub flags: PcpFlags,
    /// Order-0 refills double while allocations run without frees.
    pub alloc_factor: u8,
    /// Recent frees without allocations; sizes the next drain.
    pub free_count: i32,
    pub lists: [PcpList; NR_PCP_LISTS],
}

impl PerCpuPages {
    /// `per_cpu_pages_init`: the boot pageset, which never caches pages.
    pub fn boot_pageset() -> PerCpuPages {
        PerCpuPages {
            count: 0,
            high: 0,
            high_min: BOOT_PAGESET_HIGH,
            high_max: BOOT_PAGESET_HIGH,
            batch: BOOT_PAGESET_BATCH,
            flags: PcpFlags::empty(),
            alloc_factor: 0,
            free_count: 0,
            lists: Default::default(),
        }
    }
}

/// The kernel's `clamp(val, lo, hi)`: `hi` if `val >= hi`, else at least
/// `lo`. Unlike `Ord::clamp` it is defined (and does not panic) when `lo > hi`.
#[inline]
fn kclamp(val: i32, lo: i32, hi: i32) -> i32 {
    if val >= hi {
        hi
    } else if val <= lo {
        lo
    } else {
        val
    }
}

impl PageAlloc {
    /// `pcp_allowed_order`.
    #[inline]
    pub fn pcp_allowed_order(&self, order: u32) -> bool {
        order <= PAGE_ALLOC_COSTLY_ORDER || order == self.geo.pmd_order
    }

    /// `order_to_pindex`.
    #[inline]
    pub(crate) fn order_to_pindex(&self, mt: MigrateType, order: u32) -> usize {
        if order > PAGE_ALLOC_COSTLY_ORDER {
            NR_LOWORDER_PCP_LISTS + (mt == MigrateType::Movable) as usize
        } else {
            MIGRATE_PCPTYPES * order as usize + mt.index()
        }
    }

    /// `pindex_to_order`.
    #[inline]
    pub(crate) fn pindex_to_order(&self, pindex: usize) -> u32 {
        if pindex >= NR_LOWORDER_PCP_LISTS {
            self.geo.pmd_order
        } else {
            (pindex / MIGRATE_PCPTYPES) as u32
        }
    }

    /// Puts a free block on a pcp list (head or tail) and marks its record.
    #[inline]
    pub(crate) fn pcp_list_add(
        pcp: &mut PerCpuPages,
        pages: &mut PageArray,
        pindex: usize,
        pfn: u64,
        order: u32,
        tail: bool,
    ) {
        let page = &mut pages[pfn as usize];
        page.set_flags(PageFlags::PCP);
        page.set_order(order);
        let list = &mut pcp.lists[pindex];
        if tail {
            list.push_back(pfn);
        } else {
            list.push_front(pfn);
        }
    }

    /// `nr_pcp_alloc`: how many blocks a refill takes; grows `high` while
    /// the zone is above its high watermark.
    fn nr_pcp_alloc(&mut self, pcp_idx: usize, zi: usize, order: u32) -> i32 {
        let below_high = self.zones[zi].flags.contains(ZoneFlags::BELOW_HIGH);
        let pcp = &mut self.pcp[pcp_idx];
        let base_batch = pcp.batch;
        let (high_min, high_max) = (pcp.high_min, pcp.high_max);
        pcp.high = kclamp(pcp.high, high_min, high_max);
        let mut high = pcp.high;
        if high < base_batch {
            return 1;
        }
        let mut batch = if order > 0 {
            base_batch
        } else {
            base_batch << pcp.alloc_factor
        };
        if high_min != high_max && !below_high {
            high = (high + batch).min(high_max);
            pcp.high = high;
        }
        if order == 0 {
            let max_nr_alloc = (high - pcp.count - base_batch).max(base_batch);
            if batch <= max_nr_alloc && (pcp.alloc_factor as u32) < PCP_BATCH_SCALE_MAX {
                pcp.alloc_factor += 1;
            }
            batch = batch.min(max_nr_alloc);
        }
        if batch > 1 {
            batch = (batch >> order).max(2);
        }
        batch
    }

    /// `rmqueue_pcplist`: takes a block from this cpu's list, refilling it
    /// from the buddy lists when empty.
    pub(crate) fn rmqueue_pcplist(
        &mut self,
        cpu: usize,
        preferred_zi: usize,
        zi: usize,
        order: u32,
        mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u64> {
        let idx = self.pcp_index(zi, cpu);
        let pindex = self.order_to_pindex(mt, order);
        self.pcp[idx].free_count >>= 1;
        if self.pcp[idx].lists[pindex].is_empty() {
            self.pcp_refill(idx, pindex, zi, order, mt, alloc_flags);
        }
        let pfn = self.pcp_pop(idx, pindex, order)?;
        self.count_alloc(cpu, preferred_zi, zi, order);
        Some(pfn)
    }

    /// The pop half of `__rmqueue_pcplist`: the first page of list
    /// `pindex` of pcp `idx`, off the list.
    #[inline]
    pub(crate) fn pcp_pop(&mut self, idx: usize, pindex: usize, order: u32) -> Option<u64> {
        let (pcp, pages) = (&mut self.pcp[idx], &mut self.memmap.pages);
        let pfn = pcp.lists[pindex].pop_front()?;
        pages[pfn as usize].clear();
        pcp.count -= 1 << order;
        self.work.alloc_pcp += 1;
        Some(pfn)
    }

    /// `n` order-0 [`PageAlloc::pcp_pop`]s from list `pindex` of pcp `idx`,
    /// each after the halving of `free_count` that `rmqueue_pcplist` makes
    /// before its pop, their pfns appended to `out` in the order they
    /// leave. Each page's record is left as `prep_new_page` leaves an
    /// order-0 page (all zero, one reference), and its host refault
    /// counted. Panics when the list holds fewer than `n` pages (the
    /// caller takes no more than it holds: no refill happens here).
    pub(crate) fn pcp_pop_order0_run(&mut self, idx: usize, pindex: usize, n: usize, out: &mut Vec<u64>) {
        let start = out.len();
        let pcp = &mut self.pcp[idx];
        pcp.free_count = shr_times(pcp.free_count, n);
        pcp.lists[pindex].pop_front_into(n, out);
        pcp.count -= n as i32;
        self.work.alloc_pcp += n as u64;
        // What `prep_new_page(pfn, 0)` does, on the record directly (its
        // bounds-checked lookup cost 5 instructions a page); the unit test
        // below compares the records with allocations one by one.
        let refaults = &mut self.reporting;
        for &pfn in &out[start..] {
            refaults.stats.host_refault_pages += refaults.discarded.take_range(pfn, 1);
            let page = &mut self.memmap.pages[pfn as usize];
            page.clear();
            page.set_refcount(1);
        }
    }

    /// The refill half of `__rmqueue_pcplist`: a batch from the buddy lists.
    #[cold]
    fn pcp_refill(
        &mut self,
        idx: usize,
        pindex: usize,
        zi: usize,
        order: u32,
        mt: MigrateType,
        alloc_flags: AllocFlags,
    ) {
        debug_assert_eq!(pindex, self.order_to_pindex(mt, order));
        let batch = self.nr_pcp_alloc(idx, zi, order);
        let got = self.rmqueue_bulk(zi, idx, order, batch, mt, alloc_flags);
        self.pcp[idx].count += got << order;
    }

    /// `nr_pcp_high`: the limit above which a free drains the pcp; shrinks
    /// `high` under memory pressure, grows it for bursts of frees.
    fn nr_pcp_high(&mut self, pcp_idx: usize, zi: usize, batch: i32, free_high: bool) -> i32 {
        let zone_flags = self.zones[zi].flags;
        let pcp = &mut self.pcp[pcp_idx];
        let (high_min, high_max) = (pcp.high_min, pcp.high_max);
        pcp.high = kclamp(pcp.high, high_min, high_max);
        let high = pcp.high;
        if high == 0 {
            return 0;
        }
        if free_high {
            pcp.high = (high - (batch << PCP_BATCH_SCALE_MAX)).max(high_min);
            return 0;
        }
        if zone_flags.contains(ZoneFlags::RECLAIM_ACTIVE) {
            let free_count = pcp.free_count.max(batch);
            pcp.high = (high - free_count).max(high_min);
            return (batch << 2).min(pcp.high);
        }
        if high_min == high_max {
            return high;
        }
        if zone_flags.contains(ZoneFlags::BELOW_HIGH) {
            let free_count = pcp.free_count.max(batch);
            pcp.high = (high - free_count).max(high_min);
            return pcp.count.max(high_min);
        }
        if pcp.count >= high {
            let need_high = pcp.free_count + batch;
            if pcp.high < need_high {
                pcp.high = kclamp(need_high, high_min, high_max);
            }
        }
        high
    }

    /// `nr_pcp_free`: how many pages a drain frees.
    fn nr_pcp_free(pcp: &PerCpuPages, batch: i32, high: i32, free_high: bool) -> i32 {
        if free_high {
            return pcp.count.min(batch << PCP_BATCH_SCALE_MAX);
        }
        if high < batch {
            return 1;
        }
        let (min_nr_free, max_nr_free) = (batch, high - batch);
        kclamp(pcp.free_count, min_nr_free, max_nr_free)
    }

    /// `free_frozen_page_commit`: puts a freed block on this cpu's list and
    /// drains a batch back to the buddy lists when over the high limit.
    pub(crate) fn free_frozen_page_commit(&mut self, cpu: usize, zi: usize, pfn: u64, mt: MigrateType, order: u32) {
        let idx = self.pcp_index(zi, cpu);
        self.count_event(VmEvent::Pgfree, 1 << order);
        self.work.free_pcp += 1;
        let pindex = self.order_to_pindex(mt, order);
        let (pcp, pages) = (&mut self.pcp[idx], &mut self.memmap.pages);
        Self::pcp_list_add(pcp, pages, pindex, pfn, order, false);
        pcp.alloc_factor >>= 1;
        pcp.count += 1 << order;
        let batch = pcp.batch;
        let mut free_high = false;
        if order > 0 && order <= PAGE_ALLOC_COSTLY_ORDER {
            free_high = pcp.free_count >= batch + pcp.high_min / 2
                && pcp.flags.contains(PcpFlags::PREV_FREE_HIGH_ORDER)
                && (!pcp.flags.contains(PcpFlags::FREE_HIGH_BATCH) || pcp.count >= batch);
            pcp.flags |= PcpFlags::PREV_FREE_HIGH_ORDER;
        } else {
            pcp.flags.remove(PcpFlags::PREV_FREE_HIGH_ORDER);
        }
        if pcp.free_count < batch << PCP_BATCH_SCALE_MAX {
            pcp.free_count += 1 << order;
        }
        if !free_high && pcp.count < pcp.high && (pcp.high_min..=pcp.high_max).contains(&pcp.high) {
            // nr_pcp_high of a zone neither reclaimed nor below its high
            // mark would return `high` unchanged, which the count is below:
            // no drain, and nothing for it to change.
            let zone_flags = self.zones[zi].flags;
            if !zone_flags.intersects(ZoneFlags::RECLAIM_ACTIVE | ZoneFlags::BELOW_HIGH) {
                return;
            }
        }
        let high = self.nr_pcp_high(idx, zi, batch, free_high);
        if self.pcp[idx].count >= high {
            self.pcp_drain_over_high(idx, zi, batch, high, free_high, pindex);
        }
    }

    /// How many order-0 frees in a row, from now, would each take
    /// [`PageAlloc::free_frozen_page_commit`]'s quick return: the count
    /// stays below `high`, which is within its bounds, in a zone neither
    /// reclaimed nor below its high mark. None of them drains or changes
    /// `high`, so each changes only the list and the counts it adds to.
    fn pcp_quick_frees(&self, idx: usize, zi: usize) -> usize {
        let pcp = &self.pcp[idx];
        let quiet = !self.zones[zi]
            .flags
            .intersects(ZoneFlags::RECLAIM_ACTIVE | ZoneFlags::BELOW_HIGH);
        if !quiet || !(pcp.high_min..=pcp.high_max).contains(&pcp.high) {
            return 0;
        }
        // The k-th free (from 1) leaves count + k, which must stay below high.
        (pcp.high - pcp.count - 1).max(0) as usize
    }

    /// `free_frozen_pages` of the order-0 pages `pfns` of zone `zi`, one
    /// after another, each as [`PageAlloc::free_frozen_pages_in`] frees it
    /// (`free_unref_folios` of a zap's batch), each record first cleared
    /// as `free_pages_prepare` clears it. Where the frees take the
    /// commit's quick return ([`PageAlloc::pcp_quick_frees`]), each page
    /// joins its list and the counts the commit adds to take the stretch
    /// at once: `pgfree`, the pcp's count, its `free_count` up to its cap,
    /// `alloc_factor` halved once per free.
    pub(crate) fn free_frozen_pages_run(&mut self, cpu: usize, zi: usize, pfns: &[u64]) {
        let idx = self.pcp_index(zi, cpu);
        let mut i = 0;
        while i < pfns.len() {
            let quick = self.pcp_quick_frees(idx, zi).min(pfns.len() - i);
            let mut n = 0;
            // The list of the pageblock of the page before (nothing in the
            // stretch changes a pageblock's type): a run's pages are
            // mostly of one block.
            let (mut block, mut pindex) = (u64::MAX, 0);
            while n < quick {
                let pfn = pfns[i + n];
                if pfn >> self.geo.pageblock_order != block {
                    let mt = match self.pageblocks.migratetype(pfn) {
                        MigrateType::Isolate => break,
                        mt if mt.is_mergeable() => mt,
                        _ => MigrateType::Movable,
                    };
                    block = pfn >> self.geo.pageblock_order;
                    pindex = self.order_to_pindex(mt, 0);
                }
                // Cleared and marked as `pcp_list_add` marks it, in one write.
                let page = &mut self.memmap.pages[pfn as usize];
                page.clear();
                page.set_flags(PageFlags::PCP);
                self.pcp[idx].lists[pindex].push_front(pfn);
                n += 1;
            }
            if n > 0 {
                self.count_quick_frees(idx, n);
                i += n;
            } else {
                self.memmap.pages[pfns[i] as usize].clear();
                self.free_frozen_pages_in(cpu, zi, pfns[i], 0);
                i += 1;
            }
        }
    }

    /// What `n` order-0 frees that took the commit's quick return added
    /// to the counts ([`PageAlloc::free_frozen_pages_run`]).
    fn count_quick_frees(&mut self, idx: usize, n: usize) {
        self.count_event(VmEvent::Pgfree, n as u64);
        self.work.free_pcp += n as u64;
        let pcp = &mut self.pcp[idx];
        pcp.alloc_factor = pcp.alloc_factor.checked_shr(n as u32).unwrap_or(0);
        pcp.count += n as i32;
        pcp.flags.remove(PcpFlags::PREV_FREE_HIGH_ORDER);
        let cap = pcp.batch << PCP_BATCH_SCALE_MAX;
        if pcp.free_count < cap {
            pcp.free_count = (pcp.free_count + n as i32).min(cap);
        }
    }

    /// The drain half of `free_frozen_page_commit`.
    #[cold]
    fn pcp_drain_over_high(&mut self, idx: usize, zi: usize, batch: i32, high: i32, free_high: bool, pindex: usize) {
        let nr = Self::nr_pcp_free(&self.pcp[idx], batch, high, free_high);
        self.free_pcppages_bulk(zi, idx, nr, pindex);
        let zone = &self.zones[zi];
        let high_wmark = zone.wmark_pages(Wmark::High);
        if zone.flags.contains(ZoneFlags::BELOW_HIGH)
            && self.zone_watermark_ok(zi, 0, high_wmark, ZoneType::Movable.index(), AllocFlags::empty())
        {
            self.zones[zi].flags.remove(ZoneFlags::BELOW_HIGH);
        }
    }

    /// `free_pcppages_bulk`: returns `count` pages to the buddy lists,
    /// round-robin over the lists starting after `pindex - 1`, oldest first.
    pub(crate) fn free_pcppages_bulk(&mut self, zi: usize, pcp_idx: usize, count: i32, pindex: usize) {
        let mut count = count.min(self.pcp[pcp_idx].count);
        if count <= 0 {
            return;
        }
        self.work.zone_lock += 1;
        let mut pindex = pindex.wrapping_sub(1);
        while count > 0 {
            loop {
                pindex = pindex.wrapping_add(1);
                if pindex > NR_PCP_LISTS - 1 {
                    pindex = 0;
                }
                if !self.pcp[pcp_idx].lists[pindex].is_empty() {
                    break;
                }
            }
            let order = self.pindex_to_order(pindex);
            let nr_pages = 1i32 << order;
            while let Some(pfn) = self.pcp[pcp_idx].lists[pindex].pop_back() {
                let mt = self.pageblocks.migratetype(pfn);
                self.memmap.pages[pfn as usize].clear();
                count -= nr_pages;
                self.pcp[pcp_idx].count -= nr_pages;
                self.__free_one_page(zi, pfn, order, mt, super::Fpi::NONE);
                self.work.pcp_bulk_blocks += 1;
                if count <= 0 {
                    break;
                }
            }
        }
    }

    /// `drain_pages_zone`: empties one cpu's pageset of one zone.
    pub fn drain_pages_zone(&mut self, cpu: usize, zi: usize) {
        let idx = self.pcp_index(zi, cpu);
        while self.pcp[idx].count > 0 {
            let to_drain = self.pcp[idx].count.min(self.pcp[idx].batch << PCP_BATCH_SCALE_MAX);
            self.free_pcppages_bulk(zi, idx, to_drain, 0);
        }
    }

    /// `drain_pages`: empties every pageset of a cpu.
    pub fn drain_pages(&mut self, cpu: usize) {
        for zi in 0..self.zones.len() {
            self.drain_pages_zone(cpu, zi);
        }
    }

    /// `drain_all_pages(NULL)`.
    pub fn drain_all_pages(&mut self) {
        for cpu in 0..self.nr_cpus {
            self.drain_pages(cpu);
        }
    }

    /// `decay_pcp_high`: the periodic (vmstat_update) shrink of an idle
    /// pageset's high limit, draining what is above it. Returns whether
    /// more decay is due.
    pub fn decay_pcp_high(&mut self, cpu: usize, zi: usize) -> bool {
        let idx = self.pcp_index(zi, cpu);
        let pcp = &mut self.pcp[idx];
        let (high_min, batch) = (pcp.high_min, pcp.batch);
        let mut todo = false;
        if pcp.high > high_min {
            pcp.high = (pcp.count - (batch << PCP_BATCH_SCALE_MAX))
                .max(pcp.high - (pcp.high >> 3))
                .max(high_min);
            todo |= pcp.high > high_min;
        }
        let to_drain = pcp.count - pcp.high;
        if to_drain > 0 {
            self.free_pcppages_bulk(zi, idx, to_drain, 0);
            todo = true;
        }
        todo
    }

    /// `zone_batchsize`: about 0.1% of the zone or 1 MiB, whichever is
    /// smaller, quartered, then rounded to 2^n - 1.
    pub(crate) fn zone_batchsize(&self, zi: usize) -> i32 {
        let one_mib_pages = (1u64 << 20) >> self.geo.page_shift;
        let mut batch = (self.zones[zi].managed_pages >> 10).min(one_mib_pages) / 4;
        if batch < 1 {
            batch = 1;
        }
        let b = batch + batch / 2;
        (1i64 << (63 - b.leading_zeros())) as i32 - 1
    }

    /// `zone_highsize`: the pcp high limit for a fraction of the zone (or
    /// its low watermark), split over the node's cpus.
    fn zone_highsize(&self, zi: usize, batch: i32, cpu_online: usize, fraction: u64) -> i32 {
        let zone = &self.zones[zi];
        let total = zone
            .managed_pages
            .checked_div(fraction)
            .unwrap_or_else(|| zone.low_wmark_pages());
        let mut nr_split_cpus = self.nodes[zone.nid].cpus.len() + cpu_online;
        if nr_split_cpus == 0 {
            nr_split_cpus = self.nr_cpus;
        }
        let high = (total / nr_split_cpus as u64) as i32;
        high.max(batch << 2)
    }

    /// `zone_pcp_update` / `zone_set_pageset_high_and_batch`: recomputes
    /// batch and high limits and copies them to every cpu's pageset, then
    /// `zone_pcp_update_cacheinfo`.
    pub(crate) fn zone_pcp_update(&mut self, zi: usize, cpu_online: usize) {
        let batch = self.zone_batchsize(zi).max(1);
        let fraction = self.tunables.percpu_pagelist_high_fraction;
        let (high_min, high_max) = if fraction != 0 {
            let high = self.zone_highsize(zi, batch, cpu_online, fraction);
            (high, high)
        } else {
            (
                self.zone_highsize(zi, batch, cpu_online, 0),
                self.zone_highsize(zi, batch, cpu_online, MIN_PERCPU_PAGELIST_HIGH_FRACTION),
            )
        };
        let zone = &mut self.zones[zi];
        zone.pageset_high_min = high_min;
        zone.pageset_high_max = high_max;
        zone.pageset_batch = batch;
        let slice_pages = self.tunables.cpu_data_slice_bytes >> self.geo.page_shift;
        for cpu in 0..self.nr_cpus {
            let idx = self.pcp_index(zi, cpu);
            let pcp = &mut self.pcp[idx];
            pcp.batch = batch;
            pcp.high_min = high_min;
            pcp.high_max = high_max;
            pcp.flags.set(PcpFlags::FREE_HIGH_BATCH, slice_pages > 3 * batch as u64);
        }
    }
}

/// `x` halved `n` times as `x >>= 1` halves it (an arithmetic shift; from
/// 32 halvings on, what the sign leaves).
#[inline]
fn shr_times(x: i32, n: usize) -> i32 {
    match u32::try_from(n) {
        Ok(n) if n < i32::BITS => x >> n,
        _ => x >> (i32::BITS - 1),
    }
}

#[cfg(test)]
mod tests {
    use crate::page_alloc::gfp::GFP_HIGHUSER_MOVABLE;
    use crate::{Machine, MachineConfig};
    use largo_types::MigrateType;

    #[test]
    fn a_run_of_pcp_allocations_is_each_allocation_in_turn() {
        // Two machines alike, their pcp lists filled by frees.
        let (mut one, zi, pfns) = machine_with_pages(600);
        let (mut run, _, _) = machine_with_pages(600);
        for m in [&mut one, &mut run] {
            for &pfn in &pfns {
                let pa = m.page_alloc_mut();
                pa.memmap.page_mut(pfn).clear();
                pa.free_frozen_pages_in(0, zi, pfn, 0);
            }
        }
        assert_same(&one, &run, zi, "after the frees");
        // Runs of growing length, compared after each, until the lists
        // run dry (a run takes no more than the list holds).
        let mut len = 1;
        for step in 0..6 {
            let mut got = Vec::new();
            run.page_alloc_mut()
                .alloc_pcp_run(0, GFP_HIGHUSER_MOVABLE, len, &mut got);
            let expected: Vec<u64> = (0..got.len())
                .map(|_| {
                    one.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 0)
                        .unwrap()
                        .expect("free memory")
                        .pfn
                        .0
                })
                .collect();
            assert_eq!(got, expected, "step {step}: the pages, in order");
            assert_same(&one, &run, zi, &format!("after the run of step {step}"));
            len *= 4;
        }
    }

    #[test]
    fn halving_n_times_is_each_halving_in_turn() {
        for x in [0, 1, 7, 1000, i32::MAX, -1, -7, i32::MIN] {
            let mut y = x;
            for n in 0..40 {
                assert_eq!(super::shr_times(x, n), y, "{x} halved {n} times");
                y >>= 1;
            }
            assert_eq!(super::shr_times(x, usize::MAX), y);
        }
    }

    /// A machine with `n` order-0 pages allocated on cpu 0 (all of the
    /// first one's zone), one pageblock among them isolated.
    fn machine_with_pages(n: usize) -> (Machine, usize, Vec<u64>) {
        let mut m = Machine::new(MachineConfig {
            mem_bytes: 1 << 30,
            ..MachineConfig::default()
        })
        .unwrap();
        let mut pfns = Vec::new();
        for _ in 0..n {
            let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 0).unwrap().expect("free memory");
            pfns.push(f.pfn.0);
        }
        let pa = m.page_alloc_mut();
        let zi = pa.zone_of(pfns[0]);
        pfns.retain(|&p| pa.zone_of(p) == zi);
        pa.set_pageblock_migratetype(pfns[pfns.len() / 2], MigrateType::Isolate);
        (m, zi, pfns)
    }

    /// What the frees can change: the pcp, the zone (its free areas and
    /// counts), the events and the work; and every page record.
    fn state(m: &Machine, zi: usize) -> (String, Vec<crate::memmap::Page>) {
        let pa = m.page_alloc();
        let records = (0..pa.memmap.len()).map(|p| *pa.memmap.page(p)).collect();
        let text = format!(
            "{:?}\n{:?}\n{:?}\n{:?}",
            pa.pcp(zi, 0),
            pa.zones()[zi],
            pa.events,
            pa.work
        );
        (text, records)
    }

    fn assert_same(a: &Machine, b: &Machine, zi: usize, what: &str) {
        let ((ta, ra), (tb, rb)) = (state(a, zi), state(b, zi));
        assert_eq!(ta, tb, "{what}");
        let differ = ra.iter().zip(&rb).position(|(x, y)| x != y);
        assert_eq!(differ, None, "{what}: the first page record that differs");
    }

    #[test]
    fn a_run_of_frees_is_each_free_in_turn() {
        // Enough pages to cross `high` and drain, in two orders.
        for reverse in [false, true] {
            let (mut one, zi, mut pfns) = machine_with_pages(3000);
            let (mut run, _, _) = machine_with_pages(3000);
            if reverse {
                pfns.reverse();
            }
            assert_same(&one, &run, zi, "at the start");
            // Runs of growing length, compared after each.
            let (mut at, mut len) = (0, 1);
            while at < pfns.len() {
                let chunk = &pfns[at..(at + len).min(pfns.len())];
                for &pfn in chunk {
                    let pa = one.page_alloc_mut();
                    pa.memmap.page_mut(pfn).clear();
                    pa.free_frozen_pages_in(0, zi, pfn, 0);
                }
                run.page_alloc_mut().free_frozen_pages_run(0, zi, chunk);
                assert_same(
                    &one,
                    &run,
                    zi,
                    &format!("reverse {reverse}, after {} frees", at + chunk.len()),
                );
                (at, len) = (at + chunk.len(), len * 3);
            }
            assert!(one.page_alloc().work.pcp_bulk_blocks > 0, "the frees drained the pcp");
        }
    }
}
