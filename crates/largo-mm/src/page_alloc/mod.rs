//! The buddy page allocator (mm/page_alloc.c): zones, free areas with
//! migratetype lists, pageblocks, per-cpu page lists, watermarks.
//!
//! Files split the kernel's page_alloc.c by concept:
//! - `buddy.rs`: free-list primitives, `__free_one_page`, `expand`
//! - `fallback.rs`: migratetype fallback, block claiming and stealing
//! - `rmqueue.rs`: taking pages off the free lists
//! - `pcp.rs`: per-cpu page lists and their batch/high tuning
//! - `watermark.rs`: min_free_kbytes, watermarks, lowmem reserves, `zone_watermark_ok`
//! - `alloc.rs`: `__alloc_pages`, `get_page_from_freelist`, the slow path
//! - `free.rs`: `__free_pages`, `free_frozen_pages`, `free_pages_prepare`
//! - `split.rs`: splitting a folio to a lower order
//! - `highatomic.rs`: the high-order atomic reserve
//! - `hotplug.rs`: pages entering and leaving the zones (memory hotplug's allocator side)
//! - `isolate_free.rs`: `__isolate_free_page` / `__putback_isolated_page`
//! - `check.rs`: the invariant checker (every list, counter and record recomputed)

mod alloc;
mod buddy;
pub mod check;
mod deferred;
pub mod exact;
mod fallback;
mod free;
pub mod gfp;
pub mod gigablock;
mod highatomic;
mod hotplug;
mod isolate_free;
pub mod isolation;
pub mod list;
pub mod pageblock;
pub mod pcp;
pub mod pcp_list;
mod rmqueue;
pub mod shape;
mod split;
pub mod target;
mod watermark;
pub mod zone;

use largo_types::{Geometry, MigrateType, ZoneType, MAX_NR_ZONES, MIGRATE_TYPES};

pub use alloc::{AllocError, NoReclaim, Reclaim, SWAP_CLUSTER_MAX};
pub(crate) use fallback::Fallback;
pub use free::FreeError;
pub use gfp::{AllocFlags, Gfp, Wmark};
pub use pcp::PerCpuPages;
pub use split::SplitError;
pub use target::MigrationTarget;
pub use watermark::Tunables;
pub use zone::{FreeArea, Zone, ZoneFlags};

use crate::layout::{Layout, PfnRange};
use crate::memmap::{Memmap, PageFlags};
use crate::stats::{VmEvent, VmEvents};
use pageblock::Pageblocks;

/// Free Page Internal flags (`fpi_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fpi {
    /// `FPI_SKIP_REPORT_NOTIFY`: do not notify free page reporting.
    pub skip_report_notify: bool,
    /// `FPI_TO_TAIL`: place the (merged) block at the tail of its list.
    pub to_tail: bool,
}

impl Fpi {
    pub const NONE: Fpi = Fpi {
        skip_report_notify: false,
        to_tail: false,
    };
    pub const TO_TAIL: Fpi = Fpi {
        skip_report_notify: false,
        to_tail: true,
    };
}

/// A node's allocator view (`pglist_data` as far as page_alloc needs it).
#[derive(Clone, Debug)]
pub struct Node {
    pub nid: usize,
    pub node_start_pfn: u64,
    pub node_end_pfn: u64,
    pub cpus: Vec<usize>,
    /// Nodes in fallback order, this node first (the zonelist's node order).
    pub node_order: Vec<usize>,
    /// `kswapd_failures`: consecutive kswapd runs that reclaimed nothing.
    pub kswapd_failures: u32,
    /// A kswapd wakeup is pending (`wakeup_kswapd` was called).
    pub kswapd_pending: bool,
    pub kswapd_order: u32,
    pub kswapd_highest_zoneidx: usize,
}

/// The page allocator of one machine.
pub struct PageAlloc {
    pub(crate) geo: Geometry,
    pub(crate) memmap: Memmap,
    pub(crate) pageblocks: Pageblocks,
    /// Every zone of every node, `nid * MAX_NR_ZONES + zone_type`.
    pub(crate) zones: Vec<Zone>,
    /// Per-cpu pagesets, `zone_index * nr_cpus + cpu`.
    pub(crate) pcp: Vec<PerCpuPages>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) nr_cpus: usize,
    /// Zonelists: for each node, fallback (0) or `__GFP_THISNODE` (1), and
    /// highest zone type, the populated zones to try in order; indexed
    /// `(nid * 2 + thisnode) * MAX_NR_ZONES + highest_zoneidx`.
    pub(crate) zonelists: Vec<alloc::Zonelist>,
    /// The zone of every section whose pfns all lie in one zone (the
    /// kernel keeps the zone in each page's flags; one entry per section
    /// is enough here), `MIXED_SECTION` where zones meet inside it.
    pub(crate) section_zone: Vec<u16>,
    /// `cpu_to_node` of every cpu.
    pub(crate) cpu_node: Vec<usize>,
    /// RAM ranges, for the invariant checker.
    pub(crate) ram: Vec<PfnRange>,
    pub(crate) tunables: Tunables,
    pub(crate) totalreserve_pages: u64,
    /// Some node has a pending kswapd wakeup.
    pub(crate) kswapd_pending: bool,
    /// `page_group_by_mobility_disabled`: too little memory to group pages by mobility.
    pub(crate) mobility_disabled: bool,
    pub events: VmEvents,
    /// Work counted for the cost model and the lock report.
    pub work: AllocWork,
    /// Successful allocations by order (boot excluded).
    pub allocs_by_order: Vec<u64>,
    /// Free page reporting (no device registered by default).
    pub(crate) reporting: crate::reporting::PageReporting,
    /// The gigapageblock grouping, when turned on.
    pub(crate) gigablocks: Option<gigablock::Gigablocks>,
    /// Compaction's state: the compacting context, the direct compactor's
    /// capture, kcompactd's timer.
    pub(crate) compaction: crate::compaction::CompactionState,
    /// The CMA areas (`cma_areas[]`), empty without `--cma`.
    pub(crate) cma: Vec<crate::cma::CmaArea>,
    /// `totalcma_pages`.
    pub(crate) totalcma_pages: u64,
    /// CONFIG_CMA: MIGRATE_TYPES counts MIGRATE_CMA.
    pub(crate) cma_types: bool,
    /// Whether `rmqueue_bulk` takes a free block at a time
    /// ([`PageAlloc::set_bulk_split`]); on unless a test compares the two.
    pub(crate) bulk_split: bool,
}

/// What the allocator did, in the units its cost depends on. Boot work is
/// not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllocWork {
    /// `zone->lock` acquisitions (`rmqueue_bulk`, `rmqueue_buddy`,
    /// `free_pcppages_bulk`, `free_one_page`).
    pub zone_lock: u64,
    /// Allocations served from a pcp list.
    pub alloc_pcp: u64,
    /// Allocations taken from the buddy lists directly (`rmqueue_buddy`).
    pub alloc_buddy: u64,
    /// Frees onto a pcp list.
    pub free_pcp: u64,
    /// Frees straight to the buddy lists (`free_one_page`).
    pub free_buddy: u64,
    /// Blocks moved between pcp and buddy lists by bulk refills and drains.
    pub pcp_bulk_blocks: u64,
    /// Buddy levels walked: one per merge in `__free_one_page`, one per
    /// half returned by `expand` (deeper with a larger MAX_PAGE_ORDER).
    pub buddy_levels: u64,
    /// Free blocks a direct compactor captured (`compaction_capture`).
    pub compaction_captures: u64,
}

/// `section_zone` entry of a section shared by two zones (or a hole and a zone).
const MIXED_SECTION: u16 = u16::MAX;

/// Index of a zone in [`PageAlloc::zones`].
#[inline]
pub fn zone_index(nid: usize, zone_type: ZoneType) -> usize {
    nid * MAX_NR_ZONES + zone_type.index()
}

impl PageAlloc {
    /// Boots the allocator over `layout`: marks reserved pages, hands the
    /// rest to the buddy allocator (`memblock_free_all`), then computes
    /// watermarks, lowmem reserves and pcp limits (`init_per_zone_wmark_min`).
    pub fn boot(geo: Geometry, layout: &Layout, nr_cpus: usize, tunables: Tunables) -> PageAlloc {
        let nodes = layout
            .nodes
            .iter()
            .map(|n| Node {
                nid: n.nid,
                node_start_pfn: n.start_pfn,
                node_end_pfn: n.end_pfn,
                cpus: n.cpus.clone(),
                node_order: node_order(n.nid, layout.nodes.len()),
                kswapd_failures: 0,
                kswapd_pending: false,
                kswapd_order: 0,
                kswapd_highest_zoneidx: 0,
            })
            .collect();
        let zones = layout
            .zones
            .iter()
            .map(|zl| {
                let mut z = Zone::new(zl.nid, zl.zone_type, geo.nr_page_orders());
                z.zone_start_pfn = zl.start_pfn;
                z.spanned_pages = zl.spanned_pages;
                z.present_pages = zl.present_pages;
                z
            })
            .collect::<Vec<_>>();
        let mut pa = PageAlloc {
            geo,
            memmap: Memmap::new(
                layout.max_pfn,
                geo.max_folio_order(),
                geo.pageblock_order.min(geo.max_page_order),
            ),
            pageblocks: Pageblocks::new(layout.max_pfn, geo.pageblock_order),
            pcp: vec![PerCpuPages::boot_pageset(); zones.len() * nr_cpus],
            zones,
            nodes,
            nr_cpus,
            zonelists: Vec::new(),
            section_zone: Vec::new(),
            cpu_node: (0..nr_cpus)
                .map(|cpu| layout.nodes.iter().find(|n| n.cpus.contains(&cpu)).map_or(0, |n| n.nid))
                .collect(),
            ram: layout.ram.clone(),
            tunables,
            totalreserve_pages: 0,
            mobility_disabled: false,
            kswapd_pending: false,
            events: VmEvents::default(),
            work: AllocWork::default(),
            allocs_by_order: vec![0; geo.max_page_order as usize + 1],
            reporting: crate::reporting::PageReporting::new(geo.nr_page_orders()),
            gigablocks: None,
            compaction: crate::compaction::CompactionState::new(),
            cma: Vec::new(),
            totalcma_pages: 0,
            cma_types: false,
            bulk_split: true,
        };
        // A machine with CMA areas models a CONFIG_CMA kernel: one more
        // migratetype for page_group_by_mobility_disabled to count.
        pa.cma_types = !layout.cma.is_empty();
        pa.build_all_zonelists();
        pa.build_section_zones(layout.max_pfn);
        for (range, _) in &layout.reserved {
            for pfn in range.start..range.end {
                pa.memmap.page_mut(pfn).set_flags(PageFlags::RESERVED);
            }
        }
        pa.memblock_free_all(&layout.free_ranges());
        // cma_init_reserved_areas is a core_initcall: before the
        // watermarks (init_per_zone_wmark_min, a postcore_initcall).
        pa.activate_cma_areas(&layout.cma);
        pa.init_per_zone_wmark_min();
        pa.work = AllocWork::default();
        pa.allocs_by_order.iter_mut().for_each(|n| *n = 0);
        pa
    }

    /// `build_all_zonelists`: builds the zonelists (node fallback order,
    /// then zones from the highest type down, populated only) and decides
    /// whether there is enough memory to group pages by mobility
    /// (`page_group_by_mobility_disabled`).
    pub(crate) fn build_all_zonelists(&mut self) {
        let mut zonelists = Vec::with_capacity(self.nodes.len() * 2 * MAX_NR_ZONES);
        for node in &self.nodes {
            for thisnode in [false, true] {
                let nodes = if thisnode {
                    &node.node_order[..1]
                } else {
                    &node.node_order[..]
                };
                for highest in 0..MAX_NR_ZONES {
                    let zones: Vec<usize> = nodes
                        .iter()
                        .flat_map(|&nid| (0..=highest).rev().map(move |zt| nid * MAX_NR_ZONES + zt))
                        .filter(|&zi| self.zones[zi].populated())
                        .collect();
                    let nofragment = zones.first().is_some_and(|&zi| self.nofragment_zone(zi));
                    zonelists.push(alloc::Zonelist { zones, nofragment });
                }
            }
        }
        self.zonelists = zonelists;
        let vm_total_pages: u64 = self
            .zones
            .iter()
            .filter(|z| z.zone_type <= ZoneType::Movable)
            .map(|z| z.present_pages)
            .sum();
        let nr_types = if self.cma_types {
            MIGRATE_TYPES
        } else {
            largo_types::MIGRATE_TYPES_NO_CMA
        };
        self.mobility_disabled = vm_total_pages < self.geo.pageblock_nr_pages() * nr_types as u64;
    }

    /// `alloc_flags_nofragment`: an allocation whose preferred zone is
    /// Normal first avoids fragmenting fallbacks, provided DMA32 exists
    /// (on NUMA machines, populated in that node) to fall back to.
    fn nofragment_zone(&self, zi: usize) -> bool {
        self.zones[zi].zone_type == ZoneType::Normal && (self.nodes.len() == 1 || self.zones[zi - 1].populated())
    }

    /// Fills `section_zone` from the zone spans.
    pub(crate) fn build_section_zones(&mut self, max_pfn: u64) {
        let shift = self.geo.pfn_section_shift();
        let nr_sections = max_pfn.div_ceil(1 << shift) as usize;
        self.section_zone = (0..nr_sections)
            .map(|s| {
                let (start, end) = ((s as u64) << shift, ((s as u64 + 1) << shift).min(max_pfn));
                match self.zone_by_span(start) {
                    Some(zi) if self.zones[zi].spans(end - 1) => zi as u16,
                    _ => MIXED_SECTION,
                }
            })
            .collect();
    }

    /// The zone whose span holds `pfn`, by searching the spans.
    fn zone_by_span(&self, pfn: u64) -> Option<usize> {
        let node = self
            .nodes
            .iter()
            .find(|n| pfn >= n.node_start_pfn && pfn < n.node_end_pfn)?;
        let base = node.nid * MAX_NR_ZONES;
        (0..MAX_NR_ZONES)
            .map(|zt| base + zt)
            .find(|&zi| self.zones[zi].spans(pfn))
    }

    /// `memblock_free_all`: frees every unreserved range in naturally
    /// aligned chunks of at most MAX_PAGE_ORDER (`__free_pages_memory`),
    /// each through `__free_pages_core`, zone by zone.
    fn memblock_free_all(&mut self, free: &[PfnRange]) {
        for zi in 0..self.zones.len() {
            let span = PfnRange::new(self.zones[zi].zone_start_pfn, self.zones[zi].zone_end_pfn());
            for r in free.iter().map(|r| r.intersect(span)).filter(|r| !r.is_empty()) {
                for (pfn, order) in max_order_chunks(self.geo.max_page_order, r.start, r.end) {
                    self.__free_pages_core(zi, pfn, order);
                }
            }
        }
    }

    /// `__free_pages_core`: a fresh block joins the zone's managed pages
    /// and goes to the tail of the free lists, bypassing the pcp.
    pub(crate) fn __free_pages_core(&mut self, zi: usize, pfn: u64, order: u32) {
        self.zones[zi].managed_pages += 1 << order;
        self.free_one_page(zi, pfn, order, Fpi::TO_TAIL);
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    pub fn memmap(&self) -> &Memmap {
        &self.memmap
    }

    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    pub fn zone(&self, nid: usize, zone_type: ZoneType) -> &Zone {
        &self.zones[zone_index(nid, zone_type)]
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The machine's RAM ranges (present memory, holes excluded).
    pub fn ram_ranges(&self) -> &[PfnRange] {
        &self.ram
    }

    pub fn nr_cpus(&self) -> usize {
        self.nr_cpus
    }

    /// Compaction on this allocator.
    pub fn compactor(&mut self) -> crate::compaction::Compactor<'_> {
        crate::compaction::Compactor { pa: self }
    }

    /// Free page reporting's pass on this allocator.
    pub fn reporter(&mut self) -> crate::reporting::Reporter<'_> {
        crate::reporting::Reporter { pa: self }
    }

    /// Free page reporting's state.
    pub fn reporting(&self) -> &crate::reporting::PageReporting {
        &self.reporting
    }

    pub fn reporting_mut(&mut self) -> &mut crate::reporting::PageReporting {
        &mut self.reporting
    }

    /// The sysctls, to write (for those whose write needs no recomputation).
    pub(crate) fn tunables_mut(&mut self) -> &mut Tunables {
        &mut self.tunables
    }

    pub fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    pub fn totalreserve_pages(&self) -> u64 {
        self.totalreserve_pages
    }

    pub fn mobility_disabled(&self) -> bool {
        self.mobility_disabled
    }

    /// The pageset of `cpu` for zone `zi`.
    pub fn pcp(&self, zi: usize, cpu: usize) -> &PerCpuPages {
        &self.pcp[zi * self.nr_cpus + cpu]
    }

    #[inline]
    pub(crate) fn pcp_index(&self, zi: usize, cpu: usize) -> usize {
        zi * self.nr_cpus + cpu
    }

    /// `cpu_to_node`.
    pub fn cpu_to_node(&self, cpu: usize) -> usize {
        self.cpu_node[cpu]
    }

    /// `get_pfnblock_migratetype`.
    #[inline]
    pub fn pageblock_migratetype(&self, pfn: u64) -> MigrateType {
        self.pageblocks.migratetype(pfn)
    }

    /// The type a pageblock set to `mt` gets: with mobility grouping
    /// disabled every pcp type becomes UNMOVABLE.
    #[inline]
    pub(crate) fn stored_migratetype(&self, mt: MigrateType) -> MigrateType {
        if self.mobility_disabled && mt.is_mergeable() {
            MigrateType::Unmovable
        } else {
            mt
        }
    }

    /// `set_pageblock_migratetype` (see [`Self::stored_migratetype`]).
    #[inline]
    pub(crate) fn set_pageblock_migratetype(&mut self, pfn: u64, mt: MigrateType) {
        let mt = self.stored_migratetype(mt);
        if self.gigablocks.is_some() && mt != MigrateType::Isolate {
            let old = self.pageblocks.underlying_migratetype(pfn);
            self.gigablock_retype(pfn, old, mt);
        }
        self.pageblocks.set_migratetype(pfn, mt);
    }

    /// `change_pageblock_range`: retypes every pageblock of a block of
    /// `order >= pageblock_order` starting at `pfn`.
    pub(crate) fn change_pageblock_range(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        let pb = self.geo.pageblock_order;
        let nr_blocks = 1u64 << order.saturating_sub(pb);
        for i in 0..nr_blocks {
            self.set_pageblock_migratetype(pfn + (i << pb), mt);
        }
    }

    /// Index of the zone a pfn belongs to (`page_zone`), or `None` for a
    /// pfn outside every zone.
    #[inline]
    pub fn page_zone_index(&self, pfn: u64) -> Option<usize> {
        match self.section_zone.get((pfn >> self.geo.pfn_section_shift()) as usize) {
            Some(&zi) if zi != MIXED_SECTION => Some(zi as usize),
            Some(_) => self.zone_by_span(pfn),
            None => None,
        }
    }

    /// Total free pages over all zones (`global_zone_page_state(NR_FREE_PAGES)`).
    pub fn nr_free_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.stat.nr_free_pages.max(0) as u64).sum()
    }

    /// Pages held by pcp lists of every cpu.
    pub fn nr_pcp_pages(&self) -> u64 {
        self.pcp.iter().map(|p| p.count.max(0) as u64).sum()
    }

    pub fn managed_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.managed_pages).sum()
    }

    #[inline]
    pub(crate) fn count_event(&mut self, event: VmEvent, n: u64) {
        self.events.count(event, n);
    }
}

/// Node fallback order: the local node, then the others by distance. All
/// remote nodes are equally distant in the model, so by id after the local one.
/// `[start, end)` as naturally aligned blocks of at most `max_order`,
/// lowest first (`__free_pages_memory`'s split): `(pfn, order)`.
pub(crate) fn max_order_chunks(max_order: u32, start: u64, end: u64) -> impl Iterator<Item = (u64, u32)> {
    let mut pfn = start;
    std::iter::from_fn(move || {
        if pfn >= end {
            return None;
        }
        let mut order = max_order.min(pfn.trailing_zeros());
        while pfn + (1 << order) > end {
            order -= 1;
        }
        let chunk = (pfn, order);
        pfn += 1 << order;
        Some(chunk)
    })
}

fn node_order(nid: usize, nr_nodes: usize) -> Vec<usize> {
    (0..nr_nodes).map(|i| (nid + i) % nr_nodes).collect()
}
