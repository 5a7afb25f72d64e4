//! Event counters (`enum vm_event_item`), named exactly as /proc/vmstat.

use largo_types::ZoneType;

macro_rules! vm_events {
    ($($variant:ident => $name:literal,)*) => {
        /// A /proc/vmstat event counter the model maintains.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum VmEvent {
            $($variant,)*
        }

        impl VmEvent {
            pub const ALL: &'static [VmEvent] = &[$(VmEvent::$variant,)*];

            /// The /proc/vmstat name.
            pub fn name(self) -> &'static str {
                match self {
                    $(VmEvent::$variant => $name,)*
                }
            }
        }

        pub const NR_VM_EVENTS: usize = VmEvent::ALL.len();
    };
}

vm_events! {
    PgallocDma => "pgalloc_dma",
    PgallocDma32 => "pgalloc_dma32",
    PgallocNormal => "pgalloc_normal",
    PgallocMovable => "pgalloc_movable",
    PgallocDevice => "pgalloc_device",
    AllocstallDma => "allocstall_dma",
    AllocstallDma32 => "allocstall_dma32",
    AllocstallNormal => "allocstall_normal",
    AllocstallMovable => "allocstall_movable",
    AllocstallDevice => "allocstall_device",
    Pgfree => "pgfree",
    Pageoutrun => "pageoutrun",
    Pgpgin => "pgpgin",
    Pgpgout => "pgpgout",
    Pswpin => "pswpin",
    Pswpout => "pswpout",
    Pgfault => "pgfault",
    Pgmajfault => "pgmajfault",
    Pgreuse => "pgreuse",
    Pglazyfree => "pglazyfree",
    Pglazyfreed => "pglazyfreed",
    Pgactivate => "pgactivate",
    Pgdeactivate => "pgdeactivate",
    Pgrefill => "pgrefill",
    PgstealKswapd => "pgsteal_kswapd",
    PgstealDirect => "pgsteal_direct",
    PgstealKhugepaged => "pgsteal_khugepaged",
    PgscanKswapd => "pgscan_kswapd",
    PgscanDirect => "pgscan_direct",
    PgscanKhugepaged => "pgscan_khugepaged",
    PgscanAnon => "pgscan_anon",
    PgscanFile => "pgscan_file",
    PgstealAnon => "pgsteal_anon",
    PgstealFile => "pgsteal_file",
    Pgrotated => "pgrotated",
    WorkingsetRefaultAnon => "workingset_refault_anon",
    WorkingsetActivateAnon => "workingset_activate_anon",
    WorkingsetRestoreAnon => "workingset_restore_anon",
    DropPagecache => "drop_pagecache",
    DropSlab => "drop_slab",
    OomKill => "oom_kill",
    ThpFaultAlloc => "thp_fault_alloc",
    ThpFaultFallback => "thp_fault_fallback",
    ThpFaultFallbackCharge => "thp_fault_fallback_charge",
    ThpFileAlloc => "thp_file_alloc",
    ThpFileFallback => "thp_file_fallback",
    ThpFileFallbackCharge => "thp_file_fallback_charge",
    ThpFileMapped => "thp_file_mapped",
    ThpScanExceedNonePte => "thp_scan_exceed_none_pte",
    ThpScanExceedSwapPte => "thp_scan_exceed_swap_pte",
    ThpScanExceedSharePte => "thp_scan_exceed_share_pte",
    ThpCollapseAlloc => "thp_collapse_alloc",
    ThpCollapseAllocFailed => "thp_collapse_alloc_failed",
    ThpSplitPage => "thp_split_page",
    ThpSplitPageFailed => "thp_split_page_failed",
    ThpDeferredSplitPage => "thp_deferred_split_page",
    ThpUnderusedSplitPage => "thp_underused_split_page",
    ThpSplitPmd => "thp_split_pmd",
    ThpSwpout => "thp_swpout",
    ThpSwpoutFallback => "thp_swpout_fallback",
    ThpZeroPageAlloc => "thp_zero_page_alloc",
    ThpZeroPageAllocFailed => "thp_zero_page_alloc_failed",
    PgmigrateSuccess => "pgmigrate_success",
    PgmigrateFail => "pgmigrate_fail",
    ThpMigrationSuccess => "thp_migration_success",
    ThpMigrationFail => "thp_migration_fail",
    ThpMigrationSplit => "thp_migration_split",
    SwapRa => "swap_ra",
    SwapRaHit => "swap_ra_hit",
    SwpinZero => "swpin_zero",
    SwpoutZero => "swpout_zero",
    Zswpin => "zswpin",
    Zswpout => "zswpout",
    CompactMigrateScanned => "compact_migrate_scanned",
    CompactFreeScanned => "compact_free_scanned",
    CompactIsolated => "compact_isolated",
    CompactStall => "compact_stall",
    CompactFail => "compact_fail",
    CompactSuccess => "compact_success",
    CompactDaemonWake => "compact_daemon_wake",
    CompactDaemonMigrateScanned => "compact_daemon_migrate_scanned",
    CompactDaemonFreeScanned => "compact_daemon_free_scanned",
    CmaAllocSuccess => "cma_alloc_success",
    CmaAllocFail => "cma_alloc_fail",
}

impl VmEvent {
    /// `PGALLOC` of a zone (`__count_zid_vm_events(PGALLOC, zid, n)`).
    #[inline]
    pub fn pgalloc(zone: ZoneType) -> VmEvent {
        const PGALLOC: [VmEvent; 5] = [
            VmEvent::PgallocDma,
            VmEvent::PgallocDma32,
            VmEvent::PgallocNormal,
            VmEvent::PgallocMovable,
            VmEvent::PgallocDevice,
        ];
        PGALLOC[zone.index()]
    }

    /// `ALLOCSTALL` of a zone.
    pub fn allocstall(zone: ZoneType) -> VmEvent {
        const ALLOCSTALL: [VmEvent; 5] = [
            VmEvent::AllocstallDma,
            VmEvent::AllocstallDma32,
            VmEvent::AllocstallNormal,
            VmEvent::AllocstallMovable,
            VmEvent::AllocstallDevice,
        ];
        ALLOCSTALL[zone.index()]
    }

    /// The event /proc/vmstat names `name`, through a table built once
    /// (a report reads every item by name).
    pub fn from_name(name: &str) -> Option<VmEvent> {
        static BY_NAME: std::sync::OnceLock<rustc_hash::FxHashMap<&'static str, VmEvent>> = std::sync::OnceLock::new();
        // Reversed: were a name given twice, the first event keeps it.
        let by_name = BY_NAME.get_or_init(|| VmEvent::ALL.iter().rev().map(|&e| (e.name(), e)).collect());
        by_name.get(name).copied()
    }
}

/// The machine-wide event counters (the kernel sums per-cpu counters; the
/// model counts once).
#[derive(Clone, Debug)]
pub struct VmEvents {
    counts: [u64; NR_VM_EVENTS],
}

impl Default for VmEvents {
    fn default() -> Self {
        VmEvents {
            counts: [0; NR_VM_EVENTS],
        }
    }
}

impl VmEvents {
    #[inline]
    pub fn count(&mut self, event: VmEvent, n: u64) {
        self.counts[event as usize] += n;
    }

    #[inline]
    pub fn get(&self, event: VmEvent) -> u64 {
        self.counts[event as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::names::{CMA_VMSTAT_EVENTS, VMSTAT_ITEMS};

    #[test]
    fn every_event_is_a_host_vmstat_name() {
        for e in VmEvent::ALL {
            assert!(
                VMSTAT_ITEMS.contains(&e.name()) || CMA_VMSTAT_EVENTS.contains(&e.name()),
                "{} is not in /proc/vmstat",
                e.name()
            );
        }
    }
}
