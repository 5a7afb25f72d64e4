//! A memory zone (`struct zone`): its span, free areas, watermarks and
//! counters.

use bitflags::bitflags;
use largo_types::{MigrateType, ZoneType, MAX_NR_ZONES, MIGRATE_TYPES};

use super::gfp::{Wmark, NR_WMARK};
use super::list::ListHead;

/// `struct free_area`: one list per migratetype of free blocks of one order.
///
/// Invariant: `nr_free` is the sum of the lists' lengths.
#[derive(Clone, Copy, Debug, Default)]
pub struct FreeArea {
    pub free_list: [ListHead; MIGRATE_TYPES],
    pub nr_free: u64,
    /// Blocks on these lists with `PG_reported` (free page reporting;
    /// the seed series kept this per zone and order as `reported_pages`).
    /// Invariant: equals the REPORTED heads on the lists.
    pub nr_reported: u64,
}

impl FreeArea {
    #[inline]
    pub fn list(&self, mt: MigrateType) -> &ListHead {
        &self.free_list[mt.index()]
    }

    /// `free_area_empty`.
    #[inline]
    pub fn is_empty(&self, mt: MigrateType) -> bool {
        self.free_list[mt.index()].is_empty()
    }
}

bitflags! {
    /// `enum zone_flags`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ZoneFlags: u8 {
        /// `ZONE_BOOSTED_WATERMARK`: a fallback boosted the watermark; wake kswapd.
        const BOOSTED_WATERMARK = 1 << 0;
        /// `ZONE_RECLAIM_ACTIVE`: kswapd is reclaiming this zone.
        const RECLAIM_ACTIVE = 1 << 1;
        /// `ZONE_BELOW_HIGH`: free pages fell below the high watermark.
        const BELOW_HIGH = 1 << 2;
    }
}

/// The zone counters of /proc/zoneinfo and /proc/vmstat that the model keeps.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZoneStat {
    /// `NR_FREE_PAGES`: pages on free lists other than MIGRATE_ISOLATE.
    pub nr_free_pages: i64,
    /// `NR_FREE_PAGES_BLOCKS`: of those, pages in blocks of pageblock order or more.
    pub nr_free_pages_blocks: i64,
    /// `NR_FREE_CMA_PAGES`: of those, pages on MIGRATE_CMA lists.
    pub nr_free_cma: i64,
    pub numa_hit: u64,
    pub numa_miss: u64,
    pub numa_foreign: u64,
    pub numa_interleave: u64,
    pub numa_local: u64,
    pub numa_other: u64,
}

#[derive(Clone, Debug)]
pub struct Zone {
    pub nid: usize,
    pub zone_type: ZoneType,
    pub zone_start_pfn: u64,
    pub spanned_pages: u64,
    pub present_pages: u64,
    /// Pages handed to the buddy allocator at boot or by hotplug.
    pub managed_pages: u64,
    /// `free_area[NR_PAGE_ORDERS]`.
    pub free_area: Vec<FreeArea>,
    /// `_watermark[]`: min, low, high, promo.
    pub watermark: [u64; NR_WMARK],
    pub watermark_boost: u64,
    pub lowmem_reserve: [u64; MAX_NR_ZONES],
    pub nr_reserved_highatomic: u64,
    pub nr_free_highatomic: u64,
    /// `zone->cma_pages`: pages of activated CMA areas in the zone.
    pub cma_pages: u64,
    /// `nr_isolate_pageblock`: pageblocks currently isolated.
    pub nr_isolate_pageblock: u64,
    /// Compaction's cached scanner positions and deferral.
    pub compact: crate::compaction::ZoneCompact,
    pub flags: ZoneFlags,
    /// The zone-wide pcp settings every cpu's pageset copies.
    pub pageset_high_min: i32,
    pub pageset_high_max: i32,
    pub pageset_batch: i32,
    /// `stat_threshold` of the per-cpu vmstat diffs (zoneinfo prints it).
    pub stat_threshold: u32,
    pub stat: ZoneStat,
    /// Present pages not yet handed to the allocator (deferred struct
    /// page init), lowest first: `(start_pfn, nr_pages)`. Only a zone
    /// shaped after a host that initialises memory lazily has any.
    pub deferred: Vec<(u64, u64)>,
}

impl Zone {
    pub fn new(nid: usize, zone_type: ZoneType, nr_page_orders: usize) -> Zone {
        Zone {
            nid,
            zone_type,
            zone_start_pfn: 0,
            spanned_pages: 0,
            present_pages: 0,
            managed_pages: 0,
            free_area: vec![FreeArea::default(); nr_page_orders],
            watermark: [0; NR_WMARK],
            watermark_boost: 0,
            lowmem_reserve: [0; MAX_NR_ZONES],
            nr_reserved_highatomic: 0,
            nr_free_highatomic: 0,
            cma_pages: 0,
            nr_isolate_pageblock: 0,
            compact: Default::default(),
            flags: ZoneFlags::empty(),
            pageset_high_min: 0,
            pageset_high_max: 0,
            pageset_batch: 0,
            stat_threshold: 0,
            stat: ZoneStat::default(),
            deferred: Vec::new(),
        }
    }

    #[inline]
    pub fn zone_end_pfn(&self) -> u64 {
        self.zone_start_pfn + self.spanned_pages
    }

    /// `zone_spans_pfn`.
    #[inline]
    pub fn spans(&self, pfn: u64) -> bool {
        pfn >= self.zone_start_pfn && pfn < self.zone_end_pfn()
    }

    /// `populated_zone`: the zone has present pages.
    #[inline]
    pub fn populated(&self) -> bool {
        self.present_pages > 0
    }

    /// `managed_zone`.
    #[inline]
    pub fn managed(&self) -> bool {
        self.managed_pages > 0
    }

    /// `wmark_pages`: the watermark plus any boost.
    #[inline]
    pub fn wmark_pages(&self, w: Wmark) -> u64 {
        self.watermark[w as usize] + self.watermark_boost
    }

    #[inline]
    pub fn min_wmark_pages(&self) -> u64 {
        self.wmark_pages(Wmark::Min)
    }

    #[inline]
    pub fn low_wmark_pages(&self) -> u64 {
        self.wmark_pages(Wmark::Low)
    }

    #[inline]
    pub fn high_wmark_pages(&self) -> u64 {
        self.wmark_pages(Wmark::High)
    }

    #[inline]
    pub fn free_pages(&self) -> i64 {
        self.stat.nr_free_pages
    }

    pub fn name(&self) -> &'static str {
        self.zone_type.name()
    }
}
