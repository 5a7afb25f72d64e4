//! Watermarks and reserves (mm/page_alloc.c `calculate_min_free_kbytes`,
//! `__setup_per_zone_wmarks`, `setup_per_zone_lowmem_reserve`,
//! `calculate_totalreserve_pages`, `__zone_watermark_ok`; mm/khugepaged.c
//! `set_recommended_min_free_kbytes`; mm/vmstat.c `calculate_normal_threshold`).

use largo_types::{MigrateType, ZoneType, MAX_NR_ZONES, MIGRATE_PCPTYPES};

use super::gfp::{AllocFlags, Wmark};
use super::PageAlloc;

/// The sysctls and settings the allocator reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// `vm.min_free_kbytes` in effect.
    pub min_free_kbytes: u64,
    /// A value the user wrote to `vm.min_free_kbytes` (`user_min_free_kbytes`).
    pub user_min_free_kbytes: Option<u64>,
    /// `vm.watermark_scale_factor` (default 10, i.e. 0.1%).
    pub watermark_scale_factor: u64,
    /// `vm.watermark_boost_factor` (default 15000, i.e. 150%).
    pub watermark_boost_factor: u64,
    /// `vm.percpu_pagelist_high_fraction` (0 = auto-tuned).
    pub percpu_pagelist_high_fraction: u64,
    /// `vm.lowmem_reserve_ratio`.
    pub lowmem_reserve_ratio: [u64; MAX_NR_ZONES],
    /// `hugepage_pmd_enabled()`: PMD-size THP can be used, so khugepaged
    /// runs and raises min_free_kbytes.
    pub thp_pmd_enabled: bool,
    /// Last-level cache per cpu (`per_cpu_data_slice_size`); decides
    /// `PCPF_FREE_HIGH_BATCH`. Default: the host's 32 MiB L3 over 2 cpus.
    pub cpu_data_slice_bytes: u64,
    /// `vm.compaction_proactiveness` (0..=100, default 20): kcompactd
    /// compacts on its own while a node's fragmentation score is above
    /// `100 - proactiveness + 10`.
    pub compaction_proactiveness: u64,
    /// `vm.extfrag_threshold` (0..=1000, default 500): below it a costly
    /// allocation failure is lack of memory and compaction is not tried.
    pub extfrag_threshold: u64,
    /// From `largo/movable_min_kb` (0, off): ZONE_MOVABLE serves only
    /// allocations of at least this order, a TAO-style zone for large
    /// folios (not a kernel knob).
    pub movable_min_order: u32,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            min_free_kbytes: 0,
            user_min_free_kbytes: None,
            watermark_scale_factor: 10,
            watermark_boost_factor: 15000,
            percpu_pagelist_high_fraction: 0,
            lowmem_reserve_ratio: [256, 256, 32, 0, 0],
            thp_pmd_enabled: true,
            cpu_data_slice_bytes: 16 << 20,
            compaction_proactiveness: 20,
            extfrag_threshold: 500,
            movable_min_order: 0,
        }
    }
}

/// `SWAP_CLUSTER_MAX`.
const SWAP_CLUSTER_MAX: u64 = 32;

impl PageAlloc {
    /// `init_per_zone_wmark_min` at boot, including the THP raise that
    /// `hugepage_init` applies when PMD THP is enabled.
    pub(crate) fn init_per_zone_wmark_min(&mut self) {
        self.calculate_min_free_kbytes();
        self.setup_per_zone_wmarks();
        self.refresh_zone_stat_thresholds();
        self.setup_per_zone_lowmem_reserve();
        if self.tunables.thp_pmd_enabled {
            self.set_recommended_min_free_kbytes();
        }
    }

    /// `nr_free_zone_pages(gfp_zone(GFP_USER))` = `nr_free_buffer_pages`:
    /// managed pages above the high watermark in zones up to Normal.
    fn nr_free_buffer_pages(&self) -> u64 {
        self.zones
            .iter()
            .filter(|z| z.zone_type <= ZoneType::Normal)
            .map(|z| z.managed_pages.saturating_sub(z.high_wmark_pages()))
            .sum()
    }

    /// `calculate_min_free_kbytes`: sqrt(lowmem_kbytes * 16), clamped to
    /// 128..=262144, unless the user set more.
    fn calculate_min_free_kbytes(&mut self) {
        let lowmem_kbytes = self.nr_free_buffer_pages() * (self.geo.page_size() >> 10);
        let new = (lowmem_kbytes * 16).isqrt();
        if self.tunables.user_min_free_kbytes.is_none_or(|user| new > user) {
            self.tunables.min_free_kbytes = new.clamp(128, 262144);
        }
    }

    /// `set_recommended_min_free_kbytes`: with PMD THP, keep about
    /// 2 + MIGRATE_PCPTYPES^2 pageblocks free per zone (at most 5% of
    /// lowmem); without it, back to the computed value.
    pub(crate) fn set_recommended_min_free_kbytes(&mut self) {
        if !self.tunables.thp_pmd_enabled {
            self.calculate_min_free_kbytes();
            self.setup_per_zone_wmarks();
            return;
        }
        let nr_zones = self
            .zones
            .iter()
            .filter(|z| z.populated() && z.zone_type <= ZoneType::Normal)
            .count() as u64;
        let pb = self.geo.pageblock_nr_pages();
        let pcptypes = MIGRATE_PCPTYPES as u64;
        let mut recommended = pb * nr_zones * 2 + pb * nr_zones * pcptypes * pcptypes;
        recommended = recommended.min(self.nr_free_buffer_pages() / 20);
        let recommended_kbytes = recommended << (self.geo.page_shift - 10);
        if recommended_kbytes > self.tunables.min_free_kbytes {
            self.tunables.min_free_kbytes = recommended_kbytes;
        }
        self.setup_per_zone_wmarks();
    }

    /// `setup_per_zone_wmarks`: min proportional to each lowmem zone's size,
    /// low and high a scale-factor distance above, then the pcp limits
    /// (which depend on the low watermark) and the reserve totals.
    pub(crate) fn setup_per_zone_wmarks(&mut self) {
        let pages_min = self.tunables.min_free_kbytes >> (self.geo.page_shift - 10);
        let lowmem_pages: u64 = self
            .zones
            .iter()
            .filter(|z| z.zone_type != ZoneType::Movable)
            .map(|z| z.managed_pages)
            .sum();
        let scale = self.tunables.watermark_scale_factor;
        for zone in &mut self.zones {
            let managed = zone.managed_pages;
            let tmp = (pages_min as u128 * managed as u128 / lowmem_pages.max(1) as u128) as u64;
            zone.watermark[Wmark::Min as usize] = if zone.zone_type == ZoneType::Movable {
                (managed / 1024).clamp(SWAP_CLUSTER_MAX, 128)
            } else {
                tmp
            };
            let delta = (tmp >> 2).max(managed * scale / 10000);
            zone.watermark_boost = 0;
            zone.watermark[Wmark::Low as usize] = zone.watermark[Wmark::Min as usize] + delta;
            zone.watermark[Wmark::High as usize] = zone.watermark[Wmark::Low as usize] + delta;
            zone.watermark[Wmark::Promo as usize] = zone.watermark[Wmark::High as usize] + delta;
        }
        self.calculate_totalreserve_pages();
        for zi in 0..self.zones.len() {
            self.zone_pcp_update(zi, 0);
        }
    }

    /// `setup_per_zone_lowmem_reserve`: pages a lower zone keeps back from
    /// allocations that could have used higher zones.
    pub(crate) fn setup_per_zone_lowmem_reserve(&mut self) {
        for nid in 0..self.nodes.len() {
            let base = nid * MAX_NR_ZONES;
            for i in 0..MAX_NR_ZONES - 1 {
                let ratio = self.tunables.lowmem_reserve_ratio[i];
                let clear = ratio == 0 || self.zones[base + i].managed_pages == 0;
                let mut managed = 0;
                for j in i + 1..MAX_NR_ZONES {
                    managed += self.zones[base + j].managed_pages;
                    self.zones[base + i].lowmem_reserve[j] = if clear { 0 } else { managed / ratio };
                }
            }
        }
        self.calculate_totalreserve_pages();
    }

    /// `calculate_totalreserve_pages`: the high watermark plus the largest
    /// lowmem reserve of every zone, capped at its size.
    fn calculate_totalreserve_pages(&mut self) {
        self.totalreserve_pages = self
            .zones
            .iter()
            .map(|z| {
                let max_reserve = z.lowmem_reserve[z.zone_type.index()..]
                    .iter()
                    .max()
                    .copied()
                    .unwrap_or(0);
                (max_reserve + z.high_wmark_pages()).min(z.managed_pages)
            })
            .sum();
    }

    /// `refresh_zone_stat_thresholds` with `calculate_normal_threshold`.
    pub(crate) fn refresh_zone_stat_thresholds(&mut self) {
        let cpus = self.nr_cpus as u64;
        let fls = |x: u64| 64 - x.leading_zeros() as u64;
        let page_shift = self.geo.page_shift;
        for zone in &mut self.zones {
            let mem = zone.managed_pages >> (27u32.saturating_sub(page_shift));
            zone.stat_threshold = (2 * fls(cpus) * (1 + fls(mem))).min(125) as u32;
        }
    }

    /// `__zone_watermark_unusable_free`.
    #[inline]
    fn unusable_free(&self, zi: usize, order: u32, alloc_flags: AllocFlags) -> i64 {
        let mut unusable = (1i64 << order) - 1;
        if !alloc_flags.intersects(AllocFlags::RESERVES) {
            unusable += self.zones[zi].nr_free_highatomic as i64;
        }
        if !alloc_flags.contains(AllocFlags::CMA) {
            unusable += self.zones[zi].stat.nr_free_cma;
        }
        unusable
    }

    /// `__zone_watermark_ok`.
    pub(crate) fn __zone_watermark_ok(
        &self,
        zi: usize,
        order: u32,
        mark: u64,
        highest_zoneidx: usize,
        alloc_flags: AllocFlags,
        free_pages: i64,
    ) -> bool {
        let zone = &self.zones[zi];
        let mut min = mark as i64;
        let free_pages = free_pages - self.unusable_free(zi, order, alloc_flags);
        if alloc_flags.intersects(AllocFlags::RESERVES) {
            if alloc_flags.contains(AllocFlags::MIN_RESERVE) {
                min -= min / 2;
                if alloc_flags.contains(AllocFlags::NON_BLOCK) {
                    min -= min / 4;
                }
            }
            if alloc_flags.contains(AllocFlags::OOM) {
                min -= min / 2;
            }
        }
        if free_pages <= min + zone.lowmem_reserve[highest_zoneidx] as i64 {
            return false;
        }
        if order == 0 {
            return true;
        }
        for area in &zone.free_area[order as usize..] {
            if area.nr_free == 0 {
                continue;
            }
            if (0..MIGRATE_PCPTYPES).any(|mt| !area.free_list[mt].is_empty()) {
                return true;
            }
            if alloc_flags.contains(AllocFlags::CMA) && !area.is_empty(MigrateType::Cma) {
                return true;
            }
            if alloc_flags.intersects(AllocFlags::HIGHATOMIC | AllocFlags::OOM)
                && !area.is_empty(MigrateType::HighAtomic)
            {
                return true;
            }
        }
        false
    }

    /// `zone_watermark_ok`.
    pub fn zone_watermark_ok(
        &self,
        zi: usize,
        order: u32,
        mark: u64,
        highest_zoneidx: usize,
        alloc_flags: AllocFlags,
    ) -> bool {
        let free = self.zones[zi].stat.nr_free_pages;
        self.__zone_watermark_ok(zi, order, mark, highest_zoneidx, alloc_flags, free)
    }

    /// `zone_watermark_fast`: a quick order-0 check, then the full one.
    #[inline]
    pub(crate) fn zone_watermark_fast(
        &self,
        zi: usize,
        order: u32,
        mark: u64,
        highest_zoneidx: usize,
        alloc_flags: AllocFlags,
    ) -> bool {
        let zone = &self.zones[zi];
        let free_pages = zone.stat.nr_free_pages;
        if order == 0 {
            let reserved = self.unusable_free(zi, 0, alloc_flags);
            let usable = free_pages - free_pages.min(reserved);
            if usable > (mark + zone.lowmem_reserve[highest_zoneidx]) as i64 {
                return true;
            }
        }
        if self.__zone_watermark_ok(zi, order, mark, highest_zoneidx, alloc_flags, free_pages) {
            return true;
        }
        if order == 0
            && alloc_flags.contains(AllocFlags::MIN_RESERVE)
            && zone.watermark_boost > 0
            && alloc_flags.wmark() == Wmark::Min
        {
            let mark = zone.watermark[Wmark::Min as usize];
            return self.__zone_watermark_ok(zi, order, mark, highest_zoneidx, alloc_flags, free_pages);
        }
        false
    }

    // --- sysctl writes ---

    /// Writing `vm.min_free_kbytes`.
    pub fn set_min_free_kbytes(&mut self, kbytes: u64) {
        self.tunables.min_free_kbytes = kbytes;
        self.tunables.user_min_free_kbytes = Some(kbytes);
        self.setup_per_zone_wmarks();
    }

    /// Writing `vm.watermark_scale_factor`.
    pub fn set_watermark_scale_factor(&mut self, factor: u64) {
        self.tunables.watermark_scale_factor = factor;
        self.setup_per_zone_wmarks();
    }

    /// Writing `vm.watermark_boost_factor`.
    pub fn set_watermark_boost_factor(&mut self, factor: u64) {
        self.tunables.watermark_boost_factor = factor;
    }

    /// Writing `vm.percpu_pagelist_high_fraction`.
    pub fn set_percpu_pagelist_high_fraction(&mut self, fraction: u64) {
        self.tunables.percpu_pagelist_high_fraction = fraction;
        for zi in 0..self.zones.len() {
            self.zone_pcp_update(zi, 0);
        }
    }

    /// Writing `vm.lowmem_reserve_ratio`.
    pub fn set_lowmem_reserve_ratio(&mut self, ratio: [u64; MAX_NR_ZONES]) {
        self.tunables.lowmem_reserve_ratio = ratio;
        self.setup_per_zone_lowmem_reserve();
    }

    /// PMD-size THP became enabled or disabled (`start_stop_khugepaged`).
    pub fn set_thp_pmd_enabled(&mut self, enabled: bool) {
        if self.tunables.thp_pmd_enabled == enabled {
            return;
        }
        self.tunables.thp_pmd_enabled = enabled;
        self.set_recommended_min_free_kbytes();
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::{Layout, LayoutSpec};
    use crate::page_alloc::{zone_index, PageAlloc, Tunables, Wmark};
    use largo_types::{Preset, ZoneType};

    /// The host's /proc/zoneinfo, taken while its Normal zone had 327680
    /// managed pages (deferred struct page init): with the same managed
    /// counts, every watermark, reserve and pcp limit must match.
    #[test]
    fn host_zoneinfo_figures_follow_from_managed_pages() {
        let geo = Preset::X86_64.geometry();
        let layout = Layout::build(&geo, &LayoutSpec::new(24 << 30, 2)).unwrap();
        let mut pa = PageAlloc::boot(geo, &layout, 2, Tunables::default());
        pa.zones[zone_index(0, ZoneType::Normal)].managed_pages = 327680;
        pa.tunables = Tunables::default();
        pa.init_per_zone_wmark_min();
        assert_eq!(pa.tunables.min_free_kbytes, 67584, "host vm.min_free_kbytes");

        // (zone, [min, low, high, promo], protection, batch, high_min, high_max, threshold)
        type Row = (ZoneType, [u64; 4], [u64; 5], i32, i32, i32, u32);
        let host: [Row; 3] = [
            (
                ZoneType::Dma,
                [58, 72, 86, 100],
                [0, 3018, 4298, 4298, 4298],
                1,
                36,
                240,
                4,
            ),
            (
                ZoneType::Dma32,
                [11823, 14778, 17733, 20688],
                [0, 0, 1280, 1280, 1280],
                63,
                7389,
                48300,
                24,
            ),
            (
                ZoneType::Normal,
                [5013, 6266, 7519, 8772],
                [0, 0, 0, 0, 0],
                63,
                3133,
                20480,
                20,
            ),
        ];
        for (zt, wmarks, protection, batch, high_min, high_max, threshold) in host {
            let zi = zone_index(0, zt);
            let z = &pa.zones[zi];
            let got = [Wmark::Min, Wmark::Low, Wmark::High, Wmark::Promo].map(|w| z.wmark_pages(w));
            assert_eq!(got, wmarks, "{zt:?} watermarks");
            assert_eq!(z.lowmem_reserve, protection, "{zt:?} protection");
            assert_eq!(z.stat_threshold, threshold, "{zt:?} vm stats threshold");
            let pcp = pa.pcp(zi, 1);
            assert_eq!(
                (pcp.batch, pcp.high_min, pcp.high_max),
                (batch, high_min, high_max),
                "{zt:?} pageset"
            );
        }
        let movable = &pa.zones[zone_index(0, ZoneType::Movable)];
        assert_eq!(
            movable.watermark,
            [32, 32, 32, 32],
            "empty Movable zone: clamp(0, 32, 128)"
        );
    }

    #[test]
    fn thp_off_means_the_computed_min_free_kbytes() {
        let geo = Preset::X86_64.geometry();
        let layout = Layout::build(&geo, &LayoutSpec::new(24 << 30, 2)).unwrap();
        let tunables = Tunables {
            thp_pmd_enabled: false,
            ..Tunables::default()
        };
        let pa = PageAlloc::boot(geo, &layout, 2, tunables);
        let managed_kb = pa.managed_pages() * 4;
        assert_eq!(pa.tunables.min_free_kbytes, (managed_kb * 16).isqrt());
    }
}
