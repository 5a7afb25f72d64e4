//! Allocation: `__alloc_pages` and the paths below it.
//!
//! The slow path follows `__alloc_pages_slowpath`: kswapd woken, a retry
//! at the min watermark, an early asynchronous direct compaction for
//! costly (and non-movable high-order) requests, then rounds of direct
//! reclaim (through the [`Reclaim`] trait: lazyfree folios, shrinkers),
//! pcp drain and high-atomic release, and direct compaction at rising
//! priority, with the kernel's rules for giving up (`__GFP_NORETRY`,
//! costly orders without `__GFP_RETRY_MAYFAIL`, `should_reclaim_retry`).

use largo_types::{MigrateType, ZoneType, MAX_NR_ZONES};

use super::gfp::{AllocFlags, Gfp, GfpError, Wmark};
use super::{PageAlloc, ZoneFlags};
use crate::compaction::direct::CompactRequest;
use crate::compaction::{CompactPriority, CompactResult};
use crate::memmap::{Folio, PageFlags};
use crate::stats::VmEvent;

/// What the allocator asks of the layer that owns the mappings: memory
/// freed (direct reclaim on the slow path, kswapd's balancing) and movable
/// folios migrated (compaction, `alloc_contig_range`, memory offlining,
/// which reach mappings only through rmap). The VM layer implements it;
/// the allocator alone can neither reclaim nor migrate.
pub trait Reclaim {
    /// Frees up to `nr_to_reclaim` pages of node `nid`; returns how many.
    fn reclaim(&mut self, pa: &mut PageAlloc, cpu: usize, nid: usize, nr_to_reclaim: u64, kswapd: bool) -> u64;

    /// `lru_add_drain_all` (`lru_cache_disable`): folios waiting in the
    /// cpus' LRU batches join the LRU, so isolation sees them movable.
    fn lru_add_drain_all(&mut self, _pa: &mut PageAlloc) {}

    /// `migrate_pages`: moves the movable (LRU) folios headed at `pfns` to
    /// destinations from `target`. Returns the heads that did not move
    /// (the caller puts them back), in the order given.
    fn migrate_folios(
        &mut self,
        _pa: &mut PageAlloc,
        _cpu: usize,
        pfns: &[u64],
        _target: &mut super::MigrationTarget,
    ) -> Vec<u64> {
        pfns.to_vec()
    }
}

/// Nothing to reclaim.
pub struct NoReclaim;

impl Reclaim for NoReclaim {
    fn reclaim(&mut self, _: &mut PageAlloc, _: usize, _: usize, _: u64, _: bool) -> u64 {
        0
    }
}

/// `SWAP_CLUSTER_MAX`: pages direct reclaim tries to free per pass.
pub const SWAP_CLUSTER_MAX: u64 = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("order {order} is above MAX_PAGE_ORDER {max}")]
    OrderTooLarge { order: u32, max: u32 },
    #[error(transparent)]
    Gfp(#[from] GfpError),
    #[error("no cpu {cpu} (the machine has {nr_cpus})")]
    NoSuchCpu { cpu: usize, nr_cpus: usize },
    #[error("no node {nid} (the machine has {nr_nodes})")]
    NoSuchNode { nid: usize, nr_nodes: usize },
    /// `-EINVAL` of `alloc_contig_pages`: a compound range is a power of
    /// two pages.
    #[error("{0} pages: a contiguous folio is a power of two pages")]
    NotAPowerOfTwo(u64),
}

/// `struct alloc_context`: what stays fixed for one allocation.
#[derive(Clone, Copy, Debug)]
struct AllocContext {
    /// Node whose zonelist is walked.
    nid: usize,
    /// Index in [`PageAlloc::zonelists`].
    zonelist: usize,
    /// First zone of the zonelist (`preferred_zoneref`).
    preferred: usize,
    highest_zoneidx: usize,
    migratetype: MigrateType,
}

/// A zonelist: zones to try in order, and whether its preferred zone makes
/// the first attempt avoid fragmenting fallbacks (`alloc_flags_nofragment`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Zonelist {
    pub zones: Vec<usize>,
    pub nofragment: bool,
}

impl PageAlloc {
    /// `alloc_pages`: a folio of `order` for `cpu`, preferring its node.
    /// `Ok(None)` is an ordinary allocation failure.
    #[inline]
    pub fn alloc_pages(&mut self, cpu: usize, gfp: Gfp, order: u32) -> Result<Option<Folio>, AllocError> {
        let nid = self.cpu_node.get(cpu).copied().unwrap_or(usize::MAX);
        self.alloc_pages_node(cpu, nid, gfp, order, &mut NoReclaim)
    }

    /// `alloc_pages` with a reclaimer for the slow path.
    #[inline]
    pub fn alloc_pages_reclaim(
        &mut self,
        cpu: usize,
        gfp: Gfp,
        order: u32,
        reclaim: &mut dyn Reclaim,
    ) -> Result<Option<Folio>, AllocError> {
        let nid = self.cpu_node.get(cpu).copied().unwrap_or(usize::MAX);
        self.alloc_pages_node(cpu, nid, gfp, order, reclaim)
    }

    /// `__alloc_pages` with a preferred node (`alloc_pages_node`).
    pub fn alloc_pages_node(
        &mut self,
        cpu: usize,
        nid: usize,
        gfp: Gfp,
        order: u32,
        reclaim: &mut dyn Reclaim,
    ) -> Result<Option<Folio>, AllocError> {
        let ac = self.prepare_alloc_pages(cpu, nid, gfp, order)?;
        if ac.preferred == usize::MAX {
            return Ok(None);
        }
        let alloc_flags = self.fast_alloc_flags(gfp, &ac);
        let pfn = match self.get_page_from_freelist(cpu, order, alloc_flags, &ac) {
            Some(pfn) => pfn,
            None => match self.__alloc_pages_slowpath(cpu, gfp, order, &ac, reclaim) {
                Some(pfn) => pfn,
                None => return Ok(None),
            },
        };
        self.prep_new_page(pfn, order);
        Ok(Some(Folio {
            pfn: largo_types::Pfn(pfn),
            order,
        }))
    }

    /// The flags of `__alloc_pages`' first attempt (`get_page_from_freelist`
    /// before the slow path): the low watermark, kswapd's wakeup if the gfp
    /// allows it, `alloc_flags_nofragment` and CMA.
    #[inline]
    fn fast_alloc_flags(&self, gfp: Gfp, ac: &AllocContext) -> AllocFlags {
        let mut alloc_flags = AllocFlags::WMARK_LOW | AllocFlags::CPUSET;
        if gfp.contains(Gfp::KSWAPD_RECLAIM) {
            alloc_flags |= AllocFlags::KSWAPD;
        }
        if self.zonelists[ac.zonelist].nofragment {
            alloc_flags |= AllocFlags::NOFRAGMENT;
        }
        self.gfp_to_alloc_flags_cma(ac, alloc_flags)
    }

    /// Up to `max` order-0 allocations with `gfp` on `cpu`, one after
    /// another, each the page [`PageAlloc::alloc_pages`] would return,
    /// with the same effects: made only while every one comes from the
    /// preferred zone's pcp list without a refill. The head of that list
    /// is each time's page (`__rmqueue_pcplist`), and nothing but these
    /// pops changes the zone between them, so its watermark check
    /// (`zone_has_room`, which may note the zone below its high mark)
    /// has the first's outcome each time. A pop that finds the zone's
    /// watermark boosted wakes kswapd (`rmqueue`) and ends the run.
    /// Appends the pfns to `out` in allocation order; nothing when the
    /// first allocation would not be such a pop.
    pub(crate) fn alloc_pcp_run(&mut self, cpu: usize, gfp: Gfp, max: usize, out: &mut Vec<u64>) {
        let nid = self.cpu_node.get(cpu).copied().unwrap_or(usize::MAX);
        let Ok(ac) = self.prepare_alloc_pages(cpu, nid, gfp, 0) else {
            return;
        };
        let zi = ac.preferred;
        if zi == usize::MAX || !self.pcp_allowed_order(0) {
            return;
        }
        let alloc_flags = self.fast_alloc_flags(gfp, &ac);
        if alloc_flags.contains(AllocFlags::HIGHATOMIC) {
            return;
        }
        let idx = self.pcp_index(zi, cpu);
        let pindex = self.order_to_pindex(ac.migratetype, 0);
        let on_list = self.pcp[idx].lists[pindex].len();
        if max == 0 || on_list == 0 || !self.zone_has_room(zi, 0, ac.highest_zoneidx, alloc_flags) {
            return;
        }
        // Each pop is `rmqueue`'s for a pcp list that needs no refill. A
        // boosted watermark ends the batch after its first pop, which
        // wakes kswapd (pops leave the boost as it is, so one not boosted
        // at the first stays so); the batch's allocations are counted
        // together, before that wakeup, as the first pop's count is.
        let boosted = self.zones[zi].flags.contains(ZoneFlags::BOOSTED_WATERMARK);
        let nr_pops = if boosted && alloc_flags.contains(AllocFlags::KSWAPD) {
            1
        } else {
            max.min(on_list)
        };
        self.pcp_pop_order0_run(idx, pindex, nr_pops, out);
        self.count_allocs(cpu, zi, zi, 0, nr_pops as u64);
        self.wake_kswapd_if_boosted(zi, alloc_flags);
    }

    /// `prepare_alloc_pages`: validates the request and fixes the zonelist,
    /// the highest usable zone and the migratetype.
    #[inline]
    fn prepare_alloc_pages(&self, cpu: usize, nid: usize, gfp: Gfp, order: u32) -> Result<AllocContext, AllocError> {
        if order > self.geo.max_page_order {
            return Err(AllocError::OrderTooLarge {
                order,
                max: self.geo.max_page_order,
            });
        }
        if cpu >= self.nr_cpus {
            return Err(AllocError::NoSuchCpu {
                cpu,
                nr_cpus: self.nr_cpus,
            });
        }
        if nid >= self.nodes.len() {
            return Err(AllocError::NoSuchNode {
                nid,
                nr_nodes: self.nodes.len(),
            });
        }
        let mut migratetype = gfp.migratetype()?;
        if self.mobility_disabled {
            migratetype = MigrateType::Unmovable;
        }
        let mut highest_zoneidx = gfp.zone()?.index();
        if order < self.tunables.movable_min_order && highest_zoneidx == ZoneType::Movable.index() {
            // The TAO-style remedy (largo/movable_min_kb): allocations
            // smaller than the zone's folio size never see ZONE_MOVABLE,
            // for reclaim and compaction as for the free lists.
            highest_zoneidx = ZoneType::Normal.index();
        }
        let thisnode = gfp.contains(Gfp::THISNODE) as usize;
        let zonelist = (nid * 2 + thisnode) * MAX_NR_ZONES + highest_zoneidx;
        Ok(AllocContext {
            nid,
            zonelist,
            preferred: self.zonelists[zonelist].zones.first().copied().unwrap_or(usize::MAX),
            highest_zoneidx,
            migratetype,
        })
    }

    /// The zones of the zonelist `gfp` selects on node `nid` for an
    /// allocation of `order`, in order.
    pub(crate) fn zonelist_zones(&self, nid: usize, gfp: Gfp, order: u32) -> Result<Vec<usize>, AllocError> {
        let cpu = self.nodes.get(nid).and_then(|n| n.cpus.first().copied()).unwrap_or(0);
        let ac = self.prepare_alloc_pages(cpu, nid, gfp, order.min(self.geo.max_page_order))?;
        Ok(self.zonelists[ac.zonelist].zones.clone())
    }

    /// `__alloc_pages_direct_compact`: compaction of the zonelist's zones
    /// at `prio`, then a freelist attempt. Counts `compact_stall` and its
    /// outcome unless compaction was skipped.
    fn __alloc_pages_direct_compact(
        &mut self,
        cpu: usize,
        order: u32,
        alloc_flags: AllocFlags,
        ac: &AllocContext,
        prio: CompactPriority,
        reclaim: &mut dyn Reclaim,
    ) -> (Option<u64>, CompactResult) {
        if order == 0 || self.compaction.in_compaction() {
            return (None, CompactResult::Skipped);
        }
        let req = CompactRequest {
            order,
            alloc_flags,
            highest_zoneidx: ac.highest_zoneidx,
            migratetype: ac.migratetype,
            prio,
        };
        let zones = self.zonelists[ac.zonelist].zones.clone();
        let (result, captured) = self.compactor().try_to_compact_pages(&zones, req, cpu, reclaim);
        if result == CompactResult::Skipped {
            return (None, result);
        }
        self.count_event(VmEvent::CompactStall, 1);
        // A captured block is the allocation (no PGALLOC, as in the
        // kernel; largo's allocations-by-size still count it).
        let page = captured
            .inspect(|_| self.allocs_by_order[order as usize] += 1)
            .or_else(|| self.get_page_from_freelist(cpu, order, alloc_flags, ac));
        match page {
            Some(pfn) => {
                let zi = self.zone_of(pfn);
                self.zones[zi].compact.defer_reset(order, true);
                self.count_event(VmEvent::CompactSuccess, 1);
                (Some(pfn), result)
            }
            None => {
                self.count_event(VmEvent::CompactFail, 1);
                (None, result)
            }
        }
    }

    /// `get_page_from_freelist`: the first zone of the zonelist whose
    /// watermark allows the allocation and that has a block. Without
    /// success under ALLOC_NOFRAGMENT, the walk repeats allowing fallbacks;
    /// on a NUMA machine it does so as soon as it would leave the local node.
    fn get_page_from_freelist(
        &mut self,
        cpu: usize,
        order: u32,
        mut alloc_flags: AllocFlags,
        ac: &AllocContext,
    ) -> Option<u64> {
        let multi_node = self.nodes.len() > 1;
        let local_nid = self.zones[ac.preferred].nid;
        'retry: loop {
            let no_fallback = alloc_flags.contains(AllocFlags::NOFRAGMENT);
            for i in 0..self.zonelists[ac.zonelist].zones.len() {
                let zi = self.zonelists[ac.zonelist].zones[i];
                if no_fallback && multi_node && self.zones[zi].nid != local_nid {
                    alloc_flags.remove(AllocFlags::NOFRAGMENT);
                    continue 'retry;
                }
                // A zone with deferred memory grows instead of failing
                // (_deferred_grow_zone), then is tried again.
                let mut room = self.zone_has_room(zi, order, ac.highest_zoneidx, alloc_flags);
                while !room && self.deferred_grow_zone(zi, order) {
                    room = self.zone_has_room(zi, order, ac.highest_zoneidx, alloc_flags);
                }
                if !room {
                    continue;
                }
                loop {
                    if let Some(pfn) = self.rmqueue(cpu, ac.preferred, zi, order, alloc_flags, ac.migratetype) {
                        if alloc_flags.contains(AllocFlags::HIGHATOMIC) {
                            self.reserve_highatomic_pageblock(zi, pfn, order);
                        }
                        return Some(pfn);
                    }
                    if !self.deferred_grow_zone(zi, order) {
                        break;
                    }
                }
            }
            if no_fallback {
                alloc_flags.remove(AllocFlags::NOFRAGMENT);
                continue;
            }
            return None;
        }
    }

    /// The watermark part of `get_page_from_freelist`: notes when the zone
    /// drops below its high watermark, then checks the requested one.
    fn zone_has_room(&mut self, zi: usize, order: u32, highest_zoneidx: usize, alloc_flags: AllocFlags) -> bool {
        if !self.zones[zi].flags.contains(ZoneFlags::BELOW_HIGH) {
            let high = self.zones[zi].wmark_pages(Wmark::High);
            if self.zone_watermark_fast(zi, order, high, highest_zoneidx, alloc_flags) {
                return true;
            }
            self.zones[zi].flags |= ZoneFlags::BELOW_HIGH;
        }
        if alloc_flags.contains(AllocFlags::NO_WATERMARKS) {
            return true;
        }
        let mark = self.zones[zi].wmark_pages(alloc_flags.wmark());
        self.zone_watermark_fast(zi, order, mark, highest_zoneidx, alloc_flags)
    }

    /// `gfp_to_alloc_flags_cma`: movable allocations may use CMA
    /// pageblocks (`ac.migratetype` is already UNMOVABLE when grouping by
    /// mobility is disabled, as `gfp_migratetype` returns it then). A
    /// CONFIG_CMA=n kernel (a machine without CMA areas) defines ALLOC_CMA
    /// as 0: the flag is never set there.
    #[inline]
    fn gfp_to_alloc_flags_cma(&self, ac: &AllocContext, alloc_flags: AllocFlags) -> AllocFlags {
        if self.cma_types && ac.migratetype == MigrateType::Movable {
            alloc_flags | AllocFlags::CMA
        } else {
            alloc_flags
        }
    }

    /// `gfp_to_alloc_flags`.
    fn gfp_to_alloc_flags(gfp: Gfp, order: u32) -> AllocFlags {
        let mut flags = AllocFlags::CPUSET; // ALLOC_WMARK_MIN is 0
        if gfp.contains(Gfp::HIGH) {
            flags |= AllocFlags::MIN_RESERVE;
        }
        if gfp.contains(Gfp::KSWAPD_RECLAIM) {
            flags |= AllocFlags::KSWAPD;
        }
        if !gfp.contains(Gfp::DIRECT_RECLAIM) {
            if !gfp.contains(Gfp::NOMEMALLOC) {
                flags |= AllocFlags::NON_BLOCK;
                if order > 0 && flags.contains(AllocFlags::MIN_RESERVE) {
                    flags |= AllocFlags::HIGHATOMIC;
                }
            }
            if flags.contains(AllocFlags::MIN_RESERVE) {
                flags.remove(AllocFlags::CPUSET);
            }
        }
        flags
    }

    /// `__alloc_pages_slowpath`: wake kswapd, retry at the min watermark,
    /// then direct reclaim through `reclaim` with the kernel's retry rules
    /// (`should_reclaim_retry`): costly orders and `__GFP_NORETRY` give up
    /// after one round, others retry while reclaim makes progress, up to
    /// MAX_RECLAIM_RETRIES rounds without it. The OOM decision is the
    /// caller's.
    fn __alloc_pages_slowpath(
        &mut self,
        cpu: usize,
        gfp: Gfp,
        order: u32,
        ac: &AllocContext,
        reclaim: &mut dyn Reclaim,
    ) -> Option<u64> {
        let alloc_flags = self.gfp_to_alloc_flags_cma(ac, Self::gfp_to_alloc_flags(gfp, order));
        if alloc_flags.contains(AllocFlags::KSWAPD) {
            self.wake_all_kswapds(order, ac.nid, ac.highest_zoneidx);
        }
        if let Some(pfn) = self.get_page_from_freelist(cpu, order, alloc_flags, ac) {
            return Some(pfn);
        }
        // __gfp_pfmemalloc_flags: __GFP_MEMALLOC may use every free page.
        if gfp.contains(Gfp::MEMALLOC) && !gfp.contains(Gfp::NOMEMALLOC) {
            let reserve =
                self.gfp_to_alloc_flags_cma(ac, AllocFlags::NO_WATERMARKS) | (alloc_flags & AllocFlags::KSWAPD);
            if let Some(pfn) = self.get_page_from_freelist(cpu, order, reserve, ac) {
                return Some(pfn);
            }
        }
        if !gfp.contains(Gfp::DIRECT_RECLAIM) {
            return None;
        }
        let costly = order > largo_types::PAGE_ALLOC_COSTLY_ORDER;
        // gfp_compaction_allowed: compaction needs __GFP_IO.
        let can_compact = gfp.contains(Gfp::IO);
        let mut compact_priority = CompactPriority::SyncLight;
        if can_compact && (costly || (order > 0 && ac.migratetype != MigrateType::Movable)) {
            let (page, result) =
                self.__alloc_pages_direct_compact(cpu, order, alloc_flags, ac, CompactPriority::Async, reclaim);
            if page.is_some() {
                return page;
            }
            if costly && gfp.contains(Gfp::NORETRY) {
                if matches!(result, CompactResult::Skipped | CompactResult::Deferred) {
                    return None;
                }
                compact_priority = CompactPriority::Async;
            }
        }
        let stall_zone = ZoneType::from_index(ac.highest_zoneidx.min(ZoneType::Movable.index()));
        let mut drained = false;
        let mut no_progress_loops = 0;
        for _ in 0..MAX_SLOWPATH_ROUNDS {
            // __alloc_pages_direct_reclaim
            self.count_event(VmEvent::allocstall(stall_zone), 1);
            let target = SWAP_CLUSTER_MAX.max(1 << order);
            let progress = reclaim.reclaim(self, cpu, ac.nid, target, false);
            if let Some(pfn) = self.get_page_from_freelist(cpu, order, alloc_flags, ac) {
                return Some(pfn);
            }
            if !drained {
                self.unreserve_highatomic_pageblock(ac.zonelist, ac.migratetype, false);
                self.drain_all_pages();
                drained = true;
                if let Some(pfn) = self.get_page_from_freelist(cpu, order, alloc_flags, ac) {
                    return Some(pfn);
                }
            }
            let mut compact_result = CompactResult::Skipped;
            if can_compact {
                let (page, result) =
                    self.__alloc_pages_direct_compact(cpu, order, alloc_flags, ac, compact_priority, reclaim);
                if page.is_some() {
                    return page;
                }
                compact_result = result;
            }
            if gfp.contains(Gfp::NORETRY) || (costly && !gfp.contains(Gfp::RETRY_MAYFAIL)) {
                return None;
            }
            // should_compact_retry: a failed compaction retries at a more
            // thorough priority.
            if order > 0
                && matches!(compact_result, CompactResult::Complete | CompactResult::PartialSkipped)
                && compact_priority > CompactPriority::SyncFull
            {
                compact_priority = if compact_priority == CompactPriority::Async {
                    CompactPriority::SyncLight
                } else {
                    CompactPriority::SyncFull
                };
            }
            if progress > 0 && !costly {
                no_progress_loops = 0;
            } else {
                no_progress_loops += 1;
            }
            if no_progress_loops > MAX_RECLAIM_RETRIES {
                return None;
            }
            if progress == 0 {
                return None;
            }
        }
        None
    }

    /// `prep_new_page`: the head record of the new folio (refcount 1,
    /// unmapped, its order, PG_head for order > 0). The tails are all-zero
    /// already (free-block interiors are), so this is O(1) for any order;
    /// see [`Page`](crate::memmap::Page) for why tails carry no head link.
    #[inline]
    pub(crate) fn prep_new_page(&mut self, pfn: u64, order: u32) {
        // Frames the host discarded after a report come back zero-filled
        // on the first touch: a host refault each.
        let r = &mut self.reporting;
        r.stats.host_refault_pages += r.discarded.take_range(pfn, 1 << order);
        let head = self.memmap.page_mut(pfn);
        head.clear();
        head.set_refcount(1);
        head.set_order(order);
        if order > 0 {
            head.set_flags(PageFlags::HEAD);
        }
    }

    /// `wake_all_kswapds`: wakes kswapd of every node of the zonelist.
    fn wake_all_kswapds(&mut self, order: u32, nid: usize, highest_zoneidx: usize) {
        for i in 0..self.nodes[nid].node_order.len() {
            let n = self.nodes[nid].node_order[i];
            let zi = (0..=highest_zoneidx)
                .rev()
                .map(|zt| n * MAX_NR_ZONES + zt)
                .find(|&zi| self.zones[zi].managed());
            if let Some(zi) = zi {
                self.wakeup_kswapd(zi, order, highest_zoneidx);
            }
        }
    }

    /// `wakeup_kswapd`: records a pending kswapd run for the zone's node
    /// unless the node is balanced and unboosted, or kswapd gave up.
    pub(crate) fn wakeup_kswapd(&mut self, zi: usize, order: u32, highest_zoneidx: usize) {
        let nid = self.zones[zi].nid;
        if self.nodes[nid].kswapd_failures >= MAX_RECLAIM_RETRIES {
            return;
        }
        if self.pgdat_balanced(nid, order, highest_zoneidx) && !self.pgdat_watermark_boosted(nid, highest_zoneidx) {
            return;
        }
        let node = &mut self.nodes[nid];
        node.kswapd_order = if node.kswapd_pending {
            node.kswapd_order.max(order)
        } else {
            order
        };
        node.kswapd_highest_zoneidx = if node.kswapd_pending {
            node.kswapd_highest_zoneidx.max(highest_zoneidx)
        } else {
            highest_zoneidx
        };
        node.kswapd_pending = true;
        self.kswapd_pending = true;
    }

    /// `pgdat_balanced`: some eligible zone meets its high watermark.
    pub(crate) fn pgdat_balanced(&self, nid: usize, order: u32, highest_zoneidx: usize) -> bool {
        let mut any_managed = false;
        for zt in 0..=highest_zoneidx {
            let zi = nid * MAX_NR_ZONES + zt;
            if !self.zones[zi].managed() {
                continue;
            }
            any_managed = true;
            let mark = self.zones[zi].high_wmark_pages();
            if self.zone_watermark_ok(zi, order, mark, highest_zoneidx, AllocFlags::empty()) {
                return true;
            }
        }
        !any_managed
    }

    /// `pgdat_watermark_boosted`.
    pub(crate) fn pgdat_watermark_boosted(&self, nid: usize, highest_zoneidx: usize) -> bool {
        (0..=highest_zoneidx).any(|zt| self.zones[nid * MAX_NR_ZONES + zt].watermark_boost > 0)
    }

    /// Some node has a pending kswapd wakeup.
    #[inline]
    pub fn kswapd_pending(&self) -> bool {
        self.kswapd_pending
    }

    /// Runs every pending kswapd (`balance_pgdat`) with nothing to reclaim.
    pub fn run_kswapd(&mut self) {
        self.run_kswapd_with(&mut NoReclaim);
    }

    /// `balance_pgdat` of every pending node: reclaim through `reclaim`
    /// until the node meets its high watermarks or reclaim stops making
    /// progress, then end boosted reclaim (clearing the boost). A run that
    /// leaves the node unbalanced counts a failure; after
    /// MAX_RECLAIM_RETRIES failures kswapd is no longer woken.
    pub fn run_kswapd_with(&mut self, reclaim: &mut dyn Reclaim) {
        self.kswapd_pending = false;
        for nid in 0..self.nodes.len() {
            if !self.nodes[nid].kswapd_pending {
                continue;
            }
            let (order, highest) = (self.nodes[nid].kswapd_order, self.nodes[nid].kswapd_highest_zoneidx);
            self.nodes[nid].kswapd_pending = false;
            self.count_event(VmEvent::Pageoutrun, 1);
            let cpu = self.nodes[nid].cpus.first().copied().unwrap_or(0);
            let mut reclaimed = 0;
            for _ in 0..MAX_SLOWPATH_ROUNDS {
                if self.pgdat_balanced(nid, order, highest) && !self.pgdat_watermark_boosted(nid, highest) {
                    break;
                }
                let target = self.kswapd_target(nid, highest).max(SWAP_CLUSTER_MAX);
                let freed = reclaim.reclaim(self, cpu, nid, target, true);
                reclaimed += freed;
                if freed == 0 {
                    break;
                }
            }
            let balanced = self.pgdat_balanced(nid, order, highest);
            let boosted = self.pgdat_watermark_boosted(nid, highest);
            for zt in 0..MAX_NR_ZONES {
                self.zones[nid * MAX_NR_ZONES + zt].watermark_boost = 0;
            }
            // kswapd_try_to_sleep / boosted reclaim: kcompactd compacts
            // for the order kswapd was woken for.
            if order > 0 || boosted {
                let kcompactd_order = order.max(self.geo.pageblock_order * boosted as u32);
                self.compactor()
                    .kcompactd_do_work(nid, kcompactd_order, highest, reclaim);
            }
            if balanced || reclaimed > 0 {
                self.nodes[nid].kswapd_failures = 0;
            } else {
                self.nodes[nid].kswapd_failures += 1;
            }
        }
    }

    /// Pages a node's eligible zones lack to reach their high watermarks.
    fn kswapd_target(&self, nid: usize, highest_zoneidx: usize) -> u64 {
        (0..=highest_zoneidx)
            .map(|zt| &self.zones[nid * MAX_NR_ZONES + zt])
            .filter(|z| z.managed())
            .map(|z| z.high_wmark_pages().saturating_sub(z.stat.nr_free_pages.max(0) as u64))
            .sum()
    }
}

/// `MAX_RECLAIM_RETRIES`.
pub(crate) const MAX_RECLAIM_RETRIES: u32 = 16;
/// Bound on reclaim rounds of one allocation or kswapd run (the kernel's
/// loops end the same way, through lack of progress).
const MAX_SLOWPATH_ROUNDS: u32 = 1024;
