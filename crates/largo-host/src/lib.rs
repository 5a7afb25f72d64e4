//! The host kernel side of largo, for validation and calibration: the
//! machine's THP knobs written under a lock and restored on every exit
//! path ([`knobs`]), counter snapshots ([`counters`]), native runs of a
//! workload's operations at the model's addresses ([`native`]), and the
//! side-by-side comparison ([`validate`]).
//!
//! Everything here needs root and a kernel with mTHP controls;
//! [`knobs::unavailable_reason`] says why not when it cannot run. The only
//! unsafe code it relies on lives in `largo_physmem::host`.

pub mod burst;
pub mod calibrate;
pub mod costcheck;
pub mod counters;
pub mod fragmenter;
pub mod fresh;
pub mod hostbuild;
pub mod hostid;
pub mod hostshape;
pub mod hostswap;
pub mod interleave;
pub mod kernel_time;
pub mod knobs;
pub mod kpage;
pub mod layout;
pub mod measured;
pub mod native;
pub mod probe;
pub mod program;
pub mod reclaimcal;
pub mod record;
pub mod reporting_check;
pub mod scaling;
pub mod scenario;
pub mod sentinel;
pub mod skip;
pub mod snapshot;
pub mod stats;
pub mod syscalltime;
pub mod thpmaps;
pub mod tlbbench;
pub mod validate;

pub use knobs::{unavailable_reason, KnobGuard};
pub use validate::{validate, validate_workload, Validation};
