//! The PMD paths (mm/huge_memory.c, v6.18): THP faults, the huge zero
//! page, write faults on PMD mappings, PMD splits and zaps.

use largo_types::Pfn;

use super::fault::{Fault, VmFault};
use super::pgtable::{Pte, Slot};
use super::stats::MthpStat;
use super::types::{MmId, VmaId};
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::{Gfp, GFP_TRANSHUGE};
use crate::stats::VmEvent;

impl Vm {
    /// `do_huge_pmd_anonymous_page`: a read maps the huge zero page (with
    /// `use_zero_page`), a write maps a new PMD-sized folio.
    pub(crate) fn do_huge_pmd_anonymous_page(&mut self, ctx: &mut Ctx, vmf: &VmFault, pmd: Slot) -> Fault {
        let haddr = vmf.address & !(self.pmd_size() - 1);
        if !self.suitable_order(vmf.vma, haddr, self.pmd_order()) {
            return Fault::Fallback;
        }
        self.anon_vma_prepare(vmf.vma);
        self.khugepaged_enter_vma(vmf.vma);
        if !vmf.write && self.thp.use_zero_page {
            let Some(pgtable) = self.alloc_table(ctx, vmf.mm, 0) else {
                return Fault::Oom;
            };
            let Some(zero) = self.mm_get_huge_zero_folio(ctx, vmf.mm) else {
                self.free_table(ctx, vmf.mm, pgtable);
                ctx.pa.events.count(VmEvent::ThpFaultFallback, 1);
                return Fault::Fallback;
            };
            self.deposits.insert(pmd, pgtable);
            self.pt
                .set_slot(pmd, Pte::leaf(zero.pfn.0, Pte::HUGE | Pte::SPECIAL | Pte::YOUNG));
            return Fault::Done;
        }
        let Some(folio) = self.vma_alloc_anon_folio_pmd(ctx, vmf.vma) else {
            return Fault::Fallback;
        };
        let Some(pgtable) = self.alloc_table(ctx, vmf.mm, 0) else {
            let memcg = self.mm_memcg(vmf.mm);
            self.mem_cgroup_uncharge(ctx, memcg, folio.nr_pages());
            self.free_unused_folio(ctx, folio);
            return Fault::Oom;
        };
        self.deposits.insert(pmd, pgtable);
        self.map_anon_folio_pmd(ctx, folio, vmf, pmd);
        self.policy_mapped(ctx, vmf.vma, vmf.address, folio.order);
        Fault::Done
    }

    /// `vma_alloc_anon_folio_pmd`: a PMD-sized folio charged to the mm's
    /// memcg and zeroed, or the fallback counters (`_charge` ones too when
    /// the charge failed).
    fn vma_alloc_anon_folio_pmd(&mut self, ctx: &mut Ctx, vma: VmaId) -> Option<Folio> {
        let gfp = self.thp_gfp_mask(vma);
        let order = self.pmd_order();
        let Some(folio) = self.alloc_folio(ctx, gfp, order) else {
            ctx.pa.events.count(VmEvent::ThpFaultFallback, 1);
            self.mthp.add(order, MthpStat::AnonFaultFallback, 1);
            return None;
        };
        let memcg = self.mm_memcg(self.vmas[vma].mm);
        if !self.mem_cgroup_charge(ctx, folio, memcg, gfp) {
            self.free_unused_folio(ctx, folio);
            ctx.pa.events.count(VmEvent::ThpFaultFallback, 1);
            ctx.pa.events.count(VmEvent::ThpFaultFallbackCharge, 1);
            self.mthp.add(order, MthpStat::AnonFaultFallback, 1);
            self.mthp.add(order, MthpStat::AnonFaultFallbackCharge, 1);
            return None;
        }
        self.zero_folio(ctx, folio);
        Some(folio)
    }

    /// `map_anon_folio_pmd`: install a new PMD mapping and count the THP fault.
    fn map_anon_folio_pmd(&mut self, ctx: &mut Ctx, folio: Folio, vmf: &VmFault, pmd: Slot) {
        let haddr = vmf.address & !(self.pmd_size() - 1);
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(1);
        let key = self.add_new_anon_rmap(ctx, folio, vmf.vma, haddr, true);
        let flags = Pte::HUGE | Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vmf.vma);
        self.pt.set_slot(pmd, Pte::leaf(folio.pfn.0, flags));
        self.deferred_split_folio(ctx.pa, key, false);
        self.mms[vmf.mm].rss_anon += folio.nr_pages();
        ctx.pa.events.count(VmEvent::ThpFaultAlloc, 1);
        self.mthp.add(folio.order, MthpStat::AnonFaultAlloc, 1);
    }

    /// `mm_get_huge_zero_folio`: the mm's reference on the huge zero
    /// folio, allocating it on first use.
    pub(crate) fn mm_get_huge_zero_folio(&mut self, ctx: &mut Ctx, mm: MmId) -> Option<Folio> {
        if self.mms[mm].huge_zero_ref {
            return self.huge_zero.folio;
        }
        if self.huge_zero.folio.is_none() {
            let gfp = (GFP_TRANSHUGE | Gfp::ZERO).difference(Gfp::MOVABLE);
            match self.alloc_folio(ctx, gfp, self.pmd_order()) {
                Some(f) => {
                    ctx.pa.events.count(VmEvent::ThpZeroPageAlloc, 1);
                    self.huge_zero.folio = Some(f);
                }
                None => {
                    ctx.pa.events.count(VmEvent::ThpZeroPageAllocFailed, 1);
                    return None;
                }
            }
        }
        self.mms[mm].huge_zero_ref = true;
        self.huge_zero.mm_refs += 1;
        self.huge_zero.folio
    }

    /// `do_huge_pmd_wp_page`: a write to a read-only PMD. The huge zero
    /// page is replaced by a new THP (v6.13+ `do_huge_zero_wp_pmd`); an
    /// exclusive folio is reused; otherwise the PMD is split and the write
    /// handled at the PTE level.
    pub(crate) fn do_huge_pmd_wp_page(&mut self, ctx: &mut Ctx, vmf: &VmFault, pmd: Slot) -> Fault {
        let entry = self.pt.entry(pmd);
        if entry.is_special() {
            if let Some(folio) = self.vma_alloc_anon_folio_pmd(ctx, vmf.vma) {
                self.pt.set_slot(pmd, Pte::NONE);
                self.map_anon_folio_pmd(ctx, folio, vmf, pmd);
                return Fault::Done;
            }
            self.split_huge_pmd(ctx, vmf.mm, pmd);
            return Fault::Fallback;
        }
        let head = entry.pfn();
        let key = self.folio_key(ctx.pa, head);
        let mut reuse = ctx.pa.memmap.page(head).flags().contains(PageFlags::ANON_EXCLUSIVE);
        if !reuse && self.folio_refcount(ctx.pa, key) == 1 {
            self.folio_move_anon_rmap(key, vmf.vma);
            ctx.pa.memmap.page_mut(head).insert_flags(PageFlags::ANON_EXCLUSIVE);
            reuse = true;
        }
        if reuse {
            let flags = Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vmf.vma);
            self.pt.set_slot(pmd, entry.with(flags));
            return Fault::Done;
        }
        self.split_huge_pmd(ctx, vmf.mm, pmd);
        Fault::Fallback
    }

    /// `__split_huge_pmd_locked`: a PMD mapping becomes a PTE table (the
    /// deposited one) mapping the same pages; the folio stays whole.
    pub(crate) fn split_huge_pmd(&mut self, ctx: &mut Ctx, mm: MmId, pmd: Slot) {
        ctx.pa.events.count(VmEvent::ThpSplitPmd, 1);
        let entry = self.pt.entry(pmd);
        if !entry.is_special() && self.shmem_key_of_pfn(ctx.pa, entry.pfn()).is_some() {
            // A file PMD is not remapped by PTEs: it goes, and its pages
            // refault.
            return self.zap_shmem_pmd(ctx, mm, pmd, super::shmem::rmap::ShmemUnmap::Split);
        }
        let pgtable = self
            .deposits
            .remove(&pmd)
            .unwrap_or_else(|| unreachable!("PMD mapping without a deposited page table"));
        let nr = 1u64 << self.pmd_order();
        if entry.is_special() {
            for i in 0..nr as usize {
                self.pt
                    .set(pgtable, i, Pte::leaf(self.zero_pfn, Pte::SPECIAL | Pte::YOUNG));
            }
            self.pt.set_slot(pmd, Pte::table(pgtable));
            return;
        }
        let head = entry.pfn();
        let key = self.folio_key(ctx.pa, head);
        let exclusive = ctx.pa.memmap.page(head).flags().contains(PageFlags::ANON_EXCLUSIVE);
        let flags = entry.0 & (Pte::WRITE | Pte::DIRTY | Pte::YOUNG);
        for i in 0..nr {
            self.pt.set(pgtable, i as usize, Pte::leaf(head + i, flags));
        }
        self.pt.set_slot(pmd, Pte::table(pgtable));
        self.folio_ref_add(ctx.pa, key, nr as u32 - 1);
        self.add_rmap_ptes(ctx.pa, key, head, nr, mm, exclusive);
        self.remove_rmap_pmd(ctx.pa, key, mm);
        if !exclusive {
            ctx.pa.memmap.page_mut(head).remove_flags(PageFlags::ANON_EXCLUSIVE);
        }
    }

    /// `split_huge_pmd_address`: split the PMD mapping covering `addr`
    /// if `addr` falls inside it.
    pub(crate) fn split_huge_pmd_address(&mut self, ctx: &mut Ctx, mm: MmId, addr: u64) {
        if addr & (self.pmd_size() - 1) == 0 {
            return;
        }
        if let Some(pmd) = self.pmd_slot(mm, addr) {
            let entry = self.pt.entry(pmd);
            if entry.present() && entry.is_huge() {
                self.split_huge_pmd(ctx, mm, pmd);
            }
        }
    }

    /// `zap_huge_pmd`: the whole PMD mapping goes; its deposited table is freed.
    pub(crate) fn zap_huge_pmd(&mut self, ctx: &mut Ctx, mm: MmId, pmd: Slot) {
        let entry = self.pt.entry(pmd);
        self.pt.set_slot(pmd, Pte::NONE);
        if let Some(pgtable) = self.deposits.remove(&pmd) {
            self.free_table(ctx, mm, pgtable);
        }
        if entry.is_special() {
            return;
        }
        let key = self.folio_key(ctx.pa, entry.pfn());
        self.remove_rmap_pmd(ctx.pa, key, mm);
        self.mms[mm].rss_anon -= 1 << self.pmd_order();
        self.folio_put_refs(ctx, key, 1);
    }

    /// The huge zero folio's shrinker ("thp-zero"): frees it once no mm
    /// holds a reference. Returns pages freed.
    pub(crate) fn shrink_huge_zero_page(&mut self, ctx: &mut Ctx) -> u64 {
        match self.huge_zero.folio {
            Some(f) if self.huge_zero.mm_refs == 0 => {
                self.huge_zero.folio = None;
                ctx.pa
                    .free_folio(ctx.cpu, f)
                    .unwrap_or_else(|e| unreachable!("huge zero folio not freeable: {e}"));
                f.nr_pages()
            }
            _ => 0,
        }
    }

    /// `mm_put_huge_zero_folio` at exit.
    pub(crate) fn mm_put_huge_zero_folio(&mut self, mm: MmId) {
        if std::mem::take(&mut self.mms[mm].huge_zero_ref) {
            self.huge_zero.mm_refs -= 1;
        }
    }

    /// The pfn of the huge zero folio, if allocated.
    pub(crate) fn huge_zero_pfn(&self) -> Option<Pfn> {
        self.huge_zero.folio.map(|f| f.pfn)
    }
}
