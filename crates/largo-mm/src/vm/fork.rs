//! fork and exit (kernel/fork.c `dup_mmap`, mm/rmap.c `anon_vma_fork`,
//! mm/memory.c `copy_page_range`, mm/huge_memory.c `copy_huge_pmd`,
//! mm/mmap.c `exit_mmap`).

use super::pgtable::{Pte, Slot};
use super::types::{MmId, Pid, VmError, VmFlags, VmaId};
use super::vma::Vma;
use super::{Ctx, Vm};
use crate::memcg::SlabCache;

impl Vm {
    /// `fork`: a new process with a copy of `pid`'s address space. Private
    /// anonymous pages are shared copy-on-write: both sides' PTEs and PMDs
    /// are write-protected and the pages stop being exclusive. Shared
    /// (shmem) VMAs have no anon_vma, so their page tables are not copied
    /// (`vma_needs_copy`): the child faults the page cache in again. The
    /// child gets a copy of the descriptor table.
    ///
    /// A page-table charge the memcg refuses OOM-kills in the memcg. The
    /// kernel kills from the charge (`mem_cgroup_oom` calls
    /// `mem_cgroup_out_of_memory`) and retries the charge; the model kills
    /// once the failed fork has unwound and makes the whole fork again
    /// when the victim is another process (see
    /// [`Vm::retry_after_memcg_oom`]); when it is the parent's thread
    /// group, the fork fails and the parent is dead.
    pub fn fork(&mut self, ctx: &mut Ctx, pid: Pid) -> Result<Pid, VmError> {
        let tgid = self.task_mm(pid).map(|_| self.tasks[&pid].tgid)?;
        self.retry_after_memcg_oom(ctx, pid, Some(tgid), |vm, ctx| vm.dup_mm(ctx, pid))
    }

    /// Runs `op` (an operation outside a user fault that charges page
    /// tables: fork, exec, a new process) until it succeeds, or fails with
    /// no memcg OOM kill to follow, or the kill takes `own` thread group.
    /// Before a retry the queued RCU callbacks run: the kernel's charge
    /// retries reclaim up to `MAX_RECLAIM_RETRIES` times after a kill,
    /// time in which the victim's page tables (and those of the aborted
    /// attempt, which the kernel never made) pass their grace period. Each
    /// retry follows a kill, so the loop ends with the memcg's processes.
    pub(crate) fn retry_after_memcg_oom<T>(
        &mut self,
        ctx: &mut Ctx,
        trigger: Pid,
        own: Option<Pid>,
        mut op: impl FnMut(&mut Self, &mut Ctx) -> Result<T, VmError>,
    ) -> Result<T, VmError> {
        loop {
            self.memcg_oom_pending = None;
            let r = op(self, ctx);
            let pending = self.memcg_oom_pending.take();
            let Some(memcg) = pending.filter(|_| r.is_err()) else {
                return r;
            };
            match self.memcg_out_of_memory(ctx, memcg, trigger) {
                Some(victim) if Some(victim) != own => self.rcu_callbacks(ctx),
                _ => return r,
            }
        }
    }

    /// `dup_mm`: the child's mm, VMAs and page tables.
    fn dup_mm(&mut self, ctx: &mut Ctx, pid: Pid) -> Result<Pid, VmError> {
        let parent = self.task_mm(pid)?;
        let child = self.new_mm(ctx)?;
        {
            let (p, c) = (self.mms[parent].clone(), &mut self.mms[child]);
            c.mmap_base = p.mmap_base;
            c.start_brk = p.start_brk;
            c.brk = p.brk;
            c.thp_disable = p.thp_disable;
            c.memcg = p.memcg;
            c.files = p.files.clone();
        }
        let files = self.mms[child].files.clone();
        self.shmem_dup_fds(&files);
        let parent_vmas: Vec<VmaId> = self.mms[parent].vmas.values().copied().collect();
        for src in parent_vmas {
            let dst = self.dup_vma(src, child);
            if self.vmas[dst].flags.contains(VmFlags::ACCOUNT) {
                let pages = (self.vmas[dst].end - self.vmas[dst].start) >> self.page_shift();
                self.committed_pages += pages as i64;
                self.mms[child].committed_pages += pages;
            }
            if self.vmas[src].anon_vma.is_some() && !self.copy_page_range(ctx, src, dst) {
                self.exit_mmap(ctx, child);
                return Err(VmError::NoMem("fork ran out of memory copying page tables"));
            }
        }
        // khugepaged_fork: the child of a registered mm is registered.
        if self.mms[parent].khugepaged {
            self.khugepaged_enter(child);
        }
        let pid = self.new_task(child, None);
        self.run_pending_kswapd(ctx);
        Ok(pid)
    }

    /// The child's copy of a VMA, chained to the parent's anon_vmas with
    /// an anon_vma of its own (`anon_vma_fork`).
    fn dup_vma(&mut self, src: VmaId, child: MmId) -> VmaId {
        let s = self.vmas[src].clone();
        self.vma_layout_changed();
        let id = self.vmas.insert(Vma {
            mm: child,
            anon_vma: None,
            chain: Vec::new(),
            ..s.clone()
        });
        self.mms[child].vmas.insert(s.start, id);
        // dup_mmap runs in the parent: its memcg pays (the same here).
        self.slab_alloc(s.mm, SlabCache::VmArea, 1);
        if s.anon_vma.is_some() {
            let mut chain = s.chain.clone();
            for &av in &chain {
                self.anon_vmas[av].vmas.push(id);
            }
            // anon_vma_fork: the parent's chain cloned, then an anon_vma
            // of its own and its chain entry.
            self.slab_alloc(s.mm, SlabCache::AnonVmaChain, chain.len() + 1);
            let own = self.alloc_anon_vma(s.mm);
            self.anon_vmas[own].vmas.push(id);
            chain.push(own);
            let v = &mut self.vmas[id];
            v.anon_vma = Some(own);
            v.chain = chain;
        }
        id
    }

    /// `copy_page_range` for one VMA. Returns false when out of memory.
    fn copy_page_range(&mut self, ctx: &mut Ctx, src: VmaId, dst: VmaId) -> bool {
        let (src_mm, dst_mm, start, end) = {
            let (s, d) = (&self.vmas[src], &self.vmas[dst]);
            (s.mm, d.mm, s.start, s.end)
        };
        let mut addr = start;
        while addr < end {
            let next = self.pmd_addr_end(addr, end);
            if let Some(pmd) = self.pmd_slot(src_mm, addr) {
                let entry = self.pt.entry(pmd);
                if entry.present() && entry.is_huge() {
                    match self.copy_huge_pmd(ctx, dst_mm, pmd, addr) {
                        Some(true) => {}
                        Some(false) => return false,
                        // The PMD changed while allocating: copy what is there now.
                        None => continue,
                    }
                } else if entry.is_table() && !self.copy_ptes(ctx, dst, entry.table_idx(), addr, next) {
                    return false;
                }
            }
            addr = next;
        }
        true
    }

    /// `copy_huge_pmd`: `Some(false)` when out of memory, `None` when the
    /// source PMD stopped being a huge mapping while the tables were
    /// allocated (reclaim split or discarded it; the kernel rechecks under
    /// the lock and retries at the PTE level).
    fn copy_huge_pmd(&mut self, ctx: &mut Ctx, dst_mm: MmId, src: Slot, addr: u64) -> Option<bool> {
        let Some(table) = self.table_for(ctx, dst_mm, addr, 1) else {
            return Some(false);
        };
        let dst = Slot {
            table,
            index: src.index,
        };
        let Some(pgtable) = self.alloc_table(ctx, dst_mm, 0) else {
            return Some(false);
        };
        let pmd = self.pt.entry(src);
        if !(pmd.present() && pmd.is_huge()) {
            self.free_table(ctx, dst_mm, pgtable);
            return None;
        }
        if pmd.is_special() {
            if self.mm_get_huge_zero_folio(ctx, dst_mm).is_none() {
                self.free_table(ctx, dst_mm, pgtable);
                return Some(false);
            }
        } else {
            let key = self.folio_key(ctx.pa, pmd.pfn());
            self.folio_ref_add(ctx.pa, key, 1);
            self.dup_rmap_pmd(ctx.pa, key, dst_mm);
            self.mms[dst_mm].rss_anon += 1 << self.pmd_order();
        }
        self.deposits.insert(dst, pgtable);
        let ro = pmd.without(Pte::WRITE);
        self.pt.set_slot(src, ro);
        self.pt.set_slot(dst, ro.without(Pte::YOUNG));
        Some(true)
    }

    /// `copy_pte_range` / `copy_present_ptes`: one batch per folio.
    fn copy_ptes(&mut self, ctx: &mut Ctx, dst: VmaId, src_table: usize, start: u64, end: u64) -> bool {
        let dst_mm = self.vmas[dst].mm;
        let Some(dst_table) = self.table_for(ctx, dst_mm, start, 0) else {
            return false;
        };
        let shift = self.page_shift();
        let first = self.pt.shape.index(0, start);
        let last = first + ((end - start) >> shift) as usize;
        let mut i = first;
        while i < last {
            let pte = self.pt.get(src_table, i);
            if pte.is_swap() {
                // copy_nonpresent_pte: one more reference on the slot; the
                // entry stops being exclusive on both sides.
                self.swap
                    .swap_duplicate(pte.swap_entry())
                    .unwrap_or_else(|e| unreachable!("a swap PTE of a free slot: {e:?}"));
                let shared = pte.without(Pte::SWP_EXCLUSIVE);
                if pte.swp_exclusive() {
                    self.pt.set(src_table, i, shared);
                }
                self.pt.set(dst_table, i, shared);
                self.mms[dst_mm].swap_ents += 1;
                i += 1;
                continue;
            }
            if !pte.present() {
                i += 1;
                continue;
            }
            if pte.is_special() {
                self.pt.set(dst_table, i, pte.without(Pte::YOUNG));
                i += 1;
                continue;
            }
            let (key, pfn, nr) = self.mapped_folio_batch(ctx, src_table, i, last);
            self.folio_ref_add(ctx.pa, key, nr as u32);
            self.dup_rmap_ptes(ctx.pa, key, pfn, nr as u64, dst_mm);
            for j in i..i + nr {
                let e = self.pt.get(src_table, j).without(Pte::WRITE);
                self.pt.set(src_table, j, e);
                self.pt.set(dst_table, j, e.without(Pte::YOUNG));
            }
            self.mms[dst_mm].rss_anon += nr as u64;
            i += nr;
        }
        true
    }

    /// A task exits; the last user of an mm tears it down.
    pub fn exit(&mut self, ctx: &mut Ctx, pid: Pid) -> Result<(), VmError> {
        let mm = self.task_mm(pid)?;
        if let Some(t) = self.task_mut(pid) {
            t.alive = false;
        }
        self.mms[mm].users -= 1;
        if self.mms[mm].users == 0 {
            self.exit_mmap(ctx, mm);
        }
        Ok(())
    }

    /// `exit_mmap`: unmap every VMA, free every page table, drop the huge
    /// zero page reference, unaccount.
    pub(crate) fn exit_mmap(&mut self, ctx: &mut Ctx, mm: MmId) {
        let ids: Vec<VmaId> = self.mms[mm].vmas.values().copied().collect();
        for &id in &ids {
            let (s, e) = (self.vmas[id].start, self.vmas[id].end);
            self.zap_range(ctx, id, s, e);
        }
        let mut files: Vec<usize> = Vec::new();
        for id in ids {
            files.extend(self.vmas[id].shmem);
            self.remove_vma(id);
        }
        for inode in files {
            self.shmem_put_if_unused(ctx, inode);
        }
        self.khugepaged_exit(mm);
        let fds = std::mem::take(&mut self.mms[mm].files);
        self.shmem_close_all(ctx, fds);
        self.free_pgtables(ctx, mm, 0, self.pt.shape.task_size, 0, 0);
        let pgd = self.mms[mm].pgd;
        self.free_table(ctx, mm, pgd);
        self.mm_put_huge_zero_folio(mm);
        self.committed_pages -= self.mms[mm].committed_pages as i64;
        debug_assert_eq!(self.mms[mm].rss_anon, 0, "exit_mmap left anonymous pages mapped");
        debug_assert_eq!(self.mms[mm].rss_shmem, 0, "exit_mmap left shmem pages mapped");
        self.mms.remove(mm);
    }
}
