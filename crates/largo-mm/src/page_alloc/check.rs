//! The invariant checker: walks the whole allocator state and recomputes
//! every cached counter. Tests and replays run it after every step.
//!
//! Checked, per zone:
//! - every free-list entry is a PG_buddy head of the list's order,
//!   naturally aligned, inside the zone, on the list of its pageblock's
//!   type (all its pageblocks for blocks above pageblock order), with
//!   consistent links; `nr_free` and list lengths match;
//! - `NR_FREE_PAGES` and `NR_FREE_PAGES_BLOCKS` equal the recomputed sums;
//! - no free block has a free buddy of the same order it could have merged
//!   with (both mergeable types, or the same type);
//! - every pcp list entry is a PCP page of the list's order in the zone,
//!   and `pcp.count` is their total;
//! - a walk of the memmap finds every present page exactly once as part of
//!   a free block (whose other records are all-zero), a pcp block, an
//!   allocated folio (whose tails carry no allocator state) or a reserved page;
//!   holes are all-zero;
//! - conservation: free + pcp + allocated = managed pages.

use largo_types::MigrateType;

use super::PageAlloc;
use crate::layout::PfnRange;
use crate::memmap::PageFlags;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct InvariantError(pub String);

/// What the walk counted, machine-wide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub free_pages: u64,
    pub pcp_pages: u64,
    pub allocated_pages: u64,
    pub reserved_pages: u64,
    /// Present pages taken out of the allocator by memory offlining.
    pub offline_pages: u64,
    /// Present pages a virtio-mem device holds fake offline.
    pub fake_offline_pages: u64,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(InvariantError(format!($($fmt)+)));
        }
    };
}

impl PageAlloc {
    pub fn check_invariants(&self) -> Result<CheckReport, InvariantError> {
        self.check_gigablocks()?;
        self.check_isolated_counts()?;
        let mut total = CheckReport::default();
        for zi in 0..self.zones.len() {
            let r = self.check_zone(zi)?;
            total.free_pages += r.free_pages;
            total.pcp_pages += r.pcp_pages;
            total.allocated_pages += r.allocated_pages;
            total.reserved_pages += r.reserved_pages;
            total.offline_pages += r.offline_pages;
            total.fake_offline_pages += r.fake_offline_pages;
        }
        Ok(total)
    }

    /// Gigapageblock counts equal the non-movable pageblocks recounted.
    fn check_gigablocks(&self) -> Result<(), InvariantError> {
        let Some(g) = self.gigablocks.as_ref() else {
            return Ok(());
        };
        let mut want = vec![0u32; g.unmovable.len()];
        let pb = self.geo.pageblock_nr_pages();
        for i in 0..self.pageblocks.len() as u64 {
            let pfn = i * pb;
            let mt = self.pageblocks.underlying_migratetype(pfn);
            let pollutes = matches!(
                mt,
                MigrateType::Unmovable | MigrateType::Reclaimable | MigrateType::HighAtomic
            );
            if pollutes {
                want[(pfn >> g.pfn_shift) as usize] += 1;
            }
        }
        ensure!(
            want == g.unmovable,
            "gigablock non-movable pageblock counts drifted from the pageblock bits"
        );
        Ok(())
    }

    /// `nr_isolate_pageblock` equals the isolated pageblocks of each zone
    /// that are online (offline memory keeps its isolation bits).
    fn check_isolated_counts(&self) -> Result<(), InvariantError> {
        let pb = self.geo.pageblock_nr_pages();
        for (zi, zone) in self.zones.iter().enumerate() {
            let mut n = 0;
            let mut pfn = zone.zone_start_pfn & !(pb - 1);
            while pfn < zone.zone_end_pfn() {
                let page = self.memmap.page(pfn);
                let offline = page.flags() == PageFlags::OFFLINE && page.refcount() == 0;
                if self.page_zone_index(pfn) == Some(zi)
                    && self.pageblocks.migratetype(pfn) == MigrateType::Isolate
                    && !offline
                {
                    n += 1;
                }
                pfn += pb;
            }
            ensure!(
                n == zone.nr_isolate_pageblock,
                "node {} zone {}: nr_isolate_pageblock {} but {n} pageblocks are isolated",
                zone.nid,
                zone.name(),
                zone.nr_isolate_pageblock
            );
        }
        Ok(())
    }

    fn check_zone(&self, zi: usize) -> Result<CheckReport, InvariantError> {
        let zone = &self.zones[zi];
        let name = format!("node {} zone {}", zone.nid, zone.name());
        let (free_pages, free_blocks) = self.check_free_lists(zi, &name)?;
        let pcp_pages = self.check_pcp_lists(zi, &name)?;
        let walk = self.walk_memmap(zi, &name)?;
        ensure!(
            walk.free_pages == free_pages.values_sum,
            "{name}: memmap walk found {} free pages, lists hold {}",
            walk.free_pages,
            free_pages.values_sum
        );
        ensure!(
            walk.pcp_pages == pcp_pages,
            "{name}: memmap walk found {} pcp pages, pcp lists hold {pcp_pages}",
            walk.pcp_pages
        );
        ensure!(
            zone.stat.nr_free_pages == free_pages.counted as i64,
            "{name}: NR_FREE_PAGES is {} but the non-isolated lists hold {}",
            zone.stat.nr_free_pages,
            free_pages.counted
        );
        ensure!(
            zone.stat.nr_free_cma == free_pages.cma as i64,
            "{name}: NR_FREE_CMA_PAGES is {} but the CMA lists hold {}",
            zone.stat.nr_free_cma,
            free_pages.cma
        );
        ensure!(
            zone.stat.nr_free_pages_blocks == free_blocks as i64,
            "{name}: NR_FREE_PAGES_BLOCKS is {} but lists hold {free_blocks}",
            zone.stat.nr_free_pages_blocks
        );
        let present =
            walk.free_pages + walk.pcp_pages + walk.allocated_pages + walk.reserved_pages + walk.fake_offline_pages;
        ensure!(
            present == zone.present_pages,
            "{name}: walk accounts for {present} pages, zone has {} present",
            zone.present_pages
        );
        ensure!(
            walk.free_pages + walk.pcp_pages + walk.allocated_pages == zone.managed_pages,
            "{name}: free {} + pcp {} + allocated {} != managed {}",
            walk.free_pages,
            walk.pcp_pages,
            walk.allocated_pages,
            zone.managed_pages
        );
        Ok(walk)
    }

    /// Returns (free pages: all and non-isolated, pages in >= pageblock blocks).
    fn check_free_lists(&self, zi: usize, name: &str) -> Result<(FreeSums, u64), InvariantError> {
        let zone = &self.zones[zi];
        let pages = &self.memmap.pages;
        let pb = self.geo.pageblock_order;
        let mut sums = FreeSums::default();
        let mut blocks = 0;
        for (order, area) in zone.free_area.iter().enumerate() {
            let order = order as u32;
            let mut nr_free = 0;
            let mut nr_reported = 0;
            for mt in MigrateType::ALL {
                let list = area.list(mt);
                let mut prev = crate::memmap::NIL;
                let mut n = 0u32;
                for pfn in list.iter(pages) {
                    let page = self.memmap.page(pfn);
                    ensure!(
                        page.is_buddy(),
                        "{name}: {pfn:#x} on the order-{order} {mt:?} list is not PageBuddy"
                    );
                    ensure!(
                        page.order() == order,
                        "{name}: {pfn:#x} on the order-{order} list has order {}",
                        page.order()
                    );
                    ensure!(page.prev() == prev, "{name}: broken prev link at {pfn:#x}");
                    ensure!(
                        pfn & ((1 << order) - 1) == 0,
                        "{name}: free block {pfn:#x} not aligned to order {order}"
                    );
                    ensure!(
                        zone.spans(pfn) && zone.spans(pfn + (1 << order) - 1),
                        "{name}: free block {pfn:#x} order {order} leaves the zone"
                    );
                    let pb_pages = 1u64 << pb;
                    let mut p = pfn & !(pb_pages - 1);
                    while p < pfn + (1 << order) {
                        let block_mt = self.pageblocks.migratetype(p);
                        ensure!(
                            block_mt == mt,
                            "{name}: free block {pfn:#x} order {order} on the {mt:?} list, pageblock {p:#x} is {block_mt:?}"
                        );
                        p += pb_pages;
                    }
                    self.check_unmerged(zi, pfn, order, mt, name)?;
                    if page.flags().contains(PageFlags::REPORTED) {
                        nr_reported += 1;
                    }
                    sums.values_sum += 1 << order;
                    if mt == MigrateType::Cma {
                        sums.cma += 1 << order;
                    }
                    if mt != MigrateType::Isolate {
                        sums.counted += 1 << order;
                        if order >= pb {
                            blocks += 1 << order;
                        }
                    }
                    prev = pfn as u32;
                    n += 1;
                }
                ensure!(
                    n == list.nr,
                    "{name}: order-{order} {mt:?} list has {n} entries, head says {}",
                    list.nr
                );
                ensure!(list.last == prev, "{name}: order-{order} {mt:?} list tail is stale");
                nr_free += n as u64;
            }
            ensure!(
                nr_free == area.nr_free,
                "{name}: order {order} nr_free {} but lists hold {nr_free}",
                area.nr_free
            );
            ensure!(
                nr_reported == area.nr_reported,
                "{name}: order {order} counts {} reported blocks but the lists hold {nr_reported}",
                area.nr_reported
            );
        }
        Ok((sums, blocks))
    }

    /// A free block must not have a free, mergeable buddy of its order.
    fn check_unmerged(
        &self,
        zi: usize,
        pfn: u64,
        order: u32,
        mt: MigrateType,
        name: &str,
    ) -> Result<(), InvariantError> {
        if order >= self.geo.max_page_order {
            return Ok(());
        }
        let buddy = pfn ^ (1 << order);
        if !self.page_is_buddy(zi, buddy, order) {
            return Ok(());
        }
        let buddy_mt = self.pageblocks.migratetype(buddy);
        let mergeable = if order < self.geo.pageblock_order {
            true
        } else {
            mt == buddy_mt || (mt.is_mergeable() && buddy_mt.is_mergeable())
        };
        ensure!(
            !mergeable,
            "{name}: free buddies {pfn:#x} and {buddy:#x} of order {order} were not merged"
        );
        Ok(())
    }

    fn check_pcp_lists(&self, zi: usize, name: &str) -> Result<u64, InvariantError> {
        let mut total = 0;
        for cpu in 0..self.nr_cpus {
            let pcp = self.pcp(zi, cpu);
            let mut count = 0i64;
            let mut seen = std::collections::HashSet::new();
            for (pindex, list) in pcp.lists.iter().enumerate() {
                let order = self.pindex_to_order(pindex);
                for pfn in list.iter() {
                    let page = self.memmap.page(pfn);
                    ensure!(
                        page.flags() == PageFlags::PCP && page.order() == order,
                        "{name}: cpu {cpu} pcp list {pindex} holds {pfn:#x} with flags {:?} order {}",
                        page.flags(),
                        page.order()
                    );
                    ensure!(
                        self.zones[zi].spans(pfn),
                        "{name}: cpu {cpu} pcp page {pfn:#x} is outside the zone"
                    );
                    ensure!(
                        seen.insert(pfn),
                        "{name}: cpu {cpu} pcp page {pfn:#x} is on its lists twice"
                    );
                    count += 1 << order;
                }
            }
            ensure!(
                count == pcp.count as i64,
                "{name}: cpu {cpu} pcp count {} but lists hold {count}",
                pcp.count
            );
            total += count as u64;
        }
        Ok(total)
    }

    /// Classifies every pfn of the zone span.
    fn walk_memmap(&self, zi: usize, name: &str) -> Result<CheckReport, InvariantError> {
        let zone = &self.zones[zi];
        let mut r = CheckReport::default();
        let span = PfnRange::new(zone.zone_start_pfn, zone.zone_end_pfn());
        let mut ram = self
            .ram
            .iter()
            .map(|x| x.intersect(span))
            .filter(|x| !x.is_empty())
            .peekable();
        let mut pfn = span.start;
        while pfn < span.end {
            let in_ram = loop {
                match ram.peek() {
                    Some(range) if range.end <= pfn => {
                        ram.next();
                    }
                    Some(range) => break range.start <= pfn,
                    None => break false,
                }
            };
            let page = self.memmap.page(pfn);
            if !in_ram {
                ensure!(page.is_clear(), "{name}: hole pfn {pfn:#x} has a non-zero record");
                pfn += 1;
                continue;
            }
            let flags = page.flags();
            let nr = 1u64 << page.order();
            ensure!(
                !flags.contains(PageFlags::REPORTED) || flags.contains(PageFlags::BUDDY),
                "{name}: pfn {pfn:#x} is PG_reported but not a free block (flags {flags:?})"
            );
            if flags.contains(PageFlags::BUDDY) {
                for p in pfn + 1..pfn + nr {
                    ensure!(
                        self.memmap.page(p).is_clear(),
                        "{name}: pfn {p:#x} inside free block {pfn:#x} is not clear"
                    );
                }
                r.free_pages += nr;
            } else if flags.contains(PageFlags::PCP) {
                for p in pfn + 1..pfn + nr {
                    ensure!(
                        self.memmap.page(p).is_clear(),
                        "{name}: pfn {p:#x} inside pcp block {pfn:#x} is not clear"
                    );
                }
                r.pcp_pages += nr;
            } else if flags.contains(PageFlags::RESERVED) {
                r.reserved_pages += 1;
                pfn += 1;
                continue;
            } else if flags == PageFlags::OFFLINE && page.refcount() == 0 {
                // Offlined by hotplug: present, not managed.
                r.offline_pages += 1;
                pfn += 1;
                continue;
            } else if flags == PageFlags::OFFLINE && page.refcount() == 1 {
                // Fake offline (virtio-mem holds it): present, not managed.
                r.fake_offline_pages += 1;
                pfn += 1;
                continue;
            } else if self.memmap.is_folio_head(pfn) {
                ensure!(
                    (nr > 1) == flags.contains(PageFlags::HEAD),
                    "{name}: folio {pfn:#x} of order {} has flags {flags:?}",
                    page.order()
                );
                ensure!(pfn & (nr - 1) == 0, "{name}: folio {pfn:#x} not aligned to its order");
                for p in pfn + 1..pfn + nr {
                    let tail = self.memmap.page(p);
                    ensure!(
                        !tail.flags().intersects(ALLOCATOR_FLAGS) && tail.order() == 0 && tail.refcount() == 0,
                        "{name}: tail {p:#x} of folio {pfn:#x} carries allocator state (flags {:?}, order {}, refcount {})",
                        tail.flags(),
                        tail.order(),
                        tail.refcount()
                    );
                }
                ensure!(
                    !self.reporting.discarded.any_in(pfn, nr),
                    "{name}: folio {pfn:#x} of order {} holds pages the host discarded after a report",
                    page.order()
                );
                r.allocated_pages += nr;
            } else {
                return Err(InvariantError(format!(
                    "{name}: pfn {pfn:#x} is neither free, on a pcp, allocated nor reserved (flags {flags:?}, refcount {})",
                    page.refcount()
                )));
            }
            ensure!(pfn + nr <= span.end, "{name}: block at {pfn:#x} runs past the zone end");
            pfn += nr;
        }
        Ok(r)
    }
}

/// Flags only the allocator sets, never on a tail.
const ALLOCATOR_FLAGS: PageFlags = PageFlags::BUDDY
    .union(PageFlags::PCP)
    .union(PageFlags::HEAD)
    .union(PageFlags::RESERVED);

#[derive(Default)]
struct FreeSums {
    /// Every free page on the lists.
    values_sum: u64,
    /// Free pages outside MIGRATE_ISOLATE (what NR_FREE_PAGES counts).
    counted: u64,
    /// Free pages on MIGRATE_CMA lists (NR_FREE_CMA_PAGES).
    cma: u64,
}
