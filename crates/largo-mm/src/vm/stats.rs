//! Per-size mTHP counters (`/sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/stats/`)
//! and the per-node anonymous-memory counters the VM keeps.

macro_rules! mthp_stats {
    ($($variant:ident => $name:literal,)*) => {
        /// One per-size stat (`enum mthp_stat_item`), named as its sysfs file.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum MthpStat {
            $($variant,)*
        }

        impl MthpStat {
            pub const ALL: &'static [MthpStat] = &[$(MthpStat::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(MthpStat::$variant => $name,)*
                }
            }
        }

        pub const NR_MTHP_STATS: usize = MthpStat::ALL.len();
    };
}

mthp_stats! {
    AnonFaultAlloc => "anon_fault_alloc",
    AnonFaultFallback => "anon_fault_fallback",
    AnonFaultFallbackCharge => "anon_fault_fallback_charge",
    AnonFaultDeclined => "anon_fault_declined",
    Zswpout => "zswpout",
    Swpin => "swpin",
    SwpinFallback => "swpin_fallback",
    SwpinFallbackCharge => "swpin_fallback_charge",
    Swpout => "swpout",
    SwpoutFallback => "swpout_fallback",
    ShmemAlloc => "shmem_alloc",
    ShmemFallback => "shmem_fallback",
    ShmemFallbackCharge => "shmem_fallback_charge",
    Split => "split",
    SplitFailed => "split_failed",
    SplitDeferred => "split_deferred",
    NrAnon => "nr_anon",
    NrAnonPartiallyMapped => "nr_anon_partially_mapped",
}

/// The per-size counters of every order (gauges may go down, so i64).
#[derive(Clone, Debug)]
pub struct MthpStats {
    pmd_order: u32,
    counts: Vec<[i64; NR_MTHP_STATS]>,
}

impl MthpStats {
    pub fn new(pmd_order: u32) -> MthpStats {
        MthpStats {
            pmd_order,
            counts: vec![[0; NR_MTHP_STATS]; pmd_order as usize + 1],
        }
    }

    /// `count_mthp_stat` / `mod_mthp_stat`: orders 0 and above PMD are ignored.
    #[inline]
    pub fn add(&mut self, order: u32, stat: MthpStat, delta: i64) {
        if order == 0 || order > self.pmd_order {
            return;
        }
        self.counts[order as usize][stat as usize] += delta;
    }

    pub fn get(&self, order: u32, stat: MthpStat) -> i64 {
        self.counts.get(order as usize).map_or(0, |c| c[stat as usize])
    }
}

/// VM work in the units its kernel cost depends on (page-table writes are
/// in [`super::pgtable::PtWork`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VmWork {
    /// Base pages cleared for new folios and page tables (`folio_zero_user`, `__GFP_ZERO`).
    pub pages_zeroed: u64,
    /// Base pages copied (CoW in `wp_page_copy`).
    pub pages_copied: u64,
    /// rmap calls on a folio (add, dup, remove; one per batch of PTEs or per PMD).
    pub rmap_calls: u64,
    /// Per-page mapcount updates inside those calls.
    pub rmap_pages: u64,
    /// Base pages of folios split (`__split_huge_page` work).
    pub split_pages: u64,
    /// Large folios split (each unmapped, frozen and remapped whole).
    pub folios_split: u64,
    /// New anonymous folios mapped (`folio_add_new_anon_rmap`: each also
    /// charged to its memcg and added to the LRU).
    pub folios_new: u64,
    /// Address-space system calls (mmap, munmap, mprotect, mremap,
    /// madvise, brk).
    pub vma_ops: u64,
    /// Page-table pages allocated and freed.
    pub pgtable_alloc: u64,
    pub pgtable_free: u64,
    /// Blocks of base pages promoted into one large folio by a
    /// utilisation-driven order policy (`ingens`).
    pub promotions: u64,
    /// Folios migrated (`migrate_folio_move`): each isolated, locked,
    /// unmapped and remapped through the rmap, its metadata moved and its
    /// source freed around the copy of its data.
    pub migrate_folios: u64,
    /// TLB flushes migration issued: one per batch that unmapped a
    /// PTE-mapped folio (`try_to_unmap_flush` after the batch's unmap
    /// pass, TTU_BATCH_FLUSH), one per PMD-mapped THP (`pmdp_invalidate`
    /// in `set_pmd_migration_entry` flushes at once).
    pub migrate_flushes: u64,
    /// Reclaim's work, by who does it: the task itself (direct and memcg
    /// reclaim, MADV_PAGEOUT) or a kernel thread (kswapd, khugepaged's
    /// allocations).
    pub reclaim: ReclaimWork,
    pub reclaim_bg: ReclaimWork,
}

/// Reclaim's work on the LRU lists (mm/vmscan.c).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReclaimWork {
    /// Folios taken off an LRU list and looked at (`shrink_folio_list`,
    /// `shrink_active_list`: isolation, the rmap walk of
    /// `folio_referenced`, and for those reclaimed the unmap and free).
    pub folios: u64,
    /// Base pages written out to a swap device or stored by zswap
    /// (compressed, for zram and zswap).
    pub swapout_pages: u64,
}

/// Anonymous-memory node counters (`enum node_stat_item` entries the VM owns).
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeVmStat {
    /// `NR_ANON_MAPPED` (nr_anon_pages, meminfo AnonPages).
    pub anon_mapped: i64,
    /// `NR_ANON_THPS` in pages (meminfo AnonHugePages; PMD-mapped only).
    pub anon_thps: i64,
    /// `NR_PAGETABLE` (nr_page_table_pages, meminfo PageTables).
    pub pagetable: i64,
    /// `NR_SHMEM` (nr_shmem, meminfo Shmem): pages in shmem page caches;
    /// also all of `NR_FILE_PAGES` in the model.
    pub shmem: i64,
    /// `NR_SHMEM_THPS` in pages (nr_shmem_hugepages, ShmemHugePages).
    pub shmem_thps: i64,
    /// `NR_SHMEM_PMDMAPPED` in pages (nr_shmem_pmdmapped, ShmemPmdMapped).
    pub shmem_pmdmapped: i64,
    /// `NR_FILE_MAPPED` (nr_mapped, meminfo Mapped): shmem pages mapped.
    pub file_mapped: i64,
    /// `NR_SWAPCACHE` (nr_swapcached, meminfo SwapCached); also counted
    /// in `NR_FILE_PAGES`.
    pub swapcache: i64,
    /// `NR_VMSCAN_WRITE`: pages reclaim wrote out (swap, zero map, zswap).
    pub vmscan_write: i64,
    /// `NR_WRITTEN`: pages whose writeback completed.
    pub written: i64,
    /// `NR_ISOLATED_ANON` while reclaim holds folios off the LRU.
    pub isolated_anon: i64,
}

/// Pages on a zone's LRU lists (`NR_ZONE_INACTIVE_ANON`, ...; the node's
/// `NR_INACTIVE_ANON` is the sum over its zones). Anonymous and shmem
/// folios are on the anon lists, lazyfree folios on the file lists;
/// folios waiting in a cpu's `lru_add` batch are on none yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LruStat {
    pub inactive_anon: i64,
    pub active_anon: i64,
    pub inactive_file: i64,
    pub active_file: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_outside_the_sysfs_range_are_ignored() {
        let mut s = MthpStats::new(9);
        s.add(0, MthpStat::AnonFaultAlloc, 1);
        s.add(10, MthpStat::AnonFaultAlloc, 1);
        s.add(4, MthpStat::AnonFaultAlloc, 2);
        assert_eq!(s.get(0, MthpStat::AnonFaultAlloc), 0);
        assert_eq!(s.get(4, MthpStat::AnonFaultAlloc), 2);
        assert_eq!(s.get(10, MthpStat::AnonFaultAlloc), 0);
    }
}
