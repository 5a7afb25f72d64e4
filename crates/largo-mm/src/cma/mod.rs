//! The contiguous memory allocator (mm/cma.c): areas reserved at boot
//! (`--cma SIZE[@NODE]`), activated as MIGRATE_CMA pageblocks that only
//! movable allocations use (`__rmqueue`'s CMA rules live in
//! `page_alloc::rmqueue`), and `cma_alloc`, which takes a range back
//! through `alloc_contig_range(ACR_FLAGS_CMA)`, migrating what movable
//! allocations left there.
//!
//! - [`declare`]: where boot puts an area.
//! - [`area`]: an activated area and its allocation bitmap.
//! - [`alloc`]: `cma_alloc` / `cma_release` on a machine.

mod alloc;
mod area;
mod declare;

pub use alloc::CmaAllocError;
pub use area::CmaArea;
pub use declare::{reserve_cma_areas, CmaDeclareError, CmaReservation, CmaSpec, NodeSpan};
