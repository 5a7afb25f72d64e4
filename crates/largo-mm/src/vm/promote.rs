//! Promotion of a populated block of base pages into one large folio, for
//! order policies that promote (`ingens`, `adaptive`'s early promotion). A
//! PMD block goes through the collapse of MADV_COLLAPSE (`collapse_scan_pmd`:
//! GFP_TRANSHUGE whatever `defrag` says, counted in `thp_collapse_alloc`); a smaller block
//! is collapsed in place under its PTEs the same way (each populated page
//! copied into the new folio, each empty one zeroed, the old folios
//! unmapped and released), which the kernel has no equivalent of in 6.18
//! (khugepaged collapses PMD ranges only).

use super::collapse::{Collapser, Scan};
use super::order::highest_order;
use super::pgtable::Pte;
use super::policy::FaultSite;
use super::types::VmaId;
use super::{Ctx, Vm};

/// How a block of PTEs is populated.
enum BlockUse {
    /// Mapped whole by one folio of the block's order or larger.
    OneFolio,
    /// This many entries map anonymous pages that a promotion can take;
    /// `None` if some entry rules the block out (a swap entry, a page
    /// shared with another mapping, a folio reaching outside the block).
    Populated(Option<usize>),
}

impl Vm {
    /// After a fault at `addr`: promotes the block around it of the largest
    /// order the knobs allow there if the policy asks for it.
    pub(crate) fn promote_around(&mut self, ctx: &mut Ctx, vma: VmaId, site: &FaultSite, addr: u64) {
        let mm = self.vmas[vma].mm;
        let Some(table) = self.pt.lookup(self.mms[mm].pgd, addr, 0) else {
            return;
        };
        let pmd_order = self.pmd_order();
        let orders = self.allowable_orders(vma, (2u64 << pmd_order) - 1);
        let mut orders = self.suitable_orders(vma, addr, orders);
        // Only the largest size is promoted to (Ingens promotes 2 MiB
        // regions only): promoting through every size on the way would
        // copy each page once per size.
        if orders != 0 {
            orders = 1 << highest_order(orders);
        }
        while orders != 0 {
            let order = highest_order(orders);
            orders &= !(1 << order);
            let nr = 1usize << order;
            let first = self.pt.shape.index(0, addr) & !(nr - 1);
            if !self.may_promote_block(site, vma, table, first, nr, order) {
                debug_assert!(
                    !matches!(
                        self.block_use(ctx, table, first, nr, order),
                        BlockUse::Populated(Some(n)) if self.thp.policy.policy().promote(
                            site, &self.vmas[vma].fault_history, order, n as u64, nr as u64)
                    ),
                    "the entries ruled out a block the full scan would promote"
                );
                continue;
            }
            match self.block_use(ctx, table, first, nr, order) {
                BlockUse::OneFolio => return,
                BlockUse::Populated(Some(n))
                    if self.thp.policy.policy().promote(
                        site,
                        &self.vmas[vma].fault_history,
                        order,
                        n as u64,
                        nr as u64,
                    ) =>
                {
                    let haddr = addr & !((self.page_size() << order) - 1);
                    if self.promote_block(ctx, vma, table, haddr, order) {
                        return;
                    }
                }
                BlockUse::Populated(_) => {}
            }
        }
    }

    /// Whether [`Vm::block_use`] of the block may lead to a promotion,
    /// read from its entries alone. A promotion needs every entry that is
    /// neither none nor special to map a page the block's folio can take,
    /// so a swap or migration entry rules it out, and then the policy is
    /// asked with the count of present entries; when some entry rules the
    /// block out, or one folio maps it whole, nothing is promoted whatever
    /// the policy says (and `promote_around` tries one order, the largest,
    /// so a block ruled out ends the attempt either way). So `false` here
    /// is the full scan's outcome, without the look-up of each entry's
    /// folio (the promoting policies' cost per fault: a 2 MiB block is
    /// 512 entries).
    fn may_promote_block(
        &self,
        site: &FaultSite,
        vma: VmaId,
        table: usize,
        first: usize,
        nr: usize,
        order: u32,
    ) -> bool {
        let (present, other) = self.pt.block_census(table, first, nr);
        !other
            && self
                .thp
                .policy
                .policy()
                .promote(site, &self.vmas[vma].fault_history, order, present, nr as u64)
    }

    fn block_use(&self, ctx: &Ctx, table: usize, first: usize, nr: usize, order: u32) -> BlockUse {
        let mut populated = 0;
        let mut ok = true;
        let mut i = first;
        while i < first + nr {
            let pte = self.pt.get(table, i);
            if pte.is_none() || pte.is_special() {
                i += 1;
                continue;
            }
            if !pte.present() {
                ok = false;
                i += 1;
                continue;
            }
            let Some(key) = self.folio_key_of_pfn(ctx.pa, pte.pfn()) else {
                ok = false;
                i += 1;
                continue;
            };
            let f = &self.folios[key];
            let page_in_folio = (pte.pfn() - f.pfn) as usize;
            if f.order >= order && page_in_folio == i - first && f.nr_pages() as usize >= nr {
                return BlockUse::OneFolio;
            }
            let inside = i
                .checked_sub(page_in_folio)
                .is_some_and(|start| start >= first && start + f.nr_pages() as usize <= first + nr);
            let shared = if f.is_large() {
                f.maybe_mapped_shared
            } else {
                ctx.pa.memmap.page(f.pfn).mapcount() > 1
            };
            ok &= inside && !shared && f.swap.is_none() && !self.folio_has_extra_refs(ctx.pa, key);
            populated += 1;
            i += 1;
        }
        BlockUse::Populated(ok.then_some(populated))
    }

    /// Promotes the block of `order` at `haddr` (PTE table `table`) into
    /// one new folio; false if the folio or its charge cannot be had.
    fn promote_block(&mut self, ctx: &mut Ctx, vma: VmaId, table: usize, haddr: u64, order: u32) -> bool {
        // Folios still in this cpu's lru_add batch hold a reference the
        // collapse checks count as a pin: drain first, as madvise_collapse does.
        self.lru_add_drain(ctx);
        if order == self.pmd_order() {
            let promoted = self.collapse_scan_pmd(ctx, vma, haddr, Collapser::Madvise) == Scan::Succeed;
            self.work.promotions += u64::from(promoted);
            return promoted;
        }
        let mm = self.vmas[vma].mm;
        let gfp = self.thp_gfp_mask(vma);
        let Some(folio) = self.alloc_folio(ctx, gfp, order) else {
            return false;
        };
        let memcg = self.mm_memcg(mm);
        if !self.mem_cgroup_charge(ctx, folio, memcg, gfp) {
            self.free_unused_folio(ctx, folio);
            return false;
        }
        let first = self.pt.shape.index(0, haddr);
        // The allocation and the charge may have reclaimed: the block must
        // still qualify (no page swapped out meanwhile).
        if !matches!(
            self.block_use(ctx, table, first, 1 << order, order),
            BlockUse::Populated(Some(_))
        ) {
            self.mem_cgroup_uncharge(ctx, memcg, folio.nr_pages());
            self.free_unused_folio(ctx, folio);
            return false;
        }
        self.collapse_copy(ctx, mm, table, first, 1usize << order, folio);
        let nr = folio.nr_pages();
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(nr as u32);
        self.add_new_anon_rmap(ctx, folio, vma, haddr, false);
        let flags = Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vma);
        for k in 0..nr as usize {
            self.pt.set(table, first + k, Pte::leaf(folio.pfn.0 + k as u64, flags));
        }
        self.work.promotions += 1;
        true
    }
}
