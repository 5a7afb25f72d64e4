//! Access streams: the order in which a workload's user code touches its
//! memory once it is mapped, for the TLB model (`crate::tlb`) and for the
//! host side of `largo bench tlb`, which runs the very same stream.
//!
//! A stream visits one slot per 4 KiB block of a range, at a line chosen
//! by a hash of the block's index so that slots spread over the cache
//! sets: the data working set does not depend on the folio size, only the
//! translations do.

use serde::{Deserialize, Serialize};

/// Bytes between slots.
pub const SLOT_SPAN: u64 = 4096;

/// The order slots are visited in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// A random cyclic permutation of the 4 KiB blocks, each access
    /// depending on the one before (a pointer chase).
    Chase,
    /// One access per 4 KiB block, in address order.
    Stride,
    /// Every 64-byte line in address order.
    Seq,
}

impl Pattern {
    pub const ALL: [Pattern; 3] = [Pattern::Chase, Pattern::Stride, Pattern::Seq];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Chase => "chase",
            Pattern::Stride => "stride",
            Pattern::Seq => "seq",
        }
    }

    pub fn from_name(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// SplitMix64: a small deterministic generator for the permutation.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The slot of 4 KiB block `i`: its byte offset in the range.
pub fn slot_offset(i: u64) -> u64 {
    let mut s = i;
    let line = splitmix(&mut s) % (SLOT_SPAN / 64);
    i * SLOT_SPAN + line * 64
}

/// The 4 KiB blocks of a `range_bytes` range in visiting order.
pub fn visit_order(range_bytes: u64, pattern: Pattern, seed: u64) -> Vec<u64> {
    let n = range_bytes / SLOT_SPAN;
    let mut order: Vec<u64> = (0..n).collect();
    if pattern == Pattern::Chase {
        // Sattolo's algorithm: a single cycle through every block.
        let mut state = seed;
        for i in (1..order.len()).rev() {
            let j = (splitmix(&mut state) % i as u64) as usize;
            order.swap(i, j);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chase_is_one_cycle_through_every_block() {
        let order = visit_order(1 << 20, Pattern::Chase, 7);
        let mut seen = order.clone();
        seen.sort();
        assert_eq!(seen, (0..256).collect::<Vec<_>>());
        assert_ne!(order, seen, "shuffled");
        assert_eq!(visit_order(1 << 20, Pattern::Stride, 7), seen);
        assert!((0..1000).all(|i| slot_offset(i) / SLOT_SPAN == i && slot_offset(i).is_multiple_of(64)));
    }
}
