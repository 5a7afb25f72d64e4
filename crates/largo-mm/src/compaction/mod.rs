//! Memory compaction (mm/compaction.c) and contiguous allocation
//! (mm/page_alloc.c `alloc_contig_range`, `alloc_contig_pages`).
//!
//! Compaction runs two scanners over a zone: the migrate scanner walks
//! pageblocks up from the zone start isolating movable (LRU) folios, the
//! free scanner walks down from the zone end isolating free pages in
//! movable pageblocks; the folios migrate into those free pages (through
//! the [`Reclaim`](crate::page_alloc::Reclaim) trait, which the VM
//! implements with rmap), so movable data gathers at the top of the zone
//! and free blocks at the bottom merge. A run ends when the scanners meet
//! or, for a direct compactor, when a free block of the requested order
//! exists.
//!
//! Files:
//! - `control.rs`: `compact_control`, results, priorities, per-zone deferral
//! - `freepages.rs`: the free scanner and `compaction_alloc`
//! - `migratepages.rs`: the migrate scanner
//! - `zone.rs`: `compact_zone`, `compaction_suitable`, `__compact_finished`
//! - `direct.rs`: direct compaction (`try_to_compact_pages`), kcompactd, `compact_memory`
//! - `proactive.rs`: kcompactd's timer and proactive compaction (fragmentation score)
//! - `state.rs`: what compaction keeps (compacting context, capture, kcompactd timer)
//! - `extfrag.rs`: fragmentation and unusable-free indices (debugfs `extfrag/`)
//! - `contig.rs`: `alloc_contig_range`, `alloc_contig_pages`, `free_contig_range`

mod contig;
mod control;
pub(crate) mod direct;
mod extfrag;
mod freepages;
mod migratepages;
pub mod proactive;
mod state;
mod zone;

pub use contig::ContigError;
pub use control::{Capture, CompactControl, CompactPriority, CompactResult, MigrateMode, ZoneCompact};
pub use extfrag::{
    extfrag_for_order, fragmentation_index, render_extfrag_index, render_unusable_index, unusable_free_index,
};
pub use proactive::{fragmentation_score_node, fragmentation_score_zone};
pub use state::{CompactionState, Entered};

use crate::page_alloc::PageAlloc;

/// Compaction at work on one machine's allocator. The kernel's functions
/// take the zone they compact; the model's take the allocator, and every
/// use of it is spelled `self.pa`: the allocator API compaction needs
/// (zone watermarks, free-list and isolation primitives, pageblock bits,
/// the memmap) is what those lines call. Its own state between runs is
/// [`CompactionState`].
pub struct Compactor<'a> {
    pub(crate) pa: &'a mut PageAlloc,
}

/// `COMPACT_CLUSTER_MAX` (= `SWAP_CLUSTER_MAX`): folios isolated per round.
pub const COMPACT_CLUSTER_MAX: u64 = 32;
/// `COMPACT_MAX_DEFER_SHIFT`: compaction skipped up to 64 times after failures.
pub const COMPACT_MAX_DEFER_SHIFT: u32 = 6;
