//! `offline_pages` (mm/memory_hotplug.c) and `__offline_isolated_pages`
//! (mm/page_alloc.c), with the kernel's failure reasons.

use super::{HotplugError, EBUSY, EINTR, EINVAL};
use crate::machine::Machine;
use crate::page_alloc::isolation::IsolateMode;
use crate::page_alloc::MigrationTarget;

/// Migrate-and-test passes before the model gives up. The kernel retries
/// until the task gets a signal ("signal backoff", `-EINTR`); the model
/// stands in for the impatient user after this many passes.
pub const MAX_OFFLINE_PASSES: u32 = 10;

impl Machine {
    /// The hotplug unit: a section in mainline, a subsection when memory
    /// blocks are smaller than sections.
    pub(super) fn hotplug_unit_pages(&self) -> u64 {
        let geo = self.geometry();
        let block = self.sparse().memory_block_bytes >> geo.page_shift;
        block.min(geo.pages_per_section()).max(geo.pageblock_nr_pages())
    }

    /// Checks alignment, holes and zone of `[start, start + nr)`; returns the zone.
    pub(super) fn hotplug_range_zone(&self, start: u64, nr: u64, online: bool) -> Result<usize, HotplugError> {
        let unit = self.hotplug_unit_pages();
        let end = start + nr;
        if nr == 0 || !start.is_multiple_of(unit) || !nr.is_multiple_of(unit) {
            return Err(HotplugError::Invalid(format!(
                "[{start:#x}, {end:#x}) is not aligned to the hotplug unit of {unit} pages"
            )));
        }
        let fail = |reason| HotplugError::Offline {
            start,
            end,
            reason,
            errno: EINVAL,
            pfn: None,
        };
        let pa = self.page_alloc();
        let covered = pa.ram_ranges().iter().any(|r| r.start <= start && end <= r.end);
        if !covered {
            return Err(fail("memory holes"));
        }
        let zi = pa.page_zone_index(start).ok_or(fail("memory holes"))?;
        let same_zone = (start..end)
            .step_by(self.sparse().pages_per_subsection() as usize)
            .all(|p| pa.zones()[zi].spans(p) && pa.page_zone_index(p) == Some(zi));
        if !same_zone || !pa.zones()[zi].spans(end - 1) {
            return Err(fail("multizone range"));
        }
        let sub = self.sparse().pages_per_subsection() as usize;
        if (start..end).step_by(sub).any(|p| self.sparse().pfn_online(p) == online) {
            return Err(HotplugError::Invalid(format!(
                "[{start:#x}, {end:#x}) is not wholly {}",
                if online { "offline" } else { "online" }
            )));
        }
        Ok(zi)
    }

    /// `offline_pages(start, nr)`: on failure everything isolated is
    /// undone; folios that already moved stay where they went, as in the
    /// kernel.
    pub fn offline_pages(&mut self, start: u64, nr: u64) -> Result<(), HotplugError> {
        let end = start + nr;
        let zi = self.hotplug_range_zone(start, nr, false)?;
        let nr_nodes = self.page_alloc().nodes().len();
        let nid = self.page_alloc().zones()[zi].nid;
        // alloc_migration_target prefers the next node with memory.
        let target_nid = (nid + 1) % nr_nodes;
        // The kernel drains the pcp lists (zone_pcp_disable) before
        // isolating; largo drains right after, so that a refused offline
        // changes nothing at all (pcp pages count as free for isolation).
        self.lru_add_drain_all();
        if let Err(e) = self
            .page_alloc
            .start_isolate_page_range(start, end, IsolateMode::MemoryOffline)
        {
            let pfn = match e {
                crate::page_alloc::isolation::IsolateError::Unmovable { pfn } => Some(pfn),
                _ => None,
            };
            return Err(HotplugError::Offline {
                start,
                end,
                reason: "failure to isolate range",
                errno: EBUSY,
                pfn,
            });
        }
        self.page_alloc.drain_all_pages();
        let mut done = false;
        for _ in 0..MAX_OFFLINE_PASSES {
            // scan_movable_pages over the whole range.
            let (heads, _) = self.page_alloc.lru_folio_heads(start, end, u64::MAX);
            if !heads.is_empty() {
                self.with_reclaim(|pa, r| {
                    let entered = pa.compaction.enter();
                    r.migrate_folios(pa, 0, &heads, &mut MigrationTarget::PreferNode(target_nid));
                    pa.compaction.leave(entered);
                });
            }
            self.page_alloc.drain_all_pages();
            if self
                .page_alloc
                .test_pages_isolated(start, end, IsolateMode::MemoryOffline)
                .is_ok()
            {
                done = true;
                break;
            }
        }
        if !done {
            let pfn = self
                .page_alloc
                .test_pages_isolated(start, end, IsolateMode::MemoryOffline)
                .err();
            self.page_alloc.undo_isolate_page_range(start, end);
            return Err(HotplugError::Offline {
                start,
                end,
                reason: "signal backoff",
                errno: EINTR,
                pfn,
            });
        }
        self.page_alloc.__offline_isolated_pages(zi, start, end);
        self.sparse.set_online(start, end, false);
        Ok(())
    }
}
