//! Tests that need this host (root, mTHP sysfs, tracefs, reporting
//! counters) and cannot run say so where it shows: a `SKIPPED` line on
//! standard error, written past the test harness's output capture, so it
//! appears in `cargo test` output without `--nocapture`. CI machines are
//! root and have everything; there the tests run.

use std::io::Write;

/// Says that `test` did not run, and why.
pub fn skip(test: &str, reason: &str) {
    // `std::io::stderr()` written directly is not captured by the test
    // harness (only the print macros are).
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// Whether the host can run a validation (root, mTHP controls); if not,
/// the skip line says why.
pub fn host_ready(test: &str) -> bool {
    match crate::unavailable_reason() {
        None => true,
        Some(reason) => {
            skip(test, &reason);
            false
        }
    }
}

/// Whether the host can record (root, mTHP controls, tracefs events).
pub fn recorder_ready(test: &str) -> bool {
    match crate::record::unavailable_reason() {
        None => true,
        Some(reason) => {
            skip(test, &reason);
            false
        }
    }
}
