//! The backing of modelled page frames.
//!
//! A [`Backing`] holds the contents of the machine's pages: [`SimBacking`]
//! keeps none (metadata-only runs scale to TiB machines), [`RamBacking`]
//! maps one host arena so zeroing, copying and discarding are real work that
//! can be timed and checked, and discarded memory really goes back to the host.
//!
//! [`host`] holds the native memory operations used to run workloads on
//! the host kernel itself (validation and calibration), and [`native`]
//! the programs made of them, each run in a forked child: forking is the
//! one unsafe operation other crates need, so its callers live here.
//!
//! This is the only crate of the workspace with `unsafe` code; every unsafe
//! block carries a `// SAFETY:` comment.

mod backing;
mod chase;
pub mod copy;
pub mod handshake;
pub mod host;
mod huge_alloc;
pub mod native;
mod ram;
mod sim;
mod spans;
pub mod sysv;

pub use backing::{Backing, BackingError, BackingKind, BackingStats};
/// Turns [`HugeAlloc`]'s huge mappings on for the process.
pub use huge_alloc::enable as enable_huge_alloc;
pub use huge_alloc::{advise_huge_pages, HugeAlloc};
pub use ram::RamBacking;
pub use sim::SimBacking;

/// Builds the backing of the given kind for `nr_pages` pages of `page_size` bytes.
pub fn new_backing(kind: BackingKind, nr_pages: u64, page_size: u64) -> Result<Box<dyn Backing>, BackingError> {
    Ok(match kind {
        BackingKind::Sim => Box::new(SimBacking::new(nr_pages, page_size)),
        BackingKind::Ram => Box::new(RamBacking::new(nr_pages, page_size)?),
    })
}
