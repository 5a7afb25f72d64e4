//! A two-level data TLB: a fully associative LRU first level and a
//! set-associative second level that evicts a pseudo-random way, holding translation units
//! (`largo_mm::vm::translation::UnitKey`). A unit missing from both is a
//! page walk.

use largo_mm::vm::translation::{unit_shift, unit_start, UnitKey};
use largo_types::TlbGeometry;
use serde::Serialize;

/// What the TLB saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TlbCounts {
    /// Translations looked up (one per access).
    pub accesses: u64,
    /// First-level misses (the second level hit or a walk followed).
    pub l1_misses: u64,
    /// Second-level misses: page walks.
    pub walks: u64,
}

impl TlbCounts {
    pub fn add(&mut self, o: &TlbCounts) {
        self.accesses += o.accesses;
        self.l1_misses += o.l1_misses;
        self.walks += o.walks;
    }
}

/// The TLB state.
///
/// Invariant: `l1.len() <= l1_entries`, most recently used first; each
/// set of `l2` holds at most `ways` entries.
pub struct TlbSim {
    l1: Vec<UnitKey>,
    l1_entries: usize,
    l2: Vec<Vec<(UnitKey, u64)>>,
    ways: usize,
    clock: u64,
    pub counts: TlbCounts,
}

impl TlbSim {
    pub fn new(g: &TlbGeometry) -> TlbSim {
        let sets = (g.l2_entries / g.l2_ways).max(1) as usize;
        TlbSim {
            l1: Vec::with_capacity(g.l1_entries as usize),
            l1_entries: g.l1_entries as usize,
            l2: vec![Vec::with_capacity(g.l2_ways as usize); sets],
            ways: g.l2_ways as usize,
            clock: 0,
            counts: TlbCounts::default(),
        }
    }

    /// The set a unit maps to: its virtual page number at its own size.
    fn set_of(&self, key: UnitKey) -> usize {
        ((unit_start(key) >> unit_shift(key)) % self.l2.len() as u64) as usize
    }

    /// One access through `key`; `repeat` more accesses to the same unit
    /// follow at once (first-level hits). True if it walked.
    pub fn access(&mut self, key: UnitKey, repeat: u64) -> bool {
        self.counts.accesses += 1 + repeat;
        if self.l1.first() == Some(&key) {
            return false;
        }
        if let Some(pos) = self.l1.iter().position(|&k| k == key) {
            self.l1[..=pos].rotate_right(1);
            return false;
        }
        self.counts.l1_misses += 1;
        if self.l1.len() == self.l1_entries {
            self.l1.pop();
        }
        self.l1.insert(0, key);
        self.clock += 1;
        let (clock, ways) = (self.clock, self.ways);
        let set = self.set_of(key);
        let entries = &mut self.l2[set];
        if let Some(e) = entries.iter_mut().find(|e| e.0 == key) {
            e.1 = clock;
            return false;
        }
        self.counts.walks += 1;
        if entries.len() == ways {
            // A pseudo-random victim (deterministic): hardware replacement
            // is not true LRU, which a cyclic stream longer than the set
            // would defeat entirely.
            let victim = (splitmix(clock) % ways as u64) as usize;
            entries[victim] = (key, clock);
        } else {
            entries.push((key, clock));
        }
        true
    }
}

/// A stateless 64-bit mix (SplitMix64's finaliser).
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_mm::vm::translation::unit_key;
    use largo_types::Preset;

    #[test]
    fn a_footprint_that_fits_walks_once_per_unit() {
        let g = Preset::X86_64.tlb();
        let mut t = TlbSim::new(&g);
        for _ in 0..3 {
            for i in 0..2048u64 {
                t.access(unit_key(i << 12, 12), 0);
            }
        }
        assert_eq!(t.counts.walks, 2048, "2048 units fit in 3072 entries");
        assert_eq!(t.counts.accesses, 3 * 2048);
        // 64K units of 4K pages cycled: every access misses both levels.
        let mut t = TlbSim::new(&g);
        for _ in 0..2 {
            for i in 0..65536u64 {
                t.access(unit_key(i << 12, 12), 0);
            }
        }
        assert_eq!(t.counts.walks, 2 * 65536);
        // The same memory in 2M units: 128 walks in all.
        let mut t = TlbSim::new(&g);
        for _ in 0..2 {
            for i in 0..65536u64 {
                t.access(unit_key((i << 12) & !((2 << 20) - 1), 21), 0);
            }
        }
        assert_eq!(t.counts.walks, 128);
        assert_eq!(
            t.counts.l1_misses, 256,
            "128 units cycled through a 72-entry L1 miss every time"
        );
        // A cycle a third longer than the L2 (4096 units in 3072 entries):
        // LRU would miss every time; the pseudo-random victim keeps many.
        let mut t = TlbSim::new(&g);
        for _ in 0..4 {
            for i in 0..4096u64 {
                t.access(unit_key(i << 12, 12), 0);
            }
        }
        let warm = t.counts.walks - 4096;
        assert!(warm > 0 && warm < 3 * 4096 / 2, "{warm} warm walks of {}", 3 * 4096);
    }
}
