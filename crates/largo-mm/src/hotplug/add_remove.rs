//! Hot-add and hot-remove (mm/memory_hotplug.c `add_memory`,
//! `arch_add_memory` / `__add_pages` -> `sparse_add_section`,
//! `create_memory_block_devices`; `remove_memory` -> `__remove_pages` ->
//! `sparse_remove_section`). Added memory lies in the machine's hot-add
//! region (`--maxmem`), arrives offline, in memory blocks that `online`
//! brings in, and joins its node's highest zone; only an offline block can
//! be removed.

use super::{HotplugError, EBUSY};
use crate::layout::PfnRange;
use crate::machine::Machine;
use crate::sparse::{MemoryBlock, MemoryBlockState};

/// A zone cannot grow over memory: another zone of the node spans it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ZONE_{} would overlap ZONE_{}", .zone.to_uppercase(), .other.to_uppercase())]
pub struct ZoneOverlap {
    pub zone: &'static str,
    pub other: &'static str,
}

impl Machine {
    /// `add_memory(nid, start, size)`: `nr` pages from `start_pfn` (inside
    /// the hot-add region, aligned to the memory block size) become
    /// present and offline, in new memory blocks. Returns their ids.
    pub fn add_memory(&mut self, nid: usize, start_pfn: u64, nr: u64) -> Result<Vec<u64>, HotplugError> {
        if self.virtio_mem_owns(start_pfn, nr) {
            return Err(HotplugError::Invalid(format!(
                "[{start_pfn:#x}, {:#x}) belongs to the virtio-mem device: plug and unplug it instead",
                start_pfn + nr
            )));
        }
        self.add_memory_driver_managed(nid, start_pfn, nr)
    }

    /// Whether any of `[start_pfn, start_pfn + nr)` lies in the virtio-mem
    /// device's region (its driver alone adds and removes that memory).
    pub fn virtio_mem_owns(&self, start_pfn: u64, nr: u64) -> bool {
        self.virtio_mem
            .as_ref()
            .is_some_and(|d| start_pfn < d.end_pfn() && d.addr_pfn < start_pfn + nr)
    }

    /// `add_memory_driver_managed`: `add_memory` for a driver's own region.
    pub(crate) fn add_memory_driver_managed(
        &mut self,
        nid: usize,
        start_pfn: u64,
        nr: u64,
    ) -> Result<Vec<u64>, HotplugError> {
        let block = self.sparse.memory_block_bytes >> self.geometry().page_shift;
        let region = self
            .layout()
            .hotplug_region
            .ok_or_else(|| HotplugError::Invalid("the machine has no hot-add region (maxmem)".into()))?;
        let range = PfnRange::new(start_pfn, start_pfn + nr);
        if nr == 0 || !start_pfn.is_multiple_of(block) || !nr.is_multiple_of(block) {
            return Err(HotplugError::Invalid(format!(
                "[{start_pfn:#x}, {:#x}) is not aligned to the memory block size",
                range.end
            )));
        }
        if range.start < region.start || range.end > region.end {
            return Err(HotplugError::Invalid(format!(
                "[{start_pfn:#x}, {:#x}) is outside the hot-add region [{:#x}, {:#x})",
                range.end, region.start, region.end
            )));
        }
        if nid >= self.page_alloc().nodes().len() {
            return Err(HotplugError::Invalid(format!("no node {nid}")));
        }
        if self
            .page_alloc()
            .ram_ranges()
            .iter()
            .any(|r| !r.intersect(range).is_empty())
        {
            return Err(HotplugError::Invalid(format!(
                "[{start_pfn:#x}, {:#x}) is already present (-EEXIST)",
                range.end
            )));
        }
        self.page_alloc.add_pages(nid, range);
        self.sparse.add_section_range(range.start, range.end, nid);
        let ids: Vec<u64> = (range.start..range.end)
            .step_by(block as usize)
            .map(|p| p / block)
            .collect();
        for &id in &ids {
            self.sparse.blocks.push(MemoryBlock {
                id,
                start_pfn: id * block,
                nr_pages: block,
                nid,
                state: MemoryBlockState::Offline,
            });
        }
        self.sparse.blocks.sort_by_key(|b| b.id);
        Ok(ids)
    }

    /// Hot-adds memory block `id` (its pfns in the hot-add region) on node `nid`.
    pub fn add_memory_block(&mut self, nid: usize, id: u64) -> Result<(), HotplugError> {
        let block = self.sparse.memory_block_bytes >> self.geometry().page_shift;
        self.add_memory(nid, id * block, block).map(|_| ())
    }

    /// `remove_memory` of one memory block: it must be offline (`-EBUSY`
    /// otherwise); its sections lose the subsections, its memmap is gone,
    /// and so is the block device.
    pub fn remove_memory_block(&mut self, id: u64) -> Result<(), HotplugError> {
        let b = self
            .sparse
            .block(id)
            .cloned()
            .ok_or_else(|| HotplugError::Invalid(format!("no memory block {id}")))?;
        if b.state != MemoryBlockState::Offline {
            return Err(HotplugError::Offline {
                start: b.start_pfn,
                end: b.start_pfn + b.nr_pages,
                reason: "memory block still online",
                errno: EBUSY,
                pfn: None,
            });
        }
        let range = PfnRange::new(b.start_pfn, b.start_pfn + b.nr_pages);
        // Parts of the block that were never RAM (holes) stay holes.
        self.page_alloc.remove_pages(range);
        self.sparse.remove_section_range(range.start, range.end);
        self.sparse.blocks.retain(|x| x.id != id);
        let _ = self.backing.discard(largo_types::Pfn(range.start), range.len());
        Ok(())
    }
}
