//! `largo bench ...`: every figure is a ratio measured side by side in one run.

pub mod alloc;
pub mod contention;
pub mod fault;
pub mod gigantic;
pub mod migrate;
pub mod pageblock;
pub mod replay;
mod stream;
pub mod tlb;
