//! Which VMAs of an anon_vma cover a range of page offsets: the model's
//! `anon_vma_interval_tree_foreach` (mm/interval_tree.c). The kernel keeps
//! each anon_vma's VMAs (through their `anon_vma_chain`s) in an interval
//! tree keyed by `[vm_pgoff, vm_pgoff + vma_pages)`, so an rmap walk visits
//! only the VMAs that can map the folio. The model keeps the VMAs in a
//! list ([`AnonVma::vmas`], the order the walk reports mappings in) and,
//! for a long list, a sorted index built on demand: a VMA split into
//! thousands by partial munmaps must not cost every walk thousands of
//! VMAs.
//!
//! The index is a cache. Any change to the VMAs (added, removed, moved,
//! grown or shrunk; [`Vm::vma_layout_changed`]) bumps the VM's layout
//! generation, and an index of an older generation is rebuilt before use.
//! The checker compares every current index with a fresh build.

use std::cell::RefCell;

use super::vma::{AnonVma, Vma};
use super::Vm;

/// Below this many VMAs an anon_vma's list is scanned directly.
pub(crate) const INDEXED_FROM: usize = 16;

/// Positions in an anon_vma's list, inline up to a short list's length.
pub(crate) type Positions = smallvec::SmallVec<[u32; INDEXED_FROM]>;

/// One anon_vma's VMAs sorted by first page offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RmapIndex {
    /// The VM layout generation it was built at; `None`: never built.
    generation: Option<u64>,
    /// (first page offset, position in `AnonVma::vmas`), sorted.
    by_pgoff: Vec<(u64, u32)>,
    /// The most pages any of the VMAs spans: a VMA overlapping offset
    /// `i` starts after `i - longest_pages`.
    longest_pages: u64,
}

impl RmapIndex {
    /// The index of `av`'s VMAs as they are now.
    fn build(av: &AnonVma, vmas: &slab::Slab<Vma>, page_shift: u32, generation: u64) -> RmapIndex {
        let mut by_pgoff: Vec<(u64, u32)> = av
            .vmas
            .iter()
            .enumerate()
            .map(|(pos, &id)| (vmas[id].pgoff, pos as u32))
            .collect();
        by_pgoff.sort_unstable();
        let longest_pages = av
            .vmas
            .iter()
            .map(|&id| (vmas[id].end - vmas[id].start) >> page_shift)
            .max()
            .unwrap_or(0);
        RmapIndex {
            generation: Some(generation),
            by_pgoff,
            longest_pages,
        }
    }
}

/// The per-anon_vma cache (interior: rmap walks read the VM).
pub type RmapIndexCell = RefCell<RmapIndex>;

impl Vm {
    /// Some VMA was added, removed, moved, grown or shrunk, or joined an
    /// anon_vma: every rmap index is out of date.
    #[inline]
    pub(crate) fn vma_layout_changed(&mut self) {
        self.vma_layout_gen += 1;
    }

    /// The positions in `av.vmas` of the VMAs that may map some of the
    /// `nr` pages from page offset `index`, in list order (every VMA for a
    /// short list; for a long one those whose range overlaps).
    pub(crate) fn anon_vma_positions(&self, av: &AnonVma, index: u64, nr: u64) -> Positions {
        if av.vmas.len() < INDEXED_FROM {
            return (0..av.vmas.len() as u32).collect();
        }
        let shift = self.page_shift();
        let mut cache = av.rmap_index.borrow_mut();
        if cache.generation != Some(self.vma_layout_gen) {
            *cache = RmapIndex::build(av, &self.vmas, shift, self.vma_layout_gen);
        }
        let lowest_start = index.saturating_add(1).saturating_sub(cache.longest_pages);
        let end = index.saturating_add(nr);
        let first = cache.by_pgoff.partition_point(|&(start, _)| start < lowest_start);
        let mut positions: Positions = cache.by_pgoff[first..]
            .iter()
            .take_while(|&&(start, _)| start < end)
            .map(|&(_, pos)| pos)
            .filter(|&pos| self.vmas[av.vmas[pos as usize]].index_range(index, nr, shift).is_some())
            .collect();
        positions.sort_unstable();
        debug_assert!(
            positions.iter().copied().eq((0..av.vmas.len() as u32)
                .filter(|&pos| self.vmas[av.vmas[pos as usize]].index_range(index, nr, shift).is_some())),
            "the rmap index of an anon_vma finds other VMAs than its list for pages {index}+{nr}"
        );
        positions
    }

    /// For the checker: every anon_vma index of the current generation
    /// is what a fresh build gives.
    pub(crate) fn check_rmap_indexes(&self) -> Result<(), String> {
        let shift = self.page_shift();
        for (id, av) in self.anon_vmas.iter() {
            let cache = av.rmap_index.borrow();
            if cache.generation != Some(self.vma_layout_gen) {
                continue;
            }
            let fresh = RmapIndex::build(av, &self.vmas, shift, self.vma_layout_gen);
            if *cache != fresh {
                return Err(format!(
                    "anon_vma {id}: its rmap index {cache:?} is stale (the VMAs give {fresh:?}): a VMA changed without vma_layout_changed"
                ));
            }
        }
        Ok(())
    }
}
