//! The host side of `largo bench tlb`: dependent loads (a pointer chase)
//! over anonymous memory mapped with one folio size, timed natively, to
//! measure what TLB misses cost on this machine.
//!
//! The slots and their order are the model's ([`largo_workloads::access`]):
//! one per 4 KiB whatever the folio size, so the data working set is the
//! same at every size and only the translations differ.

use std::time::Instant;

use largo_physmem::host::{HostError, Window};
use largo_workloads::access::{slot_offset, visit_order, Pattern};
use serde::Serialize;

use crate::knobs::{KnobError, KnobGuard};

/// Why a cell could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum TlbBenchError {
    #[error(transparent)]
    Knob(#[from] KnobError),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(transparent)]
    Sysfs(#[from] crate::record::RecordError),
}

/// One measured cell.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct HostTlbPoint {
    /// Wall ns per access, median of the repeats.
    pub ns_per_access: f64,
    /// Share of the range the kernel mapped with folios of the size asked
    /// (from the per-size `anon_fault_alloc` counters; 1 for 4K).
    pub folio_share: f64,
}

fn anon_fault_alloc(folio_bytes: u64) -> u64 {
    let path = format!(
        "/sys/kernel/mm/transparent_hugepage/hugepages-{}kB/stats/anon_fault_alloc",
        folio_bytes >> 10
    );
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Maps `range_bytes` with `folio_bytes` folios, chains its slots in
/// `pattern` order and times `steps` dependent loads `repeats` times
/// (after one untimed pass over every slot).
pub fn measure(
    folio_bytes: u64,
    range_bytes: u64,
    pattern: Pattern,
    steps: u64,
    repeats: u32,
    seed: u64,
) -> Result<HostTlbPoint, TlbBenchError> {
    let mut guard = KnobGuard::acquire()?;
    guard.set_all(&crate::record::thp_only(folio_bytes)?)?;
    let align = folio_bytes.max(2 << 20);
    let mut window = Window::reserve(range_bytes, align, 0)?;
    let base = window.base();
    window.map(base, range_bytes, true)?;
    let before = anon_fault_alloc(folio_bytes);
    window.touch((0..range_bytes / 4096).map(|i| base + i * 4096), true)?;
    let folio_share = if folio_bytes <= 4096 {
        1.0
    } else {
        ((anon_fault_alloc(folio_bytes) - before) * folio_bytes) as f64 / range_bytes as f64
    };
    drop(guard);
    let slots: Vec<u64> = visit_order(range_bytes, pattern, seed)
        .into_iter()
        .map(slot_offset)
        .collect();
    window.write_chain(base, range_bytes, &slots)?;
    let start = slots[0];
    let mut at = window.chase(base, range_bytes, start, slots.len() as u64)?;
    let mut times = Vec::new();
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        at = window.chase(base, range_bytes, at, steps)?;
        times.push(t.elapsed().as_nanos() as f64 / steps as f64);
    }
    std::hint::black_box(at);
    times.sort_by(f64::total_cmp);
    Ok(HostTlbPoint {
        ns_per_access: times[times.len() / 2],
        folio_share: folio_share.min(1.0),
    })
}
