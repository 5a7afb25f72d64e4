//! Shaping a booted machine's memory like a snapshot of a real one
//! (`--machine host`): each zone's managed pages, its free blocks per
//! order and migratetype, and its pageblocks per migratetype, as
//! /proc/zoneinfo and /proc/pagetypeinfo show them.
//!
//! Not a kernel path; it stands for the history that brought the real
//! machine there. Managed pages beyond the target are withheld from the
//! zone as not-yet-initialised memory (a kernel booted with
//! `deferred_init=lazy` manages only part of its Normal zone), memory
//! that is not free in the snapshot is held as allocated blocks (in use
//! elsewhere), and the free blocks are laid out so that none can merge
//! with another: a free block's buddy is always held.

use largo_types::{MigrateType, ZoneType, MIGRATE_TYPES};

use super::{Fpi, PageAlloc};
use crate::memmap::PageFlags;

/// One zone of the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneShape {
    pub nid: usize,
    pub zone_type: ZoneType,
    pub managed_pages: u64,
    /// Free blocks, `free[order][migratetype index]`.
    pub free: Vec<[u64; MIGRATE_TYPES]>,
    /// Pageblocks per migratetype.
    pub blocks: [u64; MIGRATE_TYPES],
}

/// How well a zone could be shaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneShaped {
    pub name: String,
    pub managed_pages: u64,
    pub target_managed_pages: u64,
    pub free_pages: u64,
    pub target_free_pages: u64,
}

impl PageAlloc {
    /// Shapes every zone named in `zones` (others are left alone). Call
    /// on a freshly booted machine, before any workload.
    pub fn shape_free_memory(&mut self, zones: &[ZoneShape]) -> Vec<ZoneShaped> {
        self.drain_all_pages();
        let mut out = Vec::new();
        for shape in zones {
            let Some(zi) = self
                .zones
                .iter()
                .position(|z| z.nid == shape.nid && z.zone_type == shape.zone_type && z.managed())
            else {
                continue;
            };
            out.push(self.shape_zone(zi, shape));
        }
        self.recompute_after_shaping();
        out
    }

    fn shape_zone(&mut self, zi: usize, shape: &ZoneShape) -> ZoneShaped {
        let max = self.geo.max_page_order;
        let mut regions = self.hold_all_free(zi);
        // Withhold from the top of the zone.
        regions.sort_unstable();
        let target_managed = shape.managed_pages.min(self.zones[zi].managed_pages);
        while self.zones[zi].managed_pages > target_managed {
            let Some(pfn) = regions.pop() else { break };
            let nr = (1u64 << max).min(self.zones[zi].managed_pages - target_managed);
            self.withhold(zi, pfn, nr);
        }
        // Free blocks from the bottom, each region typed for its blocks.
        regions.reverse();
        let mut typed = [0u64; MIGRATE_TYPES];
        let pb_per_region = 1u64 << (max - self.geo.pageblock_order.min(max));
        for mt in MigrateType::ALL {
            let mut need: Vec<u64> = (0..=max)
                .map(|o| shape.free.get(o as usize).map_or(0, |f| f[mt.index()]))
                .collect();
            while need.iter().any(|&n| n > 0) {
                let Some(pfn) = regions.pop() else { break };
                self.change_pageblock_range(pfn, max.max(self.geo.pageblock_order), mt);
                typed[mt.index()] += pb_per_region;
                self.memmap.page_mut(pfn).clear();
                if need[max as usize] > 0 {
                    need[max as usize] -= 1;
                    self.release(zi, pfn, max);
                } else {
                    self.fill_partly(zi, pfn, max, &mut need);
                }
            }
        }
        // The held regions take the pageblock types still missing.
        let mut mt_iter = MigrateType::ALL.into_iter().filter(|&mt| mt != MigrateType::Isolate);
        let mut mt = mt_iter.next();
        for &pfn in &regions {
            while let Some(t) = mt {
                if typed[t.index()] < shape.blocks[t.index()] {
                    break;
                }
                mt = mt_iter.next();
            }
            let t = mt.unwrap_or(MigrateType::Movable);
            self.change_pageblock_range(pfn, max.max(self.geo.pageblock_order), t);
            typed[t.index()] += pb_per_region;
        }
        let zone = &self.zones[zi];
        let target_free: u64 = shape
            .free
            .iter()
            .enumerate()
            .map(|(o, f)| f.iter().sum::<u64>() << o)
            .sum();
        ZoneShaped {
            name: format!("Node {}, zone {}", zone.nid, zone.name()),
            managed_pages: zone.managed_pages,
            target_managed_pages: shape.managed_pages,
            free_pages: zone.stat.nr_free_pages.max(0) as u64,
            target_free_pages: target_free,
        }
    }

    /// Takes every free block of the zone off the free lists and holds it
    /// as an allocated block; returns the max-order ones (the regions the
    /// shape is cut from).
    fn hold_all_free(&mut self, zi: usize) -> Vec<u64> {
        let max = self.geo.max_page_order;
        let mut regions = Vec::new();
        for order in 0..=max {
            for mt in MigrateType::ALL {
                while let Some(pfn) = self.zones[zi].free_area[order as usize].list(mt).first() {
                    self.del_page_from_free_list(zi, pfn, order, mt);
                    self.account_freepages(zi, -(1i64 << order), mt);
                    self.hold(pfn, order);
                    if order == max {
                        regions.push(pfn);
                    }
                }
            }
        }
        regions
    }

    /// An allocated block nobody will free (memory in use elsewhere).
    fn hold(&mut self, pfn: u64, order: u32) {
        self.prep_new_page(pfn, order);
    }

    /// Takes `nr` pages of a held region out of the zone's managed memory.
    fn withhold(&mut self, zi: usize, pfn: u64, nr: u64) {
        let max = self.geo.max_page_order;
        self.memmap.page_mut(pfn).clear();
        for p in pfn..pfn + nr {
            self.memmap.page_mut(p).set_flags(PageFlags::RESERVED);
        }
        // A partial region: the rest stays held, in blocks.
        let mut at = pfn + nr;
        let end = pfn + (1 << max);
        while at < end {
            let order = (at.trailing_zeros()).min(max).min(63 - (end - at).leading_zeros());
            self.hold(at, order);
            at += 1 << order;
        }
        self.zones[zi].managed_pages -= nr;
        let d = &mut self.zones[zi].deferred;
        d.push((pfn, nr));
        d.sort_unstable();
    }

    /// Lays out free blocks inside the block at `pfn` of `order` (off the
    /// lists, its head cleared) so that it does not end up wholly free:
    /// of its halves, the first is freed whole if a block of that order is
    /// still needed, else filled the same way; the second is filled the
    /// same way if anything smaller is still needed, else held. A block
    /// of order 0 that is not freed is held, so no free block's buddy is
    /// ever wholly free.
    fn fill_partly(&mut self, zi: usize, pfn: u64, order: u32, need: &mut [u64]) {
        if order == 0 {
            self.hold(pfn, 0);
            return;
        }
        let half = order - 1;
        let (first, second) = (pfn, pfn + (1 << half));
        if need[half as usize] > 0 {
            need[half as usize] -= 1;
            self.release(zi, first, half);
        } else {
            self.fill_partly(zi, first, half, need);
        }
        if need[..half as usize].iter().any(|&n| n > 0) || need[half as usize] > 0 {
            self.fill_partly(zi, second, half, need);
        } else {
            self.hold(second, half);
        }
    }

    /// Frees a block of the shape (no reporting notification).
    fn release(&mut self, zi: usize, pfn: u64, order: u32) {
        let mt = self.pageblocks.migratetype(pfn);
        let fpi = Fpi {
            skip_report_notify: true,
            to_tail: false,
        };
        self.__free_one_page(zi, pfn, order, mt, fpi);
    }

    /// Watermarks, reserves and pcp sizes follow the new managed sizes;
    /// the shaping itself is not the workload's work.
    pub(super) fn recompute_after_shaping(&mut self) {
        self.init_per_zone_wmark_min();
        if let Some(kbytes) = self.tunables.user_min_free_kbytes {
            self.set_min_free_kbytes(kbytes);
        }
        for zi in 0..self.zones.len() {
            if self.zones[zi].managed() {
                self.zone_pcp_update(zi, self.nr_cpus);
            }
        }
        self.work = super::AllocWork::default();
        self.allocs_by_order.iter_mut().for_each(|n| *n = 0);
    }

    /// Marks every free block at or above `order` reported to the host
    /// (a snapshot of an idle machine whose reporting had caught up).
    pub fn mark_free_reported(&mut self, order: u32) {
        for zi in 0..self.zones.len() {
            for o in order..=self.geo.max_page_order {
                for mt in MigrateType::ALL {
                    let pfns: Vec<u64> = self.zones[zi].free_area[o as usize]
                        .list(mt)
                        .iter(&self.memmap.pages)
                        .collect();
                    for pfn in pfns {
                        let page = self.memmap.page_mut(pfn);
                        if !page.flags().contains(PageFlags::REPORTED) {
                            page.insert_flags(PageFlags::REPORTED);
                            self.zones[zi].free_area[o as usize].nr_reported += 1;
                            self.reporting.discarded.set_range(pfn, 1 << o);
                        }
                    }
                }
            }
        }
    }
}
