//! The vocabulary shared by every largo crate: page frame numbers, sizes,
//! migratetypes, zone types, and the machine geometry with its presets.
//!
//! This crate has no dependencies on the rest of largo and no unsafe code.

mod geometry;
mod migratetype;
mod pfn;
mod preset;
mod size;
mod tlb;
mod zone_type;

pub use geometry::{Arch, Geometry, GeometryError, GeometryOverrides, SUBSECTION_SHIFT};
pub use migratetype::{MigrateType, MIGRATE_PCPTYPES, MIGRATE_TYPES, MIGRATE_TYPES_NO_CMA};
pub use pfn::Pfn;
pub use preset::Preset;
pub use size::{format_size, parse_size, SizeError};
pub use tlb::{MemoryBandwidth, TlbGeometry};
pub use zone_type::{ZoneType, MAX_NR_ZONES};

/// Orders up to and including this one are "cheap" (include/linux/mmzone.h
/// `PAGE_ALLOC_COSTLY_ORDER`): the pcp lists cache them and the allocator
/// tries harder for them.
pub const PAGE_ALLOC_COSTLY_ORDER: u32 = 3;
