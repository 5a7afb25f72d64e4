//! Pageblock flags (include/linux/pageblock-flags.h): the migratetype of
//! each pageblock, the isolation bit and the compaction skip bit.
//!
//! As in v6.16+ (`PB_migrate_isolate`), isolation is a bit of its own: an
//! isolated pageblock reads as `MIGRATE_ISOLATE` while it keeps the type
//! it had, which un-isolation restores.

use largo_types::MigrateType;

const MT_MASK: u8 = 0x7;
/// `PB_migrate_isolate`.
const ISOLATE_BIT: u8 = 0x8;
/// `PB_compact_skip`: compaction found nothing to do here recently.
const SKIP_BIT: u8 = 0x10;

/// One byte per pageblock of the pfn space.
pub struct Pageblocks {
    flags: Vec<u8>,
    order: u32,
}

impl Pageblocks {
    /// All pageblocks start MOVABLE, as `memmap_init_range` marks them.
    pub fn new(max_pfn: u64, pageblock_order: u32) -> Pageblocks {
        let nr = max_pfn.div_ceil(1 << pageblock_order) as usize;
        Pageblocks {
            flags: vec![MigrateType::Movable as u8; nr],
            order: pageblock_order,
        }
    }

    #[inline]
    fn index(&self, pfn: u64) -> usize {
        (pfn >> self.order) as usize
    }

    /// `get_pfnblock_migratetype`: `Isolate` while the isolation bit is set.
    #[inline]
    pub fn migratetype(&self, pfn: u64) -> MigrateType {
        let f = self.flags[self.index(pfn)];
        if f & ISOLATE_BIT != 0 {
            return MigrateType::Isolate;
        }
        MigrateType::from_index((f & MT_MASK) as usize)
    }

    /// The type an isolated pageblock had, and will have again.
    #[inline]
    pub fn underlying_migratetype(&self, pfn: u64) -> MigrateType {
        MigrateType::from_index((self.flags[self.index(pfn)] & MT_MASK) as usize)
    }

    /// Sets the migratetype of the pageblock holding `pfn`: `Isolate` sets
    /// the isolation bit (`set_pageblock_isolate`), any other type is
    /// written and clears it (`clear_pageblock_isolate` + retype).
    #[inline]
    pub fn set_migratetype(&mut self, pfn: u64, mt: MigrateType) {
        let i = self.index(pfn);
        if mt == MigrateType::Isolate {
            self.flags[i] |= ISOLATE_BIT;
        } else {
            self.flags[i] = (self.flags[i] & !(MT_MASK | ISOLATE_BIT)) | mt as u8;
        }
    }

    /// `get_pageblock_skip`.
    #[inline]
    pub fn skip(&self, pfn: u64) -> bool {
        self.flags[self.index(pfn)] & SKIP_BIT != 0
    }

    /// `set_pageblock_skip` / `clear_pageblock_skip`.
    #[inline]
    pub fn set_skip(&mut self, pfn: u64, skip: bool) {
        let i = self.index(pfn);
        if skip {
            self.flags[i] |= SKIP_BIT;
        } else {
            self.flags[i] &= !SKIP_BIT;
        }
    }

    /// Number of pageblocks tracked.
    pub fn len(&self) -> usize {
        self.flags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }
}
