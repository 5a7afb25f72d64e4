//! Splitting an allocated, unmapped folio into folios of a lower order
//! (the allocator side of `split_page` / `__split_folio_to_order`).

use largo_types::Pfn;

use super::PageAlloc;
use crate::memmap::{Folio, PageFlags};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error(transparent)]
    NotAFolio(#[from] super::FreeError),
    #[error("cannot split an order-{order} folio to order {new_order}")]
    BadOrder { order: u32, new_order: u32 },
    #[error("folio {pfn} has refcount {refcount}; splitting needs the only reference")]
    Referenced { pfn: Pfn, refcount: u32 },
    #[error("folio {pfn} is mapped; the VM layer splits mapped folios")]
    Mapped { pfn: Pfn },
}

/// The folios a split produced, in pfn order.
#[derive(Clone, Copy, Debug)]
pub struct SplitFolios {
    next: u64,
    end: u64,
    order: u32,
}

impl Iterator for SplitFolios {
    type Item = Folio;

    fn next(&mut self) -> Option<Folio> {
        if self.next >= self.end {
            return None;
        }
        let folio = Folio {
            pfn: Pfn(self.next),
            order: self.order,
        };
        self.next += 1 << self.order;
        Some(folio)
    }
}

impl PageAlloc {
    /// Splits `folio` into `2^(order - new_order)` folios of `new_order`,
    /// each with refcount 1 and the original's folio flags.
    pub fn split_folio(&mut self, folio: Folio, new_order: u32) -> Result<SplitFolios, SplitError> {
        self.check_folio(folio)?;
        if new_order >= folio.order {
            return Err(SplitError::BadOrder {
                order: folio.order,
                new_order,
            });
        }
        let head = *self.memmap.page(folio.pfn.0);
        if head.refcount() != 1 {
            return Err(SplitError::Referenced {
                pfn: folio.pfn,
                refcount: head.refcount(),
            });
        }
        if head.mapcount() > 0 {
            return Err(SplitError::Mapped { pfn: folio.pfn });
        }
        let inherited = head.flags() - PageFlags::HEAD;
        let start = folio.pfn.0;
        let end = folio.end_pfn().0;
        for new_head in (start..end).step_by(1 << new_order) {
            let page = self.memmap.page_mut(new_head);
            page.clear();
            page.set_flags(inherited);
            if new_order > 0 {
                page.insert_flags(PageFlags::HEAD);
            }
            page.set_order(new_order);
            page.set_refcount(1);
        }
        Ok(SplitFolios {
            next: start,
            end,
            order: new_order,
        })
    }
}
