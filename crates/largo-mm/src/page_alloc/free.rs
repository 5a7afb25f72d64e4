//! Freeing (`__free_pages`, `folio_put`, `free_frozen_pages`,
//! `__free_pages_ok`, `free_pages_prepare`).

use largo_types::{MigrateType, Pfn};

use super::{Fpi, PageAlloc};
use crate::memmap::{Folio, PageFlags};

/// A free of something that is not an allocated folio held by the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreeError {
    #[error("{pfn} is outside the machine")]
    OutOfRange { pfn: Pfn },
    #[error("{pfn} is not an allocated folio (flags {flags:?})")]
    NotAllocated { pfn: Pfn, flags: PageFlags },
    #[error("folio {pfn} has order {actual}, not {order}")]
    OrderMismatch { pfn: Pfn, order: u32, actual: u32 },
    #[error("folio {pfn} is still mapped ({mapcount} mappings)")]
    StillMapped { pfn: Pfn, mapcount: i32 },
    #[error("folio {pfn} has refcount {refcount}; the caller must hold the only reference")]
    Referenced { pfn: Pfn, refcount: u32 },
}

impl PageAlloc {
    /// Checks that `folio` is an allocated folio head of its recorded order.
    pub fn check_folio(&self, folio: Folio) -> Result<(), FreeError> {
        let pfn = folio.pfn;
        if pfn.0 >= self.memmap.len() {
            return Err(FreeError::OutOfRange { pfn });
        }
        let page = self.memmap.page(pfn.0);
        let flags = page.flags();
        if !self.memmap.is_folio_head(pfn.0) {
            return Err(FreeError::NotAllocated { pfn, flags });
        }
        if page.order() != folio.order || (folio.order > 0) != flags.contains(PageFlags::HEAD) {
            return Err(FreeError::OrderMismatch {
                pfn,
                order: folio.order,
                actual: page.order(),
            });
        }
        Ok(())
    }

    /// `__free_pages` of a folio the caller holds the only reference to.
    pub fn free_folio(&mut self, cpu: usize, folio: Folio) -> Result<(), FreeError> {
        self.check_folio(folio)?;
        let refcount = self.memmap.page(folio.pfn.0).refcount();
        if refcount != 1 {
            return Err(FreeError::Referenced {
                pfn: folio.pfn,
                refcount,
            });
        }
        self.release_folio(cpu, folio)
    }

    /// `folio_get`: takes a reference.
    pub fn folio_get(&mut self, folio: Folio) -> Result<u32, FreeError> {
        self.check_folio(folio)?;
        let page = self.memmap.page_mut(folio.pfn.0);
        page.set_refcount(page.refcount() + 1);
        Ok(page.refcount())
    }

    /// `folio_put`: drops a reference; the last one frees the folio.
    /// Returns whether the folio was freed.
    pub fn folio_put(&mut self, cpu: usize, folio: Folio) -> Result<bool, FreeError> {
        self.check_folio(folio)?;
        let refcount = self.memmap.page(folio.pfn.0).refcount();
        if refcount > 1 {
            self.memmap.page_mut(folio.pfn.0).set_refcount(refcount - 1);
            return Ok(false);
        }
        self.release_folio(cpu, folio).map(|_| true)
    }

    /// Frees a checked folio whose last reference is being dropped.
    fn release_folio(&mut self, cpu: usize, folio: Folio) -> Result<(), FreeError> {
        let mapcount = self.memmap.page(folio.pfn.0).mapcount();
        if mapcount > 0 {
            return Err(FreeError::StillMapped {
                pfn: folio.pfn,
                mapcount,
            });
        }
        // free_pages_prepare: the head record returns to the all-zero state
        // of free memory. Tails are zero already: an upper layer that
        // writes per-page fields clears them before the folio is freed.
        self.memmap.page_mut(folio.pfn.0).clear();
        self.free_frozen_pages(cpu, folio.pfn.0, folio.order);
        Ok(())
    }

    /// `free_frozen_pages`: through this cpu's pcp for the cached orders;
    /// HIGHATOMIC blocks go on the movable pcp list, isolated ones straight
    /// to the buddy lists.
    pub(crate) fn free_frozen_pages(&mut self, cpu: usize, pfn: u64, order: u32) {
        if !self.pcp_allowed_order(order) {
            self.__free_pages_ok(pfn, order, Fpi::NONE);
            return;
        }
        let zi = self.zone_of(pfn);
        self.free_frozen_pages_in(cpu, zi, pfn, order);
    }

    /// [`PageAlloc::free_frozen_pages`] of a block of an order the pcp
    /// caches, in the zone `zi` the caller found (a zap run finds it once
    /// for the LRU count and the free).
    #[inline]
    pub(crate) fn free_frozen_pages_in(&mut self, cpu: usize, zi: usize, pfn: u64, order: u32) {
        debug_assert!(self.pcp_allowed_order(order) && self.page_zone_index(pfn) == Some(zi));
        let mut mt = self.pageblocks.migratetype(pfn);
        if !mt.is_mergeable() {
            if mt == MigrateType::Isolate {
                self.free_one_page(zi, pfn, order, Fpi::NONE);
                return;
            }
            mt = MigrateType::Movable;
        }
        self.free_frozen_page_commit(cpu, zi, pfn, mt, order);
    }

    /// `__free_pages_ok`: the buddy-list free of orders the pcp does not cache.
    pub(crate) fn __free_pages_ok(&mut self, pfn: u64, order: u32, fpi: Fpi) {
        let zi = self.zone_of(pfn);
        self.free_one_page(zi, pfn, order, fpi);
    }

    /// The zone of a pfn known to be managed memory.
    #[inline]
    pub(crate) fn zone_of(&self, pfn: u64) -> usize {
        self.page_zone_index(pfn)
            .unwrap_or_else(|| unreachable!("managed pfn {pfn:#x} outside every zone"))
    }
}
