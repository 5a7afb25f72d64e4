//! A VMA's anonymous fault history, as order policies see it.

/// How many contiguous runs a VMA remembers (independent streams: a
/// heap growing while a buffer fills, threads writing their own parts).
pub const RUNS: usize = 4;

/// A run of contiguous faulted pages `[lo, hi)` (page numbers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Run {
    pub lo: u64,
    pub hi: u64,
}

/// Per-VMA fault history (kept in `Vma::fault_history`; copied when a
/// VMA is split, duplicated by fork or moved by mremap).
///
/// Invariant: `runs[..nr_runs]` are the runs, most recently extended
/// first; each is non-empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultHistory {
    runs: [Run; RUNS],
    nr_runs: u8,
    /// The VMA's order ceiling; `None` before its first fault (a policy
    /// then starts from its prior).
    pub max_order: Option<u8>,
    /// Write faults seen.
    pub faults: u64,
}

impl FaultHistory {
    /// The run the fault on `page` extends: it starts right after the
    /// run's last page or ends right before its first one.
    pub fn extended_run(&self, page: u64) -> Option<Run> {
        self.runs[..self.nr_runs as usize]
            .iter()
            .copied()
            .find(|r| page == r.hi || page + 1 == r.lo)
    }

    /// Records pages `[first, first + nr)` as faulted: they join the run
    /// `page` extends (moved to the front), or start a new one that takes
    /// the place of the least recently extended.
    pub fn record(&mut self, page: u64, first: u64, nr: u64) {
        self.faults += 1;
        let n = self.nr_runs as usize;
        let found = self.runs[..n].iter().position(|r| page == r.hi || page + 1 == r.lo);
        let run = match found {
            Some(i) => {
                let r = self.runs[i];
                self.runs.copy_within(0..i, 1);
                Run {
                    lo: r.lo.min(first),
                    hi: r.hi.max(first + nr),
                }
            }
            None => {
                let keep = n.min(RUNS - 1);
                self.runs.copy_within(0..keep, 1);
                self.nr_runs = (keep + 1) as u8;
                Run {
                    lo: first,
                    hi: first + nr,
                }
            }
        };
        self.runs[0] = run;
    }

    pub fn runs(&self) -> &[Run] {
        &self.runs[..self.nr_runs as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_grow_both_ways_and_the_oldest_is_forgotten() {
        let mut h = FaultHistory::default();
        h.record(10, 10, 1);
        assert_eq!(h.extended_run(11), Some(Run { lo: 10, hi: 11 }));
        assert_eq!(h.extended_run(9), Some(Run { lo: 10, hi: 11 }));
        assert_eq!(h.extended_run(12), None);
        h.record(11, 8, 4); // a folio over 8..12 extending the run upward
        assert_eq!(h.runs(), &[Run { lo: 8, hi: 12 }]);
        for p in [100, 200, 300, 400] {
            h.record(p, p, 1);
        }
        assert_eq!(h.runs().len(), RUNS);
        assert!(h.runs().iter().all(|r| r.lo != 8), "the oldest run is dropped");
        h.record(201, 201, 1);
        assert_eq!(h.runs()[0], Run { lo: 200, hi: 202 });
        assert_eq!(h.faults, 7);
    }
}
