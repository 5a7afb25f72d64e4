//! Intrusive doubly linked lists of pfns threaded through the memmap, as
//! the kernel threads `page->buddy_list` and `page->pcp_list`.

use crate::memmap::{PageArray, NIL};

/// A list head: first and last pfn, and the number of entries.
///
/// Invariant: `nr` equals the entries reachable from `first`; `first == NIL`
/// iff `nr == 0`; each entry's `prev` and `next` link back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListHead {
    pub first: u32,
    pub last: u32,
    pub nr: u32,
}

impl Default for ListHead {
    fn default() -> Self {
        ListHead::EMPTY
    }
}

impl ListHead {
    pub const EMPTY: ListHead = ListHead {
        first: NIL,
        last: NIL,
        nr: 0,
    };

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.first == NIL
    }

    #[inline]
    pub fn first(&self) -> Option<u64> {
        (self.first != NIL).then_some(self.first as u64)
    }

    #[inline]
    pub fn last(&self) -> Option<u64> {
        (self.last != NIL).then_some(self.last as u64)
    }

    /// `list_add`: inserts `pfn` at the head.
    #[inline]
    pub fn push_front(&mut self, pages: &mut PageArray, pfn: u64) {
        let p = pfn as u32;
        let old = self.first;
        let page = &mut pages[pfn as usize];
        page.set_prev(NIL);
        page.set_next(old);
        if old == NIL {
            self.last = p;
        } else {
            pages[old as usize].set_prev(p);
        }
        self.first = p;
        self.nr += 1;
    }

    /// `list_add_tail`: inserts `pfn` at the tail.
    #[inline]
    pub fn push_back(&mut self, pages: &mut PageArray, pfn: u64) {
        let p = pfn as u32;
        let old = self.last;
        let page = &mut pages[pfn as usize];
        page.set_prev(old);
        page.set_next(NIL);
        if old == NIL {
            self.first = p;
        } else {
            pages[old as usize].set_next(p);
        }
        self.last = p;
        self.nr += 1;
    }

    /// `list_del`: unlinks `pfn`, which must be on this list.
    #[inline]
    pub fn remove(&mut self, pages: &mut PageArray, pfn: u64) {
        let page = pages[pfn as usize];
        let (prev, next) = (page.prev(), page.next());
        if prev == NIL {
            self.first = next;
        } else {
            pages[prev as usize].set_next(next);
        }
        if next == NIL {
            self.last = prev;
        } else {
            pages[next as usize].set_prev(prev);
        }
        self.nr -= 1;
    }

    /// `list_rotate_to_front`: makes `pfn` (on this list) the first entry,
    /// the entries before it moving, in order, behind the old tail.
    pub fn rotate_to_front(&mut self, pages: &mut PageArray, pfn: u64) {
        let p = pfn as u32;
        if self.first == p {
            return;
        }
        let prev = pages[pfn as usize].prev();
        let (old_first, old_last) = (self.first, self.last);
        pages[old_last as usize].set_next(old_first);
        pages[old_first as usize].set_prev(old_last);
        pages[pfn as usize].set_prev(NIL);
        pages[prev as usize].set_next(NIL);
        self.first = p;
        self.last = prev;
    }

    /// Iterates the pfns from head to tail.
    pub fn iter<'a>(&self, pages: &'a PageArray) -> ListIter<'a> {
        ListIter {
            pages,
            cursor: self.first,
        }
    }
}

pub struct ListIter<'a> {
    pages: &'a PageArray,
    cursor: u32,
}

impl Iterator for ListIter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.cursor == NIL {
            return None;
        }
        let pfn = self.cursor as u64;
        self.cursor = self.pages[pfn as usize].next();
        Some(pfn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotate_to_front_keeps_the_cyclic_order() {
        let mut pages = PageArray::new(8, 2);
        let mut l = ListHead::EMPTY;
        for pfn in 1..=5 {
            l.push_back(&mut pages, pfn);
        }
        l.rotate_to_front(&mut pages, 4);
        assert_eq!(l.iter(&pages).collect::<Vec<_>>(), vec![4, 5, 1, 2, 3]);
        assert_eq!((l.first(), l.last(), l.nr), (Some(4), Some(3), 5));
        l.rotate_to_front(&mut pages, 4);
        assert_eq!(l.iter(&pages).collect::<Vec<_>>(), vec![4, 5, 1, 2, 3]);
        l.rotate_to_front(&mut pages, 3);
        assert_eq!(l.iter(&pages).collect::<Vec<_>>(), vec![3, 4, 5, 1, 2]);
        assert_eq!(pages[2].next(), NIL);
        assert_eq!(pages[3].prev(), NIL);
    }

    #[test]
    fn push_remove_keeps_links() {
        let mut pages = PageArray::new(8, 2);
        let mut list = ListHead::EMPTY;
        list.push_back(&mut pages, 3);
        list.push_front(&mut pages, 5);
        list.push_back(&mut pages, 7);
        assert_eq!(list.iter(&pages).collect::<Vec<_>>(), vec![5, 3, 7]);
        list.remove(&mut pages, 3);
        assert_eq!(list.iter(&pages).collect::<Vec<_>>(), vec![5, 7]);
        list.remove(&mut pages, 5);
        list.remove(&mut pages, 7);
        assert!(list.is_empty());
        assert_eq!(list, ListHead::EMPTY);
    }
}
