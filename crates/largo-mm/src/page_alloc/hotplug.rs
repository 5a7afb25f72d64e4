//! The allocator side of memory hotplug (mm/memory_hotplug.c
//! `__add_pages`, `move_pfn_range_to_zone`, `online_pages_range`,
//! `__offline_isolated_pages`, `__remove_pages`): pages entering and
//! leaving the zones and their free lists. The block-level steps (what
//! may go offline, migration, errors) are `crate::hotplug`'s.

use largo_types::{MigrateType, ZoneType, MAX_NR_ZONES};

use super::{max_order_chunks, PageAlloc};
use crate::hotplug::ZoneOverlap;
use crate::layout::PfnRange;
use crate::memmap::PageFlags;

// From the add_remove step.
impl PageAlloc {
    /// The memmap of hot-added pages (`memmap_init_range` for an offline
    /// range): `PageOffline`, not present or managed until onlined, in no
    /// zone until then (`online_pages` picks the zone); the node spans it.
    pub(crate) fn add_pages(&mut self, nid: usize, range: PfnRange) {
        for pfn in range.start..range.end {
            self.memmap.page_mut(pfn).set_flags(PageFlags::OFFLINE);
        }
        let at = self.ram.partition_point(|r| r.start < range.start);
        self.ram.insert(at, range);
        let node = &mut self.nodes[nid];
        node.node_end_pfn = node.node_end_pfn.max(range.end);
    }

    /// `move_pfn_range_to_zone` / `resize_zone_range`: zone `zone_type`
    /// of node `nid` grows to span `range`, unless that would overlap
    /// another zone of the node.
    pub(crate) fn span_zone_over(
        &mut self,
        nid: usize,
        zone_type: ZoneType,
        range: PfnRange,
    ) -> Result<usize, ZoneOverlap> {
        let zi = nid * MAX_NR_ZONES + zone_type.index();
        let zone = &self.zones[zi];
        let (start, end) = if zone.spanned_pages == 0 {
            (range.start, range.end)
        } else {
            (zone.zone_start_pfn.min(range.start), zone.zone_end_pfn().max(range.end))
        };
        for other in nid * MAX_NR_ZONES..(nid + 1) * MAX_NR_ZONES {
            let o = &self.zones[other];
            if other != zi && o.spanned_pages > 0 && o.zone_start_pfn < end && start < o.zone_end_pfn() {
                return Err(ZoneOverlap {
                    zone: zone.name(),
                    other: o.name(),
                });
            }
        }
        let zone = &mut self.zones[zi];
        zone.zone_start_pfn = start;
        zone.spanned_pages = end - start;
        let max_pfn = self.memmap.len();
        self.build_section_zones(max_pfn);
        Ok(zi)
    }

    /// `__remove_pages` of an offline range: its records cleared, its
    /// pageblocks back to MOVABLE, no longer RAM.
    pub(crate) fn remove_pages(&mut self, range: PfnRange) {
        let pb = self.geo.pageblock_nr_pages();
        for pfn in range.start..range.end {
            self.memmap.page_mut(pfn).clear();
        }
        let mut p = range.start;
        while p < range.end {
            let old = self.pageblocks.underlying_migratetype(p);
            self.gigablock_retype(p, old, MigrateType::Movable);
            self.pageblocks.set_migratetype(p, MigrateType::Movable);
            p += pb;
        }
        let mut kept = Vec::new();
        for r in self.ram.drain(..) {
            let before = PfnRange::new(r.start, r.end.min(range.start));
            let after = PfnRange::new(r.start.max(range.end), r.end);
            kept.extend([before, after].into_iter().filter(|x| !x.is_empty()));
        }
        self.ram = kept;
    }
}

// From the offline step.
impl PageAlloc {
    /// `__offline_isolated_pages`: every free block of the isolated range
    /// leaves the free lists; its pages become `PageOffline`. The
    /// pageblocks stay isolated while offline.
    pub(crate) fn __offline_isolated_pages(&mut self, zi: usize, start: u64, end: u64) {
        for (pfn, order) in self.isolated_free_blocks(start, end) {
            self.del_page_from_free_list(zi, pfn, order, MigrateType::Isolate);
            for p in pfn..pfn + (1 << order) {
                let page = self.memmap.page_mut(p);
                page.clear();
                page.set_flags(PageFlags::OFFLINE);
            }
        }
        let nr = end - start;
        let blocks = nr.div_ceil(self.geo.pageblock_nr_pages());
        let zone = &mut self.zones[zi];
        zone.nr_isolate_pageblock -= blocks;
        zone.managed_pages -= nr;
        zone.present_pages -= nr;
        if zone.present_pages == 0 {
            // The zone leaves the zonelists.
            self.build_all_zonelists();
        }
        self.init_per_zone_wmark_min();
    }
}

// From the online step.
impl PageAlloc {
    /// `move_pfn_range_to_zone` (pageblocks isolated) and
    /// `online_pages_range`, then `undo_isolate_page_range`; the pages of
    /// `keep_offline` stay `PageOffline` with the driver's reference.
    pub(crate) fn online_pages_range(&mut self, zi: usize, start: u64, end: u64, keep_offline: &[PfnRange]) {
        let pb = self.geo.pageblock_nr_pages();
        for pfn in start..end {
            self.memmap.page_mut(pfn).clear();
        }
        let mut p = start;
        while p < end {
            self.pageblocks.set_migratetype(p, largo_types::MigrateType::Isolate);
            p += pb;
        }
        self.zones[zi].nr_isolate_pageblock += (end - start).div_ceil(pb);
        self.zones[zi].present_pages += end - start;
        let online = crate::layout::subtract(&[PfnRange::new(start, end)], keep_offline.iter().copied());
        for r in &online {
            for (pfn, order) in max_order_chunks(self.geo.max_page_order, r.start, r.end) {
                self.__free_pages_core(zi, pfn, order);
            }
        }
        for r in keep_offline {
            for pfn in r.start..r.end {
                let page = self.memmap.page_mut(pfn);
                page.set_flags(PageFlags::OFFLINE);
                page.set_refcount(1);
            }
        }
        self.undo_isolate_page_range(start, end);
        self.init_per_zone_wmark_min();
    }
}
