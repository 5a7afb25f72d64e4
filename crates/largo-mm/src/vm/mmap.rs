//! Mapping syscalls (mm/mmap.c, mm/vma.c, mm/mprotect.c, mm/mremap.c) for
//! private anonymous memory: placement, VMA split and merge, munmap,
//! mprotect, mremap, brk, prctl(PR_SET_THP_DISABLE).

use super::mm::{MMAP_MIN_ADDR, RLIMIT_STACK_BYTES, STACK_GUARD_GAP};
use super::pgtable::{Pte, Slot};
use super::types::{MapFlags, MmId, Pid, Prot, ThpDisable, VmError, VmFlags, VmaBacking, VmaId};
use super::vma::{AnonVma, Vma};
use super::{Ctx, Vm};
use crate::memcg::SlabCache;
use crate::memmap::PageFlags;

/// `mremap` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MremapFlags {
    /// `MREMAP_MAYMOVE`.
    pub may_move: bool,
    /// `MREMAP_FIXED` (with a new address).
    pub fixed: Option<u64>,
}

impl Vm {
    pub(crate) fn page_align(&self, len: u64) -> Option<u64> {
        let mask = self.page_size() - 1;
        len.checked_add(mask).map(|l| l & !mask)
    }

    /// Creates an anonymous VMA (no merging) and links it into the mm.
    pub(crate) fn insert_vma(&mut self, mm: MmId, start: u64, end: u64, pgoff: u64, flags: VmFlags) -> VmaId {
        self.insert_vma_backed(mm, start, end, pgoff, flags, VmaBacking::Anon)
    }

    /// Creates a VMA of any backing (no merging) and links it into the mm.
    pub(crate) fn insert_vma_backed(
        &mut self,
        mm: MmId,
        start: u64,
        end: u64,
        pgoff: u64,
        flags: VmFlags,
        backing: VmaBacking,
    ) -> VmaId {
        let id = self.vmas.insert(Vma {
            mm,
            start,
            end,
            pgoff,
            flags,
            backing,
            shmem: None,
            anon_vma: None,
            chain: Vec::new(),
            swap_ra: Default::default(),
            fault_history: Default::default(),
        });
        self.mms[mm].vmas.insert(start, id);
        self.slab_alloc(mm, SlabCache::VmArea, 1);
        self.vma_layout_changed();
        id
    }

    /// Unlinks a VMA from its mm and anon_vmas (`unlink_anon_vmas`) and drops it.
    pub(crate) fn remove_vma(&mut self, id: VmaId) {
        let vma = self.vmas.remove(id);
        self.vma_layout_changed();
        self.mms[vma.mm].vmas.remove(&vma.start);
        let memcg = self.mms[vma.mm].memcg;
        self.slab_free(memcg, SlabCache::AnonVmaChain, vma.chain.len());
        self.slab_free(memcg, SlabCache::VmArea, 1);
        for av in vma.chain {
            let a = &mut self.anon_vmas[av];
            a.vmas.retain(|&v| v != id);
            if a.vmas.is_empty() && a.nr_folios == 0 {
                self.free_anon_vma(av);
            }
        }
    }

    /// `anon_vma_alloc` for `mm`'s task.
    pub(crate) fn alloc_anon_vma(&mut self, mm: MmId) -> usize {
        self.slab_alloc(mm, SlabCache::AnonVma, 1);
        self.anon_vmas.insert(AnonVma {
            memcg: self.mms[mm].memcg,
            ..AnonVma::default()
        })
    }

    /// `anon_vma_free`.
    pub(crate) fn free_anon_vma(&mut self, av: usize) {
        let a = self.anon_vmas.remove(av);
        self.slab_free(a.memcg, SlabCache::AnonVma, 1);
    }

    /// `__split_vma`: `id` keeps `[start, at)`; returns the new VMA for
    /// `[at, end)`. A PMD mapping across `at` is split first
    /// (`vma_adjust_trans_huge`): no PMD maps across two VMAs.
    pub(crate) fn split_vma(&mut self, ctx: &mut Ctx, id: VmaId, at: u64) -> VmaId {
        self.split_huge_pmd_address(ctx, self.vmas[id].mm, at);
        let shift = self.page_shift();
        let old = self.vmas[id].clone();
        debug_assert!(at > old.start && at < old.end);
        self.vma_layout_changed();
        self.vmas[id].end = at;
        let new = self.vmas.insert(Vma {
            start: at,
            pgoff: old.pgoff + ((at - old.start) >> shift),
            ..old.clone()
        });
        self.mms[old.mm].vmas.insert(at, new);
        for &av in &old.chain {
            self.anon_vmas[av].vmas.push(new);
        }
        // vm_area_dup and anon_vma_clone.
        self.slab_alloc(old.mm, SlabCache::VmArea, 1);
        self.slab_alloc(old.mm, SlabCache::AnonVmaChain, old.chain.len());
        new
    }

    /// `is_mergeable_anon_vma`: one side without an anon_vma merges with a
    /// VMA whose chain is singular (not forked); otherwise they must share it.
    fn anon_vma_mergeable(&self, a: VmaId, b: VmaId) -> bool {
        let (va, vb) = (&self.vmas[a], &self.vmas[b]);
        match (va.anon_vma, vb.anon_vma) {
            (None, None) => true,
            (Some(x), Some(y)) => x == y && va.chain.len() <= 1 && vb.chain.len() <= 1,
            (None, Some(_)) => vb.chain.len() <= 1,
            (Some(_), None) => va.chain.len() <= 1,
        }
    }

    /// Can `a` (below) and `b` (directly above) merge? Only anonymous
    /// VMAs merge in the model (file mappings would need the same file at
    /// contiguous offsets, which traces do not record).
    fn can_merge(&self, a: VmaId, b: VmaId) -> bool {
        let shift = self.page_shift();
        let (va, vb) = (&self.vmas[a], &self.vmas[b]);
        va.is_anonymous()
            && vb.is_anonymous()
            && va.end == vb.start
            && va.flags.mergeable_with(vb.flags)
            && va.pgoff + ((va.end - va.start) >> shift) == vb.pgoff
            && self.anon_vma_mergeable(a, b)
    }

    /// Merges `b` into `a` (`a` directly below `b`).
    fn merge_into(&mut self, a: VmaId, b: VmaId) {
        self.vma_layout_changed();
        let vb = self.vmas[b].clone();
        if self.vmas[a].anon_vma.is_none() && vb.anon_vma.is_some() {
            // dup_anon_vma: `a` is chained to `b`'s anon_vmas anew.
            self.slab_alloc(vb.mm, SlabCache::AnonVmaChain, vb.chain.len());
            for &av in &vb.chain {
                self.anon_vmas[av].vmas.push(a);
            }
            self.vmas[a].anon_vma = vb.anon_vma;
            self.vmas[a].chain = vb.chain.clone();
        }
        self.vmas[a].end = vb.end;
        self.remove_vma(b);
    }

    /// `vma_merge`: merges `id` with its neighbours where compatible;
    /// returns the surviving VMA.
    pub(crate) fn try_merge(&mut self, id: VmaId) -> VmaId {
        let (mm, start, end) = {
            let v = &self.vmas[id];
            (v.mm, v.start, v.end)
        };
        let (prev, next) = self.mms[mm].neighbours(start, end);
        let mut cur = id;
        if let Some(n) = next.filter(|&n| self.can_merge(cur, n)) {
            self.merge_into(cur, n);
        }
        if let Some(p) = prev.filter(|&p| self.can_merge(p, cur)) {
            self.merge_into(p, cur);
            cur = p;
        }
        cur
    }

    /// `find_mergeable_anon_vma`: reuse an adjacent compatible VMA's
    /// singular anon_vma.
    pub(crate) fn find_mergeable_anon_vma(&self, id: VmaId) -> Option<usize> {
        let v = &self.vmas[id];
        let (prev, next) = self.mms[v.mm].neighbours(v.start, v.end);
        let shift = self.page_shift();
        let compatible = |a: &Vma, b: &Vma| {
            a.is_anonymous()
                && b.is_anonymous()
                && a.end == b.start
                && a.flags.mergeable_with(b.flags)
                && a.pgoff + ((a.end - a.start) >> shift) == b.pgoff
        };
        if let Some(p) = prev.map(|p| &self.vmas[p]) {
            if compatible(p, v) && p.chain.len() == 1 {
                return p.anon_vma;
            }
        }
        if let Some(n) = next.map(|n| &self.vmas[n]) {
            if compatible(v, n) && n.chain.len() == 1 {
                return n.anon_vma;
            }
        }
        None
    }

    /// `unmapped_area_topdown`: the highest gap of `len` bytes below
    /// `high`, above `MMAP_MIN_ADDR`, honouring stack guard gaps.
    fn unmapped_area_topdown(&self, mm: MmId, len: u64, high: u64) -> Option<u64> {
        let mut hi = high;
        for (_, &id) in self.mms[mm].vmas.iter().rev() {
            let v = &self.vmas[id];
            let gap_start = v.end;
            if gap_start < hi && hi - gap_start >= len {
                return Some(hi - len);
            }
            hi = hi.min(v.start_gap(STACK_GUARD_GAP));
        }
        (hi >= MMAP_MIN_ADDR + len).then(|| hi - len)
    }

    /// Is `[addr, addr + len)` free of VMAs (and their guard gaps)?
    fn range_free(&self, mm: MmId, addr: u64, len: u64) -> bool {
        if addr < MMAP_MIN_ADDR || addr.checked_add(len).is_none_or(|e| e > self.pt.shape.task_size) {
            return false;
        }
        let end = addr + len;
        let m = &self.mms[mm];
        let below_ok = m
            .vmas
            .range(..end)
            .next_back()
            .is_none_or(|(_, &id)| self.vmas[id].end <= addr);
        let above_ok = m
            .vmas
            .range(end..)
            .next()
            .is_none_or(|(_, &id)| self.vmas[id].start_gap(STACK_GUARD_GAP) >= end);
        below_ok && above_ok
    }

    /// `__get_unmapped_area` for a private anonymous mapping: a free hint
    /// is taken as is; otherwise top-down from `mmap_base`, and lengths
    /// that are a multiple of the PMD size are PMD-aligned
    /// (`__thp_get_unmapped_area`: search `len + PMD`, align up, or take
    /// the next PMD when the padded start is already aligned).
    fn get_unmapped_area(&self, mm: MmId, hint: u64, len: u64) -> Result<u64, VmError> {
        let no_mem = VmError::NoMem("no room in the address space");
        if len > self.pt.shape.task_size - MMAP_MIN_ADDR {
            return Err(no_mem);
        }
        if hint != 0 {
            let hint = self.page_align(hint).ok_or(no_mem.clone())?;
            if self.range_free(mm, hint, len) {
                return Ok(hint);
            }
        }
        let base = self.mms[mm].mmap_base;
        let pmd = self.pmd_size();
        if hint == 0 && len.is_multiple_of(pmd) {
            if let Some(ret) = self.unmapped_area_topdown(mm, len + pmd, base) {
                let off_sub = ret.wrapping_neg() & (pmd - 1);
                return Ok(if off_sub == 0 { ret + pmd } else { ret + off_sub });
            }
        }
        self.unmapped_area_topdown(mm, len, base).ok_or(no_mem)
    }

    /// `mmap`. Returns the address. Private anonymous memory and shared
    /// anonymous memory (a new shmem inode, `shmem_zero_setup`) are
    /// modelled; file mappings take their place in the address space
    /// without pages (see [`VmaBacking`]).
    pub fn mmap(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
    ) -> Result<u64, VmError> {
        self.mmap_file(ctx, pid, addr, len, prot, flags, None)
    }

    /// `mmap` of `file` = (shmem inode, page offset) when given (a shared
    /// mapping of a memfd), else of anonymous memory or an unmodelled file.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mmap_file(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        file: Option<(usize, u64)>,
    ) -> Result<u64, VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        if flags.contains(MapFlags::SHARED) == flags.contains(MapFlags::PRIVATE) {
            return Err(VmError::Invalid("mmap needs one of MAP_PRIVATE and MAP_SHARED"));
        }
        let backing = if file.is_some() {
            VmaBacking::Shmem
        } else {
            VmaBacking::of_mmap(flags)
        };
        if len == 0 {
            return Err(VmError::Invalid("zero length"));
        }
        let len = self.page_align(len).ok_or(VmError::NoMem("length overflows"))?;
        let fixed = flags.intersects(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE);
        let addr = if fixed {
            if addr & (self.page_size() - 1) != 0 {
                return Err(VmError::Invalid("MAP_FIXED address not page-aligned"));
            }
            if addr < MMAP_MIN_ADDR || addr.checked_add(len).is_none_or(|e| e > self.pt.shape.task_size) {
                return Err(VmError::NoMem("MAP_FIXED range outside the user address space"));
            }
            if !self.mms[mm].vmas_in(addr, addr + len, &self.vmas).is_empty() {
                if flags.contains(MapFlags::FIXED_NOREPLACE) {
                    return Err(VmError::Exists);
                }
                self.do_munmap(ctx, mm, addr, len);
            }
            addr
        } else {
            self.get_unmapped_area(mm, addr, len)?
        };
        let mut vm_flags = VmFlags::from_prot(prot);
        if flags.contains(MapFlags::GROWSDOWN) {
            vm_flags |= VmFlags::GROWSDOWN;
        }
        if flags.contains(MapFlags::SHARED) {
            vm_flags |= VmFlags::SHARED | VmFlags::MAYSHARE;
        }
        if flags.contains(MapFlags::NORESERVE) {
            vm_flags |= VmFlags::NORESERVE;
        } else if prot.contains(Prot::WRITE) && backing == VmaBacking::Anon {
            // Committed_AS counts the modelled (anonymous) memory only.
            vm_flags |= VmFlags::ACCOUNT;
            self.account(mm, (len >> self.page_shift()) as i64);
        }
        // A shared anonymous mapping is page 0 onwards of a new inode of its size.
        let file = match (backing, file) {
            (VmaBacking::Shmem, None) => Some((self.shmem_zero_setup(len, self.mms[mm].memcg), 0)),
            (_, file) => file,
        };
        let pgoff = file.map_or(addr >> self.page_shift(), |(_, pgoff)| pgoff);
        let id = self.insert_vma_backed(mm, addr, addr + len, pgoff, vm_flags, backing);
        self.vmas[id].shmem = file.map(|(inode, _)| inode);
        self.try_merge(id);
        if flags.contains(MapFlags::POPULATE) {
            self.populate(ctx, pid, addr, len, prot.contains(Prot::WRITE))?;
        }
        Ok(addr)
    }

    /// A special mapping of a program image's initial layout (vdso, vvar,
    /// vsyscall: `_install_special_mapping`), at a fixed place, replacing
    /// what was there. It holds its range; its pages are not modelled.
    pub fn map_special(&mut self, ctx: &mut Ctx, pid: Pid, start: u64, end: u64, prot: Prot) -> Result<(), VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        let mask = self.page_size() - 1;
        if start & mask != 0 || end & mask != 0 || end <= start || end > self.pt.shape.task_size {
            return Err(VmError::Invalid(
                "a special mapping needs a page-aligned range in the user address space",
            ));
        }
        self.do_munmap(ctx, mm, start, end - start);
        let flags = VmFlags::from_prot(prot) - (VmFlags::MAYWRITE);
        self.insert_vma_backed(mm, start, end, start >> self.page_shift(), flags, VmaBacking::Special);
        Ok(())
    }

    /// `MAP_POPULATE`: fault every page in.
    fn populate(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, len: u64, write: bool) -> Result<(), VmError> {
        self.access_pages(ctx, pid, addr, len, write)
    }

    /// An access to every page of `[addr, addr + len)` in order, as runs
    /// of accesses: a SIGSEGV, SIGBUS or OOM kill does not end the range,
    /// an error does (and is returned).
    pub fn access_pages(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, len: u64, write: bool) -> Result<(), VmError> {
        let page = self.page_size();
        let (mut a, mut left) = (addr, len.div_ceil(page));
        while left > 0 {
            let run = self.access_run(ctx, pid, a, page, left, write);
            (a, left) = (a + run.done * page, left - run.done);
            match run.stop {
                None => break,
                Some(Err(e)) => return Err(e),
                Some(Ok(_)) => {}
            }
        }
        Ok(())
    }

    /// `expand_stack` (`expand_downwards`): an access below a VM_GROWSDOWN
    /// VMA extends it down to the page of `addr`, unless that would come
    /// within `stack_guard_gap` of the mapping below or make the stack
    /// larger than RLIMIT_STACK (8 MiB). Returns the VMA.
    pub(crate) fn expand_stack(&mut self, mm: MmId, addr: u64) -> Option<VmaId> {
        let (_, &id) = self.mms[mm].vmas.range(addr..).next()?;
        let v = &self.vmas[id];
        if !v.flags.contains(VmFlags::GROWSDOWN) || addr < MMAP_MIN_ADDR {
            return None;
        }
        let new_start = addr & !(self.page_size() - 1);
        if v.end - new_start > RLIMIT_STACK_BYTES {
            return None;
        }
        if let Some((_, &prev)) = self.mms[mm].vmas.range(..v.start).next_back() {
            let p = &self.vmas[prev];
            let guarded = !p.flags.contains(VmFlags::GROWSDOWN) && p.flags.accessible();
            if p.end > new_start || (guarded && new_start - p.end < STACK_GUARD_GAP) {
                return None;
            }
        }
        let grow = (v.start - new_start) >> self.page_shift();
        let (old_start, account) = (v.start, v.flags.contains(VmFlags::ACCOUNT));
        self.vma_layout_changed();
        let v = &mut self.vmas[id];
        v.start = new_start;
        v.pgoff -= grow;
        self.mms[mm].vmas.remove(&old_start);
        self.mms[mm].vmas.insert(new_start, id);
        if account {
            self.account(mm, grow as i64);
        }
        Some(id)
    }

    /// `vm_committed_as` bookkeeping.
    fn account(&mut self, mm: MmId, pages: i64) {
        self.committed_pages += pages;
        let m = &mut self.mms[mm];
        m.committed_pages = (m.committed_pages as i64 + pages) as u64;
    }

    /// `munmap`.
    pub fn munmap(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, len: u64) -> Result<(), VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        if addr & (self.page_size() - 1) != 0 || len == 0 {
            return Err(VmError::Invalid("munmap needs a page-aligned address and a length"));
        }
        let len = self.page_align(len).ok_or(VmError::Invalid("length overflows"))?;
        if addr.checked_add(len).is_none_or(|e| e > self.pt.shape.task_size) {
            return Err(VmError::Invalid("range outside the user address space"));
        }
        self.do_munmap(ctx, mm, addr, len);
        Ok(())
    }

    /// `do_vmi_munmap`: split at the edges, zap, free page tables, unaccount.
    pub(crate) fn do_munmap(&mut self, ctx: &mut Ctx, mm: MmId, addr: u64, len: u64) {
        let end = addr + len;
        let ids = self.isolate_range(ctx, mm, addr, end);
        if ids.is_empty() {
            return;
        }
        for &id in &ids {
            let (s, e) = (self.vmas[id].start, self.vmas[id].end);
            self.zap_range(ctx, id, s, e);
        }
        let (first_start, last_end) = (self.vmas[ids[0]].start, self.vmas[*ids.last().unwrap()].end);
        let mut files = Vec::new();
        for &id in &ids {
            if self.vmas[id].flags.contains(VmFlags::ACCOUNT) {
                let pages = (self.vmas[id].end - self.vmas[id].start) >> self.page_shift();
                self.account(mm, -(pages as i64));
            }
            files.extend(self.vmas[id].shmem);
            self.remove_vma(id);
        }
        for inode in files {
            self.shmem_put_if_unused(ctx, inode);
        }
        let (prev, next) = self.mms[mm].neighbours(first_start, last_end);
        let floor = prev.map_or(0, |p| self.vmas[p].end);
        let ceiling = next.map_or(0, |n| self.vmas[n].start);
        self.free_pgtables(ctx, mm, first_start, last_end, floor, ceiling);
    }

    /// Splits VMAs so `[start, end)` is covered by whole VMAs; returns them.
    pub(crate) fn isolate_range(&mut self, ctx: &mut Ctx, mm: MmId, start: u64, end: u64) -> Vec<VmaId> {
        self.isolate_changing(ctx, mm, start, end, |_| true)
    }

    /// The VMAs meeting `[start, end)`, in address order, those for which
    /// `changes` holds split so they lie inside the range: `vma_modify`
    /// splits only a VMA whose flags change (`mprotect_fixup` and
    /// `madvise_update_vma` return early when the new flags are the old).
    pub(crate) fn isolate_changing(
        &mut self,
        ctx: &mut Ctx,
        mm: MmId,
        start: u64,
        end: u64,
        changes: impl Fn(&super::vma::Vma) -> bool,
    ) -> Vec<VmaId> {
        let ids = self.mms[mm].vmas_in(start, end, &self.vmas);
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let mut id = id;
            if changes(&self.vmas[id]) {
                if self.vmas[id].start < start {
                    id = self.split_vma(ctx, id, start);
                }
                if self.vmas[id].end > end {
                    self.split_vma(ctx, id, end);
                }
            }
            out.push(id);
        }
        out
    }

    /// After changing the flags of `ids` (split to the range first), merge
    /// each survivor with its neighbours (`vma_modify` merges as it goes;
    /// merging afterwards reaches the same VMAs). Merging only removes
    /// VMAs, so ids gone by then were merged into an earlier one.
    pub(crate) fn merge_all(&mut self, ids: &[VmaId]) {
        for &id in ids {
            if self.vmas.contains(id) {
                self.try_merge(id);
            }
        }
    }

    /// `mprotect` (`mprotect_fixup`): new permissions for `[addr, addr +
    /// len)`; a VMA whose flags do not change is left whole. Dropping
    /// write write-protects the PTEs (and uncharges the commit of an
    /// anonymous VMA never faulted); adding it charges the commit and
    /// makes exclusive anonymous pages writable again
    /// (`can_change_pte_writable`).
    pub fn mprotect(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, len: u64, prot: Prot) -> Result<(), VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        if addr & (self.page_size() - 1) != 0 {
            return Err(VmError::Invalid("mprotect needs a page-aligned address"));
        }
        let len = self.page_align(len).ok_or(VmError::NoMem("length overflows"))?;
        let end = addr.checked_add(len).ok_or(VmError::NoMem("range overflows"))?;
        if !self.range_mapped(mm, addr, end) {
            return Err(VmError::NoMem("range not fully mapped"));
        }
        let perm = VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC;
        let with_prot = |old: VmFlags| (old - perm) | (VmFlags::from_prot(prot) & perm);
        let ids = self.isolate_changing(ctx, mm, addr, end, |v| with_prot(v.flags) != v.flags);
        for &id in &ids {
            let old = self.vmas[id].flags;
            let mut new = with_prot(old);
            if new == old {
                continue;
            }
            let v = &self.vmas[id];
            let pages = ((v.end - v.start) >> self.page_shift()) as i64;
            if new.contains(VmFlags::WRITE) {
                if v.is_anonymous()
                    && !old.intersects(VmFlags::ACCOUNT | VmFlags::WRITE | VmFlags::SHARED | VmFlags::NORESERVE)
                {
                    new |= VmFlags::ACCOUNT;
                    self.account(mm, pages);
                }
            } else if old.contains(VmFlags::ACCOUNT) && v.is_anonymous() && v.anon_vma.is_none() {
                // Never faulted: nothing private to back, so the commit
                // charge goes until it becomes writable again.
                new -= VmFlags::ACCOUNT;
                self.account(mm, -pages);
            }
            self.vmas[id].flags = new;
            self.change_protection(ctx, id, new.contains(VmFlags::WRITE));
        }
        self.merge_all(&ids);
        Ok(())
    }

    /// Every page of `[start, end)` lies in some VMA.
    fn range_mapped(&self, mm: MmId, start: u64, end: u64) -> bool {
        let mut at = start;
        for id in self.mms[mm].vmas_in(start, end, &self.vmas) {
            if self.vmas[id].start > at {
                return false;
            }
            at = self.vmas[id].end;
        }
        at >= end
    }

    /// `change_protection` over a whole VMA.
    fn change_protection(&mut self, ctx: &mut Ctx, id: VmaId, writable: bool) {
        let (mm, start, end) = (self.vmas[id].mm, self.vmas[id].start, self.vmas[id].end);
        let root = self.mms[mm].pgd;
        let mut addr = start;
        while addr < end {
            match self.pt.leaf(root, addr) {
                Some((table, index, level)) => {
                    let e = self.pt.get(table, index);
                    if e.present() {
                        let page = ctx.pa.memmap.page(e.pfn());
                        // Exclusive anon pages, or any page of a shared mapping
                        // (`can_change_shared_pte_writable`), if dirty.
                        let exclusive = !e.is_special()
                            && (page.flags().contains(PageFlags::ANON_EXCLUSIVE) || self.is_shmem_vma(id));
                        let new = if !writable {
                            e.without(Pte::WRITE)
                        } else if exclusive && e.has(Pte::DIRTY) {
                            e.with(Pte::WRITE)
                        } else {
                            e
                        };
                        self.pt.set(table, index, new);
                    }
                    addr += 1 << self.pt.shape.level_shift(level);
                    addr &= !((1 << self.pt.shape.level_shift(level)) - 1);
                }
                None => addr += self.page_size(),
            }
        }
    }

    /// `mremap`: shrink in place, grow in place when the space above is
    /// free, else move (with MREMAP_MAYMOVE) page tables and all.
    pub fn mremap(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        old_addr: u64,
        old_len: u64,
        new_len: u64,
        flags: MremapFlags,
    ) -> Result<u64, VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        if old_addr & (self.page_size() - 1) != 0 || new_len == 0 {
            return Err(VmError::Invalid("mremap needs a page-aligned address and a new length"));
        }
        let old_len = self.page_align(old_len).ok_or(VmError::Invalid("length overflows"))?;
        let new_len = self.page_align(new_len).ok_or(VmError::Invalid("length overflows"))?;
        let vma = self.mms[mm]
            .vma_at(old_addr, &self.vmas)
            .ok_or(VmError::Fault(old_addr))?;
        if self.is_shmem_vma(vma) {
            return Err(VmError::NotSupported("mremap of a shmem mapping"));
        }
        let task_size = self.pt.shape.task_size;
        if old_addr.checked_add(old_len).is_none_or(|e| e > self.vmas[vma].end) {
            return Err(VmError::Fault(old_addr.saturating_add(old_len)));
        }
        if new_len > task_size || old_addr.checked_add(new_len).is_none() {
            return Err(VmError::Invalid("new length outside the user address space"));
        }
        if flags.fixed.is_none() {
            if new_len <= old_len {
                if new_len < old_len {
                    self.do_munmap(ctx, mm, old_addr + new_len, old_len - new_len);
                }
                return Ok(old_addr);
            }
            if old_addr + old_len == self.vmas[vma].end && self.range_free(mm, old_addr + old_len, new_len - old_len) {
                self.vma_layout_changed();
                self.vmas[vma].end = old_addr + new_len;
                if self.vmas[vma].flags.contains(VmFlags::ACCOUNT) {
                    self.account(mm, ((new_len - old_len) >> self.page_shift()) as i64);
                }
                self.try_merge(vma);
                return Ok(old_addr);
            }
            if !flags.may_move {
                return Err(VmError::NoMem("cannot grow in place without MREMAP_MAYMOVE"));
            }
        }
        let new_addr = match flags.fixed {
            Some(a) => {
                if a & (self.page_size() - 1) != 0 {
                    return Err(VmError::Invalid("MREMAP_FIXED address not page-aligned"));
                }
                self.do_munmap(ctx, mm, a, new_len);
                a
            }
            None => self.get_unmapped_area(mm, 0, new_len)?,
        };
        self.move_vma(ctx, mm, vma, old_addr, old_len, new_addr, new_len)?;
        Ok(new_addr)
    }

    /// `move_vma`: a VMA for the new range with the old page offset and
    /// anon_vma, the page-table entries moved across, the old range gone.
    #[allow(clippy::too_many_arguments)]
    fn move_vma(
        &mut self,
        ctx: &mut Ctx,
        mm: MmId,
        vma: VmaId,
        old_addr: u64,
        old_len: u64,
        new_addr: u64,
        new_len: u64,
    ) -> Result<(), VmError> {
        let mut old_len = old_len;
        if new_len < old_len {
            self.do_munmap(ctx, mm, old_addr + new_len, old_len - new_len);
            old_len = new_len;
        }
        let mut src = vma;
        if self.vmas[src].start < old_addr {
            src = self.split_vma(ctx, src, old_addr);
        }
        if self.vmas[src].end > old_addr + old_len {
            self.split_vma(ctx, src, old_addr + old_len);
        }
        let old = self.vmas[src].clone();
        self.vma_layout_changed();
        let new = self.vmas.insert(Vma {
            start: new_addr,
            end: new_addr + new_len,
            // Its runs name the old addresses.
            fault_history: Default::default(),
            ..old.clone()
        });
        self.mms[mm].vmas.insert(new_addr, new);
        for &av in &old.chain {
            self.anon_vmas[av].vmas.push(new);
        }
        // copy_vma: vm_area_dup and anon_vma_clone.
        self.slab_alloc(mm, SlabCache::VmArea, 1);
        self.slab_alloc(mm, SlabCache::AnonVmaChain, old.chain.len());
        let moved = self.move_page_tables(ctx, mm, old_addr, new_addr, old_len);
        if moved < old_len {
            // Out of memory for page tables: move back what moved (the
            // source tables are all still there) and drop the new VMA.
            let back = self.move_page_tables(ctx, mm, new_addr, old_addr, moved);
            debug_assert_eq!(back, moved, "moving back needs no new page tables");
            self.remove_vma(new);
            let (prev, next) = self.mms[mm].neighbours(new_addr, new_addr + new_len);
            let floor = prev.map_or(0, |p| self.vmas[p].end);
            let ceiling = next.map_or(0, |n| self.vmas[n].start);
            self.free_pgtables(ctx, mm, new_addr, new_addr + new_len, floor, ceiling);
            return Err(VmError::NoMem("no memory for the moved page tables"));
        }
        // The charge moves with the VMA; only the growth is new.
        if old.flags.contains(VmFlags::ACCOUNT) {
            let grown = ((new_len - old_len) >> self.page_shift()) as i64;
            self.account(mm, grown);
        }
        self.remove_vma(src);
        let (prev, next) = self.mms[mm].neighbours(old_addr, old_addr + old_len);
        let floor = prev.map_or(0, |p| self.vmas[p].end);
        let ceiling = next.map_or(0, |n| self.vmas[n].start);
        self.free_pgtables(ctx, mm, old_addr, old_addr + old_len, floor, ceiling);
        self.try_merge(new);
        Ok(())
    }

    /// `move_page_tables`: PMD leaves and whole PTE tables move when both
    /// sides are PMD-aligned (`move_huge_pmd`, `move_normal_pmd`); other
    /// entries move one by one (`move_ptes`). Returns the bytes moved: less
    /// than `len` when a destination table could not be allocated.
    fn move_page_tables(&mut self, ctx: &mut Ctx, mm: MmId, old: u64, new: u64, len: u64) -> u64 {
        let pmd_size = self.pmd_size();
        let mut off = 0;
        while off < len {
            let (from, to) = (old + off, new + off);
            let aligned = from & (pmd_size - 1) == 0 && to & (pmd_size - 1) == 0 && len - off >= pmd_size;
            if aligned {
                match self.move_pmd_entry(ctx, mm, from, to) {
                    Some(true) => {
                        off += pmd_size;
                        continue;
                    }
                    Some(false) => {}
                    None => return off,
                }
            }
            let root = self.mms[mm].pgd;
            if let Some((table, index, level)) = self.pt.leaf(root, from) {
                if level == 1 {
                    // A PMD leaf the move does not cover whole: split it.
                    self.split_huge_pmd(ctx, mm, Slot { table, index });
                    continue;
                }
                let e = self.pt.get(table, index);
                if e.present() || e.is_swap() {
                    let Some(dst) = self.table_for(ctx, mm, to, 0) else {
                        return off;
                    };
                    // Reclaim may have changed the source while allocating.
                    let e = self.pt.get(table, index);
                    self.pt.set(table, index, Pte::NONE);
                    self.pt.set(dst, self.pt.shape.index(0, to), e);
                }
            }
            off += self.page_size();
        }
        len
    }

    /// Moves the PMD-level entry (a huge leaf or a whole PTE table) at
    /// `from` to `to`, with its deposited table. `Some(false)`: nothing
    /// there to move this way; `None`: out of memory for the destination.
    fn move_pmd_entry(&mut self, ctx: &mut Ctx, mm: MmId, from: u64, to: u64) -> Option<bool> {
        let Some(src) = self.pmd_slot(mm, from) else {
            return Some(false);
        };
        if !self.pt.entry(src).present() {
            return Some(false);
        }
        let table = self.table_for(ctx, mm, to, 1)?;
        let dst = Slot {
            table,
            index: self.pt.shape.index(1, to),
        };
        let e = self.pt.entry(src);
        if !e.present() || !self.pt.entry(dst).is_none() {
            return Some(false);
        }
        self.pt.set_slot(src, Pte::NONE);
        self.pt.set_slot(dst, e);
        if let Some(dep) = self.deposits.remove(&src) {
            self.deposits.insert(dst, dep);
        }
        Some(true)
    }

    /// `brk` (mm/mmap.c `brk`, `do_brk_flags`): returns the new break
    /// (unchanged on failure).
    pub fn brk(&mut self, ctx: &mut Ctx, pid: Pid, new_brk: u64) -> Result<u64, VmError> {
        self.work.vma_ops += 1;
        let mm = self.task_mm(pid)?;
        let (start_brk, brk) = (self.mms[mm].start_brk, self.mms[mm].brk);
        if new_brk < start_brk {
            return Ok(brk);
        }
        let old_end = self.page_align(brk).unwrap_or(brk);
        let new_end = self.page_align(new_brk).unwrap_or(new_brk);
        if new_end < old_end {
            self.do_munmap(ctx, mm, new_end, old_end - new_end);
        } else if new_end > old_end {
            if !self.range_free(mm, old_end, new_end - old_end) {
                return Ok(brk);
            }
            let flags = VmFlags::from_prot(Prot::READ | Prot::WRITE) | VmFlags::ACCOUNT;
            self.account(mm, ((new_end - old_end) >> self.page_shift()) as i64);
            // do_brk_flags: only a brk VMA (starting at or above start_brk)
            // ending at the old break is expanded; otherwise the heap is a
            // VMA of its own, never merged with the bss below start_brk.
            let brk_vma = self.mms[mm]
                .vmas
                .range(start_brk..old_end)
                .next_back()
                .map(|(_, &id)| id)
                .filter(|&id| self.vmas[id].end == old_end && self.vmas[id].flags == flags);
            match brk_vma {
                Some(id) => {
                    self.vma_layout_changed();
                    self.vmas[id].end = new_end;
                }
                None => {
                    self.insert_vma(mm, old_end, new_end, old_end >> self.page_shift(), flags);
                }
            }
        }
        self.mms[mm].brk = new_brk;
        Ok(new_brk)
    }

    /// `prctl(PR_SET_THP_DISABLE)`.
    pub fn prctl_thp_disable(&mut self, pid: Pid, mode: ThpDisable) -> Result<(), VmError> {
        let mm = self.task_mm(pid)?;
        self.mms[mm].thp_disable = mode;
        Ok(())
    }
}
