//! A real machine's physical memory, pfn by pfn, as `largo host snapshot`
//! records it from /proc/kpageflags and /proc/kpagecount: what each page
//! frame is (free, anonymous, file, slab, page table, reserved, other
//! kernel memory, not yet initialised, a hole) and each pageblock's
//! migratetype, with the zones and knobs of the host. `--machine
//! snapshot:FILE` boots a machine from it ([`crate::page_alloc::exact`]):
//! every free buddy block at its real pfn and order, everything else held.
//! The file format and the reading of a live host are in
//! `largo-host/src/snapshot/`.

use serde::{Deserialize, Serialize};

/// What a page frame is. Free pages carry `KPF_BUDDY` on every page of
/// their block (6.18 `snapshot_page`), so a run of free frames is split
/// into the buddy blocks it must be made of ([`HostSnapshot::free_blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum PfnKind {
    /// Not RAM (outside /proc/iomem's System RAM).
    Hole = 0,
    /// In a free buddy block.
    Free = 1,
    /// Anonymous memory (`KPF_ANON`).
    Anon = 2,
    /// Page cache and shmem (on the LRU or mapped, not anonymous).
    File = 3,
    Slab = 4,
    PageTable = 5,
    /// `PG_reserved` (boot reservations, the kernel image, the memmap).
    Reserved = 6,
    /// Struct pages not initialised yet (deferred init): whole sections
    /// showing no flag at all.
    Uninit = 7,
    /// Other kernel memory (no flag: vmalloc, kernel stacks, pcp lists,
    /// bare `alloc_pages`).
    Kernel = 8,
    /// hugetlb.
    Huge = 9,
    /// `PG_offline` (ballooned out, offlined).
    Offline = 10,
    /// Free on a per-cpu list: a whole naturally aligned PMD-sized block
    /// of flagless, unmapped frames, as many as the zone's per-cpu counts
    /// (/proc/zoneinfo `count:`) allow (the pcp THP lists hold freed
    /// THPs whole; kpageflags shows them as nothing).
    PcpFree = 11,
}

impl PfnKind {
    pub const ALL: [PfnKind; 12] = [
        PfnKind::Hole,
        PfnKind::Free,
        PfnKind::Anon,
        PfnKind::File,
        PfnKind::Slab,
        PfnKind::PageTable,
        PfnKind::Reserved,
        PfnKind::Uninit,
        PfnKind::Kernel,
        PfnKind::Huge,
        PfnKind::Offline,
        PfnKind::PcpFree,
    ];

    pub fn from_u8(b: u8) -> Option<PfnKind> {
        PfnKind::ALL.get(b as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            PfnKind::Hole => "hole",
            PfnKind::Free => "free",
            PfnKind::Anon => "anon",
            PfnKind::File => "file",
            PfnKind::Slab => "slab",
            PfnKind::PageTable => "pagetable",
            PfnKind::Reserved => "reserved",
            PfnKind::Uninit => "uninitialised",
            PfnKind::Kernel => "kernel",
            PfnKind::Huge => "hugetlb",
            PfnKind::Offline => "offline",
            PfnKind::PcpFree => "pcp-free",
        }
    }

    /// Memory a movable allocation holds (compaction could move it).
    pub fn is_movable(self) -> bool {
        matches!(self, PfnKind::Anon | PfnKind::File)
    }
}

/// A zone of the snapshot, from /proc/zoneinfo and /proc/pagetypeinfo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotZone {
    pub nid: usize,
    /// `DMA`, `DMA32`, `Normal`, `Movable`.
    pub name: String,
    pub start_pfn: u64,
    pub spanned_pages: u64,
    pub present_pages: u64,
    pub managed_pages: u64,
    /// Free blocks per order and migratetype index, as pagetypeinfo
    /// counted them when the snapshot was taken.
    pub free: Vec<Vec<u64>>,
    /// Pageblocks per migratetype index, as pagetypeinfo counted them.
    pub blocks: Vec<u64>,
    /// Pages on the zone's per-cpu lists (/proc/zoneinfo, all cpus).
    #[serde(default)]
    pub pcp_pages: u64,
}

/// Everything but the per-pfn arrays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotHeader {
    /// RFC 3339, UTC.
    pub taken_at: String,
    /// The host and its kernel.
    pub host: String,
    pub page_size: u64,
    pub pageblock_order: u32,
    pub nr_pfns: u64,
    pub zones: Vec<SnapshotZone>,
    /// The host's THP, vm and reporting knobs, as knob writes.
    pub knobs: Vec<(String, String)>,
    /// `page_reporting_order`, if the host reports free pages.
    pub reporting_order: Option<u32>,
    /// How pageblock migratetypes were inferred and how well they agree
    /// with pagetypeinfo.
    pub migratetype_method: String,
    /// Free pages whose pageblock type disagrees with pagetypeinfo's
    /// per-type free counts (0: the inference reproduces them).
    pub migratetype_misplaced_pages: u64,
}

/// A host's memory, pfn by pfn.
///
/// Invariant: `kinds.len() == header.nr_pfns`, `pageblock_mt.len()` is
/// `nr_pfns` in pageblocks rounded up, every byte a valid kind or
/// migratetype index.
#[derive(Clone, PartialEq)]
pub struct HostSnapshot {
    pub header: SnapshotHeader,
    pub kinds: Vec<u8>,
    pub pageblock_mt: Vec<u8>,
}

impl std::fmt::Debug for HostSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HostSnapshot({} pfns, taken {} on {})",
            self.header.nr_pfns, self.header.taken_at, self.header.host
        )
    }
}

impl HostSnapshot {
    /// A snapshot of the given frames, every pageblock Movable, with a
    /// placeholder header (4 KiB pages, no knobs): synthetic machines and
    /// tests.
    pub fn from_kinds(kinds: &[PfnKind], pageblock_order: u32, zones: Vec<SnapshotZone>) -> HostSnapshot {
        let nr = kinds.len() as u64;
        HostSnapshot {
            header: SnapshotHeader {
                taken_at: "1970-01-01T00:00:00Z".into(),
                host: "synthetic".into(),
                page_size: 4096,
                pageblock_order,
                nr_pfns: nr,
                zones,
                knobs: Vec::new(),
                reporting_order: None,
                migratetype_method: "given".into(),
                migratetype_misplaced_pages: 0,
            },
            kinds: kinds.iter().map(|&k| k as u8).collect(),
            pageblock_mt: vec![
                largo_types::MigrateType::Movable.index() as u8;
                Self::nr_pageblocks(nr, pageblock_order)
            ],
        }
    }

    /// Pageblocks covering `nr_pfns`.
    pub fn nr_pageblocks(nr_pfns: u64, pageblock_order: u32) -> usize {
        nr_pfns.div_ceil(1u64.checked_shl(pageblock_order).unwrap_or(u64::MAX)) as usize
    }

    pub fn kind(&self, pfn: u64) -> PfnKind {
        self.kinds
            .get(pfn as usize)
            .and_then(|&b| PfnKind::from_u8(b))
            .unwrap_or(PfnKind::Hole)
    }

    /// The migratetype index of `pfn`'s pageblock (Movable past the end).
    pub fn migratetype_index(&self, pfn: u64) -> usize {
        pfn.checked_shr(self.header.pageblock_order)
            .and_then(|i| self.pageblock_mt.get(i as usize))
            .map_or(largo_types::MigrateType::Movable.index(), |&b| b as usize)
    }

    /// Pages of each kind.
    pub fn pages_by_kind(&self) -> Vec<(PfnKind, u64)> {
        let mut n = [0u64; PfnKind::ALL.len()];
        for &b in &self.kinds {
            n[(b as usize).min(PfnKind::ALL.len() - 1)] += 1;
        }
        PfnKind::ALL.iter().map(|&k| (k, n[k as usize])).collect()
    }

    /// The free buddy blocks `(pfn, order)` in `[start, end)`, orders at
    /// most `max_order`: each maximal run of free frames split into the
    /// largest naturally aligned blocks, which is what the buddy allocator
    /// leaves (two free buddies always merge).
    pub fn free_blocks(&self, start: u64, end: u64, max_order: u32) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut pfn = start;
        while pfn < end {
            if self.kind(pfn) != PfnKind::Free {
                pfn += 1;
                continue;
            }
            let mut run_end = pfn;
            while run_end < end && self.kind(run_end) == PfnKind::Free {
                run_end += 1;
            }
            out.extend(aligned_blocks(pfn, run_end, max_order));
            pfn = run_end;
        }
        out
    }
}

/// `[start, end)` split into the largest naturally aligned blocks of at
/// most `max_order`, in address order.
pub fn aligned_blocks(start: u64, end: u64, max_order: u32) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut pfn = start;
    while pfn < end {
        let align = if pfn == 0 { 63 } else { pfn.trailing_zeros() };
        let fit = 63 - (end - pfn).leading_zeros();
        let order = align.min(fit).min(max_order);
        out.push((pfn, order));
        pfn += 1 << order;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(kinds: &[PfnKind]) -> HostSnapshot {
        HostSnapshot::from_kinds(kinds, 2, Vec::new())
    }

    #[test]
    fn free_runs_split_into_aligned_buddy_blocks() {
        assert_eq!(aligned_blocks(2, 16, 10), vec![(2, 1), (4, 2), (8, 3)]);
        assert_eq!(aligned_blocks(0, 8, 2), vec![(0, 2), (4, 2)]);
        use PfnKind::*;
        let s = snapshot(&[Anon, Free, Free, Free, Free, Free, Kernel, Free]);
        assert_eq!(s.free_blocks(0, 8, 10), vec![(1, 0), (2, 1), (4, 1), (7, 0)]);
    }
}
