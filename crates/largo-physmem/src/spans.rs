//! The live mappings of a native window: disjoint address ranges with a
//! writable bit, kept in one sorted vector whose capacity is reserved up
//! front. Every update works in place, so a forked child (which must not
//! allocate, and whose first write to a page copies it) changes only the
//! pages of that vector, which it can write once before it starts.

/// One mapping `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

/// Disjoint spans in address order.
///
/// Invariant: `spans[i].start < spans[i].end <= spans[i + 1].start`.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    spans: Vec<Span>,
}

/// Spans reserved for a window: room for this many mappings before an
/// update would allocate.
pub const RESERVED_SPANS: usize = 4096;

impl Spans {
    pub fn with_capacity(n: usize) -> Spans {
        Spans {
            spans: Vec::with_capacity(n),
        }
    }

    /// Writes every page of the reserved vector (the copy a forked child
    /// makes of them happens now, not during its program).
    pub fn prefault(&mut self) {
        let len = self.spans.len();
        let dummy = Span {
            start: 0,
            end: 0,
            write: false,
        };
        // Within the capacity: no allocation.
        while self.spans.len() < self.spans.capacity() {
            self.spans.push(std::hint::black_box(dummy));
        }
        self.spans.truncate(len);
    }

    pub fn iter(&self) -> impl Iterator<Item = Span> + '_ {
        self.spans.iter().copied()
    }

    /// The index of the first span ending after `addr`.
    fn first_after(&self, addr: u64) -> usize {
        self.spans.partition_point(|s| s.end <= addr)
    }

    /// The span holding `addr`.
    pub fn find(&self, addr: u64) -> Option<Span> {
        self.spans
            .get(self.first_after(addr))
            .copied()
            .filter(|s| s.start <= addr)
    }

    /// Whether any span meets `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.spans.get(self.first_after(start)).is_some_and(|s| s.start < end)
    }

    /// Splits the span holding `addr` (if it starts before it) in two.
    fn split_at(&mut self, addr: u64) {
        let i = self.first_after(addr);
        if let Some(s) = self.spans.get(i).copied() {
            if s.start < addr {
                self.spans[i].end = addr;
                self.spans.insert(i + 1, Span { start: addr, ..s });
            }
        }
    }

    /// Drops `[start, end)`, keeping the parts of spans outside it.
    pub fn forget(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        self.split_at(start);
        self.split_at(end);
        let from = self.first_after(start);
        let to = self.spans.partition_point(|s| s.start < end);
        self.spans.drain(from..to);
    }

    /// Adds `[start, end)` over whatever was there.
    pub fn insert(&mut self, start: u64, end: u64, write: bool) {
        self.forget(start, end);
        let at = self.first_after(start);
        self.spans.insert(at, Span { start, end, write });
    }

    /// Sets the writable bit of the mapped parts of `[start, end)`.
    pub fn protect(&mut self, start: u64, end: u64, write: bool) {
        self.split_at(start);
        self.split_at(end);
        let from = self.first_after(start);
        for s in self.spans[from..].iter_mut().take_while(|s| s.start < end) {
            s.write = write;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &Spans) -> Vec<(u64, u64, bool)> {
        s.iter().map(|x| (x.start, x.end, x.write)).collect()
    }

    #[test]
    fn insert_forget_and_protect_keep_disjoint_sorted_spans() {
        let mut s = Spans::with_capacity(8);
        s.insert(0x1000, 0x5000, true);
        s.insert(0x8000, 0x9000, false);
        s.forget(0x2000, 0x3000);
        assert_eq!(
            all(&s),
            [(0x1000, 0x2000, true), (0x3000, 0x5000, true), (0x8000, 0x9000, false)]
        );
        s.protect(0x4000, 0x8800, false);
        assert_eq!(
            all(&s),
            [
                (0x1000, 0x2000, true),
                (0x3000, 0x4000, true),
                (0x4000, 0x5000, false),
                (0x8000, 0x8800, false),
                (0x8800, 0x9000, false)
            ]
        );
        s.insert(0x1800, 0x8400, true);
        assert_eq!(
            all(&s),
            [
                (0x1000, 0x1800, true),
                (0x1800, 0x8400, true),
                (0x8400, 0x8800, false),
                (0x8800, 0x9000, false)
            ]
        );
        assert_eq!(s.find(0x17ff).map(|x| x.start), Some(0x1000));
        assert_eq!(s.find(0x9000), None);
        assert!(s.overlaps(0x8fff, 0xa000));
        assert!(!s.overlaps(0x9000, 0xa000));
        assert!(!s.overlaps(0, 0x1000));
    }

    #[test]
    fn prefault_keeps_the_spans() {
        let mut s = Spans::with_capacity(4);
        s.insert(1, 2, true);
        s.prefault();
        assert_eq!(all(&s), [(1, 2, true)]);
    }
}
