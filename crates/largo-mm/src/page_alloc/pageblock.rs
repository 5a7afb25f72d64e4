//! Pageblock flags (include/linux/pageblock-flags.h): the migratetype of
//! each pageblock. The compaction skip bit joins with compaction.

use largo_types::MigrateType;

const MT_MASK: u8 = 0x7;

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

    /// `get_pfnblock_migratetype`.
    #[inline]
    pub fn migratetype(&self, pfn: u64) -> MigrateType {
        MigrateType::from_index((self.flags[self.index(pfn)] & MT_MASK) as usize)
    }

    /// Sets the migratetype of the pageblock holding `pfn`, keeping other bits.
    #[inline]
    pub fn set_migratetype(&mut self, pfn: u64, mt: MigrateType) {
        let i = self.index(pfn);
        self.flags[i] = (self.flags[i] & !MT_MASK) | mt as u8;
    }
}
