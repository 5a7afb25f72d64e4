//! Workloads for largo: the built-in set (will-it-scale and vm-scalability
//! style loops, bloat and deferred-split cases), the deterministic
//! scheduler that runs N tasks on simulated CPUs, counter reports in the
//! kernel's names, and the kernel-time cost model.
//!
//! - [`spec`]: `NAME:KEY=VALUE,...` specifications
//! - [`op`]: what a task does (scripts) and did (resolved operations)
//! - [`builtin`]: the catalog
//! - [`sched`], [`run`]: running a workload on a `Machine`
//! - [`report`]: counter snapshots
//! - [`replay`]: replaying a recorded or hand-written trace
//! - [`cost`]: the cost model and its calibration fit
//! - [`tlb`]: TLB reach and contiguity coverage

pub mod access;
pub mod aging;
pub mod builtin;
pub mod contention;
pub mod cost;
pub mod entry;
pub mod op;
pub mod policy;
pub mod recorded;
pub mod replay;
pub mod report;
pub mod reporting;
pub mod run;
pub mod sched;
pub mod spec;
pub mod tlb;
pub mod workload;

pub use builtin::{catalog, WorkloadDef};
pub use run::{run, Peak, RunError, RunOptions, RunOutcome};
pub use sched::TaskMode;
pub use spec::{SpecError, WorkloadSpec};
pub use workload::{TraceSource, Workload, WorkloadError};
