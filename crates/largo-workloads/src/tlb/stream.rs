//! Running a workload's declared access stream through the TLB model and
//! estimating its user time.
//!
//! user ns = accesses x load latency (by pattern and data working set)
//!         + first-level misses that hit the second level x `l2_hit_ns`
//!         + levels the walks fetch x `walk_near_ns` for a walk whose leaf
//!           entry shares a 64-byte line with the previous walk's, else
//!           x `walk_ns`
//!         + those other (far) walks x, for random orders,
//!           `walk_ns_per_doubling` per doubling of the leaf entries'
//!           working set above 128 KiB
//!
//! A walk fetches the leaf level only when the geometry has page-walk
//! caches, every level from the top down to the leaf without.
//!
//! The load latencies are curves measured with 2M folios (where the TLB
//! barely misses) by `largo bench tlb`; the walk costs are fitted from its
//! 4K points; see `TlbGeometry`.

use largo_mm::vm::translation::{Contiguity, UnitKey};
use largo_mm::Machine;
use largo_types::TlbGeometry;
use serde::Serialize;

use super::sim::{TlbCounts, TlbSim};
use crate::access::{visit_order, Pattern, SLOT_SPAN};

/// Accesses per 4 KiB block of a sequential pass (one per 64-byte line).
const LINES_PER_BLOCK: u64 = SLOT_SPAN / 64;

/// The TLB and user-time figures of a run's streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StreamReport {
    #[serde(flatten)]
    pub counts: TlbCounts,
    /// The walks' share of the user time, ns.
    pub walk_ns: f64,
    /// The same in core cycles (at the geometry's clock).
    pub walk_cycles: f64,
    /// Second-level TLB misses (= walks), under the name perf gives them.
    pub misses: u64,
    /// Estimated user time of the streams, ns.
    pub user_ns: f64,
}

impl StreamReport {
    pub fn add(&mut self, o: &StreamReport) {
        self.counts.add(&o.counts);
        self.walk_ns += o.walk_ns;
        self.walk_cycles += o.walk_cycles;
        self.misses += o.misses;
        self.user_ns += o.user_ns;
    }
}

/// Log-linear interpolation of a latency curve at `bytes`.
pub fn interpolate(curve: &[(u64, f64)], bytes: u64) -> f64 {
    let x = (bytes.max(1) as f64).log2();
    let first = curve[0];
    if bytes <= first.0 {
        return first.1;
    }
    for w in curve.windows(2) {
        let (a, b) = (w[0], w[1]);
        if bytes <= b.0 {
            let (xa, xb) = ((a.0 as f64).log2(), (b.0 as f64).log2());
            return a.1 + (b.1 - a.1) * (x - xa) / (xb - xa);
        }
    }
    curve[curve.len() - 1].1
}

/// The contiguity the machine's TLB uses.
pub fn contiguity(m: &Machine, tlb: &TlbGeometry) -> Contiguity {
    Contiguity {
        cont_order: m.geometry().cont_pte_order,
        coalesce_order: if m.geometry().page_shift == 12 {
            tlb.coalesce_pages.max(1).trailing_zeros()
        } else {
            0
        },
    }
}

/// Runs `passes` passes of `pattern` over `[start, start + len)` of `pid`'s
/// memory (as mapped now) through a cold TLB.
#[allow(clippy::too_many_arguments)]
pub fn run_stream(
    m: &Machine,
    tlb: &TlbGeometry,
    pid: u32,
    start: u64,
    len: u64,
    pattern: Pattern,
    passes: u64,
    seed: u64,
) -> StreamReport {
    let units = m
        .vm()
        .translation_units(m.page_alloc(), pid, start, len, contiguity(m, tlb));
    let page_shift = m.geometry().page_shift;
    let unit_of = |block: u64| -> UnitKey {
        let page = ((block * SLOT_SPAN) >> page_shift) as usize;
        // A page without a translation would fault; it is counted as a
        // base-page translation.
        units.get(page).copied().flatten().unwrap_or_else(|| {
            let addr = (start + block * SLOT_SPAN) & !((1u64 << page_shift) - 1);
            largo_mm::vm::translation::unit_key(addr, page_shift)
        })
    };
    let mut sim = TlbSim::new(tlb);
    let order = visit_order(len, pattern, seed);
    let geo = m.geometry();
    // Levels a walk fetches for a unit: the leaf's only with page-walk
    // caches, else from the top level down to the leaf.
    let levels_of = |key: UnitKey| -> u64 {
        if tlb.page_walk_caches {
            return 1;
        }
        let bits = geo.page_shift - 3;
        let above_leaf = largo_mm::vm::translation::unit_shift(key).saturating_sub(page_shift) / bits;
        (geo.pgtable_levels - above_leaf.min(geo.pgtable_levels - 1)) as u64
    };
    let repeat = if pattern == Pattern::Seq {
        LINES_PER_BLOCK - 1
    } else {
        0
    };
    let block_shift = page_shift + (page_shift - 3);
    let far_extra = leaf_extra_ns(tlb, &units, block_shift, pattern);
    // Levels fetched by walks whose leaf line the previous walk read
    // (near) and by the others (far), and the number of far walks.
    let (mut near_levels, mut far_levels, mut far_walks) = (0u64, 0u64, 0u64);
    let mut last_line = None;
    for _ in 0..passes {
        for &block in &order {
            let unit = unit_of(block);
            if sim.access(unit, repeat) {
                let line = leaf_line(unit, start + block * SLOT_SPAN, page_shift, block_shift);
                if last_line == Some(line) {
                    near_levels += levels_of(unit);
                } else {
                    far_walks += 1;
                    far_levels += levels_of(unit);
                }
                last_line = Some(line);
            }
        }
    }
    let c = sim.counts;
    let blocks = len / SLOT_SPAN;
    let load_ns = match pattern {
        Pattern::Chase => interpolate(&tlb.random_load_ns, blocks * 64),
        Pattern::Stride => interpolate(&tlb.stride_load_ns, blocks * 64),
        Pattern::Seq => tlb.seq_line_ns,
    };
    let walk_total =
        near_levels as f64 * tlb.walk_near_ns + far_levels as f64 * tlb.walk_ns + far_walks as f64 * far_extra;
    let user_ns = c.accesses as f64 * load_ns + (c.l1_misses - c.walks) as f64 * tlb.l2_hit_ns + walk_total;
    StreamReport {
        counts: c,
        walk_ns: walk_total,
        walk_cycles: walk_total * tlb.cpu_mhz as f64 / 1000.0,
        misses: c.walks,
        user_ns,
    }
}

/// The 64-byte line holding the leaf entry a walk for `addr` through
/// `unit` reads: a PTE (8 per line) for PTE-level units, coalesced or
/// contiguous ones included (the hardware still reads one PTE), or the
/// block entry of a PMD or larger mapping. Tagged with the leaf's shift.
fn leaf_line(unit: UnitKey, addr: u64, page_shift: u32, block_shift: u32) -> (u32, u64) {
    let shift = largo_mm::vm::translation::unit_shift(unit);
    let leaf_shift = if shift >= block_shift { shift } else { page_shift };
    (leaf_shift, (addr >> leaf_shift) >> 3)
}

/// What a walk's leaf fetch adds when the leaf entries fall out of the
/// caches: they take 8 bytes per entry (a PTE per page however the TLB
/// groups them; one entry per PMD or larger mapping); for a random order
/// each doubling of that beyond 128 KiB adds `walk_ns_per_doubling`.
fn leaf_extra_ns(tlb: &TlbGeometry, units: &[Option<UnitKey>], block_shift: u32, pattern: Pattern) -> f64 {
    if pattern != Pattern::Chase {
        return 0.0;
    }
    let mut entries = 0u64;
    let mut last_block = None;
    for &u in units.iter().flatten() {
        if largo_mm::vm::translation::unit_shift(u) < block_shift {
            entries += 1;
        } else if last_block != Some(u) {
            entries += 1;
            last_block = Some(u);
        }
    }
    let pt_bytes = entries * 8;
    let doublings = ((pt_bytes as f64) / (128u64 << 10) as f64).log2().max(0.0);
    tlb.walk_ns_per_doubling * doublings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_log_linear_and_clamped() {
        let c = [(1024, 10.0), (4096, 30.0)];
        assert_eq!(interpolate(&c, 10), 10.0);
        assert_eq!(interpolate(&c, 1 << 20), 30.0);
        assert!((interpolate(&c, 2048) - 20.0).abs() < 1e-9);
    }
}
