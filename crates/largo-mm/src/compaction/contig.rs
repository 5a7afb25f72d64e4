//! Contiguous allocation beyond the buddy allocator (mm/page_alloc.c
//! `alloc_contig_range`, `__alloc_contig_migrate_range`,
//! `alloc_contig_pages`, `pfn_range_valid_contig`, `free_contig_range`).
//!
//! The range's pageblocks are isolated (nothing in them is handed out any
//! more), the movable folios in it migrate elsewhere, and once every page
//! is a free page on an isolated list the free blocks are taken whole;
//! what lies outside the range is freed again.

use largo_types::Pfn;

use super::Compactor;
use super::COMPACT_CLUSTER_MAX;
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::Gfp;
use crate::page_alloc::isolation::{IsolateError, IsolateMode};
use crate::page_alloc::{max_order_chunks, AllocError, MigrationTarget, Reclaim};

/// Retries of a batch of folios that would not migrate.
const CONTIG_MIGRATE_TRIES: u32 = 5;

/// Why `alloc_contig_range` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContigError {
    /// `-EINVAL`: not a range of one zone, or not aligned as asked.
    #[error("pfn range [{start:#x}, {end:#x}) is not a valid contiguous range: {why}")]
    Invalid { start: u64, end: u64, why: &'static str },
    /// `-EBUSY`: isolation refused (an unmovable page) ...
    #[error("-EBUSY: {0}")]
    Isolate(IsolateError),
    /// ... or a page did not migrate or free in time.
    #[error("-EBUSY: page at pfn {pfn:#x} is still in use")]
    Busy { pfn: u64 },
}

impl Compactor<'_> {
    /// `alloc_contig_range(start, end, ACR_FLAGS_NONE, GFP_KERNEL | __GFP_COMP)`
    /// when `compound` (the range must then be a naturally aligned power
    /// of two; one folio of that order comes back), else every page as an
    /// order-0 page with one reference.
    pub fn alloc_contig_range(
        &mut self,
        start: u64,
        end: u64,
        compound: bool,
        cpu: usize,
        reclaim: &mut dyn Reclaim,
    ) -> Result<Option<Folio>, ContigError> {
        self.alloc_contig_range_mode(start, end, compound, IsolateMode::ContigAlloc, cpu, reclaim)
    }

    /// `alloc_contig_range` with the isolation mode its `acr_flags_t`
    /// selects: `ContigAlloc` (ACR_FLAGS_NONE) or `CmaAlloc`
    /// (ACR_FLAGS_CMA, the only one that may take CMA pageblocks).
    pub fn alloc_contig_range_mode(
        &mut self,
        start: u64,
        end: u64,
        compound: bool,
        mode: IsolateMode,
        cpu: usize,
        reclaim: &mut dyn Reclaim,
    ) -> Result<Option<Folio>, ContigError> {
        let nr = end.saturating_sub(start);
        let invalid = |why| ContigError::Invalid { start, end, why };
        if nr == 0 || end > self.pa.memmap.len() {
            return Err(invalid("empty or beyond the last pfn"));
        }
        if compound && (!nr.is_power_of_two() || !start.is_multiple_of(nr)) {
            return Err(invalid("a compound range must be a naturally aligned power of two"));
        }
        let zi = self.pa.page_zone_index(start).ok_or(invalid("not in a zone"))?;
        if self.pa.page_zone_index(end - 1) != Some(zi) || !self.pa.zones[zi].spans(end - 1) {
            return Err(invalid("spans more than one zone"));
        }
        let pb = self.pa.geo.pageblock_nr_pages();
        let (iso_start, iso_end) = (start & !(pb - 1), end.next_multiple_of(pb));
        if !self.block_in_zone(zi, iso_start, iso_end) {
            return Err(invalid("its pageblocks leave the zone"));
        }
        reclaim.lru_add_drain_all(self.pa);
        self.pa
            .start_isolate_page_range(iso_start, iso_end, mode)
            .map_err(ContigError::Isolate)?;
        self.pa.drain_all_pages();
        let nid = self.pa.zones[zi].nid;
        let migrated = self.alloc_contig_migrate_range(start, end, nid, cpu, reclaim);
        self.pa.drain_all_pages();
        let result = migrated.and_then(|_| {
            self.pa
                .test_pages_isolated(start, end, mode)
                .map_err(|pfn| ContigError::Busy { pfn })
        });
        if let Err(e) = result {
            self.pa.undo_isolate_page_range(iso_start, iso_end);
            return Err(e);
        }
        let taken = self.pa.isolated_free_blocks(iso_start, iso_end);
        for &(pfn, order) in &taken {
            self.pa
                .del_page_from_free_list(zi, pfn, order, largo_types::MigrateType::Isolate);
        }
        self.pa.undo_isolate_page_range(iso_start, iso_end);
        for &(pfn, order) in &taken {
            self.free_outside(pfn, pfn + (1 << order), start, end);
        }
        if compound {
            let order = nr.trailing_zeros();
            self.pa.prep_new_page(start, order);
            return Ok(Some(Folio { pfn: Pfn(start), order }));
        }
        for pfn in start..end {
            self.pa.prep_new_page(pfn, 0);
        }
        Ok(None)
    }

    /// The part of the taken block `[b_start, b_end)` outside `[start, end)`
    /// goes back to the buddy allocator in aligned chunks.
    fn free_outside(&mut self, b_start: u64, b_end: u64, start: u64, end: u64) {
        self.free_pfn_range(b_start, b_end.min(start));
        self.free_pfn_range(b_start.max(end), b_end);
    }

    /// Frees `[start, end)` (records clear, pages owned by the caller) in
    /// naturally aligned chunks of at most MAX_PAGE_ORDER.
    fn free_pfn_range(&mut self, start: u64, end: u64) {
        for (pfn, order) in max_order_chunks(self.pa.geo.max_page_order, start, end) {
            self.pa.__free_pages_ok(pfn, order, crate::page_alloc::Fpi::NONE);
        }
    }

    /// `__alloc_contig_migrate_range`: every LRU folio overlapping
    /// `[start, end)` migrates away, in batches of COMPACT_CLUSTER_MAX
    /// pages; a batch that keeps failing CONTIG_MIGRATE_TRIES times fails
    /// the range.
    fn alloc_contig_migrate_range(
        &mut self,
        start: u64,
        end: u64,
        nid: usize,
        cpu: usize,
        reclaim: &mut dyn Reclaim,
    ) -> Result<(), ContigError> {
        let mut pfn = start;
        if let Some(head) = self.pa.memmap.folio_head(start) {
            pfn = head;
        }
        let entered = self.pa.compaction.enter();
        let mut result = Ok(());
        while pfn < end {
            let (batch, next) = self.pa.lru_folio_heads(pfn, end, COMPACT_CLUSTER_MAX);
            pfn = next;
            let mut pending = batch;
            let mut tries = 0;
            while !pending.is_empty() {
                tries += 1;
                if tries > CONTIG_MIGRATE_TRIES {
                    result = Err(ContigError::Busy { pfn: pending[0] });
                    break;
                }
                pending = reclaim.migrate_folios(self.pa, cpu, &pending, &mut MigrationTarget::PreferNode(nid));
            }
            if result.is_err() {
                break;
            }
        }
        self.pa.compaction.leave(entered);
        result
    }

    /// `free_contig_range`: gives back what `alloc_contig_range` took: a
    /// folio of any order (up to beyond MAX_PAGE_ORDER), freed in aligned
    /// chunks, or `nr` order-0 pages.
    pub fn free_contig_range(&mut self, start: u64, nr: u64) {
        for pfn in start..start + nr {
            self.pa.memmap.page_mut(pfn).clear();
        }
        self.free_pfn_range(start, start + nr);
    }

    /// `pfn_range_valid_contig`: every page of the candidate is in zone
    /// `zi`, not reserved, and not part of a gigantic folio.
    fn pfn_range_valid_contig(&self, zi: usize, start: u64, nr: u64) -> bool {
        let mut pfn = start;
        while pfn < start + nr {
            if self.pa.page_zone_index(pfn) != Some(zi) {
                return false;
            }
            let page = self.pa.memmap.page(pfn);
            if page.flags().contains(PageFlags::RESERVED) {
                return false;
            }
            if self.pa.memmap.is_folio_head(pfn) && page.order() > self.pa.geo.max_page_order {
                return false;
            }
            pfn += if page.is_buddy() { 1 << page.order() } else { 1 };
        }
        true
    }

    /// `alloc_contig_pages(nr_pages, gfp, nid, NULL)`: the first naturally
    /// aligned range of `nr_pages` (a power of two, else `-EINVAL`) in the
    /// zonelist's zones that `alloc_contig_range` can take, as one folio.
    pub fn alloc_contig_pages(
        &mut self,
        nr_pages: u64,
        gfp: Gfp,
        nid: usize,
        cpu: usize,
        reclaim: &mut dyn Reclaim,
    ) -> Result<Option<Folio>, AllocError> {
        if !nr_pages.is_power_of_two() {
            return Err(AllocError::NotAPowerOfTwo(nr_pages));
        }
        for zi in self.pa.zonelist_zones(nid, gfp, nr_pages.trailing_zeros())? {
            let (zone_start, zone_end) = (self.pa.zones[zi].zone_start_pfn, self.pa.zones[zi].zone_end_pfn());
            let mut pfn = zone_start.next_multiple_of(nr_pages);
            while pfn + nr_pages <= zone_end {
                if self.pfn_range_valid_contig(zi, pfn, nr_pages) {
                    if let Ok(folio) = self.alloc_contig_range(pfn, pfn + nr_pages, true, cpu, reclaim) {
                        return Ok(folio);
                    }
                }
                pfn += nr_pages;
            }
        }
        Ok(None)
    }
}
