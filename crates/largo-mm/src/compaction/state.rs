//! What compaction keeps between runs and across the allocator: whether
//! the running code is a compactor (the `PF_MEMALLOC` of its task), the
//! running direct compactor's capture (`current->capture_control`), and
//! kcompactd's timer and proactive deferral. One struct, owned by the
//! allocator (the capture is taken inside `__free_one_page`), changed only
//! through the methods below.

use largo_types::MigrateType;

use super::control::Capture;
use super::proactive::{Kcompactd, HPAGE_FRAG_CHECK_INTERVAL_NS};
use super::COMPACT_MAX_DEFER_SHIFT;

#[derive(Clone, Debug, Default)]
pub struct CompactionState {
    /// A compaction or contiguous allocation is migrating: allocations
    /// for its targets never compact (the kernel's `PF_MEMALLOC`).
    in_compaction: bool,
    /// The running direct compactor's capture.
    capture: Option<Capture>,
    kcompactd: Kcompactd,
}

/// What `enter` returns and `leave` takes back: whether the code that
/// entered was already a compactor (nested migration).
#[must_use = "give it back to `leave`"]
pub struct Entered(bool);

impl CompactionState {
    /// At boot: kcompactd's first check one interval on.
    pub fn new() -> CompactionState {
        CompactionState {
            kcompactd: Kcompactd {
                next_ns: HPAGE_FRAG_CHECK_INTERVAL_NS,
                ..Kcompactd::default()
            },
            ..CompactionState::default()
        }
    }

    /// Whether the running code is a compactor (`current->flags & PF_MEMALLOC`).
    pub fn in_compaction(&self) -> bool {
        self.in_compaction
    }

    /// Marks the start of a migrating section (`memalloc_noreclaim_save`).
    pub fn enter(&mut self) -> Entered {
        Entered(std::mem::replace(&mut self.in_compaction, true))
    }

    /// Ends it, restoring what was (`memalloc_noreclaim_restore`).
    pub fn leave(&mut self, entered: Entered) {
        self.in_compaction = entered.0;
    }

    /// A direct compactor starts waiting for a free block of `order` in
    /// zone `zi` (`current->capture_control` set).
    pub fn arm_capture(&mut self, zi: usize, order: u32, migratetype: MigrateType) {
        self.capture = Some(Capture {
            zi,
            order,
            migratetype,
            page: None,
        });
    }

    /// The run ends: the captured block, if one was.
    pub fn take_capture(&mut self) -> Option<u64> {
        self.capture.take().and_then(|c| c.page)
    }

    /// Whether the running compactor already captured its block.
    pub fn captured(&self) -> bool {
        self.capture.is_some_and(|c| c.page.is_some())
    }

    /// `compaction_capture`: the block of `order` at `pfn` freed into zone
    /// `zi` (its pageblock of type `mt`) goes to the waiting compactor if
    /// it wants exactly that: not from isolated blocks, and a movable
    /// pageblock below pageblock order only for a movable request.
    pub fn try_capture(&mut self, zi: usize, pfn: u64, order: u32, mt: MigrateType, pageblock_order: u32) -> bool {
        let Some(c) = self.capture.as_mut() else {
            return false;
        };
        if c.page.is_some() || c.zi != zi || c.order != order || mt == MigrateType::Isolate || mt == MigrateType::Cma {
            return false;
        }
        if order < pageblock_order && mt == MigrateType::Movable && c.migratetype != MigrateType::Movable {
            return false;
        }
        c.page = Some(pfn);
        true
    }

    /// When kcompactd's timer fires next.
    pub fn kcompactd_due(&self) -> u64 {
        self.kcompactd.next_ns
    }

    /// The timer fired at `now`: it fires again an interval later.
    pub fn kcompactd_rearm(&mut self, now: u64) {
        self.kcompactd.next_ns = now + HPAGE_FRAG_CHECK_INTERVAL_NS;
    }

    /// Whether node `nid`'s proactive compaction is deferred at this check
    /// (`proactive_defer`), counting the check off.
    pub fn proactive_deferred(&mut self, nid: usize, nr_nodes: usize) -> bool {
        let defer = &mut self.kcompactd.proactive_defer;
        defer.resize(nr_nodes, 0);
        if defer[nid] > 0 {
            defer[nid] -= 1;
            return true;
        }
        false
    }

    /// A proactive run that did not lower the score defers the next
    /// `1 << COMPACT_MAX_DEFER_SHIFT` checks of the node.
    pub fn defer_proactive(&mut self, nid: usize) {
        self.kcompactd.proactive_defer[nid] = 1 << COMPACT_MAX_DEFER_SHIFT;
    }
}
