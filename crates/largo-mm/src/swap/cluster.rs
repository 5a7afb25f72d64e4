//! Swap clusters (mm/swapfile.c, v6.18): every `SWAPFILE_CLUSTER` slots
//! form a cluster that serves one folio order while it holds any slot
//! (order 0 may use any), kept on the free, nonfull, frag or full list.

use super::device::SwapDevice;
use super::SWAP_HAS_CACHE;

/// `enum swap_cluster_flags`: which list a cluster is on. The order of
/// the variants is the kernel's (`CLUSTER_FLAG_USABLE` = `Frag`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ClusterFlag {
    /// Off every list (isolated by an allocator).
    #[default]
    None,
    Free,
    Nonfull,
    Frag,
    Full,
}

/// `struct swap_cluster_info`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cluster {
    /// Slots in use (the header and the slots past the device's end count).
    pub count: u32,
    pub flag: ClusterFlag,
    /// The order the cluster serves while it is not empty.
    pub order: u8,
    /// Its swap table is allocated (a free cluster gets one when an
    /// allocator isolates it, and loses it when it becomes free again).
    pub table: bool,
    /// Links of the list it is on (u32::MAX: none).
    prev: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

/// Head and tail of one cluster list.
#[derive(Clone, Copy, Debug)]
struct ListHead {
    first: u32,
    last: u32,
}

impl Default for ListHead {
    fn default() -> Self {
        ListHead { first: NIL, last: NIL }
    }
}

/// Which list (`si->free_clusters`, `nonfull_clusters[order]`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListId {
    Free,
    Nonfull(u8),
    Frag(u8),
    Full,
}

/// The device's cluster lists.
#[derive(Clone, Debug)]
pub(crate) struct ClusterLists {
    free: ListHead,
    nonfull: Vec<ListHead>,
    frag: Vec<ListHead>,
    full: ListHead,
    /// Which list each cluster is on, by index (kept beside the flag so
    /// the order of a nonfull or frag list is known).
    on: Vec<Option<ListId>>,
}

impl ClusterLists {
    pub fn new(nr_orders: usize) -> ClusterLists {
        ClusterLists {
            free: ListHead::default(),
            nonfull: vec![ListHead::default(); nr_orders],
            frag: vec![ListHead::default(); nr_orders],
            full: ListHead::default(),
            on: Vec::new(),
        }
    }

    fn head(&mut self, id: ListId) -> &mut ListHead {
        match id {
            ListId::Free => &mut self.free,
            ListId::Nonfull(o) => &mut self.nonfull[o as usize],
            ListId::Frag(o) => &mut self.frag[o as usize],
            ListId::Full => &mut self.full,
        }
    }

    /// The first cluster of a list.
    pub fn first(&self, id: ListId) -> Option<u32> {
        let h = match id {
            ListId::Free => self.free,
            ListId::Nonfull(o) => self.nonfull[o as usize],
            ListId::Frag(o) => self.frag[o as usize],
            ListId::Full => self.full,
        };
        (h.first != NIL).then_some(h.first)
    }

    fn unlink(&mut self, clusters: &mut [Cluster], ci: u32) {
        let Some(id) = self.on.get(ci as usize).copied().flatten() else {
            return;
        };
        let (prev, next) = (clusters[ci as usize].prev, clusters[ci as usize].next);
        if prev == NIL {
            self.head(id).first = next;
        } else {
            clusters[prev as usize].next = next;
        }
        if next == NIL {
            self.head(id).last = prev;
        } else {
            clusters[next as usize].prev = prev;
        }
        clusters[ci as usize].prev = NIL;
        clusters[ci as usize].next = NIL;
        self.on[ci as usize] = None;
    }

    /// `list_move_tail`.
    fn push_tail(&mut self, clusters: &mut [Cluster], ci: u32, id: ListId) {
        self.unlink(clusters, ci);
        if self.on.len() <= ci as usize {
            self.on.resize(ci as usize + 1, None);
        }
        let last = self.head(id).last;
        clusters[ci as usize].prev = last;
        clusters[ci as usize].next = NIL;
        if last == NIL {
            self.head(id).first = ci;
        } else {
            clusters[last as usize].next = ci;
        }
        self.head(id).last = ci;
        self.on[ci as usize] = Some(id);
    }

    /// The lists agree with the flags and the links are consistent.
    pub fn check(&self, clusters: &[Cluster]) -> Result<(), String> {
        for (ci, c) in clusters.iter().enumerate() {
            let on = self.on.get(ci).copied().flatten();
            let ok = match (c.flag, on) {
                (ClusterFlag::None, None) => true,
                (ClusterFlag::Free, Some(ListId::Free)) => true,
                (ClusterFlag::Nonfull, Some(ListId::Nonfull(_))) => true,
                (ClusterFlag::Frag, Some(ListId::Frag(_))) => true,
                (ClusterFlag::Full, Some(ListId::Full)) => true,
                _ => false,
            };
            if !ok {
                return Err(format!("swap cluster {ci}: flag {:?} but on list {on:?}", c.flag));
            }
            if c.flag == ClusterFlag::Free && c.count != 0 {
                return Err(format!(
                    "swap cluster {ci}: on the free list with {} slots in use",
                    c.count
                ));
            }
        }
        Ok(())
    }
}

impl SwapDevice {
    /// `move_cluster`: to the tail of the list of `flag` (`order` for the
    /// nonfull and frag lists).
    pub(crate) fn move_cluster(&mut self, ci: u32, flag: ClusterFlag, order: u8) {
        let id = match flag {
            ClusterFlag::Free => ListId::Free,
            ClusterFlag::Nonfull => ListId::Nonfull(order),
            ClusterFlag::Frag => ListId::Frag(order),
            ClusterFlag::Full => ListId::Full,
            ClusterFlag::None => unreachable!("a cluster is moved to a list"),
        };
        self.lists.push_tail(&mut self.clusters, ci, id);
        self.clusters[ci as usize].flag = flag;
    }

    /// `isolate_lock_cluster`: takes the first cluster off a list (flag
    /// cleared); a free cluster gets its swap table.
    pub(crate) fn isolate_cluster(&mut self, id: ListId) -> Option<u32> {
        let ci = self.lists.first(id)?;
        self.lists.unlink(&mut self.clusters, ci);
        let c = &mut self.clusters[ci as usize];
        c.flag = ClusterFlag::None;
        c.table = true;
        Some(ci)
    }

    /// `cluster_is_usable`.
    pub(crate) fn cluster_usable(&self, ci: u32, order: u32) -> bool {
        let c = &self.clusters[ci as usize];
        if c.flag > ClusterFlag::Frag || !c.table {
            return false;
        }
        order == 0 || c.count == 0 || c.order as u32 == order
    }

    /// `__free_cluster` (no discard: the devices do not ask for it).
    fn free_cluster(&mut self, ci: u32) {
        self.clusters[ci as usize].table = false;
        self.move_cluster(ci, ClusterFlag::Free, 0);
        self.clusters[ci as usize].order = 0;
    }

    /// `partial_free_cluster`: a cluster that lost slots but keeps some
    /// goes to the tail of its order's nonfull list.
    pub(crate) fn partial_free_cluster(&mut self, ci: u32) {
        if self.clusters[ci as usize].flag != ClusterFlag::Nonfull {
            let order = self.clusters[ci as usize].order;
            self.move_cluster(ci, ClusterFlag::Nonfull, order);
        }
    }

    /// After slots of cluster `ci` were freed: free or nonfull.
    pub(crate) fn cluster_after_free(&mut self, ci: u32) {
        if self.clusters[ci as usize].count == 0 {
            self.free_cluster(ci);
        } else {
            self.partial_free_cluster(ci);
        }
    }

    /// `relocate_cluster`: after an allocation, to the free, frag or full list.
    fn relocate_cluster(&mut self, ci: u32) {
        let (count, flag, order) = {
            let c = &self.clusters[ci as usize];
            (c.count, c.flag, c.order)
        };
        if count == 0 {
            if flag != ClusterFlag::Free {
                self.free_cluster(ci);
            }
        } else if (count as u64) != self.cluster_slots {
            if flag != ClusterFlag::Frag {
                self.move_cluster(ci, ClusterFlag::Frag, order);
            }
        } else if flag != ClusterFlag::Full {
            self.move_cluster(ci, ClusterFlag::Full, 0);
        }
    }

    /// `cluster_scan_range`: every slot free (a cache-only slot would need
    /// reclaim while swap is full; the model's allocator does not reclaim
    /// the swap cache, so such a range is not usable).
    fn range_free(&self, ci: u32, start: u64, nr: u64) -> bool {
        if self.clusters[ci as usize].count == 0 {
            return true;
        }
        (start..start + nr).all(|o| self.map[o as usize] == 0)
    }

    /// `cluster_alloc_range`: the slots get `SWAP_HAS_CACHE`.
    fn alloc_range(&mut self, ci: u32, start: u64, order: u32) {
        let nr = 1u64 << order;
        let c = &mut self.clusters[ci as usize];
        if c.count == 0 {
            c.order = order as u8;
        }
        c.count += nr as u32;
        for o in start..start + nr {
            self.map[o as usize] = SWAP_HAS_CACHE;
        }
        self.inuse_pages += nr;
    }

    /// `alloc_swap_scan_cluster`: the first naturally aligned free range
    /// of `1 << order` slots from `offset` in cluster `ci`. Returns the
    /// slot found and where the next allocation of this order continues.
    pub(crate) fn alloc_scan_cluster(&mut self, ci: u32, mut offset: u64, order: u32) -> (Option<u64>, Option<u64>) {
        let nr = 1u64 << order;
        let start = self.cluster_offset(ci);
        let end = (start + self.cluster_slots).min(self.max);
        let mut found = None;
        let mut next = None;
        if end >= nr && self.clusters[ci as usize].count as u64 + nr <= self.cluster_slots {
            let last = end - nr;
            while offset <= last {
                if self.range_free(ci, offset, nr) {
                    self.alloc_range(ci, offset, order);
                    found = Some(offset);
                    offset += nr;
                    if (self.clusters[ci as usize].count as u64) < self.cluster_slots && offset <= last {
                        next = Some(offset);
                    }
                    break;
                }
                offset += nr;
            }
        }
        self.relocate_cluster(ci);
        self.last_scan_next = Some(next);
        (found, next)
    }

    /// `alloc_swap_scan_list`: isolates clusters off a list (all of them
    /// with `scan_all`, else only the first) until one serves the order.
    fn alloc_scan_list(&mut self, id: ListId, order: u32, scan_all: bool) -> (Option<u64>, Option<u64>) {
        loop {
            let Some(ci) = self.isolate_cluster(id) else {
                return (None, None);
            };
            let offset = self.cluster_offset(ci);
            let r = self.alloc_scan_cluster(ci, offset, order);
            if r.0.is_some() || !scan_all {
                return r;
            }
        }
    }

    /// `cluster_alloc_swap_entry` (no discard, no swap cache reclaim):
    /// a rotational device's global pointer first, then this order's
    /// nonfull clusters, a free cluster, this order's first frag cluster,
    /// and for order 0 the other orders' frag and nonfull clusters.
    /// Returns the slot and the next offset for this order's pointer.
    pub(crate) fn cluster_alloc_swap_entry(&mut self, order: u32, pmd_order: u32) -> (Option<u64>, Option<u64>) {
        if !self.solidstate() {
            if let Some(offset) = self.global_next[order as usize] {
                let ci = self.cluster_of(offset);
                if self.cluster_usable(ci, order) {
                    let from = if self.clusters[ci as usize].count == 0 {
                        self.cluster_offset(ci)
                    } else {
                        offset
                    };
                    let r = self.alloc_scan_cluster(ci, from, order);
                    if r.0.is_some() {
                        return r;
                    }
                }
            }
        }
        if order < pmd_order {
            let r = self.alloc_scan_list(ListId::Nonfull(order as u8), order, true);
            if r.0.is_some() {
                return r;
            }
        }
        let r = self.alloc_scan_list(ListId::Free, order, false);
        if r.0.is_some() {
            return r;
        }
        if order < pmd_order {
            let r = self.alloc_scan_list(ListId::Frag(order as u8), order, false);
            if r.0.is_some() {
                return r;
            }
        }
        if order > 0 {
            return (None, None);
        }
        for o in 1..super::MAX_SWAP_ORDERS as u8 {
            for id in [ListId::Frag(o), ListId::Nonfull(o)] {
                let r = self.alloc_scan_list(id, 0, true);
                if r.0.is_some() {
                    return r;
                }
            }
        }
        (None, None)
    }
}
