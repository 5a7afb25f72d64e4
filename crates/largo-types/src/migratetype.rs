//! Page mobility types (include/linux/mmzone.h `enum migratetype`) with
//! CONFIG_CMA and CONFIG_MEMORY_ISOLATION on. A machine without CMA areas
//! (`--cma`) never has a `MIGRATE_CMA` pageblock, and its /proc files
//! print what a CONFIG_CMA=n kernel (the host's) prints.

/// Free-list and pageblock mobility type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[repr(u8)]
pub enum MigrateType {
    Unmovable = 0,
    Movable = 1,
    Reclaimable = 2,
    /// `MIGRATE_HIGHATOMIC` (= `MIGRATE_PCPTYPES`): reserve for high-order atomic allocations.
    HighAtomic = 3,
    /// `MIGRATE_CMA`: pageblocks of a contiguous memory allocator area;
    /// only movable allocations use them, and `cma_alloc` takes them back.
    Cma = 4,
    /// `MIGRATE_ISOLATE`: pageblocks being offlined or allocated contiguously.
    Isolate = 5,
}

/// Number of types with per-cpu lists (`MIGRATE_PCPTYPES`).
pub const MIGRATE_PCPTYPES: usize = 3;
/// Number of migratetypes (`MIGRATE_TYPES`).
pub const MIGRATE_TYPES: usize = 6;
/// `MIGRATE_TYPES` of a CONFIG_CMA=n kernel (the host's): what
/// `page_group_by_mobility_disabled` compares against without CMA areas.
pub const MIGRATE_TYPES_NO_CMA: usize = 5;

impl MigrateType {
    pub const ALL: [MigrateType; MIGRATE_TYPES] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
        MigrateType::HighAtomic,
        MigrateType::Cma,
        MigrateType::Isolate,
    ];

    /// The name /proc/pagetypeinfo prints (`migratetype_names[]`).
    pub fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
            MigrateType::HighAtomic => "HighAtomic",
            MigrateType::Cma => "CMA",
            MigrateType::Isolate => "Isolate",
        }
    }

    #[inline]
    pub fn from_index(index: usize) -> MigrateType {
        const ALL: [MigrateType; MIGRATE_TYPES] = MigrateType::ALL;
        ALL[index]
    }

    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// `is_migrate_movable`: MOVABLE or CMA.
    #[inline]
    pub fn is_movable(self) -> bool {
        matches!(self, MigrateType::Movable | MigrateType::Cma)
    }

    /// `migratetype_is_mergeable`: only the pcp types may merge across
    /// pageblocks of different types.
    #[inline]
    pub fn is_mergeable(self) -> bool {
        (self as usize) < MIGRATE_PCPTYPES
    }
}
