//! Page mobility types (include/linux/mmzone.h `enum migratetype`), as the
//! host kernel configures them (CONFIG_CMA off, CONFIG_MEMORY_ISOLATION on).

/// Free-list and pageblock mobility type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[repr(u8)]
pub enum MigrateType {
    Unmovable = 0,
    Movable = 1,
    Reclaimable = 2,
    /// `MIGRATE_HIGHATOMIC` (= `MIGRATE_PCPTYPES`): reserve for high-order atomic allocations.
    HighAtomic = 3,
    /// `MIGRATE_ISOLATE`: pageblocks being offlined or allocated contiguously.
    Isolate = 4,
}

/// Number of types with per-cpu lists (`MIGRATE_PCPTYPES`).
pub const MIGRATE_PCPTYPES: usize = 3;
/// Number of migratetypes (`MIGRATE_TYPES`).
pub const MIGRATE_TYPES: usize = 5;

impl MigrateType {
    pub const ALL: [MigrateType; MIGRATE_TYPES] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
        MigrateType::HighAtomic,
        MigrateType::Isolate,
    ];

    /// The name /proc/pagetypeinfo prints (`migratetype_names[]`).
    pub fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
            MigrateType::HighAtomic => "HighAtomic",
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

    /// `migratetype_is_mergeable`: only the pcp types may merge across
    /// pageblocks of different types.
    #[inline]
    pub fn is_mergeable(self) -> bool {
        (self as usize) < MIGRATE_PCPTYPES
    }
}
