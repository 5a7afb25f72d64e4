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
    #[error("reading /proc/self/pagemap: {0}")]
    Pagemap(std::io::Error),
}

/// One measured cell.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct HostTlbPoint {
    /// Wall ns per access, median of the repeats.
    pub ns_per_access: f64,
    /// Share of the range the kernel mapped with folios of the size asked
    /// (from the per-size `anon_fault_alloc` counters; 1 for 4K).
    pub folio_share: f64,
    /// Share of the range's naturally aligned groups of `COALESCE_PAGES`
    /// 4K pages that map naturally aligned, physically contiguous frames
    /// (from /proc/self/pagemap): what the CPU may coalesce whatever the
    /// folio size. A host that has run a while hands 4K faults scattered
    /// frames (near 0); right after compaction, consecutive ones.
    pub contiguous_share: f64,
    /// Share of the range's pages whose frame is next to (one above or one
    /// below) the previous page's: the guest-physical locality of the
    /// mapping, which on a guest decides how often a walk's nested
    /// (guest-physical to host) translation misses. The per-cpu lists hand
    /// a fresh split's 4K pages out in descending order here.
    pub adjacent_share: f64,
}

/// Pages a coalesced TLB entry covers (the x86 preset's, AMD's).
pub const COALESCE_PAGES: u64 = 4;

/// The frames of this process's `[base, base + len)` (None: not present).
fn frames(base: u64, len: u64) -> std::io::Result<Vec<Option<u64>>> {
    let f = std::fs::File::open("/proc/self/pagemap")?;
    let entries = crate::kpage::read_u64s_at(&f, base / 4096, (len / 4096) as usize)?;
    Ok(entries
        .into_iter()
        .map(|e| (e >> 63 == 1).then_some(e & ((1 << 55) - 1)).filter(|&p| p != 0))
        .collect())
}

/// [`HostTlbPoint::adjacent_share`] of `frames`.
fn adjacent_share(frames: &[Option<u64>]) -> f64 {
    let adjacent = frames
        .windows(2)
        .filter(|w| matches!(w, [Some(a), Some(b)] if a.abs_diff(*b) == 1))
        .count();
    adjacent as f64 / frames.len().saturating_sub(1).max(1) as f64
}

/// [`HostTlbPoint::contiguous_share`] of `frames`.
fn contiguous_share(frames: &[Option<u64>]) -> f64 {
    let groups = frames.chunks_exact(COALESCE_PAGES as usize);
    let nr = groups.len();
    let contiguous = groups
        .filter(|g| {
            g[0].is_some_and(|first| {
                first % COALESCE_PAGES == 0 && g.iter().enumerate().all(|(i, &e)| e == Some(first + i as u64))
            })
        })
        .count();
    if nr == 0 {
        0.0
    } else {
        contiguous as f64 / nr as f64
    }
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
    let frames = frames(base, range_bytes).map_err(TlbBenchError::Pagemap)?;
    let (contiguous_share, adjacent_share) = (contiguous_share(&frames), adjacent_share(&frames));
    drop(frames);
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
        contiguous_share,
        adjacent_share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity_counts_aligned_ascending_runs_and_adjacency_either_way() {
        let up: Vec<Option<u64>> = (100..108).map(Some).collect();
        assert_eq!(contiguous_share(&up), 1.0);
        assert_eq!(adjacent_share(&up), 1.0);
        let down: Vec<Option<u64>> = (100..108).rev().map(Some).collect();
        assert_eq!(contiguous_share(&down), 0.0, "descending frames do not coalesce");
        assert_eq!(adjacent_share(&down), 1.0);
        let unaligned: Vec<Option<u64>> = (101..109).map(Some).collect();
        assert_eq!(contiguous_share(&unaligned), 0.0);
        let holes = vec![Some(4), None, Some(6), Some(7)];
        assert_eq!((contiguous_share(&holes), adjacent_share(&holes)), (0.0, 1.0 / 3.0));
    }
}
