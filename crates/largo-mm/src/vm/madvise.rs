//! madvise (mm/madvise.c, mm/huge_memory.c `madvise_free_huge_pmd`).

use super::lru::FolioRef;
use super::pgtable::Pte;
use super::types::{Advice, Pid, VmError, VmFlags, VmaBacking, VmaId};
use super::{Ctx, Vm};
use crate::memmap::PageFlags;

/// The VMA flags MADV_HUGEPAGE or MADV_NOHUGEPAGE sets and clears.
fn hugepage_flags(advice: Advice) -> (VmFlags, VmFlags) {
    if advice == Advice::HugePage {
        (VmFlags::HUGEPAGE, VmFlags::NOHUGEPAGE)
    } else {
        (VmFlags::NOHUGEPAGE, VmFlags::HUGEPAGE)
    }
}

impl Vm {
    /// `madvise(addr, len, advice)`. Unmapped holes in the range give
    /// ENOMEM after the mapped parts are processed, as in the kernel.
    pub fn madvise(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, len: u64, advice: Advice) -> Result<(), VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        if addr & (self.page_size() - 1) != 0 {
            return Err(VmError::Invalid("madvise needs a page-aligned address"));
        }
        let len = (len + self.page_size() - 1) & !(self.page_size() - 1);
        let end = addr.checked_add(len).ok_or(VmError::Invalid("range overflows"))?;
        if len == 0 {
            return Ok(());
        }
        let mut covered = addr;
        let mut hole = false;
        let ids = match advice {
            Advice::HugePage | Advice::NoHugePage => {
                let (set, clear) = hugepage_flags(advice);
                self.isolate_changing(ctx, mm, addr, end, |v| (v.flags - clear) | set != v.flags)
            }
            _ => self.mms[mm].vmas_in(addr, end, &self.vmas),
        };
        for &id in &ids {
            let (s, e) = (self.vmas[id].start.max(addr), self.vmas[id].end.min(end));
            hole |= s > covered;
            covered = e;
            match advice {
                // madvise_free_single_vma: anonymous memory only; the walk
                // stops at the first other VMA.
                Advice::Free if !self.vmas[id].is_anonymous() => {
                    return Err(VmError::Invalid("MADV_FREE of a non-anonymous mapping"))
                }
                Advice::DontNeed => {
                    self.zap_range(ctx, id, s, e);
                    self.reclaim_empty_pte_tables(ctx, id, s, e);
                }
                Advice::Free => self.madvise_free(ctx, id, s, e),
                Advice::HugePage | Advice::NoHugePage => {
                    let (set, clear) = hugepage_flags(advice);
                    self.set_hugepage_flags(id, set, clear);
                }
                // madvise_walk_vmas returns the first VMA's error at once.
                Advice::Collapse => self.madvise_collapse(ctx, id, s, e)?,
                Advice::Cold => self.madvise_cold_or_pageout(ctx, id, s, e, false),
                Advice::PageOut => self.madvise_cold_or_pageout(ctx, id, s, e, true),
                Advice::Remove => self.madvise_remove(ctx, id, s, e)?,
            }
        }
        if matches!(advice, Advice::HugePage | Advice::NoHugePage) {
            self.merge_all(&ids);
        }
        if advice == Advice::HugePage {
            // hugepage_madvise -> khugepaged_enter_vma.
            for id in ids {
                if self.vmas.contains(id) {
                    self.khugepaged_enter_vma(id);
                }
            }
        }
        if hole || covered < end {
            return Err(VmError::NoMem("range not fully mapped"));
        }
        Ok(())
    }

    /// `madvise_remove` of `[start, end)` inside `vma`: a hole punched in
    /// the shmem file a shared, writable-at-will mapping maps
    /// (`vfs_fallocate` with `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`
    /// at the range's file offset); EINVAL for a locked or fileless
    /// mapping (private anonymous memory), EACCES for a private one or
    /// one that may not be written (`vma_is_shared_maywrite`). Every
    /// mapping of the punched pages is zapped, in every process.
    fn madvise_remove(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64) -> Result<(), VmError> {
        let v = &self.vmas[vma];
        if v.flags.contains(VmFlags::LOCKED) {
            return Err(VmError::Invalid("MADV_REMOVE of a locked mapping"));
        }
        if matches!(v.backing, VmaBacking::Anon | VmaBacking::Special) {
            return Err(VmError::Invalid("MADV_REMOVE of a mapping without a file"));
        }
        if !v.flags.contains(VmFlags::SHARED | VmFlags::MAYWRITE) {
            return Err(VmError::Access("MADV_REMOVE of a private or read-only-opened mapping"));
        }
        // Another file's page cache is not modelled: its punch changes nothing here.
        let Some(inode) = v.shmem else {
            return Ok(());
        };
        let offset = (start - v.start) + (v.pgoff << self.page_shift());
        let mm = v.mm;
        self.shmem_punch_hole(ctx, mm, inode, offset, end - start)
    }

    /// `hugepage_madvise`: set one of VM_HUGEPAGE/VM_NOHUGEPAGE, clear the
    /// other (the caller merges afterwards).
    fn set_hugepage_flags(&mut self, id: VmaId, set: VmFlags, clear: VmFlags) {
        let v = &mut self.vmas[id];
        v.flags = (v.flags - clear) | set;
    }

    /// `madvise_free_single_vma`: exclusive anonymous folios wholly in the
    /// range become lazyfree; a large folio only partly covered is split
    /// first (skipped if it may be shared).
    fn madvise_free(&mut self, ctx: &mut Ctx, vma: VmaId, start: u64, end: u64) {
        self.lru_add_drain(ctx);
        let mm = self.vmas[vma].mm;
        let mut addr = start;
        while addr < end {
            let next = self.pmd_addr_end(addr, end);
            let Some(pmd) = self.pmd_slot(mm, addr) else {
                addr = next;
                continue;
            };
            let entry = self.pt.entry(pmd);
            if entry.present() && entry.is_huge() && !entry.is_special() {
                let key = self.folio_key(ctx.pa, entry.pfn());
                if self.folios[key].maybe_mapped_shared {
                    addr = next;
                    continue;
                }
                if next - addr == self.pmd_size() {
                    self.pt.set_slot(pmd, entry.without(Pte::DIRTY | Pte::YOUNG));
                    self.folio_mark_lazyfree(ctx, key);
                    addr = next;
                    continue;
                }
                self.split_anon_folio(ctx, key);
            }
            let entry = self.pt.entry(pmd);
            if entry.is_table() {
                self.madvise_free_ptes(ctx, mm, entry.table_idx(), addr, next);
            }
            addr = next;
        }
    }

    /// `madvise_free_pte_range` within one PTE table.
    fn madvise_free_ptes(&mut self, ctx: &mut Ctx, mm: usize, table: usize, start: u64, end: u64) {
        let shift = self.page_shift();
        let first = self.pt.shape.index(0, start);
        let last = first + ((end - start) >> shift) as usize;
        let mut i = first;
        while i < last {
            let pte = self.pt.get(table, i);
            if pte.is_swap() {
                // Swapped-out data is dropped now.
                let nr = self.swap_pte_batch(table, i, last, pte);
                for j in i..i + nr {
                    self.pt.set(table, j, Pte::NONE);
                }
                self.mms[mm].swap_ents -= nr as u64;
                self.free_swap_and_cache_nr(ctx, pte.swap_entry(), nr as u64);
                i += nr;
                continue;
            }
            if !pte.present() || pte.is_special() {
                i += 1;
                continue;
            }
            let pfn = pte.pfn();
            let key = self.folio_key_of_pfn(ctx.pa, pfn).expect("mapped anonymous page");
            let (folio_pfn, nr_pages, large) = {
                let m = &self.folios[key];
                (m.pfn, m.nr_pages(), m.is_large())
            };
            if large {
                let nr = self.pt.folio_pte_batch(table, i, last, pfn, folio_pfn + nr_pages);
                if (nr as u64) < nr_pages {
                    if self.folios[key].maybe_mapped_shared || !self.split_anon_folio(ctx, key) {
                        i += nr;
                    }
                    continue;
                }
                if self.folios[key].maybe_mapped_shared {
                    i += nr;
                    continue;
                }
                for j in i..i + nr {
                    let e = self.pt.get(table, j);
                    self.pt.set(table, j, e.without(Pte::DIRTY | Pte::YOUNG));
                }
                self.folio_mark_lazyfree(ctx, key);
                i += nr;
                continue;
            }
            if ctx.pa.memmap.page(pfn).mapcount() > 1 {
                i += 1;
                continue;
            }
            self.pt.set(table, i, pte.without(Pte::DIRTY | Pte::YOUNG));
            self.folio_mark_lazyfree(ctx, key);
            i += 1;
        }
    }

    /// The end of `madvise_free_pte_range` for one folio: its swap slot
    /// and dirty flag go, then `folio_mark_lazyfree` queues it in the
    /// cpu's `lru_lazyfree` batch ([`Vm::folio_mark_lazyfree_batch`]), whose
    /// move clears PG_swapbacked and puts it on the inactive file list.
    fn folio_mark_lazyfree(&mut self, ctx: &mut Ctx, key: usize) {
        let pfn = self.folios[key].pfn;
        if self.folios[key].swap.is_some() && !self.folio_free_swap(ctx, key) {
            return;
        }
        ctx.pa.memmap.page_mut(pfn).remove_flags(PageFlags::DIRTY);
        if !ctx.pa.memmap.page(pfn).flags().contains(PageFlags::SWAPBACKED) {
            return;
        }
        self.folio_mark_lazyfree_batch(ctx.pa, ctx.cpu, FolioRef::Anon(key));
    }
}
