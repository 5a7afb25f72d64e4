//! `largo host ...`: the live host (root) as largo sees it.

pub mod fragment;
pub mod snapshot;
pub mod thpmaps;
