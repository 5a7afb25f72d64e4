//! The `largo` command line: its arguments, the typed `--config` specs,
//! the output formats, and one module per command. A library so that the
//! fuzz targets can drive the parsers; `main.rs` is the binary.

pub mod args;
pub mod cmd;
pub mod config;
pub mod embed;
pub mod exit;
pub mod output;
pub mod plot;
