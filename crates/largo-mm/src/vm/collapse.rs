//! Collapsing a PMD range of anonymous memory into one PMD-mapped folio
//! (mm/khugepaged.c, v6.18: `hpage_collapse_scan_pmd`,
//! `collapse_huge_page`), for MADV_COLLAPSE (`madvise_collapse`, here)
//! and for khugepaged (`khugepaged.rs`): the present pages are copied and
//! the empty or zero-page entries zeroed.
//!
//! MADV_COLLAPSE ignores the sysfs settings, `max_ptes_none`,
//! `max_ptes_shared` and the referenced test; what stops it is a VMA never
//! faulted (no anon_vma: `thp_vma_allowable_order` allows nothing), a
//! range without a page table, with a page pinned by more references than
//! mappings, or a failed PMD-folio allocation. Since 6.18 a range with no
//! writable entry (read-only, or only zero pages) collapses too: the
//! `SCAN_PAGE_RO` test is gone from the scan and the isolation.
//! khugepaged also needs at most `max_ptes_none` empty or zero entries,
//! at most `max_ptes_shared` pages that may be mapped by another process,
//! and at least one young entry.

use super::pgtable::{Pte, Slot};
use super::types::{VmError, VmaId};
use super::{Ctx, Vm};
use crate::memmap::PageFlags;
use crate::page_alloc::gfp::{GFP_TRANSHUGE, GFP_TRANSHUGE_LIGHT};
use crate::stats::VmEvent;

/// The outcome of one PMD range (a subset of the kernel's `scan_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    Succeed,
    /// Already mapped by a PMD (a THP or the huge zero page).
    PmdMapped,
    /// No page table below the PUD.
    PmdNull,
    /// A PMD entry that is none.
    PmdNone,
    /// A page with references beyond its mappings.
    PageCount,
    AllocFail,
    /// The new folio's memcg charge failed.
    CgroupChargeFail,
    /// A page is not on an LRU list (still in a cpu's batch).
    PageLru,
    /// A swap-in of the range failed.
    Fail,
    /// khugepaged: more swap entries than `max_ptes_swap`.
    ExceedSwapPte,
    /// khugepaged: more empty or zero entries than `max_ptes_none`.
    ExceedNonePte,
    /// khugepaged: more maybe-shared pages than `max_ptes_shared`.
    ExceedSharedPte,
    /// khugepaged: no young entry.
    LackReferencedPage,
    /// An entry that is neither present nor none at isolation (reclaim,
    /// run by the allocations, unmapped a page after the scan).
    PteNonPresent,
}

/// Who collapses (`struct collapse_control`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collapser {
    Madvise,
    Khugepaged,
}

impl Scan {
    /// `madvise_collapse`: results after which the next range is tried.
    fn continues(self) -> bool {
        matches!(
            self,
            Scan::Succeed
                | Scan::PmdMapped
                | Scan::PmdNull
                | Scan::PteNonPresent
                | Scan::PageCount
                | Scan::PageLru
                | Scan::LackReferencedPage
        )
    }

    /// `madvise_collapse_errno`.
    fn error(self) -> VmError {
        match self {
            Scan::AllocFail => VmError::NoMem("MADV_COLLAPSE: no PMD-sized folio"),
            Scan::CgroupChargeFail => VmError::Busy("MADV_COLLAPSE: the memcg charge of the new folio failed"),
            Scan::PageCount => VmError::Again("MADV_COLLAPSE: a page is pinned"),
            Scan::PageLru => VmError::Again("MADV_COLLAPSE: a page is off the LRU"),
            _ => VmError::Invalid("MADV_COLLAPSE: a range cannot be collapsed"),
        }
    }
}

impl Vm {
    /// `madvise_collapse` on `[start, end)` of one VMA: every PMD-aligned
    /// range inside it collapsed or already PMD-mapped is success; a piece
    /// with no PMD-aligned range and no PMD boundary in it (its start and
    /// end included) is `EINVAL`.
    pub(crate) fn madvise_collapse(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64) -> Result<(), VmError> {
        let pmd_size = self.pmd_size();
        // thp_vma_allowable_order outside a fault: the VMA must hold a
        // whole PMD block ending at or before its end.
        let v = &self.vmas[vma];
        let fits = v.end - v.start >= pmd_size && self.suitable_order(vma, v.end - pmd_size, self.pmd_order());
        if !v.is_anonymous() || v.anon_vma.is_none() || self.thp_disabled(vma) || !fits {
            return Err(VmError::Invalid("MADV_COLLAPSE: THPs are not allowed here"));
        }
        self.lru_add_drain_all(ctx.pa);
        let hstart = (start + pmd_size - 1) & !(pmd_size - 1);
        let hend = end & !(pmd_size - 1);
        let (mut thps, mut last_fail) = (0u64, None);
        let mut addr = hstart;
        while addr < hend {
            let result = self.collapse_scan_pmd(ctx, vma, addr, Collapser::Madvise);
            match result {
                Scan::Succeed | Scan::PmdMapped => thps += 1,
                r => last_fail = Some(r),
            }
            if !result.continues() {
                break;
            }
            addr += pmd_size;
        }
        // The kernel compares the count with `(hend - hstart) >> PMD_SHIFT`
        // in unsigned arithmetic: for a piece of a VMA that holds no whole
        // PMD block and no block boundary, its ends included (hstart past
        // hend), that wraps, so the call fails with `EINVAL` and the
        // madvise stops there, before the VMAs after it (host: 6.18).
        let wanted = hend.wrapping_sub(hstart) / pmd_size;
        match last_fail {
            _ if thps == wanted => Ok(()),
            Some(r) => Err(r.error()),
            None => Err(VmError::Invalid("MADV_COLLAPSE: a range cannot be collapsed")),
        }
    }

    /// `hpage_collapse_scan_pmd`, then `collapse_huge_page` if the range
    /// qualifies.
    pub(crate) fn collapse_scan_pmd(&mut self, ctx: &mut Ctx, vma: VmaId, haddr: u64, cc: Collapser) -> Scan {
        let mm = self.vmas[vma].mm;
        if !self.suitable_order(vma, haddr, self.pmd_order()) {
            return Scan::PmdNull;
        }
        let Some(pmd) = self.pmd_slot(mm, haddr) else {
            return Scan::PmdNull;
        };
        let entry = self.pt.entry(pmd);
        if entry.is_none() {
            return Scan::PmdNone;
        }
        if entry.present() && entry.is_huge() {
            return Scan::PmdMapped;
        }
        let table = entry.table_idx();
        let unmapped = match self.scan_ptes(ctx, table, haddr, cc) {
            Ok(unmapped) => unmapped,
            Err(result) => return result,
        };
        self.collapse_huge_page(ctx, vma, pmd, haddr, cc, unmapped)
    }

    /// The PTE walk of `hpage_collapse_scan_pmd`: the number of swap
    /// entries in a range that qualifies, else why it does not.
    fn scan_ptes(&self, ctx: &mut Ctx, table: usize, haddr: u64, cc: Collapser) -> Result<u32, Scan> {
        let khugepaged = cc == Collapser::Khugepaged;
        let knobs = (self.thp.max_ptes_none, self.thp.khugepaged.max_ptes_shared);
        let first = self.pt.shape.index(0, haddr);
        let nr = 1usize << self.pmd_order();
        let (mut none_or_zero, mut shared, mut referenced) = (0u32, 0u32, 0u32);
        let mut unmapped = 0u32;
        for i in first..first + nr {
            let pte = self.pt.get(table, i);
            if pte.is_swap() {
                unmapped += 1;
                if khugepaged && unmapped > self.thp.khugepaged.max_ptes_swap {
                    ctx.pa.events.count(VmEvent::ThpScanExceedSwapPte, 1);
                    return Err(Scan::ExceedSwapPte);
                }
                continue;
            }
            if pte.is_none() || pte.is_special() {
                none_or_zero += 1;
                if khugepaged && none_or_zero > knobs.0 {
                    ctx.pa.events.count(VmEvent::ThpScanExceedNonePte, 1);
                    return Err(Scan::ExceedNonePte);
                }
                continue;
            }
            let key = self.folio_key_of_pfn(ctx.pa, pte.pfn()).expect("mapped anonymous page");
            if self.folio_maybe_mapped_shared(ctx.pa, key) {
                shared += 1;
                if khugepaged && shared > knobs.1 {
                    ctx.pa.events.count(VmEvent::ThpScanExceedSharePte, 1);
                    return Err(Scan::ExceedSharedPte);
                }
            }
            if self.folios[key].lru.list.is_none() {
                return Err(Scan::PageLru);
            }
            if self.folio_has_extra_refs(ctx.pa, key) {
                return Err(Scan::PageCount);
            }
            referenced += u32::from(pte.has(Pte::YOUNG) || self.folios[key].lru.referenced);
        }
        let half = 1u32 << (self.pmd_order() - 1);
        if khugepaged && (referenced == 0 || (unmapped > 0 && referenced < half)) {
            Err(Scan::LackReferencedPage)
        } else {
            Ok(unmapped)
        }
    }

    /// `__collapse_huge_page_swapin`: every swap entry of the range is
    /// faulted in (a read fault through `do_swap_page`, no `pgfault`).
    fn collapse_swapin(&mut self, ctx: &mut Ctx, vma: VmaId, table: usize, haddr: u64) -> Result<(), Scan> {
        let mm = self.vmas[vma].mm;
        let first = self.pt.shape.index(0, haddr);
        let mut swapped_in = 0;
        for i in 0..1usize << self.pmd_order() {
            let pte = self.pt.get(table, first + i);
            if !pte.is_swap() {
                continue;
            }
            let vmf = super::fault::VmFault {
                mm,
                vma,
                address: haddr + ((i as u64) << self.page_shift()),
                write: false,
                small_only: false,
            };
            let slot = Slot {
                table,
                index: first + i,
            };
            if self.do_swap_page(ctx, &vmf, slot, pte) != super::fault::Fault::Done {
                return Err(Scan::Fail);
            }
            swapped_in += 1;
        }
        if swapped_in > 0 {
            self.lru_add_drain(ctx);
        }
        Ok(())
    }

    /// The entry checks of `__collapse_huge_page_isolate`, the walk
    /// under the PMD lock after the allocation, the charge and the
    /// swap-ins, any of which may have reclaimed: every entry present,
    /// none or the zero page, and (khugepaged) no more of the latter than
    /// `max_ptes_none`; (khugepaged) one page still referenced (reclaim's `folio_referenced` clears young bits).
    /// The folio checks the scan made still hold: reclaim puts back what
    /// it isolated.
    fn collapse_isolate_ptes(&self, ctx: &mut Ctx, table: usize, haddr: u64, cc: Collapser) -> Result<(), Scan> {
        let khugepaged = cc == Collapser::Khugepaged;
        let first = self.pt.shape.index(0, haddr);
        let (mut none_or_zero, mut referenced) = (0u32, 0u32);
        for i in first..first + (1usize << self.pmd_order()) {
            let pte = self.pt.get(table, i);
            if pte.is_none() || pte.is_special() {
                none_or_zero += 1;
                if khugepaged && none_or_zero > self.thp.max_ptes_none {
                    ctx.pa.events.count(VmEvent::ThpScanExceedNonePte, 1);
                    return Err(Scan::ExceedNonePte);
                }
                continue;
            }
            if !pte.present() {
                return Err(Scan::PteNonPresent);
            }
            if khugepaged {
                let key = self.folio_key_of_pfn(ctx.pa, pte.pfn()).expect("mapped anonymous page");
                referenced += u32::from(pte.has(Pte::YOUNG) || self.folios[key].lru.referenced);
            }
        }
        if khugepaged && referenced == 0 {
            Err(Scan::LackReferencedPage)
        } else {
            Ok(())
        }
    }

    /// `folio_maybe_mapped_shared`.
    fn folio_maybe_mapped_shared(&self, pa: &crate::page_alloc::PageAlloc, key: usize) -> bool {
        let meta = &self.folios[key];
        if meta.is_large() {
            meta.maybe_mapped_shared
        } else {
            pa.memmap.page(meta.pfn).mapcount() > 1
        }
    }

    /// `collapse_huge_page` of the PTE table under `pmd` (whose scan
    /// found `unmapped` swap entries): a PMD-sized folio (GFP_TRANSHUGE
    /// for MADV_COLLAPSE and khugepaged's `defrag`, else
    /// GFP_TRANSHUGE_LIGHT), each page copied from the one its entry maps
    /// or zeroed, the old pages unmapped and released, the PTE table
    /// deposited under the new PMD mapping.
    fn collapse_huge_page(
        &mut self,
        ctx: &mut Ctx,
        vma: VmaId,
        pmd: Slot,
        haddr: u64,
        cc: Collapser,
        unmapped: u32,
    ) -> Scan {
        let mm = self.vmas[vma].mm;
        let table = self.pt.entry(pmd).table_idx();
        let gfp = match cc {
            Collapser::Khugepaged if !self.thp.khugepaged.defrag => GFP_TRANSHUGE_LIGHT,
            _ => GFP_TRANSHUGE,
        };
        let Some(folio) = self.alloc_folio(ctx, gfp, self.pmd_order()) else {
            ctx.pa.events.count(VmEvent::ThpCollapseAllocFailed, 1);
            return Scan::AllocFail;
        };
        ctx.pa.events.count(VmEvent::ThpCollapseAlloc, 1);
        let memcg = self.mm_memcg(mm);
        if !self.mem_cgroup_charge(ctx, folio, memcg, gfp) {
            self.free_unused_folio(ctx, folio);
            return Scan::CgroupChargeFail;
        }
        self.anon_vma_prepare(vma);
        // Only a range the scan found swap entries in is swapped in; a
        // page reclaim took since fails the isolation below.
        let swapped_in = if unmapped > 0 {
            self.collapse_swapin(ctx, vma, table, haddr)
        } else {
            Ok(())
        };
        let isolated = swapped_in.and_then(|()| self.collapse_isolate_ptes(ctx, table, haddr, cc));
        if let Err(result) = isolated {
            self.mem_cgroup_uncharge(ctx, memcg, folio.nr_pages());
            self.free_unused_folio(ctx, folio);
            return result;
        }
        let first = self.pt.shape.index(0, haddr);
        self.collapse_copy(ctx, mm, table, first, 1usize << self.pmd_order(), folio);
        self.deposits.insert(pmd, table);
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(1);
        // map_anon_folio_pmd_nopf: mapped and queued for the underused
        // shrinker, as a PMD fault's folio is.
        let key = self.add_new_anon_rmap(ctx, folio, vma, haddr, true);
        let flags = Pte::HUGE | Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vma);
        self.pt.set_slot(pmd, Pte::leaf(folio.pfn.0, flags));
        self.deferred_split_folio(ctx.pa, key, false);
        Scan::Succeed
    }

    /// The copy of a collapse (`__collapse_huge_page_copy`) into `folio`:
    /// entries `[first, first + nr_entries)` of PTE table `table` (of mm
    /// `mm`) each copied from the page they map or, if none or the zero
    /// page, zeroed; the old folios unmapped batch by batch and released.
    pub(crate) fn collapse_copy(
        &mut self,
        ctx: &mut Ctx,
        mm: super::types::MmId,
        table: usize,
        first: usize,
        nr_entries: usize,
        folio: crate::Folio,
    ) {
        let limit = first + nr_entries;
        let mut i = first;
        while i < limit {
            let pte = self.pt.get(table, i);
            let dst = |j: usize| largo_types::Pfn(folio.pfn.0 + (j - first) as u64);
            if pte.is_none() || pte.is_special() {
                self.work.pages_zeroed += 1;
                ctx.backing
                    .zero(dst(i), 1)
                    .unwrap_or_else(|e| unreachable!("a new folio outside the backing: {e}"));
                self.mms[mm].rss_anon += 1;
                if pte.is_special() {
                    self.pt.set(table, i, Pte::NONE);
                }
                i += 1;
                continue;
            }
            // __collapse_huge_page_copy_succeeded unmaps the entries of
            // one folio as a batch, so a large folio goes from fully
            // mapped to unmapped without being partially mapped (and
            // queued for a deferred split) in between.
            let (key, pfn, nr) = self.mapped_folio_batch(ctx, table, i, limit);
            for j in i..i + nr {
                let src = self.pt.get(table, j).pfn();
                self.work.pages_copied += 1;
                ctx.backing
                    .copy(largo_types::Pfn(src), dst(j), 1)
                    .unwrap_or_else(|e| unreachable!("a page copy outside the backing: {e}"));
                let written = ctx.pa.memmap.page(src).flags() & PageFlags::USER_WRITTEN;
                ctx.pa.memmap.page_mut(dst(j).0).insert_flags(written);
                self.pt.set(table, j, Pte::NONE);
            }
            self.remove_rmap_ptes(ctx.pa, key, pfn, nr as u64, mm);
            let cached = self.folios[key].swap.is_some();
            self.folio_put_refs(ctx, key, nr as u32);
            if cached && self.folios.contains(key) {
                // free_swap_cache: a source swapped in from the swap cache
                // gives its slots up once unmapped.
                self.free_swap_cache(ctx, key);
                if self.folio_refcount(ctx.pa, key) == 0 {
                    self.free_anon_folio(ctx, key);
                }
            }
            i += nr;
        }
    }
}
