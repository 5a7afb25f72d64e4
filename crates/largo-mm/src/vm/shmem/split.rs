//! Splitting a large shmem folio (mm/huge_memory.c v6.18 `__folio_split`
//! for a page-cache folio) and truncating one that a range covers only in
//! part (mm/truncate.c `truncate_inode_partial_folio`).
//!
//! A split first unmaps the folio everywhere (`unmap_folio`: a PMD mapping
//! is split, which for a file PMD zaps it, counted in `thp_split_pmd`; PTEs
//! are zapped): file pages are not remapped, they fault back in. Then the
//! page-cache entry becomes one entry per piece, each piece keeps the
//! folio's memcg charge, LRU flags and dirtiness, and the pieces join the
//! LRU just younger than the piece at the folio's first page
//! (`lru_add_split_folio` adds each new folio before the origin, in page
//! order). Pieces wholly beyond i_size leave the page cache.
//!
//! `split_folio` splits uniformly to order 0; truncation splits
//! non-uniformly (`try_folio_split_to_order`, `folio_split`): the half
//! without the target page stays whole at each order, so an order-N folio
//! becomes N + 1 folios with the target page alone. Either counts `split`
//! for the folio's size (and `thp_split_page` for PMD size) once.

use super::super::lru::FolioRef;
use super::super::{Ctx, Vm};
use super::rmap::ShmemUnmap;
use super::ShmemFolio;
use crate::memmap::PageFlags;
use crate::stats::VmEvent;
use crate::vm::stats::MthpStat;

/// The folios a split of an order-`order` folio leaves, as (first page,
/// order) in page order: every page alone for a uniform split (`at`
/// `None`); for a non-uniform split at page `at`, at each order the half
/// not holding `at` whole, and `at` alone.
pub(crate) fn split_pieces(order: u32, at: Option<u64>) -> Vec<(u64, u32)> {
    let Some(at) = at else {
        return (0..1u64 << order).map(|page| (page, 0)).collect();
    };
    let mut pieces = Vec::with_capacity(order as usize + 1);
    let mut base = 0;
    for o in (0..order).rev() {
        let half = 1u64 << o;
        if at < base + half {
            pieces.push((base + half, o));
        } else {
            pieces.push((base, o));
            base += half;
        }
    }
    pieces.push((base, 0));
    pieces.sort_unstable();
    pieces
}

impl Vm {
    /// `can_split_folio` for a shmem folio: every reference is the page
    /// cache's (one per page) or a mapping's; none waits in a cpu batch,
    /// none is under writeback.
    fn shmem_can_split(&self, ctx: &Ctx, key: usize) -> bool {
        let f = &self.shmem.folios[key];
        if f.lru.batched || f.lru.reclaim {
            return false;
        }
        let mapped = self.shmem_pte_mapcount(ctx, key) + f.entire_mapcount as u64;
        ctx.pa.memmap.page(f.pfn).refcount() as u64 == f.nr_pages() + mapped
    }

    /// The PTE mappings of a shmem folio's pages, summed.
    pub(super) fn shmem_pte_mapcount(&self, ctx: &Ctx, key: usize) -> u64 {
        let f = &self.shmem.folios[key];
        (f.pfn..f.pfn + f.nr_pages())
            .map(|p| ctx.pa.memmap.page(p).mapcount() as u64)
            .sum()
    }

    /// `split_folio` (`at` `None`) or `folio_split` at page `at` of the
    /// large shmem folio `key`, by a task of `task_memcg` (the memcg a
    /// non-uniform split's new xarray node is charged to). Returns the
    /// keys of the pieces in page order (`key` stays the first piece's),
    /// or `None` when the folio cannot be split (counted in
    /// `split_failed`).
    pub(crate) fn shmem_split_folio(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        at: Option<u64>,
        task_memcg: usize,
    ) -> Option<Vec<usize>> {
        let ShmemFolio {
            pfn,
            order,
            inode,
            index,
            memcg,
            ..
        } = self.shmem.folios[key];
        if order == 0 {
            return None;
        }
        let pmd_order = self.pmd_order();
        if !self.shmem_can_split(ctx, key) {
            self.mthp.add(order, MthpStat::SplitFailed, 1);
            if order == pmd_order {
                ctx.pa.events.count(VmEvent::ThpSplitPageFailed, 1);
            }
            return None;
        }
        self.shmem_unmap_folio(ctx, key);
        // Off the LRU while its pages change hands; back in its place below.
        let origin = FolioRef::Shmem(key);
        let on_list = self.lru_state(origin).list.is_some();
        let younger = if on_list { self.lru_prev(origin) } else { None };
        if on_list {
            self.lruvec_del(ctx.pa, origin);
        }
        let flags = ctx.pa.memmap.page(pfn).flags() & (PageFlags::SWAPBACKED | PageFlags::UPTODATE | PageFlags::DIRTY);
        let lru = self.shmem.folios[key].lru;
        let i = &mut self.shmem.inodes[inode];
        i.cache.remove(&index);
        i.xa_count_entry(index, order, -1);
        let mut keys = Vec::new();
        for (page, o) in split_pieces(order, at) {
            let k = if page == 0 {
                self.shmem.folios[key].order = o;
                key
            } else {
                let mut state = super::super::lru::LruState::with_flags(lru.active, lru.workingset);
                state.referenced = lru.referenced;
                self.shmem.folios.insert(ShmemFolio {
                    pfn: pfn + page,
                    order: o,
                    inode,
                    index: index + page,
                    entire_mapcount: 0,
                    nr_pages_mapped: 0,
                    memcg,
                    lru: state,
                })
            };
            let head = ctx.pa.memmap.page_mut(pfn + page);
            // Folio flags from the old head; the page's own write mark stays.
            let own = head.flags() & PageFlags::USER_WRITTEN;
            head.set_flags(if o > 0 {
                flags | own | PageFlags::HEAD
            } else {
                flags | own
            });
            head.set_order(o);
            head.set_private(k as u32 + 1);
            head.set_refcount(1 << o);
            let i = &mut self.shmem.inodes[inode];
            i.cache.insert(index + page, k);
            i.xa_count_entry(index + page, o, 1);
            keys.push(k);
        }
        // The split's new xarray nodes: a uniform split's are charged to
        // no memcg (6.18's `__folio_split` preallocates them with
        // `xas_split_alloc` and the mapping's gfp masked by
        // GFP_RECLAIM_MASK, no __GFP_ACCOUNT, which `xas_split_alloc` does
        // not add; measured: a 2M memfd folio split by MADV_COLD leaves
        // the memcg's kmem as it was). A non-uniform split preallocates
        // nothing: `xas_try_split` allocates the one node it needs itself,
        // GFP_NOWAIT with __GFP_ACCOUNT for an accounted xarray such as
        // `i_pages`, so it is charged to the splitting task's memcg
        // (measured: memfd-punch-swapped-trunc, four such nodes).
        let node_memcg = if at.is_some() { task_memcg } else { 0 };
        self.shmem_xa_update(inode, node_memcg);
        if on_list {
            let tails = keys.iter().filter(|&&k| k != key).map(|&k| FolioRef::Shmem(k));
            self.lru_add_split_pieces(ctx.pa, younger, Some(origin), tails);
        }
        if order == pmd_order {
            let nid = self.node_of(ctx.pa, pfn);
            self.node_stat[nid].shmem_thps -= 1 << order;
            ctx.pa.events.count(VmEvent::ThpSplitPage, 1);
        }
        self.mthp.add(order, MthpStat::Split, 1);
        self.work.split_pages += 1 << order;
        self.work.folios_split += 1;
        Some(self.shmem_drop_beyond_eof(ctx, inode, keys))
    }

    /// `unmap_folio` for a shmem folio: its PMD mappings split (zapped)
    /// and its PTEs zapped, in every VMA of its inode.
    fn shmem_unmap_folio(&mut self, ctx: &mut Ctx, key: usize) {
        let page_size = self.page_size();
        for m in self.shmem_rmap_walk(key) {
            if m.level == 1 {
                ctx.pa.events.count(VmEvent::ThpSplitPmd, 1);
                self.zap_shmem_pmd(ctx, m.mm, m.slot, ShmemUnmap::Split);
            } else {
                self.zap_shmem_ptes(
                    ctx,
                    m.mm,
                    m.slot.table,
                    m.addr,
                    m.addr + m.nr * page_size,
                    ShmemUnmap::Unmap,
                );
            }
        }
    }

    /// The pieces of a split whose first page lies at or beyond i_size
    /// leave the page cache (`__folio_split`'s EOF drop); returns the
    /// others.
    fn shmem_drop_beyond_eof(&mut self, ctx: &mut Ctx, inode: usize, keys: Vec<usize>) -> Vec<usize> {
        let eof = self.shmem.inodes[inode].size_bytes.div_ceil(self.page_size());
        let (gone, kept): (Vec<usize>, Vec<usize>) = keys.into_iter().partition(|&k| self.shmem.folios[k].index >= eof);
        if !gone.is_empty() {
            for k in gone {
                self.shmem_remove_from_cache(ctx, k);
            }
            self.shmem_xa_update(inode, 0);
        }
        kept
    }

    /// `truncate_inode_folio`: the folio leaves the page cache (the
    /// xarray's nodes settled); freed when nothing else holds it.
    fn shmem_delete_from_cache(&mut self, ctx: &mut Ctx, key: usize) {
        let inode = self.shmem.folios[key].inode;
        self.shmem_remove_from_cache(ctx, key);
        self.shmem_xa_update(inode, 0);
    }

    /// A folio leaves the page cache, its entry counted out of the
    /// xarray; the caller settles the nodes (`shmem_xa_update`) once for
    /// all it removes.
    pub(super) fn shmem_remove_from_cache(&mut self, ctx: &mut Ctx, key: usize) {
        let (inode, index, order) = {
            let f = &self.shmem.folios[key];
            (f.inode, f.index, f.order)
        };
        let i = &mut self.shmem.inodes[inode];
        i.cache.remove(&index);
        i.xa_count_entry(index, order, -1);
        self.shmem_cache_stats(ctx, key, -1);
        self.shmem_folio_put_refs(ctx, key, 1 << order);
    }

    /// `truncate_inode_partial_folio` for shmem folio `key` and the byte
    /// range `[lstart, lend]`: a folio wholly inside leaves the page
    /// cache; otherwise the range is zeroed and a large folio split
    /// non-uniformly at the range's first page, then (the piece holding
    /// it) at the page after the range, so the pieces inside can go.
    /// Returns false when the split failed (the folio stays whole).
    /// `memcg`: the truncating task's (charged for the splits' nodes).
    pub(crate) fn shmem_truncate_partial_folio(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        lstart: u64,
        lend: u64,
        memcg: usize,
    ) -> bool {
        let shift = self.page_shift();
        let (pfn, index, size) = {
            let f = &self.shmem.folios[key];
            (f.pfn, f.index, f.nr_pages() << shift)
        };
        let pos = index << shift;
        let offset = lstart.saturating_sub(pos);
        let length = if pos + size <= lend {
            size - offset
        } else {
            lend + 1 - pos - offset
        };
        if length == size {
            self.shmem_delete_from_cache(ctx, key);
            return true;
        }
        self.shmem_zero_bytes(ctx, pfn, offset, length);
        if self.shmem.folios[key].order == 0 {
            return true;
        }
        let Some(pieces) = self.shmem_split_folio(ctx, key, Some(offset >> shift), memcg) else {
            // Shmem folios are dirty here: the caller keeps this one.
            return false;
        };
        if offset + length == size {
            return true;
        }
        let at2 = index + ((offset + length) >> shift);
        let holder = pieces.into_iter().find(|&k| {
            let f = &self.shmem.folios[k];
            (f.index..f.index + f.nr_pages()).contains(&at2)
        });
        if let Some(k) = holder.filter(|&k| self.shmem.folios[k].order > 0) {
            let at = at2 - self.shmem.folios[k].index;
            let _ = self.shmem_split_folio(ctx, k, Some(at), memcg);
        }
        true
    }

    /// `folio_zero_range` on the ram backing: the bytes `[offset, offset +
    /// length)` of the folio at `pfn` read as zero.
    fn shmem_zero_bytes(&mut self, ctx: &mut Ctx, pfn: u64, offset: u64, length: u64) {
        if !ctx.ram || length == 0 {
            return;
        }
        let page_size = self.page_size();
        let mut at = offset;
        while at < offset + length {
            let in_page = at % page_size;
            let n = (page_size - in_page).min(offset + length - at);
            ctx.backing
                .write(largo_types::Pfn(pfn + at / page_size), in_page, &vec![0; n as usize])
                .unwrap_or_else(|e| unreachable!("shmem page outside the backing: {e}"));
            at += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_pieces;

    #[test]
    fn a_uniform_split_leaves_every_page_alone() {
        assert_eq!(split_pieces(2, None), vec![(0, 0), (1, 0), (2, 0), (3, 0)]);
    }

    #[test]
    fn a_non_uniform_split_keeps_the_far_half_whole_at_each_order() {
        // Order 4 at page 5: [8, 16) order 3, [0, 4) order 2, [6, 8)
        // order 1, 4 and 5 alone.
        assert_eq!(split_pieces(4, Some(5)), vec![(0, 2), (4, 0), (5, 0), (6, 1), (8, 3)]);
        assert_eq!(split_pieces(9, Some(0)).len(), 10);
        for (order, at) in [(4, 0), (4, 15), (9, 300), (1, 1)] {
            let pieces = split_pieces(order, Some(at));
            let covered: u64 = pieces.iter().map(|&(_, o)| 1u64 << o).sum();
            assert_eq!(covered, 1 << order, "order {order} at {at}");
            assert!(pieces.contains(&(at, 0)), "page {at} alone");
            assert!(pieces.iter().all(|&(p, o)| p % (1 << o) == 0), "pieces aligned");
        }
    }
}
