//! Where the order policy ([`super::policy`]) meets the fault path: the
//! orders a write fault may try, the history it leaves, and the
//! promotions of utilisation-driven policies. With the `static` policy
//! every hook is a no-op and the fault path is the kernel's.

use super::order::Orders;
use super::pgtable::Pte;
use super::policy::{BlockFill, FaultSite};
use super::types::VmaId;
use super::{Ctx, Vm};

impl Vm {
    /// The site of a write fault at `addr` whose folio covers `order`'s
    /// aligned block (0 before the folio is chosen: the faulting page).
    fn fault_site(&self, vma: VmaId, addr: u64, order: u32) -> FaultSite {
        let v = &self.vmas[vma];
        let shift = self.page_shift();
        let size = self.page_size() << order;
        let first = addr & !(size - 1);
        FaultSite {
            page: addr >> shift,
            vma_pages: (v.end - v.start) >> shift,
            pmd_order: self.pmd_order(),
            beside_populated: self.populated_at(v.mm, first.wrapping_sub(self.page_size()))
                || self.populated_at(v.mm, first + size),
        }
    }

    /// A page is mapped (or a swap entry) at `addr` in `mm`.
    fn populated_at(&self, mm: super::types::MmId, addr: u64) -> bool {
        self.pt
            .leaf(self.mms[mm].pgd, addr)
            .is_some_and(|(table, index, _)| !self.pt.get(table, index).is_none())
    }

    /// Of the `orders` the knobs allow for a write fault at `addr`, the
    /// ones the policy tries.
    #[inline]
    pub(crate) fn policy_orders(&self, vma: VmaId, addr: u64, orders: Orders) -> Orders {
        if self.thp.policy.is_static() || orders == 0 {
            return orders;
        }
        self.policy_orders_dynamic(vma, addr, orders)
    }

    /// [`Vm::policy_orders`] for a policy that is not static.
    fn policy_orders_dynamic(&self, vma: VmaId, addr: u64, orders: Orders) -> Orders {
        let site = self.fault_site(vma, addr, 0);
        let fill = Neighbourhood { vm: self, vma, addr };
        self.thp
            .policy
            .policy()
            .orders(&site, &self.vmas[vma].fault_history, orders, &fill)
    }

    /// `__handle_mm_fault`'s test for a PMD fault: the knobs allow the PMD
    /// order, and for a write fault the policy does too.
    pub(crate) fn pmd_fault_orders(&self, vmf: &super::fault::VmFault) -> Orders {
        let orders = self.allowable_orders(vmf.vma, 1 << self.pmd_order());
        if vmf.write {
            self.policy_orders(vmf.vma, vmf.address, orders)
        } else {
            orders
        }
    }

    /// A write fault at `addr` mapped a new folio of `order`.
    #[inline]
    pub(crate) fn policy_mapped(&mut self, ctx: &mut Ctx, vma: VmaId, addr: u64, order: u32) {
        if !self.thp.policy.is_static() {
            self.policy_mapped_dynamic(ctx, vma, addr, order);
        }
    }

    /// [`Vm::policy_mapped`] for a policy that is not static.
    fn policy_mapped_dynamic(&mut self, ctx: &mut Ctx, vma: VmaId, addr: u64, order: u32) {
        // Beside the folio just mapped, not beside the faulting page
        // (which now has neighbours inside its own folio).
        let site = self.fault_site(vma, addr, order);
        let first = site.page & !((1u64 << order) - 1);
        let policy = self.thp.policy;
        policy
            .policy()
            .mapped(&site, first, order, &mut self.vmas[vma].fault_history);
        if policy.policy().promotes() {
            self.promote_around(ctx, vma, &site, addr);
        }
    }
}

/// The page tables around a fault, as a policy's [`BlockFill`].
struct Neighbourhood<'a> {
    vm: &'a Vm,
    vma: VmaId,
    addr: u64,
}

impl Neighbourhood<'_> {
    /// Populated entries of the PTE table `table`'s `[first, first + nr)`.
    fn ptes_populated(&self, table: usize, first: usize, nr: usize) -> usize {
        (first..first + nr)
            .filter(|&i| !self.vm.pt.get(table, i).is_none())
            .count()
    }

    /// Populated base pages under one PMD entry.
    fn pmd_populated(&self, e: Pte) -> usize {
        if e.is_table() {
            self.ptes_populated(e.table_idx(), 0, self.vm.pt.shape.entries_at(0))
        } else if e.present() {
            self.vm.pt.shape.entries_at(0)
        } else {
            0
        }
    }

    /// The block of `order` starting `delta` blocks from the fault's, if it
    /// lies in the VMA.
    fn neighbour(&self, order: u32, delta: i64) -> Option<u64> {
        let size = self.vm.page_size() << order;
        let start = (self.addr & !(size - 1)).checked_add_signed(delta * size as i64)?;
        let v = &self.vm.vmas[self.vma];
        (start >= v.start && start + size <= v.end).then_some(start)
    }
}

impl BlockFill for Neighbourhood<'_> {
    fn beside_per_mille(&self, order: u32) -> u32 {
        let vm = self.vm;
        let mm = vm.vmas[self.vma].mm;
        let root = vm.mms[mm].pgd;
        let nr = 1usize << order;
        let populated = |start: u64| -> usize {
            if order == vm.pmd_order() {
                vm.pt
                    .lookup(root, start, 1)
                    .map_or(0, |t| self.pmd_populated(vm.pt.get(t, vm.pt.shape.index(1, start))))
            } else {
                vm.pt
                    .lookup(root, start, 0)
                    .map_or(0, |t| self.ptes_populated(t, vm.pt.shape.index(0, start), nr))
            }
        };
        let best = [-1, 1]
            .into_iter()
            .filter_map(|d| self.neighbour(order, d))
            .map(populated)
            .max()
            .unwrap_or(0);
        (best * 1000 / nr) as u32
    }
}
