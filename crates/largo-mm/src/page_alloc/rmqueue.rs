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
        let zone_type = self.zones[zi].zone_type;
        self.count_event(VmEvent::pgalloc(zone_type), 1 << order);
        self.allocs_by_order[order as usize] += 1;
        let nid = self.zones[zi].nid;
        if nid == self.zones[preferred_zi].nid {
            self.zones[zi].stat.numa_hit += 1;
        } else {
            self.zones[zi].stat.numa_miss += 1;
            self.zones[preferred_zi].stat.numa_foreign += 1;
        }
        if nid == self.cpu_node[cpu] {
            self.zones[zi].stat.numa_local += 1;
        } else {
            self.zones[zi].stat.numa_other += 1;
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
