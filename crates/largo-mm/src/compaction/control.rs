//! `struct compact_control`, the results and priorities of
//! include/linux/compaction.h, and the per-zone deferral state.

use largo_types::MigrateType;

use super::COMPACT_MAX_DEFER_SHIFT;

/// `enum compact_result`, in the kernel's order (callers take the max).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CompactResult {
    /// The zone cannot be compacted for this request (fragindex says it lacks memory).
    NotSuitableZone,
    /// Not enough free memory to compact, or compaction not allowed.
    Skipped,
    /// Skipped after recent failures.
    Deferred,
    /// No suitable page was found (only kcompactd reports it).
    NoSuitablePage,
    /// Keep going.
    Continue,
    /// The scanners met: the whole zone was compacted.
    Complete,
    /// The scanners met but some blocks were skipped.
    PartialSkipped,
    /// Lock contention or a signal (not modelled).
    Contended,
    /// A free block of the requested order exists.
    Success,
}

/// `enum migrate_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrateMode {
    Async,
    SyncLight,
    Sync,
}

/// `enum compact_priority`: lower is more thorough.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CompactPriority {
    /// `COMPACT_PRIO_SYNC_FULL` (= `MIN_COMPACT_PRIORITY`): whole zone, skip hints ignored.
    SyncFull = 0,
    /// `COMPACT_PRIO_SYNC_LIGHT` (= `DEF_COMPACT_PRIORITY`).
    SyncLight = 1,
    /// `COMPACT_PRIO_ASYNC` (= `INIT_COMPACT_PRIORITY`).
    Async = 2,
}

/// A zone's compaction memory (`compact_cached_*`, `compact_considered`,
/// `compact_defer_shift`, `compact_order_failed` of `struct zone`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ZoneCompact {
    /// Where the migrate scanner resumes (0: the zone start).
    pub cached_migrate_pfn: u64,
    /// Where the free scanner resumes (0: the zone's last pageblock).
    pub cached_free_pfn: u64,
    pub considered: u32,
    pub defer_shift: u32,
    pub order_failed: u32,
}

impl ZoneCompact {
    /// `defer_compaction`: after a failure, skip the next 1 << shift attempts.
    pub fn defer(&mut self, order: u32) {
        self.considered = 0;
        self.defer_shift = (self.defer_shift + 1).min(COMPACT_MAX_DEFER_SHIFT);
        if order < self.order_failed {
            self.order_failed = order;
        }
    }

    /// `compaction_deferred`: whether this attempt is skipped.
    pub fn deferred(&mut self, order: u32) -> bool {
        if order < self.order_failed {
            return false;
        }
        let limit = 1u32 << self.defer_shift;
        self.considered += 1;
        if self.considered >= limit {
            self.considered = limit;
            return false;
        }
        true
    }

    /// `compaction_defer_reset`: a success at `order`.
    pub fn defer_reset(&mut self, order: u32, alloc_success: bool) {
        if alloc_success {
            self.considered = 0;
            self.defer_shift = 0;
        }
        if order >= self.order_failed {
            self.order_failed = order + 1;
        }
    }
}

/// `struct capture_control`: a direct compactor's claim on the first free
/// block of its order that compaction frees in its zone, so that nobody
/// else can take it between the free and the allocation.
#[derive(Clone, Copy, Debug)]
pub struct Capture {
    pub zi: usize,
    pub order: u32,
    pub migratetype: MigrateType,
    /// The captured block's first pfn, once one was freed.
    pub page: Option<u64>,
}

/// `struct compact_control`: one compaction run of one zone.
#[derive(Clone, Debug)]
pub struct CompactControl {
    pub zi: usize,
    /// The order wanted; `None` compacts the whole zone (`compact_memory`).
    pub order: Option<u32>,
    pub migratetype: MigrateType,
    pub mode: MigrateMode,
    pub highest_zoneidx: usize,
    /// The allocation's flags (their watermark decides "already done").
    pub alloc_flags: crate::page_alloc::AllocFlags,
    pub direct_compaction: bool,
    /// kcompactd's proactive compaction (`cc->proactive_compaction`).
    pub proactive: bool,
    pub whole_zone: bool,
    pub ignore_skip_hint: bool,
    /// Next pfn the migrate scanner looks at.
    pub migrate_pfn: u64,
    /// The pageblock the free scanner looks at next (scans downwards).
    pub free_pfn: u64,
    /// Isolated free pages by buddy order (`cc->freepages[]`); their records are clear.
    pub freepages: Vec<Vec<u64>>,
    pub nr_freepages: u64,
    /// Heads of the isolated folios (`cc->migratepages`).
    pub migratepages: Vec<u64>,
    pub nr_migratepages: u64,
    pub total_migrate_scanned: u64,
    pub total_free_scanned: u64,
    /// Base pages migrated in this run.
    pub nr_migrated: u64,
    /// The free scanner found nothing more to isolate.
    pub free_exhausted: bool,
}

impl CompactControl {
    pub fn new(zi: usize, order: Option<u32>, mode: MigrateMode, nr_page_orders: usize) -> CompactControl {
        CompactControl {
            zi,
            order,
            migratetype: MigrateType::Movable,
            mode,
            highest_zoneidx: largo_types::MAX_NR_ZONES - 1,
            alloc_flags: crate::page_alloc::AllocFlags::empty(),
            direct_compaction: false,
            proactive: false,
            whole_zone: false,
            ignore_skip_hint: false,
            migrate_pfn: 0,
            free_pfn: 0,
            freepages: vec![Vec::new(); nr_page_orders],
            nr_freepages: 0,
            migratepages: Vec::new(),
            nr_migratepages: 0,
            total_migrate_scanned: 0,
            total_free_scanned: 0,
            nr_migrated: 0,
            free_exhausted: false,
        }
    }
}
