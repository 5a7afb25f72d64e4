//! Which folio orders an anonymous fault may use (mm/huge_memory.c
//! `__thp_vma_allowable_orders`, include/linux/huge_mm.h
//! `thp_vma_allowable_orders` and `thp_vma_suitable_orders`, mm/memory.c
//! `alloc_anon_folio`'s `pte_range_none` filter), and the gfp the `defrag`
//! knob implies (`vma_thp_gfp_mask`).

use super::pgtable::Pte;
use super::types::{ThpDisable, VmFlags, VmaId};
use super::Vm;
use crate::knobs::ThpDefrag;
use crate::page_alloc::gfp::{Gfp, GFP_TRANSHUGE, GFP_TRANSHUGE_LIGHT};

/// A set of orders, bit n = order n (`unsigned long orders`).
pub type Orders = u64;

/// `highest_order`.
#[inline]
pub fn highest_order(orders: Orders) -> u32 {
    63 - orders.leading_zeros()
}

/// Drops orders from the highest down until one passes `ok`; that order
/// and all lower ones are kept (the `next_order` loops of the kernel).
fn keep_from_first(mut orders: Orders, ok: impl Fn(u32) -> bool) -> Orders {
    while orders != 0 {
        let order = highest_order(orders);
        if ok(order) {
            break;
        }
        orders &= !(1 << order);
    }
    orders
}

impl Vm {
    /// `thp_vma_allowable_orders(vma, vm_flags, TVA_PAGEFAULT, orders)` for an
    /// anonymous VMA: the per-size settings against the top-level one and
    /// VM_HUGEPAGE, then `vma_thp_disabled`.
    pub(crate) fn allowable_orders(&self, vma: VmaId, orders: Orders) -> Orders {
        let v = &self.vmas[vma];
        let madvised = v.flags.contains(VmFlags::HUGEPAGE);
        let thp = &self.thp;
        let [always, madvise, inherit] = thp.size_masks();
        let mut mask = always;
        if madvised {
            mask |= madvise;
        }
        if thp.global_always() || (madvised && thp.global_enabled()) {
            mask |= inherit;
        }
        let orders = orders & mask;
        if orders == 0 || self.thp_disabled(vma) {
            return 0;
        }
        orders
    }

    /// `vma_thp_disabled` (v6.18): VM_NOHUGEPAGE, or the prctl disables.
    pub(crate) fn thp_disabled(&self, vma: VmaId) -> bool {
        let v = &self.vmas[vma];
        if v.flags.contains(VmFlags::NOHUGEPAGE) {
            return true;
        }
        match self.mms[v.mm].thp_disable {
            ThpDisable::Completely => true,
            ThpDisable::ExceptAdvised => !v.flags.contains(VmFlags::HUGEPAGE),
            ThpDisable::Off => false,
        }
    }

    /// `thp_vma_suitable_order`: the naturally aligned block holding `addr`
    /// fits in the VMA.
    pub(crate) fn suitable_order(&self, vma: VmaId, addr: u64, order: u32) -> bool {
        let v = &self.vmas[vma];
        let size = self.page_size() << order;
        let haddr = addr & !(size - 1);
        haddr >= v.start && haddr + size <= v.end
    }

    /// `thp_vma_suitable_orders`: drops orders from the highest down until
    /// the first suitable one; lower orders are kept.
    pub(crate) fn suitable_orders(&self, vma: VmaId, addr: u64, orders: Orders) -> Orders {
        keep_from_first(orders, |order| self.suitable_order(vma, addr, order))
    }

    /// The `pte_range_none` filter of `alloc_anon_folio`: from the highest
    /// order down, keep the first whose aligned range in the PTE table is
    /// entirely none; lower orders are kept without checking.
    pub(crate) fn pte_none_orders(&self, pte_table: usize, addr: u64, orders: Orders) -> Orders {
        keep_from_first(orders, |order| self.pte_range_none(pte_table, addr, order))
    }

    /// `pte_range_none` over the order-sized aligned block holding `addr`.
    pub(crate) fn pte_range_none(&self, pte_table: usize, addr: u64, order: u32) -> bool {
        let first = self.pt.shape.index(0, addr) & !((1 << order) - 1);
        let entries = &self.pt.pages[pte_table].entries[first..first + (1 << order)];
        entries.iter().all(|e| e.is_none())
    }

    /// The host kernel's `anon_beside_full` policy: the block of this order
    /// just before or just after the folio's, in the same PTE table, has
    /// no `pte_none` entry.
    pub(crate) fn beside_full(&self, pte_table: usize, addr: u64, order: u32) -> bool {
        let nr = 1usize << order;
        let first = self.pt.shape.index(0, addr) & !(nr - 1);
        let entries = &self.pt.pages[pte_table].entries;
        let full = |start: usize| entries[start..start + nr].iter().all(|e: &Pte| !e.is_none());
        (first >= nr && full(first - nr)) || (first + 2 * nr <= entries.len() && full(first + nr))
    }

    /// `vma_thp_gfp_mask`: the gfp of THP and mTHP fault allocations.
    pub(crate) fn thp_gfp_mask(&self, vma: VmaId) -> Gfp {
        self.thp_gfp_mask_madvised(self.vmas[vma].flags.contains(VmFlags::HUGEPAGE))
    }

    /// `vma_thp_gfp_mask(NULL)`: as for a VMA without MADV_HUGEPAGE.
    pub(crate) fn thp_gfp_mask_unmadvised(&self) -> Gfp {
        self.thp_gfp_mask_madvised(false)
    }

    fn thp_gfp_mask_madvised(&self, madvised: bool) -> Gfp {
        match self.thp.defrag {
            ThpDefrag::Always => GFP_TRANSHUGE | if madvised { Gfp::empty() } else { Gfp::NORETRY },
            ThpDefrag::Defer => GFP_TRANSHUGE_LIGHT | Gfp::KSWAPD_RECLAIM,
            ThpDefrag::DeferMadvise => {
                GFP_TRANSHUGE_LIGHT
                    | if madvised {
                        Gfp::DIRECT_RECLAIM
                    } else {
                        Gfp::KSWAPD_RECLAIM
                    }
            }
            ThpDefrag::Madvise => GFP_TRANSHUGE_LIGHT | if madvised { Gfp::DIRECT_RECLAIM } else { Gfp::empty() },
            ThpDefrag::Never => GFP_TRANSHUGE_LIGHT,
        }
    }
}
