use std::fmt;
use std::ops::{Add, Sub};

/// A page frame number: physical address >> PAGE_SHIFT of the machine's
/// base page size.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
pub struct Pfn(pub u64);

impl Pfn {
    /// The pfn rounded down to a multiple of `1 << order`.
    #[inline]
    pub fn align_down(self, order: u32) -> Pfn {
        Pfn(self.0 & !((1u64 << order) - 1))
    }

    /// True when the pfn is a multiple of `1 << order`.
    #[inline]
    pub fn is_aligned(self, order: u32) -> bool {
        self.0 & ((1u64 << order) - 1) == 0
    }

    #[inline]
    pub fn as_usize(self) -> usize {
        self.0 as usize
    }
}

impl Add<u64> for Pfn {
    type Output = Pfn;
    #[inline]
    fn add(self, nr_pages: u64) -> Pfn {
        Pfn(self.0 + nr_pages)
    }
}

impl Sub<Pfn> for Pfn {
    type Output = u64;
    #[inline]
    fn sub(self, other: Pfn) -> u64 {
        self.0 - other.0
    }
}

impl fmt::Debug for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pfn:{:#x}", self.0)
    }
}

impl fmt::Display for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
