//! Shared memory (mm/shmem.c, v6.18): shmem inodes with their page cache,
//! for shared anonymous mappings (`shmem_zero_setup`) and memfds
//! (`memfd_create` on the internal tmpfs mount), and the system calls on
//! them: ftruncate, close, mmap of a descriptor, hole punching.
//!
//! - `mod.rs`: inodes, folios, descriptors, truncation and eviction
//! - `order.rs`: which folio orders a shmem allocation may use
//! - `fault.rs`: `shmem_fault`, fault-around, `finish_fault`, `do_set_pmd`
//! - `rmap.rs`: file rmap counts and unmapping shmem ranges
//! - `split.rs`: splitting large shmem folios, partial truncation
//! - `check.rs`: shmem invariants
//! - `cold.rs`: MADV_COLD and MADV_PAGEOUT of shmem mappings
//! - `sysv.rs`: SysV segments (shmget, shmat, shmdt, IPC_RMID)
//! - `swap.rs`: reclaim of shmem folios (dropped clean, swapped dirty)
//!   and their swap-in
//! - `xarray.rs`: the kernel memory a shmem file costs its memcg
//!
//! A shmem folio's head page carries PG_swapbacked and not PG_anon; its
//! private word holds its key in [`ShmemFs::folios`] + 1, as an anon
//! folio's does in the anon folio table.

mod check;
mod cold;
mod fault;
mod order;
pub(crate) mod rmap;
mod split;
pub(crate) mod swap;
mod sysv;
mod xarray;

pub(crate) use check::ShmemRecount;

use std::collections::BTreeMap;

use slab::Slab;

use super::types::{MapFlags, MmId, Pid, Prot, VmError, VmaBacking};
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};

/// A shmem inode (`struct shmem_inode_info` + its `address_space`).
#[derive(Clone, Debug)]
pub struct ShmemInode {
    /// `i_size`.
    pub size_bytes: u64,
    /// The page cache: each folio's first index -> its key. Invariant:
    /// the folios' index ranges do not overlap and each is aligned to
    /// its size.
    pub cache: BTreeMap<u64, usize>,
    /// No name links to it (shared anonymous memory, a memfd):
    /// `shmem_mmap` gives its mappings `shmem_anon_vm_ops`, so they are
    /// anonymous shmem (`vma_is_anon_shmem`) and their folio sizes come
    /// from the per-size `shmem_enabled`. A named tmpfs file's would come
    /// from its mount's `huge=` alone.
    pub unlinked: bool,
    /// Swapped-out ranges: each first index -> the swap entry of its first
    /// page and the range's order. Invariant: disjoint from `cache`, each
    /// range aligned to its size.
    pub swapped: BTreeMap<u64, (crate::swap::SwapEntry, u32)>,
    /// Open descriptors (across every process) referring to it.
    pub nr_fds: u32,
    /// The memcg its inode, dentry and file are charged to (0: none).
    pub kmem_memcg: u16,
    /// The page cache's xarray nodes, (level, index >> 6 * (level + 1)),
    /// each with the memcg it is charged to.
    pub xa_nodes: rustc_hash::FxHashMap<(u32, u64), u16>,
    /// How many of `xa_nodes` sit at each level. Invariant: the count of
    /// its keys of that level.
    pub xa_nodes_per_level: [u32; xarray::XA_LEVELS as usize],
    /// Per node position off the left edge (index >> 6 * (level + 1)
    /// not 0), the entries beneath it (every level from each entry's own
    /// up); see `xarray.rs`.
    pub xa_count: rustc_hash::FxHashMap<(u32, u64), u32>,
    /// The same count for the left-edge node of each level (index 0
    /// there), which every small index shares: an array, not the map.
    pub xa_edge_count: [u32; xarray::XA_LEVELS as usize],
    /// Indices whose entries changed since the nodes were last settled.
    pub xa_touched: Vec<u64>,
    /// A SysV segment: its mappings carry `shm_vm_ops`, so they are not
    /// anonymous shmem even though the inode is unlinked (the per-size
    /// `shmem_enabled` do not apply to them).
    pub sysv: bool,
    /// A SysV segment not yet removed (`IPC_RMID`): the IPC namespace
    /// keeps it with no descriptor and no mapping.
    pub ipc_held: bool,
}

impl ShmemInode {
    /// An inode of `size_bytes` with nothing in its page cache, its
    /// kernel objects charged to `memcg`.
    pub(crate) fn empty(size_bytes: u64, unlinked: bool, memcg: u16) -> ShmemInode {
        ShmemInode {
            size_bytes,
            cache: BTreeMap::new(),
            swapped: BTreeMap::new(),
            unlinked,
            nr_fds: 0,
            kmem_memcg: memcg,
            xa_nodes: Default::default(),
            xa_nodes_per_level: Default::default(),
            xa_count: Default::default(),
            xa_edge_count: Default::default(),
            xa_touched: Vec::new(),
            sysv: false,
            ipc_held: false,
        }
    }
}

/// A folio in a shmem page cache.
#[derive(Clone, Debug)]
pub struct ShmemFolio {
    pub pfn: u64,
    pub order: u32,
    pub inode: usize,
    /// `folio->index`.
    pub index: u64,
    /// PMD mappings (`_entire_mapcount`).
    pub entire_mapcount: i32,
    /// Pages mapped by at least one PTE (`_nr_pages_mapped`).
    pub nr_pages_mapped: i32,
    /// The memcg it is charged to (0: the root).
    pub memcg: u16,
    /// Its LRU list, links and LRU flags (shmem is on the anon lists).
    pub lru: super::lru::LruState,
}

impl ShmemFolio {
    pub fn nr_pages(&self) -> u64 {
        1 << self.order
    }
}

/// Every shmem inode and folio of the machine.
#[derive(Clone, Debug, Default)]
pub struct ShmemFs {
    pub inodes: Slab<ShmemInode>,
    pub folios: Slab<ShmemFolio>,
    /// SysV segments by identifier -> inode. Invariant: exactly the
    /// inodes with `ipc_held`.
    pub sysv: BTreeMap<u32, usize>,
}

impl Vm {
    /// The shmem folio whose page `pfn` is, if it is one.
    pub(crate) fn shmem_key_of_pfn(&self, pa: &crate::page_alloc::PageAlloc, pfn: u64) -> Option<usize> {
        let head = pa.memmap.folio_head(pfn)?;
        let page = pa.memmap.page(head);
        let f = page.flags();
        (!f.contains(PageFlags::ANON) && f.contains(PageFlags::SWAPBACKED) && page.private() > 0)
            .then(|| page.private() as usize - 1)
    }

    /// A new shmem inode of `size_bytes`.
    pub(crate) fn new_shmem_inode(&mut self, size_bytes: u64, unlinked: bool, memcg: u16) -> usize {
        self.shmem_file_objects_alloc(memcg);
        self.shmem.inodes.insert(ShmemInode::empty(size_bytes, unlinked, memcg))
    }

    /// `memfd_create`: a new empty, unlinked shmem file at descriptor `fd`
    /// of the process (a descriptor already there is closed first, as
    /// dup2 would).
    pub fn memfd_create(&mut self, ctx: &mut Ctx, pid: Pid, fd: u32) -> Result<(), VmError> {
        let mm = self.task_mm(pid)?;
        if self.mms[mm].files.contains_key(&fd) {
            self.close(ctx, pid, fd)?;
        }
        let inode = self.new_shmem_inode(0, true, self.mms[mm].memcg);
        self.shmem.inodes[inode].nr_fds = 1;
        self.mms[mm].files.insert(fd, inode);
        Ok(())
    }

    fn fd_inode(&self, pid: Pid, fd: u32) -> Result<usize, VmError> {
        let mm = self.task_mm(pid)?;
        self.mms[mm].files.get(&fd).copied().ok_or(VmError::BadFd(fd))
    }

    /// `close(fd)`: the inode goes once nothing refers to it.
    pub fn close(&mut self, ctx: &mut Ctx, pid: Pid, fd: u32) -> Result<(), VmError> {
        let mm = self.task_mm(pid)?;
        let inode = self.mms[mm].files.remove(&fd).ok_or(VmError::BadFd(fd))?;
        self.shmem.inodes[inode].nr_fds -= 1;
        self.shmem_put_if_unused(ctx, inode);
        Ok(())
    }

    /// `ftruncate(fd, len)` (`shmem_setattr`): a shrink unmaps and frees
    /// the folios wholly beyond the new end.
    pub fn ftruncate(&mut self, ctx: &mut Ctx, pid: Pid, fd: u32, len: u64) -> Result<(), VmError> {
        let inode = self.fd_inode(pid, fd)?;
        let mm = self.task_mm(pid)?;
        let old = self.shmem.inodes[inode].size_bytes;
        self.shmem.inodes[inode].size_bytes = len;
        // `shmem_setattr` truncates on `newsize <= oldsize`, the same size
        // too (a folio across EOF would be split, the EOF page's tail
        // zeroed), and only an inode that has pages (`info->alloced`).
        if len <= old {
            let first = len.div_ceil(self.page_size());
            if old > first << self.page_shift() {
                self.unmap_mapping_range(ctx, inode, first, u64::MAX);
            }
            if !self.shmem.inodes[inode].cache.is_empty() || !self.shmem.inodes[inode].swapped.is_empty() {
                self.shmem_undo_range(ctx, mm, inode, len, u64::MAX);
            }
        }
        Ok(())
    }

    /// `fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
    /// len)`: the mappings of the whole pages in the range are zapped, then
    /// the range is truncated ([`Vm::shmem_undo_range`]).
    pub fn punch_hole(&mut self, ctx: &mut Ctx, pid: Pid, fd: u32, offset: u64, len: u64) -> Result<(), VmError> {
        let inode = self.fd_inode(pid, fd)?;
        let mm = self.task_mm(pid)?;
        self.shmem_punch_hole(ctx, mm, inode, offset, len)
    }

    /// `shmem_fallocate` with `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`
    /// on `inode`, by a task of `mm` (the one a swapped edge folio is read
    /// back for): a hole punch and MADV_REMOVE.
    pub(crate) fn shmem_punch_hole(
        &mut self,
        ctx: &mut Ctx,
        mm: MmId,
        inode: usize,
        offset: u64,
        len: u64,
    ) -> Result<(), VmError> {
        if len == 0 {
            return Err(VmError::Invalid("fallocate of zero bytes"));
        }
        if let Some((first, end)) = punch_unmap_pages(offset, len, self.page_size()) {
            self.unmap_mapping_range(ctx, inode, first, end);
        }
        self.shmem_undo_range(ctx, mm, inode, offset, offset.saturating_add(len - 1));
        Ok(())
    }

    /// `mmap` of the shmem file at `fd`: shared mappings map its page
    /// cache; a private one holds its place without pages (as file
    /// mappings do).
    #[allow(clippy::too_many_arguments)]
    pub fn mmap_fd(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        fd: u32,
        offset: u64,
    ) -> Result<u64, VmError> {
        let inode = self.fd_inode(pid, fd)?;
        if offset & (self.page_size() - 1) != 0 {
            return Err(VmError::Invalid("mmap offset not page-aligned"));
        }
        let file = flags
            .contains(MapFlags::SHARED)
            .then_some((inode, offset >> self.page_shift()));
        self.mmap_file(ctx, pid, addr, len, prot, flags - MapFlags::ANONYMOUS, file)
    }

    /// The shmem inode of a new shared anonymous mapping of `len` bytes
    /// (`shmem_zero_setup`).
    pub(crate) fn shmem_zero_setup(&mut self, len: u64, memcg: u16) -> usize {
        self.new_shmem_inode(len, true, memcg)
    }

    /// Drops the inode once no descriptor and no VMA refers to it
    /// (`shmem_evict_inode`): its whole page cache is freed.
    pub(crate) fn shmem_put_if_unused(&mut self, ctx: &mut Ctx, inode: usize) {
        let held = |i: &ShmemInode| i.nr_fds > 0 || i.ipc_held;
        if !self.shmem.inodes.contains(inode) || held(&self.shmem.inodes[inode]) {
            return;
        }
        if self.vmas.iter().any(|(_, v)| v.shmem == Some(inode)) {
            return;
        }
        self.shmem_truncate_range(ctx, inode, 0, u64::MAX);
        let gone = self.shmem.inodes.remove(inode);
        self.shmem_file_objects_free(gone.kmem_memcg);
    }

    /// The shmem inodes of `fds` get one more descriptor each (fork).
    pub(crate) fn shmem_dup_fds(&mut self, fds: &BTreeMap<u32, usize>) {
        for &inode in fds.values() {
            self.shmem.inodes[inode].nr_fds += 1;
        }
    }

    /// Every descriptor of an exiting address space is closed.
    pub(crate) fn shmem_close_all(&mut self, ctx: &mut Ctx, fds: BTreeMap<u32, usize>) {
        for inode in fds.into_values() {
            self.shmem.inodes[inode].nr_fds -= 1;
            self.shmem_put_if_unused(ctx, inode);
        }
    }

    /// `shmem_undo_range` (truncate or punch, not an undone fallocate) of
    /// the bytes `[lstart, lend]` (`lend` `u64::MAX`: to the end): the
    /// folios and swap entries wholly inside go first; then the folio
    /// holding the first byte and the one holding the last are truncated
    /// in part (zeroed, a large one split so its pieces inside can go:
    /// [`Vm::shmem_truncate_partial_folio`]), and what the splits left
    /// inside goes. A folio whose split failed stays, and the range
    /// shrinks past it. An edge folio swapped out is read back first
    /// ([`Vm::shmem_get_partial_folio`], by the task `mm`).
    pub(crate) fn shmem_undo_range(&mut self, ctx: &mut Ctx, mm: MmId, inode: usize, lstart: u64, lend: u64) {
        let shift = self.page_shift();
        let mut start = lstart.div_ceil(1 << shift);
        let mut end = if lend == u64::MAX {
            u64::MAX
        } else {
            (lend + 1) >> shift
        };
        if start < end {
            self.shmem_truncate_range(ctx, inode, start, end);
        }
        let mut same_folio = (lstart >> shift) == (lend >> shift);
        let memcg = self.mm_memcg(mm);
        if let Some(key) = self.shmem_get_partial_folio(ctx, mm, inode, lstart >> shift) {
            let (index, nr) = (self.shmem.folios[key].index, self.shmem.folios[key].nr_pages());
            same_folio = lend < (index + nr) << shift;
            self.shmem_mark_dirty(ctx.pa, key);
            if !self.shmem_truncate_partial_folio(ctx, key, lstart, lend, memcg) {
                start = index + nr;
                if same_folio {
                    end = index;
                }
            }
        }
        if !same_folio && lend != u64::MAX {
            if let Some(key) = self.shmem_get_partial_folio(ctx, mm, inode, lend >> shift) {
                let index = self.shmem.folios[key].index;
                self.shmem_mark_dirty(ctx.pa, key);
                if !self.shmem_truncate_partial_folio(ctx, key, lstart, lend, memcg) {
                    end = index;
                }
            }
        }
        if start < end {
            self.shmem_truncate_range(ctx, inode, start, end);
        }
    }

    /// `shmem_get_partial_folio`: the folio holding page `index` of
    /// `inode` for a partial truncation, read back first if it is swapped
    /// out and the page lies within i_size (`shmem_get_folio(SGP_READ)`:
    /// charged to the swap entry's memcg, no fault counted); the read's
    /// reference is put at once (the kernel's after the truncation).
    /// `None`: a hole, beyond EOF, or no memory.
    fn shmem_get_partial_folio(&mut self, ctx: &mut Ctx, mm: MmId, inode: usize, index: u64) -> Option<usize> {
        if let Some(key) = self.shmem_lookup(inode, index) {
            return Some(key);
        }
        if index << self.page_shift() >= self.shmem.inodes[inode].size_bytes {
            return None;
        }
        let swapped = self.shmem_swapped_at(inode, index)?;
        let by = swap::SwapinBy { mm, vma: None };
        let key = self.shmem_swapin(ctx, by, inode, index, swapped)?;
        self.shmem_folio_put_refs(ctx, key, 1);
        Some(key)
    }

    /// The first pass of `shmem_undo_range`: the folios lying wholly in
    /// `[first, end)` (page indices) leave the page cache, freed when
    /// unmapped, and the swap entries wholly inside are freed.
    pub(crate) fn shmem_truncate_range(&mut self, ctx: &mut Ctx, inode: usize, first: u64, end: u64) {
        let keys: Vec<(u64, usize)> = self.shmem.inodes[inode]
            .cache
            .range(..end)
            .map(|(&i, &k)| (i, k))
            .filter(|&(i, k)| i >= first && i + self.shmem.folios[k].nr_pages() <= end)
            .collect();
        if !keys.is_empty() {
            // folio_batch_release drains this cpu's LRU batches first
            // (`__folio_batch_release`), so the folios die off them.
            self.lru_add_drain(ctx);
        }
        for (_, key) in keys {
            self.shmem_remove_from_cache(ctx, key);
        }
        self.shmem_free_swap_range(ctx, inode, first, end);
        self.shmem_xa_update(inode, 0);
    }

    /// The node counters of a folio entering (+1) or leaving (-1) a shmem
    /// page cache (`shmem_update_stats`) and its LRU list.
    pub(crate) fn shmem_cache_stats(&mut self, ctx: &mut Ctx, key: usize, sign: i64) {
        let (pfn, order) = (self.shmem.folios[key].pfn, self.shmem.folios[key].order);
        let nr = (1i64 << order) * sign;
        let nid = self.node_of(ctx.pa, pfn);
        let pmd_order = self.pmd_order();
        let s = &mut self.node_stat[nid];
        s.shmem += nr;
        if order == pmd_order {
            s.shmem_thps += nr;
        }
        if sign > 0 {
            self.folio_add_lru(ctx.pa, ctx.cpu, super::lru::FolioRef::Shmem(key));
        }
    }

    /// `folio_put_refs` for a shmem folio; the last reference frees it.
    pub(crate) fn shmem_folio_put_refs(&mut self, ctx: &mut Ctx, key: usize, n: u32) {
        let pfn = self.shmem.folios[key].pfn;
        let page = ctx.pa.memmap.page_mut(pfn);
        let rc = page.refcount() - n;
        page.set_refcount(rc);
        if rc > 0 {
            return;
        }
        self.free_shmem_folio(ctx, key);
    }

    /// The end of a shmem folio nothing refers to: off the LRU, uncharged,
    /// freed; one still in its `lru_add` batch waits there for the drain.
    pub(crate) fn free_shmem_folio(&mut self, ctx: &mut Ctx, key: usize) {
        let r = super::lru::FolioRef::Shmem(key);
        if self.lru_state(r).held_by_batch() {
            return self.release_to_batch(ctx.pa, r);
        }
        let pfn = self.shmem.folios[key].pfn;
        let order = self.shmem.folios[key].order;
        let memcg = self.shmem.folios[key].memcg as usize;
        self.lru_forget(ctx.pa, r);
        self.mem_cgroup_uncharge(ctx, memcg, 1 << order);
        self.shmem.folios.remove(key);
        super::rmap::free_user_folio(ctx, pfn, order);
    }

    /// A new folio enters the page cache of `inode` at `index`
    /// (`shmem_add_to_page_cache`): one reference per page for the cache
    /// on top of the caller's.
    /// `lru`: its `PG_active` and `PG_workingset`, set before it joins
    /// the LRU.
    pub(crate) fn shmem_add_to_page_cache(
        &mut self,
        ctx: &mut Ctx,
        folio: Folio,
        inode: usize,
        index: u64,
        memcg: usize,
        (active, workingset): (bool, bool),
    ) -> usize {
        let key = self.shmem.folios.insert(ShmemFolio {
            pfn: folio.pfn.0,
            order: folio.order,
            inode,
            index,
            entire_mapcount: 0,
            nr_pages_mapped: 0,
            memcg: memcg as u16,
            lru: super::lru::LruState::with_flags(active, workingset),
        });
        let i = &mut self.shmem.inodes[inode];
        i.cache.insert(index, key);
        i.xa_count_entry(index, folio.order, 1);
        self.shmem_xa_add_one(inode, index, folio.order, memcg);
        let head = ctx.pa.memmap.page_mut(folio.pfn.0);
        head.insert_flags(PageFlags::SWAPBACKED | PageFlags::UPTODATE);
        head.set_private(key as u32 + 1);
        head.set_refcount(1 + folio.nr_pages() as u32);
        self.shmem_cache_stats(ctx, key, 1);
        key
    }

    /// The folio of `inode`'s page cache holding page `index`.
    pub(crate) fn shmem_lookup(&self, inode: usize, index: u64) -> Option<usize> {
        let (&first, &key) = self.shmem.inodes[inode].cache.range(..=index).next_back()?;
        (index < first + self.shmem.folios[key].nr_pages()).then_some(key)
    }

    /// `unmap_mapping_range`: every shared mapping of pages `[first, end)`
    /// of `inode` is zapped.
    pub(crate) fn unmap_mapping_range(&mut self, ctx: &mut Ctx, inode: usize, first: u64, end: u64) {
        let shift = self.page_shift();
        let vmas: Vec<usize> = self
            .vmas
            .iter()
            .filter(|(_, v)| v.shmem == Some(inode))
            .map(|(id, _)| id)
            .collect();
        for id in vmas {
            let v = &self.vmas[id];
            let vma_first = v.pgoff;
            let vma_end = v.pgoff + ((v.end - v.start) >> shift);
            let (lo, hi) = (first.max(vma_first), end.min(vma_end));
            if lo < hi {
                let start = v.start + ((lo - vma_first) << shift);
                let stop = v.start + ((hi - vma_first) << shift);
                self.zap_range(ctx, id, start, stop);
            }
        }
    }

    /// Whether a VMA maps shmem pages.
    pub(crate) fn is_shmem_vma(&self, vma: usize) -> bool {
        self.vmas[vma].backing == VmaBacking::Shmem
    }
}

/// The pages `[first, end)` a hole punch of `len` bytes at `offset` unmaps
/// (`shmem_fallocate`): from the first whole page to the last, as the
/// kernel's unsigned arithmetic has it. A punch that ends inside the
/// file's first page makes the range's end -1: `unmap_mapping_range` then
/// takes a length of 0 (at offset 0) or of nearly 2^64 bytes, and
/// `unmap_mapping_pages` unmaps from the start page to the end of the file.
fn punch_unmap_pages(offset: u64, len: u64, page_size: u64) -> Option<(u64, u64)> {
    let shift = page_size.trailing_zeros();
    let unmap_start = offset.next_multiple_of(page_size);
    let unmap_end = (offset.saturating_add(len) & !(page_size - 1)).wrapping_sub(1);
    if unmap_end <= unmap_start {
        return None;
    }
    let hole_bytes = unmap_end.wrapping_sub(unmap_start).wrapping_add(1);
    let first = unmap_start >> shift;
    let end = match hole_bytes {
        0 => u64::MAX,
        n => first.saturating_add(n.div_ceil(page_size)),
    };
    Some((first, end))
}

#[cfg(test)]
mod tests {
    use super::punch_unmap_pages;

    #[test]
    fn a_punch_unmaps_its_whole_pages_and_one_ending_in_page_0_to_the_end() {
        let p = 4096;
        assert_eq!(punch_unmap_pages(p, 2 * p, p), Some((1, 3)));
        assert_eq!(
            punch_unmap_pages(100, 3 * p, p),
            Some((1, 3)),
            "partial edges stay mapped"
        );
        assert_eq!(punch_unmap_pages(p + 100, 100, p), None, "inside page 1: nothing");
        assert_eq!(
            punch_unmap_pages(0, 100, p),
            Some((0, u64::MAX)),
            "length 0 at offset 0: all"
        );
        let (first, end) = punch_unmap_pages(100, 100, p).unwrap();
        assert_eq!(first, 1, "inside page 0 past its start: from page 1...");
        assert!(end >= 1 << 52, "...to the end of any file");
    }
}
