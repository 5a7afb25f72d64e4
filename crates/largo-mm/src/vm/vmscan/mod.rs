//! Page reclaim of the LRU lists (mm/vmscan.c, v6.18 without MGLRU):
//! memcg limit reclaim (`try_to_free_mem_cgroup_pages`), global direct
//! reclaim and kswapd (`do_try_to_free_pages` / `balance_pgdat`'s
//! `shrink_node`), and the folio lists madvise hands it
//! (`reclaim_pages`). One concept per file:
//!
//! - `references.rs`: `folio_referenced`, `folio_check_references`
//! - `unmap.rs`: `try_to_unmap` of a swap-cache or lazyfree folio
//! - `pageout.rs`: `swap_writeout` (zero map, zswap, the device)
//! - `folio_list.rs`: `shrink_folio_list`, `__remove_mapping`
//! - `lists.rs`: `isolate_lru_folios`, `shrink_inactive_list`,
//!   `shrink_active_list`, `move_folios_to_lru`
//! - `lruvec.rs`: `get_scan_count`, `shrink_lruvec`, `inactive_is_low`
//! - `node.rs`: the priority loop for memcg and global reclaim

pub(crate) mod folio_list;
mod lists;
mod lruvec;
mod node;
pub(crate) mod pageout;
pub(crate) mod references;
mod unmap;

/// `DEF_PRIORITY`.
pub(crate) const DEF_PRIORITY: u32 = 12;
/// `SWAP_CLUSTER_MAX`.
pub(crate) const SWAP_CLUSTER_MAX: u64 = 32;
/// `MAX_SWAPPINESS`.
const MAX_SWAPPINESS: u64 = 200;

/// Who reclaims, for the `pgscan_*`/`pgsteal_*` counters
/// (`reclaimer_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reclaimer {
    Kswapd,
    Direct,
    Khugepaged,
    /// MADV_PAGEOUT's `reclaim_pages`: no scan counters at all.
    Madvise,
}

impl Reclaimer {
    /// Reclaim done by a kernel thread, not in the task's system time.
    pub(crate) fn is_kernel_thread(self) -> bool {
        matches!(self, Reclaimer::Kswapd | Reclaimer::Khugepaged)
    }
}

impl super::Vm {
    /// The reclaim work counters of whoever reclaims now.
    pub(crate) fn reclaim_work_mut(&mut self) -> &mut super::stats::ReclaimWork {
        if self.reclaiming_in_background {
            &mut self.work.reclaim_bg
        } else {
            &mut self.work.reclaim
        }
    }
}

/// `struct scan_control`.
#[derive(Clone, Debug)]
pub(crate) struct ScanControl {
    pub nr_to_reclaim: u64,
    pub priority: u32,
    /// `may_swap`: anon may be swapped out.
    pub may_swap: bool,
    /// `target_mem_cgroup`: memcg limit reclaim of this memcg.
    pub target_memcg: Option<usize>,
    pub reclaimer: Reclaimer,
    pub nr_reclaimed: u64,
    pub nr_scanned: u64,
    /// `may_deactivate` bits: anon, file.
    pub may_deactivate: [bool; 2],
    pub force_deactivate: bool,
    pub skipped_deactivate: bool,
    pub anon_cost: u64,
    pub file_cost: u64,
    pub cache_trim_mode: bool,
    pub file_is_tiny: bool,
    /// `vm.swappiness` (or the memcg's).
    pub swappiness: u64,
}

impl ScanControl {
    pub fn new(nr_to_reclaim: u64, reclaimer: Reclaimer, target_memcg: Option<usize>, swappiness: u64) -> ScanControl {
        ScanControl {
            nr_to_reclaim,
            priority: DEF_PRIORITY,
            may_swap: true,
            target_memcg,
            reclaimer,
            nr_reclaimed: 0,
            nr_scanned: 0,
            may_deactivate: [false; 2],
            force_deactivate: false,
            skipped_deactivate: false,
            anon_cost: 0,
            file_cost: 0,
            cache_trim_mode: false,
            file_is_tiny: false,
            swappiness,
        }
    }

    /// `cgroup_reclaim`.
    pub fn cgroup_reclaim(&self) -> bool {
        self.target_memcg.is_some()
    }
}
