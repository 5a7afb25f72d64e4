//! `cma_alloc` and `cma_release` (mm/cma.c `__cma_alloc`,
//! `cma_range_alloc`, `cma_release`): a first-fit aligned search of the
//! area's bitmap, then `alloc_contig_range(ACR_FLAGS_CMA)` over the
//! candidate; on -EBUSY the bits are released and the search resumes at
//! the next aligned slot after the failed start (one page on, with no
//! alignment), any other error ends it. One `cma_alloc_success` or
//! `cma_alloc_fail` per call; the area's sysfs statistics count pages.

use crate::compaction::ContigError;
use crate::machine::Machine;
use crate::page_alloc::isolation::IsolateMode;
use crate::stats::VmEvent;

/// Why a `cma_alloc` request is refused before any search.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmaAllocError {
    #[error("no CMA area {0} (the machine has {1}; add one with --cma SIZE)")]
    NoArea(usize, usize),
    #[error("cma_alloc alignment order {0} is beyond the area's size")]
    Alignment(u32),
}

/// The outcome of one `cma_alloc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmaAllocOutcome {
    /// First pfn of the allocated range, `None` when it failed.
    pub pfn: Option<u64>,
    /// Candidate ranges tried (`alloc_contig_range` calls).
    pub tries: u64,
    /// The last `alloc_contig_range` error, when it failed.
    pub error: Option<ContigError>,
}

impl Machine {
    /// `cma_alloc(cma, count, align, no_warn)` on area `index`:
    /// `nr_pages` contiguous pages aligned to `1 << align_order` pages.
    pub fn cma_alloc(
        &mut self,
        index: usize,
        nr_pages: u64,
        align_order: u32,
    ) -> Result<CmaAllocOutcome, CmaAllocError> {
        let nr_areas = self.page_alloc().cma_areas().len();
        let area = self
            .page_alloc()
            .cma_areas()
            .get(index)
            .ok_or(CmaAllocError::NoArea(index, nr_areas))?;
        let mut out = CmaAllocOutcome {
            pfn: None,
            tries: 0,
            error: None,
        };
        // __cma_alloc returns NULL without counting for an empty request
        // or an area that failed to activate.
        if area.count == 0 || nr_pages == 0 {
            return Ok(out);
        }
        if align_order >= 40 {
            return Err(CmaAllocError::Alignment(align_order));
        }
        let mask = (1u64 << align_order) - 1;
        // cma_bitmap_aligned_offset: where the base sits in the alignment.
        let offset = area.base_pfn & mask;
        let mut start = 0;
        loop {
            let area = &self.page_alloc().cma_areas()[index];
            if nr_pages > area.available_count {
                break;
            }
            let Some(bit) = area.find_zero_area(start, nr_pages, mask, offset) else {
                break;
            };
            let pfn = area.base_pfn + bit;
            self.page_alloc.cma[index].set_range(bit, nr_pages, true);
            out.tries += 1;
            let got = self.with_reclaim(|pa, r| {
                pa.compactor()
                    .alloc_contig_range_mode(pfn, pfn + nr_pages, false, IsolateMode::CmaAlloc, 0, r)
            });
            match got {
                Ok(_) => {
                    out.pfn = Some(pfn);
                    out.error = None;
                    break;
                }
                Err(e) => {
                    self.page_alloc.cma[index].set_range(bit, nr_pages, false);
                    let busy = !matches!(e, ContigError::Invalid { .. });
                    out.error = Some(e);
                    if !busy {
                        break;
                    }
                    start = bit + mask + 1;
                }
            }
        }
        let area = &mut self.page_alloc.cma[index];
        if out.pfn.is_some() {
            area.alloc_pages_success += nr_pages;
            self.page_alloc.count_event(VmEvent::CmaAllocSuccess, 1);
        } else {
            area.alloc_pages_fail += nr_pages;
            self.page_alloc.count_event(VmEvent::CmaAllocFail, 1);
        }
        Ok(out)
    }

    /// `cma_release`: gives back `nr_pages` from `pfn` that `cma_alloc`
    /// returned from area `index`; false (nothing done) when the range is
    /// not the area's.
    pub fn cma_release(&mut self, index: usize, pfn: u64, nr_pages: u64) -> bool {
        let Some(area) = self.page_alloc().cma_areas().get(index) else {
            return false;
        };
        if !area.contains(pfn, nr_pages) {
            return false;
        }
        let bit = pfn - area.base_pfn;
        if (bit..bit + nr_pages).any(|b| !area.test(b)) {
            return false;
        }
        self.page_alloc.compactor().free_contig_range(pfn, nr_pages);
        let area = &mut self.page_alloc.cma[index];
        area.set_range(bit, nr_pages, false);
        area.release_pages_success += nr_pages;
        true
    }
}
