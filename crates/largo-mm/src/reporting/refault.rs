//! The page frames whose host memory a report discarded: allocating one
//! again is a host refault (the host backs it with a fresh zero page on
//! the guest's first touch). One bit per pfn, allocated when a device
//! registers.

/// Invariant: a set bit is a page frame the allocator holds free (on a
/// free list or a pcp list); allocation clears it.
#[derive(Clone, Debug, Default)]
pub struct HostDiscarded {
    words: Vec<u64>,
    nr_set: u64,
}

impl HostDiscarded {
    pub fn resize(&mut self, nr_pfns: u64) {
        self.words.resize(nr_pfns.div_ceil(64) as usize, 0);
    }

    /// Pages currently discarded on the host.
    pub fn nr_pages(&self) -> u64 {
        self.nr_set
    }

    pub fn is_set(&self, pfn: u64) -> bool {
        self.words
            .get((pfn / 64) as usize)
            .is_some_and(|w| w & (1 << (pfn % 64)) != 0)
    }

    /// Whether any of `[pfn, pfn + nr)` is discarded.
    pub fn any_in(&self, pfn: u64, nr: u64) -> bool {
        self.nr_set > 0 && (pfn..pfn + nr).any(|p| self.is_set(p))
    }

    /// Marks `[pfn, pfn + nr)` discarded.
    pub fn set_range(&mut self, pfn: u64, nr: u64) {
        self.update(pfn, nr, true);
    }

    /// Clears `[pfn, pfn + nr)`, returning how many were set.
    #[inline]
    pub fn take_range(&mut self, pfn: u64, nr: u64) -> u64 {
        if self.nr_set == 0 {
            return 0;
        }
        self.update(pfn, nr, false)
    }

    /// Sets or clears a range word by word; returns the bits that changed.
    fn update(&mut self, pfn: u64, nr: u64, set: bool) -> u64 {
        let (mut at, end) = (pfn, pfn + nr);
        let mut changed = 0;
        while at < end {
            let Some(word) = self.words.get_mut((at / 64) as usize) else {
                break;
            };
            let lo = at % 64;
            let n = (64 - lo).min(end - at);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << lo };
            let before = *word;
            *word = if set { before | mask } else { before & !mask };
            changed += (before ^ *word).count_ones() as u64;
            at += n;
        }
        if set {
            self.nr_set += changed;
        } else {
            self.nr_set -= changed;
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_across_words() {
        let mut d = HostDiscarded::default();
        d.resize(1000);
        d.set_range(60, 200);
        assert_eq!(d.nr_pages(), 200);
        assert!(d.is_set(60) && d.is_set(259) && !d.is_set(260) && !d.is_set(59));
        d.set_range(100, 10);
        assert_eq!(d.nr_pages(), 200, "setting set bits changes nothing");
        assert_eq!(d.take_range(0, 128), 68);
        assert_eq!(d.take_range(0, 128), 0);
        assert_eq!(d.nr_pages(), 132);
        assert_eq!(d.take_range(128, 512), 132);
    }
}
