//! Swap (mm/swapfile.c, mm/swap_state.c, mm/page_io.c, mm/zswap.c, v6.18):
//! swap devices with the cluster allocator, the swap map and the swap
//! cache table, the zero map, what each slot holds, and zswap.
//!
//! - `entry.rs`: a swap entry (`swp_entry_t`)
//! - `device.rs`: one device (`swap_info_struct`): swapon, the swap map,
//!   the cache table, slot contents
//! - `cluster.rs`: clusters and their lists (free, nonfull, frag, full)
//! - `alloc.rs`: `folio_alloc_swap` (per-cpu cluster fast path, then the
//!   devices by priority)
//! - `free.rs`: dropping map and cache references, freeing slots
//! - `zswap.rs`: the compressed cache in front of the devices
//!
//! This module knows nothing of page tables or folios: the VM hands it
//! opaque folio tokens for the swap cache and the contents of pages.

mod alloc;
mod cluster;
mod device;
mod entry;
mod free;
mod zswap;

pub use device::{CacheSlot, SlotData, SwapDevice, SwapKind};
pub use entry::SwapEntry;
pub use zswap::{Zswap, ZswapStats};

use largo_types::format_size;

/// `SWAP_NR_ORDERS` of the kernel is PMD order + 1; the model keeps one
/// per-cpu cluster pointer per order up to this many.
pub const MAX_SWAP_ORDERS: usize = 16;

/// `SWAP_HAS_CACHE`: the slot has a folio in the swap cache (or is pinned
/// by a swap-in that bypasses it).
pub const SWAP_HAS_CACHE: u8 = 0x40;
/// `SWAP_MAP_MAX`: the largest map count kept in the byte.
pub const SWAP_MAP_MAX: u8 = 0x3e;
/// `SWAP_MAP_BAD`: the header page.
pub const SWAP_MAP_BAD: u8 = 0x3f;

/// A swap device to create at boot (`--swap SIZE[:zram|:disk]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapSpec {
    pub size_bytes: u64,
    pub kind: SwapKind,
}

impl SwapSpec {
    /// Parses `SIZE[:zram|:disk]` (zram when no kind is given).
    pub fn parse(text: &str) -> Result<SwapSpec, String> {
        let (size, kind) = match text.split_once(':') {
            Some((s, k)) => (s, k),
            None => (text, "zram"),
        };
        let kind =
            SwapKind::from_name(kind).ok_or_else(|| format!("swap device kind '{kind}': expected zram or disk"))?;
        let size_bytes = largo_types::parse_size(size).map_err(|e| format!("swap size '{size}': {e}"))?;
        Ok(SwapSpec { size_bytes, kind })
    }

    pub fn describe(&self) -> String {
        format!("{}:{}", format_size(self.size_bytes), self.kind.name())
    }
}

/// Why a device could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwapError {
    #[error("a swap device of {size} holds no page beside its header (at least two {page_size}-byte pages)")]
    TooSmall { size: String, page_size: u64 },
    #[error("at most {0} swap devices")]
    TooMany(usize),
}

/// `MAX_SWAPFILES` (x86_64 without device-private swap types in use).
pub const MAX_SWAPFILES: usize = 29;

/// The machine's swap: every device, the per-cpu cluster pointers and
/// zswap.
#[derive(Debug)]
pub struct Swap {
    /// By swap type (`swap_info[]`).
    pub devices: Vec<SwapDevice>,
    /// `percpu_swap_cluster`: per cpu and order, the device and offset to
    /// continue from (solid-state devices only).
    percpu: Vec<[Option<(usize, u64)>; MAX_SWAP_ORDERS]>,
    /// Slots of one cluster (`SWAPFILE_CLUSTER` = HPAGE_PMD_NR with THP swap).
    pub cluster_slots: u64,
    /// Base page size in bytes.
    pub page_size: u64,
    pub zswap: Zswap,
    /// `/sys/kernel/mm/swap/vma_ra_enabled`.
    pub vma_ra_enabled: bool,
    /// `vm.page-cluster`.
    pub page_cluster: u32,
    /// Rotational devices swapped on (`nr_rotate_swap`): any makes swap-in
    /// read ahead by swap offset instead of by address.
    pub nr_rotate_swap: u32,
    /// Whether slot contents are kept (the ram backing).
    pub keep_data: bool,
    /// `swap_cluster_readahead`'s global statistics.
    pub cluster_ra: ClusterRa,
}

/// The global readahead statistics of swap readahead by offset
/// (`swapin_readahead_hits`, `prev_offset`, `last_readahead_pages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterRa {
    pub hits: u32,
    pub prev_offset: u64,
    pub last_pages: u32,
}

impl Default for ClusterRa {
    fn default() -> Self {
        ClusterRa {
            hits: 4,
            prev_offset: 0,
            last_pages: 0,
        }
    }
}

impl Swap {
    /// No device yet.
    pub fn new(nr_cpus: usize, pmd_order: u32, page_size: u64, keep_data: bool) -> Swap {
        Swap {
            devices: Vec::new(),
            percpu: vec![[None; MAX_SWAP_ORDERS]; nr_cpus.max(1)],
            cluster_slots: 1 << pmd_order,
            page_size,
            zswap: Zswap::default(),
            vma_ra_enabled: true,
            page_cluster: 3,
            nr_rotate_swap: 0,
            keep_data,
            cluster_ra: ClusterRa::default(),
        }
    }

    /// `swapon` of a new device of `spec.size_bytes` (mkswap's header in
    /// its first page); priorities go -2, -3, ... as when none is given.
    pub fn swapon(&mut self, spec: SwapSpec) -> Result<usize, SwapError> {
        if self.devices.len() >= MAX_SWAPFILES {
            return Err(SwapError::TooMany(MAX_SWAPFILES));
        }
        let max = spec.size_bytes / self.page_size;
        if max < 2 {
            return Err(SwapError::TooSmall {
                size: format_size(spec.size_bytes),
                page_size: self.page_size,
            });
        }
        let ty = self.devices.len();
        let prio = -2 - ty as i32;
        let dev = SwapDevice::new(ty as u8, spec.kind, max, prio, self.cluster_slots, self.keep_data);
        if !dev.solidstate() {
            self.nr_rotate_swap += 1;
        }
        self.devices.push(dev);
        Ok(ty)
    }

    /// Slots recorded to memcg `id` on every device (its `MEMCG_SWAP`).
    pub fn cgroup_pages(&self, id: u16) -> u64 {
        self.devices.iter().map(|d| d.cgroup_slots(id)).sum()
    }

    /// `total_swap_pages`.
    pub fn total_pages(&self) -> u64 {
        self.devices.iter().map(|d| d.pages).sum()
    }

    /// `nr_swap_pages`: free slots.
    pub fn free_pages(&self) -> u64 {
        self.devices.iter().map(|d| d.pages - d.inuse_pages).sum()
    }

    /// `vm_swap_full`: more than half of all swap in use.
    pub fn vm_swap_full(&self) -> bool {
        self.free_pages() * 2 < self.total_pages()
    }

    /// Any swap space at all (`total_swap_pages > 0`).
    pub fn has_swap(&self) -> bool {
        !self.devices.is_empty()
    }

    pub fn device(&self, entry: SwapEntry) -> &SwapDevice {
        &self.devices[entry.ty as usize]
    }

    pub fn device_mut(&mut self, entry: SwapEntry) -> &mut SwapDevice {
        &mut self.devices[entry.ty as usize]
    }

    /// `__swap_count`: the map count of a slot, without the cache bit.
    pub fn swap_count(&self, entry: SwapEntry) -> u8 {
        self.device(entry).count(entry.offset)
    }

    /// Slots whose contents a swap-in reads from a device
    /// (`SWP_SYNCHRONOUS_IO`).
    pub fn synchronous(&self, entry: SwapEntry) -> bool {
        self.device(entry).synchronous()
    }

    /// The swap readahead the kernel would use (`swap_use_vma_readahead`).
    pub fn use_vma_readahead(&self) -> bool {
        self.vma_ra_enabled && self.nr_rotate_swap == 0
    }

    /// `/proc/swaps`.
    pub fn render_proc_swaps(&self) -> String {
        let mut out = String::from("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
        let kb = self.page_size >> 10;
        for d in &self.devices {
            let name = match d.kind {
                SwapKind::Zram => format!("/dev/zram{}", d.ty),
                SwapKind::Disk => format!("/dev/vdswap{}", d.ty),
            };
            out.push_str(&format!(
                "{name:<40}partition\t{}\t\t{}\t\t{}\n",
                d.pages * kb,
                d.inuse_pages * kb,
                d.prio
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_zram_as_the_default_kind() {
        assert_eq!(
            SwapSpec::parse("1G").unwrap(),
            SwapSpec {
                size_bytes: 1 << 30,
                kind: SwapKind::Zram
            }
        );
        assert_eq!(SwapSpec::parse("512M:disk").unwrap().kind, SwapKind::Disk);
        assert!(SwapSpec::parse("1G:tape").unwrap_err().contains("zram or disk"));
        assert!(SwapSpec::parse("lots").is_err());
    }

    #[test]
    fn swapon_reserves_the_header_page() {
        let mut s = Swap::new(2, 9, 4096, false);
        s.swapon(SwapSpec::parse("64M").unwrap()).unwrap();
        // mkswap's header is slot 0: SwapTotal is the size less one page.
        assert_eq!(s.total_pages(), 16383);
        assert_eq!(s.free_pages(), 16383);
        assert!(s.render_proc_swaps().contains("65532"));
        assert!(s.swapon(SwapSpec::parse("4K").unwrap()).is_err());
    }
}
