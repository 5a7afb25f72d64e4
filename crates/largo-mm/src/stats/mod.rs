//! Counters the kernel exports (/proc/vmstat events and zone and node
//! items, per-size mTHP stats later) and the renderers of the /proc files.

mod events;
pub mod names;
pub mod render;

pub use events::{VmEvent, VmEvents, NR_VM_EVENTS};
