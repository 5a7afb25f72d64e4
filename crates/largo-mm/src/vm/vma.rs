//! Virtual memory areas and anon_vmas (mm/mmap.c, mm/rmap.c).

use super::types::{AnonVmaId, MmId, VmFlags, VmaBacking};

/// One VMA (`struct vm_area_struct`).
#[derive(Clone, Debug)]
pub struct Vma {
    pub mm: MmId,
    pub start: u64,
    pub end: u64,
    /// Page offset of `start` (`vm_pgoff`); for anonymous memory the
    /// address at creation >> PAGE_SHIFT, kept across mremap.
    pub pgoff: u64,
    pub flags: VmFlags,
    /// What backs it; `Anon` and `Shmem` VMAs get pages.
    pub backing: VmaBacking,
    /// The shmem inode a `Shmem` VMA maps (`vm_file`).
    pub shmem: Option<usize>,
    /// The anon_vma new folios of this VMA get (`vma->anon_vma`).
    pub anon_vma: Option<AnonVmaId>,
    /// Every anon_vma this VMA is chained to (`anon_vma_chain`): its own
    /// and those inherited from its ancestors by fork.
    pub chain: Vec<AnonVmaId>,
    /// Swap readahead state (`swap_readahead_info`).
    pub swap_ra: super::swapin::SwapRa,
    /// What its anonymous write faults did, for the order policy.
    pub fault_history: super::policy::FaultHistory,
}

impl Vma {
    /// `vma_is_anonymous`.
    #[inline]
    pub fn is_anonymous(&self) -> bool {
        self.backing == VmaBacking::Anon
    }

    #[inline]
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }

    /// `linear_page_index`: the page offset of `addr` in this VMA.
    #[inline]
    pub fn page_index(&self, addr: u64, page_shift: u32) -> u64 {
        self.pgoff + ((addr - self.start) >> page_shift)
    }

    /// The address of page offset `index`, if this VMA maps it.
    #[inline]
    pub fn address_of(&self, index: u64, page_shift: u32) -> Option<u64> {
        let off = index.checked_sub(self.pgoff)?;
        let addr = self.start + (off << page_shift);
        (addr < self.end).then_some(addr)
    }

    /// Of the `nr` pages from page offset `index` (a folio), the offsets
    /// `[from, to)` (counted from `index`) this VMA maps: those whose
    /// `address_of` is some address. `None` when it maps none of them.
    pub fn index_range(&self, index: u64, nr: u64, page_shift: u32) -> Option<(u64, u64)> {
        let vma_pages = (self.end - self.start) >> page_shift;
        let from = self.pgoff.max(index);
        let to = self.pgoff.saturating_add(vma_pages).min(index.saturating_add(nr));
        (from < to).then(|| (from - index, to - index))
    }

    /// `vm_start_gap`: a stack keeps a guard gap below it.
    pub fn start_gap(&self, stack_guard_gap: u64) -> u64 {
        if self.flags.contains(VmFlags::GROWSDOWN) {
            self.start.saturating_sub(stack_guard_gap)
        } else {
            self.start
        }
    }
}

/// An anon_vma: the VMAs whose page tables may map folios faulted in
/// through it (its own VMA, and after fork the children's).
#[derive(Clone, Debug, Default)]
pub struct AnonVma {
    pub vmas: Vec<usize>,
    /// `vmas` by page offset, for long lists (a cache; see `rmap_index.rs`).
    pub rmap_index: super::rmap_index::RmapIndexCell,
    /// The memcg its slab object is charged to (0: none).
    pub memcg: u16,
    /// Folios whose `mapping` is this anon_vma.
    pub nr_folios: u64,
}

impl AnonVma {
    /// How many of its folios may go (`put_anon_vma_folio`) before the
    /// one whose put frees it: all but the last when no VMA links it,
    /// else no limit.
    pub(crate) fn puts_it_outlives(&self) -> u64 {
        if self.vmas.is_empty() {
            self.nr_folios.wrapping_sub(1)
        } else {
            u64::MAX
        }
    }
}
