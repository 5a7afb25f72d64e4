//! Renderers of /proc files in the kernel's exact text format, so their
//! output can be diffed against the host's. Lines for things the model
//! does not track (page cache, slab, swap, ...) print 0.

mod buddyinfo;
mod meminfo;
mod node;
mod pagetypeinfo;
mod reporting;
mod thpmaps;
mod vmstat;
mod zoneinfo;

pub use buddyinfo::buddyinfo;
pub use meminfo::{meminfo, meminfo_kb};
pub use node::{global_node_item, node_item, zone_lru_item};
pub use pagetypeinfo::pagetypeinfo;
pub use reporting::page_reporting;
pub use thpmaps::{mthp, thpmaps};
pub use vmstat::{vmstat, vmstat_value};
pub use zoneinfo::zoneinfo;

/// The files `largo show` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcFile {
    Buddyinfo,
    Pagetypeinfo,
    Zoneinfo,
    Vmstat,
    Meminfo,
    /// Per-size mTHP stats (sysfs).
    Mthp,
    /// Mapped anonymous memory by folio size (tools/mm/thpmaps).
    Thpmaps,
    /// Free page reporting's parameters, counters and Reported blocks.
    PageReporting,
    /// `/sys/kernel/debug/extfrag/extfrag_index`.
    ExtfragIndex,
    /// `/sys/kernel/debug/extfrag/unusable_index`.
    UnusableIndex,
}

impl ProcFile {
    pub const ALL: [ProcFile; 10] = [
        ProcFile::Buddyinfo,
        ProcFile::Pagetypeinfo,
        ProcFile::Zoneinfo,
        ProcFile::Vmstat,
        ProcFile::Meminfo,
        ProcFile::Mthp,
        ProcFile::Thpmaps,
        ProcFile::PageReporting,
        ProcFile::ExtfragIndex,
        ProcFile::UnusableIndex,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProcFile::Buddyinfo => "buddyinfo",
            ProcFile::Pagetypeinfo => "pagetypeinfo",
            ProcFile::Zoneinfo => "zoneinfo",
            ProcFile::Vmstat => "vmstat",
            ProcFile::Meminfo => "meminfo",
            ProcFile::Mthp => "mthp",
            ProcFile::Thpmaps => "thpmaps",
            ProcFile::PageReporting => "page_reporting",
            ProcFile::ExtfragIndex => "extfrag_index",
            ProcFile::UnusableIndex => "unusable_index",
        }
    }

    /// Where the kernel shows it.
    pub fn help(self) -> &'static str {
        match self {
            ProcFile::Buddyinfo => "/proc/buddyinfo: free blocks per order and zone",
            ProcFile::Pagetypeinfo => "/proc/pagetypeinfo: free blocks per migratetype, pageblocks per type",
            ProcFile::Zoneinfo => "/proc/zoneinfo: watermarks, counters and pcp state per zone",
            ProcFile::Vmstat => "/proc/vmstat",
            ProcFile::Meminfo => "/proc/meminfo",
            ProcFile::Mthp => "per-size mTHP stats, as `grep . hugepages-*/stats/*` prints them",
            ProcFile::Thpmaps => "mapped anonymous memory by folio size (tools/mm/thpmaps --rollup)",
            ProcFile::PageReporting => "free page reporting: parameters, counters, Reported blocks per order",
            ProcFile::ExtfragIndex => "debugfs extfrag/extfrag_index: fragmentation index per order",
            ProcFile::UnusableIndex => "debugfs extfrag/unusable_index: free memory unusable per order",
        }
    }

    pub fn render(self, m: &crate::Machine) -> String {
        match self {
            ProcFile::Buddyinfo => buddyinfo(m),
            ProcFile::Pagetypeinfo => pagetypeinfo(m),
            ProcFile::Zoneinfo => zoneinfo(m),
            ProcFile::Vmstat => vmstat(m),
            ProcFile::Meminfo => meminfo(m),
            ProcFile::Mthp => mthp(m),
            ProcFile::Thpmaps => thpmaps(m),
            ProcFile::PageReporting => page_reporting(m),
            ProcFile::ExtfragIndex => crate::compaction::render_extfrag_index(m.page_alloc()),
            ProcFile::UnusableIndex => crate::compaction::render_unusable_index(m.page_alloc()),
        }
    }
}
