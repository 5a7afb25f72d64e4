//! The folio orders a shmem fault may allocate (mm/shmem.c v6.18:
//! `shmem_huge_global_enabled`, `shmem_allowable_huge_orders`,
//! `shmem_suitable_orders`).

use super::super::order::highest_order;
use super::super::types::{VmFlags, VmaId};
use super::super::Vm;
use crate::knobs::{ShmemEnabled, ShmemSizeEnabled};

impl Vm {
    /// `shmem_huge_global_enabled` for a fault (a VMA, no write size):
    /// the PMD order or nothing, from the internal mount's `huge=` policy,
    /// which the top-level `shmem_enabled` sets.
    fn shmem_huge_global_orders(&self, inode: usize, index: u64, vma: VmaId) -> u64 {
        let pmd = 1u64 << self.pmd_order();
        match self.thp.shmem.enabled {
            ShmemEnabled::Deny | ShmemEnabled::Never => 0,
            ShmemEnabled::Force | ShmemEnabled::Always => pmd,
            ShmemEnabled::WithinSize if self.shmem_within_size(inode, index, self.pmd_order()) => pmd,
            ShmemEnabled::WithinSize | ShmemEnabled::Advise => {
                if self.vmas[vma].flags.contains(VmFlags::HUGEPAGE) {
                    pmd
                } else {
                    0
                }
            }
        }
    }

    /// A folio of `order` holding page `index` would lie wholly within `i_size`.
    fn shmem_within_size(&self, inode: usize, index: u64, order: u32) -> bool {
        let aligned_end = (index + 1).next_multiple_of(1 << order);
        let size_pages = self.shmem.inodes[inode].size_bytes.div_ceil(self.page_size());
        size_pages >= aligned_end
    }

    /// `shmem_allowable_huge_orders` for a fault in `vma` at page `index`.
    pub(crate) fn shmem_allowable_orders(&self, inode: usize, index: u64, vma: VmaId) -> u64 {
        if self.thp_disabled(vma) {
            return 0;
        }
        let global = self.shmem_huge_global_orders(inode, index, vma);
        // Not anonymous shmem (`vma_is_anon_shmem`): a named file, or a
        // SysV segment mapped through `shm_vm_ops`.
        let i = &self.shmem.inodes[inode];
        if !i.unlinked || i.sysv {
            return global;
        }
        let knobs = &self.thp.shmem;
        match knobs.enabled {
            ShmemEnabled::Deny => return 0,
            ShmemEnabled::Force => return knobs.orders(ShmemSizeEnabled::Inherit),
            _ => {}
        }
        let mut mask = knobs.orders(ShmemSizeEnabled::Always);
        // The within_size orders from the highest that fits in i_size down.
        let mut within = knobs.orders(ShmemSizeEnabled::WithinSize);
        while within != 0 {
            let order = highest_order(within);
            if self.shmem_within_size(inode, index, order) {
                mask |= within;
                break;
            }
            within &= !(1 << order);
        }
        if self.vmas[vma].flags.contains(VmFlags::HUGEPAGE) {
            mask |= knobs.orders(ShmemSizeEnabled::Advise);
        }
        if global != 0 {
            mask |= knobs.orders(ShmemSizeEnabled::Inherit);
        }
        // THP_ORDERS_ALL_FILE_DEFAULT: orders 1..=PMD.
        mask & ((1 << (self.pmd_order() + 1)) - 2)
    }

    /// `thp_vma_suitable_order` for a file VMA: the VMA's file offset is
    /// aligned to the folio size and the aligned block holding `addr`
    /// lies inside the VMA.
    pub(crate) fn shmem_suitable_order(&self, vma: VmaId, addr: u64, order: u32) -> bool {
        let v = &self.vmas[vma];
        let nr = 1u64 << order;
        ((v.start >> self.page_shift()).wrapping_sub(v.pgoff)) % nr == 0 && self.suitable_order(vma, addr, order)
    }

    /// `shmem_suitable_orders`: drops the orders unsuitable in the VMA from
    /// the highest down to the first suitable one (`thp_vma_suitable_orders`),
    /// then from the highest down those whose aligned range of the mapping
    /// already holds an entry, a folio or a swap entry (`xa_find` of
    /// `XA_PRESENT`), stopping at the first free one.
    pub(crate) fn shmem_suitable_orders(&self, inode: usize, vma: VmaId, addr: u64, index: u64, orders: u64) -> u64 {
        let mut orders = orders;
        while orders != 0 {
            let order = highest_order(orders);
            if self.shmem_suitable_order(vma, addr, order) {
                break;
            }
            orders &= !(1 << order);
        }
        while orders != 0 {
            let order = highest_order(orders);
            let first = index & !((1 << order) - 1);
            if !self.shmem_range_present(inode, first, 1 << order) {
                break;
            }
            orders &= !(1 << order);
        }
        orders
    }

    /// Whether any entry of `inode`'s mapping, a page-cache folio or a
    /// swap entry, covers a page of `[first, first + nr)` (`xa_find`
    /// with `XA_PRESENT`).
    pub(crate) fn shmem_range_present(&self, inode: usize, first: u64, nr: u64) -> bool {
        let i = &self.shmem.inodes[inode];
        self.shmem_lookup(inode, first).is_some()
            || i.cache.range(first..first + nr).next().is_some()
            || self.shmem_swapped_at(inode, first).is_some()
            || i.swapped.range(first..first + nr).next().is_some()
    }
}
