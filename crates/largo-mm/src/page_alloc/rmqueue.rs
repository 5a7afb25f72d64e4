//! Taking pages off the free lists (`rmqueue` and friends).

use largo_types::MigrateType;

use super::gfp::AllocFlags;
use super::{PageAlloc, ZoneFlags};
use crate::stats::VmEvent;

/// `enum rmqueue_mode`: how far `__rmqueue` had to go last time, so a bulk
/// refill does not repeat failed fallback searches (v6.16+).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RmqueueMode {
    Normal,
    Cma,
    Claim,
    Steal,
}

impl PageAlloc {
    /// Whether a pcp refill (`rmqueue_bulk`) takes the pages of a free
    /// block all at once (the default) or page by page through
    /// `__rmqueue`: the two leave the same allocator, which a test checks.
    pub fn set_bulk_split(&mut self, on: bool) {
        self.bulk_split = on;
    }

    /// `__rmqueue_smallest`: the smallest block of the type's own lists.
    #[inline]
    pub(crate) fn __rmqueue_smallest(&mut self, zi: usize, order: u32, mt: MigrateType) -> Option<u64> {
        for current_order in order..=self.geo.max_page_order {
            let Some(pfn) = self.zones[zi].free_area[current_order as usize].list(mt).first() else {
                continue;
            };
            self.page_del_and_expand(zi, pfn, order, current_order, mt);
            return Some(pfn);
        }
        None
    }

    /// `__rmqueue_cma_fallback`.
    #[inline]
    fn __rmqueue_cma_fallback(&mut self, zi: usize, order: u32) -> Option<u64> {
        self.__rmqueue_smallest(zi, order, MigrateType::Cma)
    }

    /// `__rmqueue`: an ALLOC_CMA request takes CMA first while more than
    /// half the zone's free pages are CMA (balancing the two); then own
    /// lists, CMA (ALLOC_CMA), claiming a foreign block, and (unless
    /// ALLOC_NOFRAGMENT) stealing one.
    pub(crate) fn __rmqueue(
        &mut self,
        zi: usize,
        order: u32,
        mt: MigrateType,
        alloc_flags: AllocFlags,
        mode: &mut RmqueueMode,
    ) -> Option<u64> {
        let cma = alloc_flags.contains(AllocFlags::CMA);
        if cma && self.zones[zi].stat.nr_free_cma > self.zones[zi].stat.nr_free_pages / 2 {
            if let Some(pfn) = self.__rmqueue_cma_fallback(zi, order) {
                return Some(pfn);
            }
        }
        if *mode == RmqueueMode::Normal {
            if let Some(pfn) = self.__rmqueue_smallest(zi, order, mt) {
                return Some(pfn);
            }
        }
        if *mode <= RmqueueMode::Cma && cma {
            if let Some(pfn) = self.__rmqueue_cma_fallback(zi, order) {
                *mode = RmqueueMode::Cma;
                return Some(pfn);
            }
        }
        if *mode <= RmqueueMode::Claim {
            if let Some(pfn) = self.__rmqueue_claim(zi, order, mt, alloc_flags) {
                *mode = RmqueueMode::Normal;
                return Some(pfn);
            }
        }
        if !alloc_flags.contains(AllocFlags::NOFRAGMENT) {
            if let Some(pfn) = self.__rmqueue_steal(zi, order, mt) {
                *mode = RmqueueMode::Steal;
                return Some(pfn);
            }
        }
        None
    }

    /// The blocks `rmqueue_bulk` takes while `__rmqueue_smallest` finds
    /// them, a free block at a time instead of a page at a time, with the
    /// same result: the lists, the pages' records, the counts and the
    /// buddy levels walked. Returns how many of `count` it took; the
    /// caller's loop takes the rest (the fallbacks).
    ///
    /// Why the result is the same: `__rmqueue_smallest` takes the first
    /// block of the smallest non-empty order `high` from `order` up, so
    /// the type's lists of orders `order..high` are empty. Taking its
    /// first unit, `expand` leaves the rest of it as one block of each of
    /// those orders, each alone on its list; the next take finds the
    /// lowest of them, the smallest, and so on: the units go in address
    /// order, and after `m` of them what remains is `[m, 2^(high -
    /// order))` (in units) cut into aligned blocks, each alone on its
    /// list (where the order of a list's pushes does not matter). The
    /// take of unit `t > 0` found a block of order `order + tz(t)` and
    /// walked `tz(t)` levels; the first walked `high - order`.
    fn rmqueue_bulk_split(
        &mut self,
        zi: usize,
        pcp_idx: usize,
        pindex: usize,
        order: u32,
        count: i32,
        mt: MigrateType,
    ) -> i32 {
        let mut got = 0;
        while got < count {
            let found = (order..=self.geo.max_page_order).find_map(|o| {
                self.zones[zi].free_area[o as usize]
                    .list(mt)
                    .first()
                    .map(|pfn| (o, pfn))
            });
            let Some((high, pfn)) = found else {
                break;
            };
            let units = 1u64 << (high - order);
            let m = units.min((count - got) as u64);
            self.del_page_from_free_list(zi, pfn, high, mt);
            // The sum of tz(t) for t in 1..m: the 2s in (m - 1)! (Legendre).
            let levels = (m - 1) - u64::from((m - 1).count_ones());
            self.work.buddy_levels += u64::from(high - order) + levels;
            // What remains, from unit `m` up: aligned blocks, smallest first
            // (`unit < units`: each fits below the block's end).
            let mut unit = m;
            while unit < units {
                let o = unit.trailing_zeros();
                self.add_to_free_list(zi, pfn + (unit << order), order + o, mt, false);
                unit += 1 << o;
            }
            self.account_freepages(zi, -((m << order) as i64), mt);
            for t in 0..m {
                let unit_pfn = pfn + (t << order);
                if t > 0 {
                    self.memmap.page_mut(unit_pfn).clear();
                }
                Self::pcp_list_add(
                    &mut self.pcp[pcp_idx],
                    &mut self.memmap.pages,
                    pindex,
                    unit_pfn,
                    order,
                    true,
                );
            }
            got += m as i32;
        }
        got
    }

    /// `rmqueue_bulk`: up to `count` blocks of `order` under one zone-lock
    /// hold, appended to the pcp list in physical order. Returns how many.
    pub(crate) fn rmqueue_bulk(
        &mut self,
        zi: usize,
        pcp_idx: usize,
        order: u32,
        count: i32,
        mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> i32 {
        let pindex = self.order_to_pindex(mt, order);
        let mut mode = RmqueueMode::Normal;
        let mut got = 0;
        self.work.zone_lock += 1;
        // A CMA request may be steered to CMA page by page, as the free
        // counts move: only the block-at-a-time way when that cannot be.
        let cma_steers = alloc_flags.contains(AllocFlags::CMA) && self.zones[zi].stat.nr_free_cma > 0;
        if self.bulk_split && !cma_steers {
            got = self.rmqueue_bulk_split(zi, pcp_idx, pindex, order, count, mt);
        }
        while got < count {
            let Some(pfn) = self.__rmqueue(zi, order, mt, alloc_flags, &mut mode) else {
                break;
            };
            Self::pcp_list_add(&mut self.pcp[pcp_idx], &mut self.memmap.pages, pindex, pfn, order, true);
            got += 1;
        }
        self.work.pcp_bulk_blocks += got as u64;
        got
    }

    /// `rmqueue_buddy`: one block straight from the buddy lists, trying the
    /// high-atomic reserve first when allowed.
    pub(crate) fn rmqueue_buddy(
        &mut self,
        cpu: usize,
        preferred_zi: usize,
        zi: usize,
        order: u32,
        alloc_flags: AllocFlags,
        mt: MigrateType,
    ) -> Option<u64> {
        let mut pfn = None;
        self.work.zone_lock += 1;
        if alloc_flags.contains(AllocFlags::HIGHATOMIC) {
            pfn = self.__rmqueue_smallest(zi, order, MigrateType::HighAtomic);
        }
        if pfn.is_none() {
            let mut mode = RmqueueMode::Normal;
            pfn = self.__rmqueue(zi, order, mt, alloc_flags, &mut mode);
            if pfn.is_none() && alloc_flags.intersects(AllocFlags::OOM | AllocFlags::NON_BLOCK) {
                pfn = self.__rmqueue_smallest(zi, order, MigrateType::HighAtomic);
            }
        }
        let pfn = pfn?;
        self.work.alloc_buddy += 1;
        self.count_alloc(cpu, preferred_zi, zi, order);
        Some(pfn)
    }

    /// `__count_zid_vm_events(PGALLOC)` and `zone_statistics`.
    #[inline]
    pub(crate) fn count_alloc(&mut self, cpu: usize, preferred_zi: usize, zi: usize, order: u32) {
        self.count_allocs(cpu, preferred_zi, zi, order, 1);
    }

    /// [`PageAlloc::count_alloc`] of `nr_allocs` allocations alike (same
    /// cpu, zones and order) at once: the counters only add, and nothing
    /// reads them between the allocations of a batch.
    #[inline]
    pub(crate) fn count_allocs(&mut self, cpu: usize, preferred_zi: usize, zi: usize, order: u32, nr_allocs: u64) {
        let zone_type = self.zones[zi].zone_type;
        self.count_event(VmEvent::pgalloc(zone_type), nr_allocs << order);
        self.allocs_by_order[order as usize] += nr_allocs;
        let nid = self.zones[zi].nid;
        if nid == self.zones[preferred_zi].nid {
            self.zones[zi].stat.numa_hit += nr_allocs;
        } else {
            self.zones[zi].stat.numa_miss += nr_allocs;
            self.zones[preferred_zi].stat.numa_foreign += nr_allocs;
        }
        if nid == self.cpu_node[cpu] {
            self.zones[zi].stat.numa_local += nr_allocs;
        } else {
            self.zones[zi].stat.numa_other += nr_allocs;
        }
    }

    /// `rmqueue`: through the pcp for the orders it caches, else the buddy
    /// lists; a boosted watermark wakes kswapd.
    pub(crate) fn rmqueue(
        &mut self,
        cpu: usize,
        preferred_zi: usize,
        zi: usize,
        order: u32,
        alloc_flags: AllocFlags,
        mt: MigrateType,
    ) -> Option<u64> {
        let mut pfn = None;
        if self.pcp_allowed_order(order) {
            pfn = self.rmqueue_pcplist(cpu, preferred_zi, zi, order, mt, alloc_flags);
        }
        if pfn.is_none() {
            pfn = self.rmqueue_buddy(cpu, preferred_zi, zi, order, alloc_flags, mt);
        }
        self.wake_kswapd_if_boosted(zi, alloc_flags);
        pfn
    }

    /// The end of `rmqueue`: an allocation that may wake kswapd and finds
    /// the zone's watermark boosted clears the boost and wakes it.
    #[inline]
    pub(crate) fn wake_kswapd_if_boosted(&mut self, zi: usize, alloc_flags: AllocFlags) {
        let zone = &mut self.zones[zi];
        if alloc_flags.contains(AllocFlags::KSWAPD) && zone.flags.contains(ZoneFlags::BOOSTED_WATERMARK) {
            zone.flags.remove(ZoneFlags::BOOSTED_WATERMARK);
            let zone_type = zone.zone_type.index();
            self.wakeup_kswapd(zi, 0, zone_type);
        }
    }
}
