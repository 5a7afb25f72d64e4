//! Memory hotplug (mm/memory_hotplug.c, drivers/base/memory.c): memory
//! blocks go offline and online. Offlining isolates the block's
//! pageblocks, migrates its movable folios elsewhere, checks every page is
//! free, then takes the pages out of the zone and recomputes watermarks
//! and pcp limits; a failure undoes the isolation and names its reason as
//! the kernel's "memory offlining ... failed due to" message does.
//!
//! In mainline the unit is a memory block of whole sections. With
//! `memory_block_bytes` below the section size (the seed's proposal) the
//! same steps run per 2 MiB subsection: sections track which subsections
//! are online. Memory can also be hot-added into the machine's hot-add
//! region (`--maxmem`) and removed once offline (`add_remove.rs`).

mod add_remove;
pub use add_remove::ZoneOverlap;
mod offline;
mod online;

use crate::machine::Machine;
use crate::sparse::MemoryBlockState;

/// The errnos hotplug returns, negated as the kernel returns them.
pub const EINVAL: i32 = -22;
pub const EBUSY: i32 = -16;
pub const EINTR: i32 = -4;

/// Why a hotplug operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HotplugError {
    /// `-EINVAL`: the request itself is wrong.
    #[error("-EINVAL: {0}")]
    Invalid(String),
    /// Offlining failed after it started; `reason` is the kernel's wording.
    #[error("memory offlining [pfn {start:#x}-{end:#x}] failed due to {reason}{}", pfn.map_or(String::new(), |p| format!(" (pfn {p:#x})")))]
    Offline {
        start: u64,
        end: u64,
        reason: &'static str,
        errno: i32,
        pfn: Option<u64>,
    },
}

impl HotplugError {
    /// The errno the kernel returns.
    pub fn errno(&self) -> i32 {
        match self {
            HotplugError::Invalid(_) => EINVAL,
            HotplugError::Offline { errno, .. } => *errno,
        }
    }
}

impl Machine {
    /// `echo offline > /sys/devices/system/memory/memoryN/state`.
    pub fn offline_memory_block(&mut self, id: u64) -> Result<(), HotplugError> {
        let (start, nr, state) = self.block_range(id)?;
        if state == MemoryBlockState::Offline {
            return Ok(());
        }
        self.offline_pages(start, nr)?;
        self.sparse.block_mut(id).expect("block looked up").state = MemoryBlockState::Offline;
        Ok(())
    }

    /// `echo online > /sys/devices/system/memory/memoryN/state`.
    pub fn online_memory_block(&mut self, id: u64) -> Result<(), HotplugError> {
        self.online_memory_block_to(id, None)
    }

    /// `echo online_movable > .../memoryN/state`: hot-added memory goes to
    /// ZONE_MOVABLE, so it holds only movable pages and can be removed again.
    pub fn online_memory_block_movable(&mut self, id: u64) -> Result<(), HotplugError> {
        self.online_memory_block_to(id, Some(largo_types::ZoneType::Movable))
    }

    fn online_memory_block_to(&mut self, id: u64, zone: Option<largo_types::ZoneType>) -> Result<(), HotplugError> {
        let (start, nr, state) = self.block_range(id)?;
        if state == MemoryBlockState::Online {
            return Ok(());
        }
        self.online_pages(start, nr, zone)?;
        self.sparse.block_mut(id).expect("block looked up").state = MemoryBlockState::Online;
        Ok(())
    }

    /// The memory block holding `pfn`.
    pub fn memory_block_of(&self, pfn: u64) -> Option<u64> {
        let pages = self.sparse.memory_block_bytes >> self.geometry().page_shift;
        let id = pfn / pages;
        self.sparse.block(id).map(|b| b.id)
    }

    fn block_range(&self, id: u64) -> Result<(u64, u64, MemoryBlockState), HotplugError> {
        let b = self
            .sparse
            .block(id)
            .ok_or_else(|| HotplugError::Invalid(format!("no memory block {id}")))?;
        Ok((b.start_pfn, b.nr_pages, b.state))
    }
}
