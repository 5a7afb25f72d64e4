//! The largo engine: a user-space model of Linux's physical memory
//! management, mirroring mm/ function by function.
//!
//! - [`layout`]: the physical memory map (RAM, nodes, zone spans, boot reservations)
//! - [`sparse`]: sections, subsections, memory blocks
//! - [`memmap`]: the per-pfn metadata array and folios
//! - [`page_alloc`]: the buddy allocator, pcp lists, watermarks, isolation, and its invariant checker
//! - [`hotplug`]: memory blocks offline and online, down to 2 MiB subsections
//! - [`cma`]: contiguous memory allocator areas and `cma_alloc`
//! - [`compaction`]: compaction, `alloc_contig_range`, fragmentation indices
//! - [`stats`]: counters and /proc renderers
//! - [`machine`]: [`Machine`], the root that owns all of it

pub mod cma;
pub mod compaction;
pub mod hotplug;
pub mod knobs;
pub mod layout;
pub mod machine;
pub mod memcg;
pub mod memmap;
pub mod page_alloc;
pub mod reporting;
pub mod snapshot;
pub mod sparse;
pub mod stats;
pub mod swap;
pub mod virtio_mem;
pub mod vm;

pub use machine::{CheckError, Machine, MachineConfig, MachineError};
pub use memmap::Folio;
pub use page_alloc::gfp;
