//! The khugepaged tunables (`transparent_hugepage/khugepaged/*`,
//! mm/khugepaged.c v6.18; `max_ptes_none` lives in [`super::ThpKnobs`],
//! which the underused shrinker shares).

/// Defaults as `khugepaged_init` sets them for a PMD of `1 << pmd_order` pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KhugepagedKnobs {
    /// `scan_sleep_millisecs`: the pause between two scans.
    pub scan_sleep_ms: u64,
    /// `alloc_sleep_millisecs`: the pause after a failed THP allocation.
    pub alloc_sleep_ms: u64,
    /// `pages_to_scan`: the budget of one scan (a PMD range counts its pages).
    pub pages_to_scan: u64,
    /// `max_ptes_swap`: swap entries a range may hold and still collapse.
    pub max_ptes_swap: u32,
    /// `max_ptes_shared`: pages mapped by other processes too.
    pub max_ptes_shared: u32,
    /// `defrag`: THP allocations may reclaim and compact (GFP_TRANSHUGE).
    pub defrag: bool,
}

impl KhugepagedKnobs {
    pub fn defaults(pmd_order: u32) -> KhugepagedKnobs {
        let pmd_nr = 1u64 << pmd_order;
        KhugepagedKnobs {
            scan_sleep_ms: 10_000,
            alloc_sleep_ms: 60_000,
            pages_to_scan: pmd_nr * 8,
            max_ptes_swap: (pmd_nr / 8) as u32,
            max_ptes_shared: (pmd_nr / 2) as u32,
            defrag: true,
        }
    }
}
