//! `struct page_counter` (mm/page_counter.c): usage against a limit, the
//! highest usage (`watermark`) and failed charges (`failcnt`).

/// A page counter of one memcg (the model's memcgs have no hierarchy
/// below the root, which is never charged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageCounter {
    pub usage: u64,
    /// The limit (`max`) in pages.
    pub max: u64,
    /// `watermark`: the highest usage.
    pub watermark: u64,
    /// `failcnt`: charges that would have gone over the limit.
    pub failcnt: u64,
}

impl PageCounter {
    pub fn new(max: u64) -> PageCounter {
        PageCounter {
            usage: 0,
            max,
            watermark: 0,
            failcnt: 0,
        }
    }

    /// `page_counter_try_charge`.
    pub fn try_charge(&mut self, nr: u64) -> bool {
        if self.usage + nr > self.max {
            self.failcnt += 1;
            return false;
        }
        self.charge(nr);
        true
    }

    /// `page_counter_charge`: without a limit check.
    pub fn charge(&mut self, nr: u64) {
        self.usage += nr;
        self.watermark = self.watermark.max(self.usage);
    }

    /// `page_counter_uncharge`.
    pub fn uncharge(&mut self, nr: u64) {
        debug_assert!(self.usage >= nr, "uncharge of {nr} pages below zero ({})", self.usage);
        self.usage = self.usage.saturating_sub(nr);
    }

    /// `mem_cgroup_margin`: pages that still fit.
    pub fn margin(&self) -> u64 {
        self.max.saturating_sub(self.usage)
    }
}
