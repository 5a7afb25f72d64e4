//! An address space (`struct mm_struct`): its VMAs, page-table root and
//! counters.

use std::collections::BTreeMap;

use super::types::{ThpDisable, VmaId};

/// `mmap_min_addr` default.
pub const MMAP_MIN_ADDR: u64 = 65536;
/// `stack_guard_gap` default: 256 pages of 4 KiB.
pub const STACK_GUARD_GAP: u64 = 256 << 12;
/// The default `RLIMIT_STACK` (8 MiB).
pub const RLIMIT_STACK_BYTES: u64 = 8 << 20;

#[derive(Clone, Debug)]
pub struct Mm {
    /// VMAs by start address.
    pub vmas: BTreeMap<u64, VmaId>,
    /// Root page table (PGD).
    pub pgd: usize,
    /// Top of the top-down mmap area (`mmap_base`).
    pub mmap_base: u64,
    pub start_brk: u64,
    pub brk: u64,
    /// The `mm_id` of CONFIG_MM_ID (never `MM_ID_DUMMY` = 0).
    pub mm_id: u32,
    pub thp_disable: ThpDisable,
    /// `MMF_HUGE_ZERO_PAGE`: this mm holds a reference on the huge zero folio.
    pub huge_zero_ref: bool,
    /// `MM_ANONPAGES`.
    pub rss_anon: u64,
    /// `MM_SHMEMPAGES`.
    pub rss_shmem: u64,
    /// `MM_SWAPENTS`: swap entries in its page tables (VmSwap).
    pub swap_ents: u64,
    /// The memcg of its owner: its user pages are charged there.
    pub memcg: u16,
    /// Open descriptors of shmem files: fd -> shmem inode (the process's
    /// file table; threads share it with the mm).
    pub files: BTreeMap<u32, usize>,
    /// `MMF_VM_HUGEPAGE`: on khugepaged's list.
    pub khugepaged: bool,
    /// `mm->pgtables_bytes` in pages.
    pub nr_pgtables: u64,
    /// Pages accounted to `vm_committed_as`.
    pub committed_pages: u64,
    /// Tasks using this mm (threads share it).
    pub users: u32,
}

impl Mm {
    /// The VMA containing `addr` (`vma_lookup`).
    pub fn vma_at(&self, addr: u64, vmas: &slab::Slab<super::vma::Vma>) -> Option<VmaId> {
        let (_, &id) = self.vmas.range(..=addr).next_back()?;
        vmas[id].contains(addr).then_some(id)
    }

    /// VMAs overlapping `[start, end)`, in address order.
    pub fn vmas_in(&self, start: u64, end: u64, vmas: &slab::Slab<super::vma::Vma>) -> Vec<VmaId> {
        let first = self
            .vmas
            .range(..start)
            .next_back()
            .map(|(_, &id)| id)
            .filter(|&id| vmas[id].end > start);
        first
            .into_iter()
            .chain(self.vmas.range(start..end).map(|(_, &id)| id))
            .collect()
    }

    /// The VMA just below `addr` and just at or above it.
    pub fn neighbours(&self, start: u64, end: u64) -> (Option<VmaId>, Option<VmaId>) {
        let prev = self.vmas.range(..start).next_back().map(|(_, &id)| id);
        let next = self.vmas.range(end..).next().map(|(_, &id)| id);
        (prev, next)
    }
}
