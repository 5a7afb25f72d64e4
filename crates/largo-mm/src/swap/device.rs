//! One swap device (`struct swap_info_struct`): its swap map, clusters,
//! swap cache table, zero map and what each slot holds.

use rustc_hash::FxHashMap as HashMap;

use super::cluster::{Cluster, ClusterFlag, ClusterLists};
use super::{SWAP_HAS_CACHE, SWAP_MAP_BAD};

/// What backs a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwapKind {
    /// zram: non-rotational (`SWP_SOLIDSTATE`) and synchronous
    /// (`SWP_SYNCHRONOUS_IO`): a write completes before `swap_writeout`
    /// returns, a swap-in with one reference bypasses the swap cache.
    Zram,
    /// A rotational block device: one global cluster pointer per order,
    /// asynchronous writes (the folio stays in the swap cache until reclaim
    /// finds it clean), swap-in through the cache with cluster readahead.
    Disk,
}

impl SwapKind {
    pub fn name(self) -> &'static str {
        match self {
            SwapKind::Zram => "zram",
            SwapKind::Disk => "disk",
        }
    }

    pub fn from_name(name: &str) -> Option<SwapKind> {
        match name {
            "zram" => Some(SwapKind::Zram),
            "disk" => Some(SwapKind::Disk),
            _ => None,
        }
    }
}

/// A slot's entry in the swap cache table (6.18's per-cluster swap table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSlot {
    /// A folio in the swap cache (the VM's token for it).
    Folio(u64),
    /// What reclaim left when it evicted the folio (`workingset_eviction`).
    Shadow(u64),
}

/// The contents of a written slot on the ram backing.
pub type SlotData = Box<[u8]>;

/// One device.
#[derive(Debug)]
pub struct SwapDevice {
    /// The swap type (index in `swap_info[]`).
    pub ty: u8,
    pub kind: SwapKind,
    pub prio: i32,
    /// `si->max`: slots including the header.
    pub max: u64,
    /// `si->pages`: usable slots (`max - 1`).
    pub pages: u64,
    /// `si->inuse_pages`: allocated slots, cache-only ones included.
    pub inuse_pages: u64,
    /// `si->swap_map`: per slot, the number of page-table (or shmem)
    /// references plus `SWAP_HAS_CACHE`.
    pub(crate) map: Vec<u8>,
    /// `si->zeromap`: the slot's page was all zeroes when written.
    zeromap: Vec<u64>,
    /// The slot's page had non-zero contents (the sim backing's stand-in
    /// for the data; on ram `data` holds the bytes).
    written: Vec<u64>,
    /// Page contents by slot (ram backing only).
    pub(crate) data: HashMap<u64, SlotData>,
    /// `swap_cgroup`: the memcg id each slot's charge is recorded to (0: none).
    cgroup: Vec<u16>,
    /// Slots recorded to each memcg.
    cgroup_slots: HashMap<u16, u64>,
    /// The swap cache table, by slot.
    pub(crate) cache: HashMap<u64, CacheSlot>,
    pub(crate) clusters: Vec<Cluster>,
    pub(crate) lists: ClusterLists,
    /// Rotational devices: the global cluster pointer per order.
    pub(crate) global_next: [Option<u64>; super::MAX_SWAP_ORDERS],
    pub(crate) cluster_slots: u64,
    /// Where the last `alloc_swap_scan_cluster` told the allocating cpu
    /// (or the global pointer) to continue: set by every scan.
    pub(crate) last_scan_next: Option<Option<u64>>,
    /// Map counts beyond `SWAP_MAP_MAX` (the kernel's count continuation pages).
    pub(crate) continued: HashMap<u64, u32>,
    /// zram `notify_free`: slots whose copy the device dropped.
    pub notify_free: u64,
    /// Pages written to the device and read from it.
    pub writes: u64,
    pub reads: u64,
}

fn bit(bits: &[u64], i: u64) -> bool {
    bits[(i / 64) as usize] & (1 << (i % 64)) != 0
}

fn set_bit(bits: &mut [u64], i: u64, v: bool) {
    let w = &mut bits[(i / 64) as usize];
    if v {
        *w |= 1 << (i % 64);
    } else {
        *w &= !(1 << (i % 64));
    }
}

impl SwapDevice {
    /// A freshly `swapon`ed device of `max` slots (`read_swap_header`,
    /// `setup_swap_map`, `setup_clusters`): slot 0 is the header; the
    /// header's cluster and the partial last cluster start on the order-0
    /// nonfull list, every other cluster on the free list in index order.
    pub(crate) fn new(ty: u8, kind: SwapKind, max: u64, prio: i32, cluster_slots: u64, keep_data: bool) -> SwapDevice {
        let nr_clusters = max.div_ceil(cluster_slots);
        let words = (max as usize).div_ceil(64);
        let mut map = vec![0u8; max as usize];
        map[0] = SWAP_MAP_BAD;
        let mut clusters = vec![Cluster::default(); nr_clusters as usize];
        clusters[0].count = 1;
        clusters[0].table = true;
        let tail = (nr_clusters * cluster_slots - max) as u32;
        if tail > 0 {
            let last = &mut clusters[nr_clusters as usize - 1];
            last.count += tail;
            last.table = true;
        }
        let mut dev = SwapDevice {
            ty,
            kind,
            prio,
            max,
            pages: max - 1,
            inuse_pages: 0,
            map,
            zeromap: vec![0; words],
            written: vec![0; words],
            data: HashMap::default(),
            cgroup: vec![0; max as usize],
            cgroup_slots: HashMap::default(),
            cache: HashMap::default(),
            clusters,
            lists: ClusterLists::new(super::MAX_SWAP_ORDERS),
            global_next: [None; super::MAX_SWAP_ORDERS],
            cluster_slots,
            last_scan_next: None,
            continued: HashMap::default(),
            notify_free: 0,
            writes: 0,
            reads: 0,
        };
        let _ = keep_data;
        for ci in 0..nr_clusters as u32 {
            if dev.clusters[ci as usize].count > 0 {
                dev.move_cluster(ci, ClusterFlag::Nonfull, 0);
            } else {
                dev.move_cluster(ci, ClusterFlag::Free, 0);
            }
        }
        dev
    }

    /// `SWP_SOLIDSTATE`.
    pub fn solidstate(&self) -> bool {
        self.kind == SwapKind::Zram
    }

    /// `SWP_SYNCHRONOUS_IO`.
    pub fn synchronous(&self) -> bool {
        self.kind == SwapKind::Zram
    }

    /// The map count of `offset` without the cache bit (`swap_count`).
    #[inline]
    pub fn count(&self, offset: u64) -> u8 {
        self.map[offset as usize] & !SWAP_HAS_CACHE
    }

    /// The raw swap map byte.
    #[inline]
    pub fn map_byte(&self, offset: u64) -> u8 {
        self.map[offset as usize]
    }

    #[inline]
    pub fn has_cache(&self, offset: u64) -> bool {
        self.map[offset as usize] & SWAP_HAS_CACHE != 0
    }

    /// Every slot of `[offset, offset + nr)` holds only the cache bit
    /// (`swap_only_has_cache`).
    pub fn only_has_cache(&self, offset: u64, nr: u64) -> bool {
        (offset..offset + nr).all(|o| self.map[o as usize] == SWAP_HAS_CACHE)
    }

    pub fn zeromap(&self, offset: u64) -> bool {
        bit(&self.zeromap, offset)
    }

    pub(crate) fn set_zeromap(&mut self, offset: u64, v: bool) {
        set_bit(&mut self.zeromap, offset, v)
    }

    /// The page written to the slot had non-zero contents.
    pub fn written(&self, offset: u64) -> bool {
        bit(&self.written, offset)
    }

    pub(crate) fn set_written(&mut self, offset: u64, v: bool) {
        set_bit(&mut self.written, offset, v)
    }

    /// The swap cache table entry of a slot.
    pub fn cache_slot(&self, offset: u64) -> Option<CacheSlot> {
        self.cache.get(&offset).copied()
    }

    /// `swap_cgroup`'s record of a slot.
    pub fn cgroup_id(&self, offset: u64) -> u16 {
        self.cgroup[offset as usize]
    }

    /// Records `nr` slots to memcg `id` (0 clears the record); keeps the
    /// per-memcg counts of recorded slots.
    pub fn set_cgroup_id(&mut self, offset: u64, nr: u64, id: u16) {
        for o in offset..offset + nr {
            let old = std::mem::replace(&mut self.cgroup[o as usize], id);
            if old != 0 {
                *self.cgroup_slots.entry(old).or_default() -= 1;
            }
            if id != 0 {
                *self.cgroup_slots.entry(id).or_default() += 1;
            }
        }
    }

    /// Slots recorded to memcg `id` (`MEMCG_SWAP` of the device).
    pub fn cgroup_slots(&self, id: u16) -> u64 {
        self.cgroup_slots.get(&id).copied().unwrap_or(0)
    }

    /// The cluster index of a slot.
    #[inline]
    pub(crate) fn cluster_of(&self, offset: u64) -> u32 {
        (offset / self.cluster_slots) as u32
    }

    /// The first slot of cluster `ci`.
    #[inline]
    pub(crate) fn cluster_offset(&self, ci: u32) -> u64 {
        ci as u64 * self.cluster_slots
    }

    /// Recounts the device's state for the invariant checker: the cluster
    /// counts against the map, `inuse_pages` against the map, the lists
    /// against the flags. Returns a description of the first mismatch.
    pub fn check(&self) -> Result<(), String> {
        let used = self.map.iter().skip(1).filter(|&&b| b != 0).count() as u64;
        if used != self.inuse_pages {
            return Err(format!(
                "swap {}: inuse_pages {} but {} slots in use",
                self.ty, self.inuse_pages, used
            ));
        }
        for (ci, c) in self.clusters.iter().enumerate() {
            let start = ci as u64 * self.cluster_slots;
            let end = (start + self.cluster_slots).min(self.max);
            let mut n = (start..end).filter(|&o| self.map[o as usize] != 0).count() as u32;
            n += (start + self.cluster_slots).saturating_sub(self.max) as u32;
            if n != c.count {
                return Err(format!(
                    "swap {} cluster {ci}: count {} but {} slots in use",
                    self.ty, c.count, n
                ));
            }
        }
        for (&offset, slot) in &self.cache {
            if matches!(slot, CacheSlot::Folio(_)) && !self.has_cache(offset) {
                return Err(format!(
                    "swap {} slot {offset}: a cached folio without SWAP_HAS_CACHE",
                    self.ty
                ));
            }
        }
        self.lists.check(&self.clusters)
    }
}
