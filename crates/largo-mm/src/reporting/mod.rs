//! Free page reporting (mm/page_reporting.c): free blocks at or above the
//! reporting order are handed, in batches, to a device that gives their
//! memory back to the host (virtio-balloon with `VIRTIO_BALLOON_F_REPORTING`);
//! the host backs them again, zero-filled, on the next touch.
//!
//! - `state.rs`: the device's request / active / idle state machine and
//!   the trigger that requests a pass (`page_reporting_notify_free`).
//! - `cycle.rs`: the pass (`page_reporting_process`, `_process_zone`,
//!   `_cycle`, `_drain`) with `__isolate_free_page` and
//!   `__putback_isolated_page`; the free lists are touched only there.
//! - `sink.rs`: where reported blocks go ([`ReportSink`]): counted on
//!   `sim`, discarded from the host arena on `ram`.
//! - `refault.rs`: which page frames the host has discarded, so that
//!   allocating them again counts as host refaults.
//! - `device.rs`: the machine side: the sink of the backing, the clock
//!   that runs the delayed pass, the `page_reporting/*` knobs.
//!
//! Time is the machine's simulated clock ([`crate::machine::Machine::advance_time`]):
//! a requested pass runs `PAGE_REPORTING_DELAY` later, never by the wall clock.

mod cycle;
mod device;
mod refault;
mod sink;
mod state;

pub use cycle::Reporter;
pub(crate) use device::sink_for;
pub use refault::HostDiscarded;
pub use sink::{CountingSink, DiscardingSink, ReportError, ReportSink};
pub use state::{PageReporting, PrState, ReportingStats, TimelineSample, Trigger};

/// `PAGE_REPORTING_CAPACITY`: blocks per report call (scatterlist entries).
pub const PAGE_REPORTING_CAPACITY: usize = 32;

/// `PAGE_REPORTING_DELAY`: 2 s between a request and its pass.
pub const PAGE_REPORTING_DELAY_NS: u64 = 2_000_000_000;

/// `PAGE_REPORTING_HWM` of the seed series' trigger: unreported free
/// blocks of an order that request a pass.
pub const PAGE_REPORTING_HWM: u64 = 32;
