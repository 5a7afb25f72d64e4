//! tools/mm/thpmaps for the live host, in Rust (`largo host thpmaps`):
//! [`scan`] reads smaps, pagemap and kpageflags, [`stats`] counts.

pub mod scan;
pub mod stats;
