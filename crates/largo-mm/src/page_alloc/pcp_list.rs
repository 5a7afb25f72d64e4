//! One pcp list (`per_cpu_pages.lists[pindex]`): the free blocks a cpu
//! caches for one order and pcp type, youngest first.
//!
//! The kernel threads the list through `page->pcp_list`; blocks join at
//! the head (a free, `list_add`) or the tail (a refill, `list_add_tail`),
//! and leave from the head (an allocation, `list_first_entry`) or the tail
//! (a drain, `list_last_entry`), never from the middle. So the model
//! keeps the pfns in a double-ended queue: the same order, without a link
//! written into two memmap records at every free and allocation.

use std::collections::VecDeque;

/// The pfns of one pcp list's blocks, head first.
///
/// Invariant: each pfn is the head of a free block whose record carries
/// `PG_pcp` and the list's order (checked by `check_pcp_lists`), and
/// fits in 32 bits, as the memmap's own lists require.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcpList {
    pfns: VecDeque<u32>,
}

impl PcpList {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pfns.is_empty()
    }

    /// Blocks on the list.
    #[inline]
    pub fn len(&self) -> usize {
        self.pfns.len()
    }

    /// `list_add`: a freed block joins at the head.
    #[inline]
    pub fn push_front(&mut self, pfn: u64) {
        self.pfns.push_front(pfn_32(pfn));
    }

    /// `list_add_tail`: a refilled block joins at the tail.
    #[inline]
    pub fn push_back(&mut self, pfn: u64) {
        self.pfns.push_back(pfn_32(pfn));
    }

    /// The head leaves (an allocation).
    #[inline]
    pub fn pop_front(&mut self) -> Option<u64> {
        self.pfns.pop_front().map(u64::from)
    }

    /// The first `n` leave, head first, appended to `out` (`n` allocations).
    /// Panics when the list holds fewer.
    #[inline]
    pub fn pop_front_into(&mut self, n: usize, out: &mut Vec<u64>) {
        out.extend(self.pfns.drain(..n).map(u64::from));
    }

    /// The tail leaves (a drain).
    #[inline]
    pub fn pop_back(&mut self) -> Option<u64> {
        self.pfns.pop_back().map(u64::from)
    }

    /// The pfns, head first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.pfns.iter().map(|&p| u64::from(p))
    }
}

#[inline]
fn pfn_32(pfn: u64) -> u32 {
    u32::try_from(pfn).unwrap_or_else(|_| panic!("pfn {pfn:#x} beyond the 32-bit pfns of the lists"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_into_take_the_head_first() {
        let mut l = PcpList::default();
        for pfn in [5, 6, 7, 8] {
            l.push_back(pfn);
        }
        let mut out = vec![1];
        l.pop_front_into(3, &mut out);
        assert_eq!(out, [1, 5, 6, 7]);
        assert_eq!(l.iter().collect::<Vec<_>>(), [8]);
    }

    #[test]
    fn frees_join_at_the_head_refills_at_the_tail() {
        let mut l = PcpList::default();
        l.push_back(1);
        l.push_back(2);
        l.push_front(3);
        assert_eq!(l.iter().collect::<Vec<_>>(), [3, 1, 2]);
        assert_eq!(l.len(), 3);
        assert_eq!(l.pop_front(), Some(3));
        assert_eq!(l.pop_back(), Some(2));
        assert_eq!(l.pop_back(), Some(1));
        assert!(l.is_empty() && l.pop_front().is_none());
    }
}
