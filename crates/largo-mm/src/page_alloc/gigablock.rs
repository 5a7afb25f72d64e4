//! Gigapageblocks: the alternative to larger MAX_PAGE_ORDER raised in the
//! seed thread (2021): keep 2 MiB pageblocks and add a coarser 1 GiB
//! grouping that counts the non-movable pageblocks of each gigablock; when
//! an unmovable (or reclaimable) allocation has to take a free block from
//! a movable pageblock, it prefers a gigablock already polluted, so that
//! other gigablocks stay wholly movable and can still become 1 GiB folios
//! by migration. Not in any kernel; off by default (knob
//! `largo/gigapageblocks`).
//!
//! With it on, a non-movable fallback (`__rmqueue_claim`) looks for the
//! smallest foreign free block first inside polluted gigablocks, then
//! anywhere; and it claims one pageblock of a larger block, never the
//! whole block (mainline claims every pageblock of a block of pageblock
//! order or more, which with MAX_PAGE_ORDER 18 retypes a whole gigabyte
//! for the first unmovable page that needs one).

use largo_types::MigrateType;

use super::{AllocFlags, Fallback, PageAlloc};

/// How far down a free list the steering looks for a polluted gigablock.
const GIGABLOCK_SCAN: usize = 64;

/// Non-movable pageblock counts per 1 GiB gigablock.
#[derive(Clone, Debug)]
pub struct Gigablocks {
    /// log2 of base pages per gigablock.
    pub pfn_shift: u32,
    pub unmovable: Vec<u32>,
}

/// Pageblock types that pollute a gigablock.
fn pollutes(mt: MigrateType) -> bool {
    matches!(
        mt,
        MigrateType::Unmovable | MigrateType::Reclaimable | MigrateType::HighAtomic
    )
}

impl PageAlloc {
    /// Turns the grouping on (counting the current pageblocks) or off.
    pub fn set_gigapageblocks(&mut self, on: bool) {
        if !on {
            self.gigablocks = None;
            return;
        }
        let pfn_shift = 30 - self.geo.page_shift;
        let nr = (self.memmap.len() >> pfn_shift) as usize + 1;
        let mut g = Gigablocks {
            pfn_shift,
            unmovable: vec![0; nr],
        };
        let pb = self.geo.pageblock_nr_pages();
        for i in 0..self.pageblocks.len() as u64 {
            if pollutes(self.pageblocks.underlying_migratetype(i * pb)) {
                g.unmovable[((i * pb) >> pfn_shift) as usize] += 1;
            }
        }
        self.gigablocks = Some(g);
    }

    pub fn gigapageblocks(&self) -> bool {
        self.gigablocks.is_some()
    }

    /// Keeps the counts right when pageblock `pfn` changes from `old` to `new`.
    pub(crate) fn gigablock_retype(&mut self, pfn: u64, old: MigrateType, new: MigrateType) {
        let Some(g) = self.gigablocks.as_mut() else {
            return;
        };
        let i = (pfn >> g.pfn_shift) as usize;
        match (pollutes(old), pollutes(new)) {
            (false, true) => g.unmovable[i] += 1,
            (true, false) => g.unmovable[i] -= 1,
            _ => {}
        }
    }

    /// The free block a fallback of `start_mt` takes from the
    /// `fallback_mt` list at `order`: the list head, or with gigapageblocks
    /// and a non-movable request the first of the first GIGABLOCK_SCAN
    /// blocks whose gigablock is already polluted.
    pub(crate) fn fallback_block(
        &self,
        zi: usize,
        order: u32,
        start_mt: MigrateType,
        fallback_mt: MigrateType,
    ) -> Option<u64> {
        let first = self.zones[zi].free_area[order as usize].list(fallback_mt).first()?;
        if start_mt == MigrateType::Movable {
            return Some(first);
        }
        Some(self.polluted_block(zi, order, fallback_mt).unwrap_or(first))
    }

    /// Among the first GIGABLOCK_SCAN free blocks of the `mt` list at
    /// `order`, the first in a gigablock that already holds non-movable
    /// pageblocks (none without gigapageblocks).
    fn polluted_block(&self, zi: usize, order: u32, mt: MigrateType) -> Option<u64> {
        let g = self.gigablocks.as_ref()?;
        self.zones[zi].free_area[order as usize]
            .list(mt)
            .iter(&self.memmap.pages)
            .take(GIGABLOCK_SCAN)
            .find(|&pfn| g.unmovable[(pfn >> g.pfn_shift) as usize] > 0)
    }

    /// `__rmqueue_claim` under gigapageblocks (see the module doc).
    pub(crate) fn gigablock_claim(
        &mut self,
        zi: usize,
        order: u32,
        start_mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u64> {
        let pb = self.geo.pageblock_order;
        let min_order = self.claim_min_order(order, alloc_flags);
        for polluted_only in [true, false] {
            for current_order in min_order..=self.geo.max_page_order {
                let Fallback::Found(fallback_mt) = self.find_suitable_fallback(zi, current_order, start_mt, true)
                else {
                    continue;
                };
                let pick = if polluted_only {
                    self.polluted_block(zi, current_order, fallback_mt)
                } else {
                    self.zones[zi].free_area[current_order as usize]
                        .list(fallback_mt)
                        .first()
                };
                let Some(pfn) = pick else { continue };
                if current_order <= pb.max(order) {
                    if let Some(page) =
                        self.try_to_claim_block(zi, pfn, current_order, order, start_mt, fallback_mt, alloc_flags)
                    {
                        return Some(page);
                    }
                    continue;
                }
                return Some(self.claim_one_pageblock(zi, pfn, current_order, order, start_mt, fallback_mt));
            }
        }
        None
    }

    /// Splits the free block `pfn` of `current_order` (above pageblock
    /// order) down to one pageblock (or the allocation's order if larger),
    /// which alone changes type and serves the allocation of `order`.
    fn claim_one_pageblock(
        &mut self,
        zi: usize,
        pfn: u64,
        current_order: u32,
        order: u32,
        start_mt: MigrateType,
        block_mt: MigrateType,
    ) -> u64 {
        // One pageblock, or as many as the allocation itself needs.
        let keep = order.max(self.geo.pageblock_order);
        self.del_page_from_free_list(zi, pfn, current_order, block_mt);
        let kept = self.expand(zi, pfn, keep, current_order, block_mt);
        self.account_freepages(zi, kept as i64 - (1i64 << current_order), block_mt);
        self.change_pageblock_range(pfn, keep, start_mt);
        let added = self.expand(zi, pfn, order, keep, start_mt);
        self.account_freepages(zi, added as i64, start_mt);
        pfn
    }
}
