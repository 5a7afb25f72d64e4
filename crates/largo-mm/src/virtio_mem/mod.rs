//! A virtio-mem device (drivers/virtio/virtio_mem.c): a region of device
//! memory above boot RAM, plugged and unplugged in device blocks as the
//! host asks (`requested_size`).
//!
//! The driver's unit is the sub-block, `max(device_block_size,
//! pageblock size)` (`virtio_mem_init_hotplug`): a request for 2 MiB
//! device blocks still moves whole pageblocks, because unplugging runs
//! `alloc_contig_range`, which isolates whole pageblocks. Sub-blocks
//! smaller than a memory block (Sub Block Mode) are plugged into and
//! unplugged from online memory blocks: the unplugged ones are kept
//! "fake offline" (`PageOffline`, held by the driver, not managed); a
//! memory block whose last sub-block goes is offlined and removed. When
//! the sub-block is a memory block or more (Big Block Mode), the unit is
//! `max(device_block_size, memory block size)`, added and removed whole.
//! This model runs both modes through one path with one sub-block per big
//! block. Added memory is onlined at once, to ZONE_NORMAL or (`movable`)
//! ZONE_MOVABLE, as `memhp_default_state=online[_movable]` does.
//!
//! - [`plug`]: `virtio_mem_sbm_plug_request`.
//! - [`unplug`]: `virtio_mem_sbm_unplug_request`, `virtio_mem_fake_offline`.

mod plug;
mod unplug;

use largo_types::{format_size, ZoneType};

/// `--virtio-mem SIZE[,block=SIZE][,plugged=SIZE][,movable]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioMemSpec {
    /// `region_size`.
    pub region_bytes: u64,
    /// `block_size` (QEMU's `block-size`, 2 MiB by default on x86).
    pub block_bytes: u64,
    /// `requested_size` at boot.
    pub plugged_bytes: u64,
    /// Online added memory to ZONE_MOVABLE.
    pub movable: bool,
}

/// Why a device cannot be set up or resized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VirtioMemError {
    #[error("virtio-mem block size {0} must be a power of two of at least the base page")]
    BlockSize(String),
    #[error("virtio-mem region {region} holds no whole {unit} unit (the driver's plug unit here)")]
    Region { region: String, unit: String },
    #[error("virtio-mem: requested size {requested} is beyond the region ({region})")]
    TooLarge { requested: String, region: String },
    #[error("the machine has no virtio-mem device (add one with --virtio-mem SIZE)")]
    NoDevice,
    /// Adding or onlining a memory block failed; the driver unplugged it
    /// again.
    #[error("virtio-mem: adding memory failed: {0}")]
    AddMemory(String),
}

/// The driver's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Sub Block Mode: sub-blocks inside memory blocks.
    Sbm,
    /// Big Block Mode: whole big blocks of one or more memory blocks.
    Bbm,
}

/// The device and the driver's state.
///
/// Invariant: `plugged_pages` is `sb_pages` times the set entries of
/// `units`; a unit is `Some` exactly while its memory is added (and
/// online), and then has at least one plugged sub-block.
#[derive(Clone, Debug)]
pub struct VirtioMem {
    pub spec: VirtioMemSpec,
    pub mode: Mode,
    /// First pfn of the region.
    pub addr_pfn: u64,
    /// Pages of one sub-block (a big block in BBM).
    pub sb_pages: u64,
    /// Pages of one unit the driver adds and removes: a memory block in
    /// SBM, a big block in BBM.
    pub unit_pages: u64,
    /// Per unit: the plugged state of each sub-block, `None` while the
    /// unit is not added.
    pub(crate) units: Vec<Option<Vec<bool>>>,
    pub plugged_pages: u64,
    pub requested_pages: u64,
    pub zone: ZoneType,
}

impl VirtioMem {
    /// The driver's geometry for `spec` on a machine with `pageblock_pages`
    /// and memory blocks of `mb_pages`, the region starting at the first
    /// unit boundary at or after `from_pfn`.
    pub fn new(
        spec: VirtioMemSpec,
        page_shift: u32,
        pageblock_pages: u64,
        mb_pages: u64,
        from_pfn: u64,
    ) -> Result<VirtioMem, VirtioMemError> {
        let block_pages = spec.block_bytes >> page_shift;
        if !spec.block_bytes.is_power_of_two() || block_pages == 0 {
            return Err(VirtioMemError::BlockSize(format_size(spec.block_bytes)));
        }
        let sb_pages = block_pages.max(pageblock_pages);
        let (mode, sb_pages, unit_pages) = if sb_pages < mb_pages {
            (Mode::Sbm, sb_pages, mb_pages)
        } else {
            let bb = block_pages.max(mb_pages);
            (Mode::Bbm, bb, bb)
        };
        let nr_units = (spec.region_bytes >> page_shift) / unit_pages;
        if nr_units == 0 {
            return Err(VirtioMemError::Region {
                region: format_size(spec.region_bytes),
                unit: format_size(unit_pages << page_shift),
            });
        }
        Ok(VirtioMem {
            spec,
            mode,
            addr_pfn: from_pfn.next_multiple_of(unit_pages),
            sb_pages,
            unit_pages,
            units: vec![None; nr_units as usize],
            plugged_pages: 0,
            requested_pages: 0,
            zone: if spec.movable {
                ZoneType::Movable
            } else {
                ZoneType::Normal
            },
        })
    }

    /// Sub-blocks per unit.
    pub fn sbs_per_unit(&self) -> usize {
        (self.unit_pages / self.sb_pages) as usize
    }

    /// Pages of the usable region (whole units).
    pub fn region_pages(&self) -> u64 {
        self.units.len() as u64 * self.unit_pages
    }

    /// One past the region's last pfn.
    pub fn end_pfn(&self) -> u64 {
        self.addr_pfn + self.region_pages()
    }

    /// First pfn of sub-block `sb` of unit `unit`.
    pub(crate) fn sb_pfn(&self, unit: usize, sb: usize) -> u64 {
        self.addr_pfn + unit as u64 * self.unit_pages + sb as u64 * self.sb_pages
    }

    /// Units added, with how many of their sub-blocks are plugged.
    pub fn added_units(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.units
            .iter()
            .enumerate()
            .filter_map(|(i, u)| u.as_ref().map(|sbs| (i, sbs.iter().filter(|&&p| p).count())))
    }
}

/// What one resize did (`largo hotplug plug:SIZE` / `unplug:SIZE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ResizeReport {
    pub requested_bytes: u64,
    pub plugged_before_bytes: u64,
    pub plugged_after_bytes: u64,
    /// Sub-blocks plugged or unplugged.
    pub sub_blocks_moved: u64,
    /// Sub-blocks whose unplug failed (`-EBUSY`), and the first reason.
    pub sub_blocks_busy: u64,
    pub first_busy: Option<String>,
    /// Memory blocks added and removed.
    pub units_added: u64,
    pub units_removed: u64,
    /// The request ended with `-ENOSPC` (region full) or `-EBUSY` (some
    /// of it could not be unplugged): the driver retries on its timer.
    pub errno: Option<&'static str>,
}
