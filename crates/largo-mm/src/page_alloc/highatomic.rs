//! The high-order atomic reserve (`reserve_highatomic_pageblock`,
//! `unreserve_highatomic_pageblock`): pageblocks set aside for high-order
//! allocations that cannot wait.

use largo_types::MigrateType;

use super::PageAlloc;

impl PageAlloc {
    /// `reserve_highatomic_pageblock`: after a successful high-order atomic
    /// allocation, moves its pageblock to MIGRATE_HIGHATOMIC, up to about
    /// 1% of the zone.
    pub(crate) fn reserve_highatomic_pageblock(&mut self, zi: usize, pfn: u64, order: u32) {
        let pb_pages = self.geo.pageblock_nr_pages();
        let managed = self.zones[zi].managed_pages;
        if managed / 100 < pb_pages {
            return;
        }
        let max_managed = (managed / 100).div_ceil(pb_pages) * pb_pages;
        if self.zones[zi].nr_reserved_highatomic >= max_managed {
            return;
        }
        let mt = self.pageblocks.migratetype(pfn);
        if !mt.is_mergeable() {
            return;
        }
        if order < self.geo.pageblock_order {
            if self
                .move_freepages_block(zi, pfn, mt, MigrateType::HighAtomic)
                .is_none()
            {
                return;
            }
            self.zones[zi].nr_reserved_highatomic += pb_pages;
        } else {
            self.change_pageblock_range(pfn, order, MigrateType::HighAtomic);
            self.zones[zi].nr_reserved_highatomic += 1 << order;
        }
    }

    /// `unreserve_highatomic_pageblock`: gives one reserved block of the
    /// zonelist's zones to the failing allocation's migratetype. Keeps one
    /// block per zone unless `force`.
    pub(crate) fn unreserve_highatomic_pageblock(&mut self, zonelist: usize, new_mt: MigrateType, force: bool) -> bool {
        let pb_pages = self.geo.pageblock_nr_pages();
        for i in 0..self.zonelists[zonelist].zones.len() {
            let zi = self.zonelists[zonelist].zones[i];
            if !force && self.zones[zi].nr_reserved_highatomic <= pb_pages {
                continue;
            }
            for order in 0..=self.geo.max_page_order {
                let Some(pfn) = self.zones[zi].free_area[order as usize]
                    .list(MigrateType::HighAtomic)
                    .first()
                else {
                    continue;
                };
                let size = pb_pages.max(1 << order).min(self.zones[zi].nr_reserved_highatomic);
                self.zones[zi].nr_reserved_highatomic -= size;
                if order < self.geo.pageblock_order {
                    if self
                        .move_freepages_block(zi, pfn, MigrateType::HighAtomic, new_mt)
                        .is_some()
                    {
                        return true;
                    }
                } else {
                    self.move_to_free_list(zi, pfn, order, MigrateType::HighAtomic, new_mt);
                    self.change_pageblock_range(pfn, order, new_mt);
                    return true;
                }
            }
        }
        false
    }
}
