//! The anonymous page fault (mm/memory.c `handle_mm_fault`,
//! `__handle_mm_fault`, `do_anonymous_page`, `alloc_anon_folio`,
//! `do_wp_page`, `wp_page_copy`, v6.15+).

use super::order::highest_order;
use super::pgtable::{Pte, Slot};
use super::stats::MthpStat;
use super::types::{Access, MmId, Pid, SegvCode, VmError, VmFlags, VmaId};
use super::{Ctx, Vm};
use crate::memcg::SlabCache;
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::{Gfp, GFP_HIGHUSER_MOVABLE};
use crate::stats::VmEvent;

/// `vm_fault_t` outcomes the model distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Done,
    /// `VM_FAULT_FALLBACK`: retry at the PTE level.
    Fallback,
    /// `VM_FAULT_OOM`.
    Oom,
    /// `VM_FAULT_SIGBUS`.
    Sigbus,
    /// Nothing done: the entry changed under the fault (a `pte_same`
    /// check failed, e.g. reclaim unmapped the page while the fault
    /// allocated). The access runs again, a new fault.
    Retry,
}

/// The fault being handled (`struct vm_fault`): who, where, what access.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VmFault {
    pub mm: MmId,
    pub vma: VmaId,
    /// The faulting address.
    pub address: u64,
    pub write: bool,
    /// Only an order-0 folio may be allocated (exec's `get_arg_page`,
    /// whose stack VMA then reaches just down to the page).
    pub small_only: bool,
}

/// The byte a write access stores on the ram backing (any non-zero value:
/// written pages must not look zero-filled).
const WRITE_BYTE: u8 = 0x5a;

impl Vm {
    /// A user access by `pid`: a hit if the page tables allow it (the
    /// hardware sets the accessed and dirty bits), otherwise a page fault.
    /// On OOM the killer has already picked and killed a victim.
    pub fn access(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, write: bool) -> Result<Access, VmError> {
        self.access_with(ctx, pid, addr, write, false)
    }

    /// A page exec itself writes (`copy_strings` -> `get_arg_page`) while
    /// the new stack VMA reaches only down to that page: no large folio
    /// fits, so the page is order 0 whatever the THP settings.
    pub fn exec_page(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64) -> Result<Access, VmError> {
        self.access_with(ctx, pid, addr, true, true)
    }

    fn access_with(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        addr: u64,
        write: bool,
        small_only: bool,
    ) -> Result<Access, VmError> {
        let mm = self.task_mm(pid)?;
        if self.access_hits(ctx, mm, addr, write) {
            return Ok(Access::Hit);
        }
        self.access_fault(ctx, pid, addr, write, small_only)
    }

    /// An access the page tables do not allow (not a hit): the fault.
    pub(crate) fn access_fault(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        addr: u64,
        write: bool,
        small_only: bool,
    ) -> Result<Access, VmError> {
        let mm = self.task_mm(pid)?;
        let Some(vma) = self.find_vma(mm, addr).or_else(|| self.expand_stack(mm, addr)) else {
            return Ok(Access::Segv(SegvCode::MapErr));
        };
        let flags = self.vmas[vma].flags;
        if (write && !flags.contains(VmFlags::WRITE)) || !flags.accessible() {
            return Ok(Access::Segv(SegvCode::AccErr));
        }
        let shmem = self.is_shmem_vma(vma);
        if !self.vmas[vma].is_anonymous() && !shmem {
            return Ok(Access::NotModelled);
        }
        let vmf = VmFault {
            mm,
            vma,
            address: addr,
            write,
            small_only,
        };
        let mut retries = 0u32;
        // A memcg OOM kill left over from a charge outside a fault that
        // failed without one is not this fault's.
        self.memcg_oom_pending = None;
        loop {
            ctx.pa.events.count(VmEvent::Pgfault, 1);
            let memcg = self.mm_memcg(mm);
            if memcg != 0 {
                self.memcg.get_mut(memcg).stat.pgfault += 1;
            }
            let majors = ctx.pa.events.get(VmEvent::Pgmajfault);
            let result = if shmem {
                self.handle_shmem_fault(ctx, &vmf)
            } else {
                self.handle_mm_fault(ctx, &vmf)
            };
            if memcg != 0 {
                self.memcg.get_mut(memcg).stat.pgmajfault += ctx.pa.events.get(VmEvent::Pgmajfault) - majors;
            }
            self.run_pending_kswapd(ctx);
            return match result {
                Fault::Retry => {
                    // Each retry follows reclaim that changed the entry; a
                    // model that kept changing it would hang here instead.
                    retries += 1;
                    debug_assert!(retries < 10_000, "a fault at {addr:#x} retried {retries} times");
                    continue;
                }
                Fault::Oom => match self.pagefault_out_of_memory(ctx, pid) {
                    Some(outcome) => outcome,
                    None => continue,
                },
                Fault::Sigbus => Ok(Access::Sigbus),
                _ => {
                    self.user_store(ctx, mm, addr, write);
                    Ok(Access::Faulted)
                }
            };
        }
    }

    /// `pagefault_out_of_memory` after a fault of `pid` failed with
    /// `VM_FAULT_OOM`: a memcg's OOM kill is done now, and the fault is to
    /// be made again (`None`) unless this task was the victim; without
    /// one, the global OOM killer.
    pub(super) fn pagefault_out_of_memory(&mut self, ctx: &mut Ctx, pid: Pid) -> Option<Result<Access, VmError>> {
        if let Some(memcg) = self.memcg_oom_pending.take() {
            let tgid = self.tasks.get(&pid).map_or(pid, |t| t.tgid);
            return match self.memcg_out_of_memory(ctx, memcg, pid) {
                Some(victim) if victim != tgid => None,
                _ => Some(Ok(Access::Oom)),
            };
        }
        self.out_of_memory(ctx, pid);
        Some(Ok(Access::Oom))
    }

    /// The MMU's walk: a present leaf that allows the access. Nothing at
    /// or above TASK_SIZE is the user's (the walk would wrap the top
    /// index onto a user entry).
    fn access_hits(&mut self, ctx: &mut Ctx, mm: MmId, addr: u64, write: bool) -> bool {
        if addr >= self.pt.shape.task_size {
            return false;
        }
        let root = self.mms[mm].pgd;
        let Some((table, index, level)) = self.pt.leaf(root, addr) else {
            return false;
        };
        self.hit_at(ctx, table, index, level, addr, write)
    }

    /// What a completed write leaves behind: the page's contents change.
    fn user_store(&mut self, ctx: &mut Ctx, mm: MmId, addr: u64, write: bool) {
        if !write {
            return;
        }
        let root = self.mms[mm].pgd;
        let Some((table, index, level)) = self.pt.leaf(root, addr) else {
            return;
        };
        let e = self.pt.get(table, index);
        if e.present() {
            self.store_through(ctx, e, level, addr);
        }
    }

    /// The write itself, through a present leaf entry `e` at `level`.
    #[inline(always)]
    pub(crate) fn store_through(&mut self, ctx: &mut Ctx, e: Pte, level: u32, addr: u64) {
        if e.is_special() {
            return;
        }
        let offset_pages = if level == 0 {
            0
        } else {
            (addr >> self.page_shift()) & ((1 << (level * self.pt.shape.bits_per_level)) - 1)
        };
        self.store_page(ctx, e.pfn() + offset_pages, addr);
    }

    /// The write of a user store at `addr` into page `pfn`.
    #[inline]
    fn store_page(&self, ctx: &mut Ctx, pfn: u64, addr: u64) {
        store_user_page(ctx, pfn, addr & (self.page_size() - 1));
    }

    /// `__handle_mm_fault` for an anonymous VMA.
    pub(crate) fn handle_mm_fault(&mut self, ctx: &mut Ctx, vmf: &VmFault) -> Fault {
        let Some(table) = self.table_for(ctx, vmf.mm, vmf.address, 1) else {
            return Fault::Oom;
        };
        let pmd = Slot {
            table,
            index: self.pt.shape.index(1, vmf.address),
        };
        let entry = self.pt.entry(pmd);
        if entry.is_none() && !vmf.small_only && self.pmd_fault_orders(vmf) != 0 {
            match self.do_huge_pmd_anonymous_page(ctx, vmf, pmd) {
                Fault::Fallback => {}
                done => return done,
            }
        } else if entry.present() && entry.is_huge() {
            if vmf.write && !entry.writable() {
                match self.do_huge_pmd_wp_page(ctx, vmf, pmd) {
                    Fault::Fallback => {}
                    done => return done,
                }
            } else {
                self.pt.set_slot(pmd, entry.with(access_bits(vmf.write)));
                return Fault::Done;
            }
        }
        self.handle_pte_fault(ctx, vmf, pmd)
    }

    /// `handle_pte_fault`.
    fn handle_pte_fault(&mut self, ctx: &mut Ctx, vmf: &VmFault, pmd: Slot) -> Fault {
        let entry = self.pt.entry(pmd);
        if entry.is_table() {
            let pte = Slot {
                table: entry.table_idx(),
                index: self.pt.shape.index(0, vmf.address),
            };
            let e = self.pt.entry(pte);
            if e.present() {
                if vmf.write && !e.writable() {
                    return self.do_wp_page(ctx, vmf, pte);
                }
                self.pt.set_slot(pte, e.with(access_bits(vmf.write)));
                return Fault::Done;
            }
            if e.is_swap() {
                self.anon_vma_prepare(vmf.vma);
                return self.do_swap_page(ctx, vmf, pte, e);
            }
        }
        self.do_anonymous_page(ctx, vmf, pmd)
    }

    /// `do_wp_page` for the PTE now mapping `vmf.address` (a swap-in that
    /// could not map the page writable).
    pub(crate) fn do_wp_page_at(&mut self, ctx: &mut Ctx, vmf: &VmFault) -> Fault {
        let Some(table) = self.pt.lookup(self.mms[vmf.mm].pgd, vmf.address, 0) else {
            return Fault::Done;
        };
        let pte = Slot {
            table,
            index: self.pt.shape.index(0, vmf.address),
        };
        self.do_wp_page(ctx, vmf, pte)
    }

    /// The table at `level` covering `addr`, allocating the levels above
    /// it and itself as needed (`p4d_alloc`/`pud_alloc`/`pmd_alloc`/`pte_alloc`).
    pub(crate) fn table_for(&mut self, ctx: &mut Ctx, mm: MmId, addr: u64, level: u32) -> Option<usize> {
        let root = self.mms[mm].pgd;
        // Present already (the common case): no allocation to make.
        if let Some(t) = self.pt.lookup(root, addr, level) {
            return Some(t);
        }
        let mut table = root;
        for l in (level + 1..self.pt.shape.levels).rev() {
            let idx = self.pt.shape.index(l, addr);
            let e = self.pt.get(table, idx);
            table = if e.is_table() {
                e.table_idx()
            } else if e.is_none() {
                let next = self.alloc_table(ctx, mm, l - 1)?;
                self.pt.set(table, idx, Pte::table(next));
                next
            } else {
                return None;
            };
        }
        Some(table)
    }

    /// `pte_alloc`: the PTE table the PMD entry `pmd` points to, allocated
    /// and set there if it is none ([`Vm::table_for`]'s last step). `None`
    /// when the allocation fails, or, as `table_for` answers, when the
    /// entry is neither none nor a table (a huge or swap PMD entry).
    fn pte_alloc(&mut self, ctx: &mut Ctx, mm: MmId, pmd: Slot) -> Option<usize> {
        let e = self.pt.entry(pmd);
        if e.is_table() {
            return Some(e.table_idx());
        }
        if !e.is_none() {
            return None;
        }
        let table = self.alloc_table(ctx, mm, 0)?;
        self.pt.set_slot(pmd, Pte::table(table));
        Some(table)
    }

    /// `do_anonymous_page`, under the PMD entry `pmd` of the fault's walk.
    fn do_anonymous_page(&mut self, ctx: &mut Ctx, vmf: &VmFault, pmd: Slot) -> Fault {
        let Some(pte_table) = self.pte_alloc(ctx, vmf.mm, pmd) else {
            return Fault::Oom;
        };
        if !vmf.write {
            let idx = self.pt.shape.index(0, vmf.address);
            self.pt
                .set(pte_table, idx, Pte::leaf(self.zero_pfn, Pte::SPECIAL | Pte::YOUNG));
            return Fault::Done;
        }
        self.anon_vma_prepare(vmf.vma);
        let folio = if vmf.small_only {
            let memcg = self.mm_memcg(vmf.mm);
            self.folio_prealloc(ctx, memcg, true)
        } else {
            self.alloc_anon_folio(ctx, vmf.vma, pte_table, vmf.address)
        };
        let Some(folio) = folio else {
            return Fault::Oom;
        };
        self.map_anon_folio(ctx, vmf, pte_table, folio);
        Fault::Done
    }

    /// The rest of `do_anonymous_page` once its folio is allocated,
    /// charged and zeroed: the folio's references and rss, its
    /// `anon_fault_alloc`, its rmap and LRU add, and `set_ptes` of the
    /// whole folio (young, dirty, writable as the VMA is) in `pte_table`.
    pub(super) fn map_anon_folio(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte_table: usize, folio: Folio) {
        let nr = folio.nr_pages();
        let haddr = vmf.address & !((self.page_size() << folio.order) - 1);
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(nr as u32);
        self.mms[vmf.mm].rss_anon += nr;
        self.mthp.add(folio.order, MthpStat::AnonFaultAlloc, 1);
        self.add_new_anon_rmap(ctx, folio, vmf.vma, haddr, false);
        let flags = Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vmf.vma);
        let first = self.pt.shape.index(0, haddr);
        self.pt.set_ptes(pte_table, first, folio.pfn.0, nr as usize, flags);
        self.policy_mapped(ctx, vmf.vma, vmf.address, folio.order);
    }

    /// `maybe_mkwrite`: the write bit if the VMA is writable.
    #[inline]
    pub(crate) fn vma_write_bit(&self, vma: VmaId) -> u64 {
        if self.vmas[vma].flags.contains(VmFlags::WRITE) {
            Pte::WRITE
        } else {
            0
        }
    }

    /// `alloc_anon_folio`: the largest allowed, suitable order whose range
    /// is all `pte_none`, falling back order by order (each failure counted
    /// in `anon_fault_fallback`), order 0 last. The folio is zeroed.
    pub(super) fn alloc_anon_folio(&mut self, ctx: &mut Ctx, vma: VmaId, pte_table: usize, addr: u64) -> Option<Folio> {
        let memcg = self.mm_memcg(self.vmas[vma].mm);
        let mut orders = self.allowable_orders(vma, (1 << self.pmd_order()) - 1);
        orders = self.suitable_orders(vma, addr, orders);
        orders = self.pte_none_orders(pte_table, addr, orders);
        orders = self.policy_orders(vma, addr, orders);
        if orders != 0 {
            let gfp = self.thp_gfp_mask(vma);
            while orders != 0 {
                let order = highest_order(orders);
                orders &= !(1 << order);
                if self.thp.anon_beside_full && !self.beside_full(pte_table, addr, order) {
                    self.mthp.add(order, MthpStat::AnonFaultDeclined, 1);
                    continue;
                }
                if let Some(folio) = self.alloc_folio(ctx, gfp, order) {
                    if self.mem_cgroup_charge(ctx, folio, memcg, gfp) {
                        self.zero_folio(ctx, folio);
                        return Some(folio);
                    }
                    self.mthp.add(order, MthpStat::AnonFaultFallbackCharge, 1);
                    self.free_unused_folio(ctx, folio);
                }
                self.mthp.add(order, MthpStat::AnonFaultFallback, 1);
            }
        }
        self.folio_prealloc(ctx, memcg, true)
    }

    /// `folio_prealloc`: an order-0 folio charged to `memcg` with
    /// `GFP_KERNEL` (zeroed if asked); `None` when either fails.
    pub(crate) fn folio_prealloc(&mut self, ctx: &mut Ctx, memcg: usize, zero: bool) -> Option<Folio> {
        let gfp = if zero {
            GFP_HIGHUSER_MOVABLE | Gfp::ZERO
        } else {
            GFP_HIGHUSER_MOVABLE
        };
        let folio = self.alloc_folio(ctx, gfp, 0)?;
        if !self.mem_cgroup_charge(ctx, folio, memcg, crate::page_alloc::gfp::GFP_KERNEL) {
            self.free_unused_folio(ctx, folio);
            return None;
        }
        Some(folio)
    }

    /// Clears a new folio (`folio_zero_user`).
    pub(crate) fn zero_folio(&mut self, ctx: &mut Ctx, folio: Folio) {
        self.work.pages_zeroed += folio.nr_pages();
        ctx.backing
            .zero(folio.pfn, folio.nr_pages())
            .unwrap_or_else(|e| unreachable!("allocated memory outside the backing: {e}"));
    }

    /// A folio allocated but not used (its charge failed): freed at once.
    pub(crate) fn free_unused_folio(&mut self, ctx: &mut Ctx, folio: Folio) {
        ctx.pa.memmap.page_mut(folio.pfn.0).set_refcount(1);
        ctx.pa
            .free_folio(ctx.cpu, folio)
            .unwrap_or_else(|e| unreachable!("unused folio not freeable: {e}"));
    }

    /// `anon_vma_prepare`: the VMA gets an anon_vma on its first anonymous
    /// fault, shared with an adjacent compatible VMA when possible
    /// (`find_mergeable_anon_vma`) so the two can still merge.
    #[inline]
    pub(crate) fn anon_vma_prepare(&mut self, vma: VmaId) {
        if self.vmas[vma].anon_vma.is_none() {
            self.anon_vma_prepare_new(vma);
        }
    }

    /// The first anonymous fault of a VMA: its anon_vma.
    fn anon_vma_prepare_new(&mut self, vma: VmaId) {
        let mm = self.vmas[vma].mm;
        self.slab_alloc(mm, SlabCache::AnonVmaChain, 1);
        let av = self
            .find_mergeable_anon_vma(vma)
            .unwrap_or_else(|| self.alloc_anon_vma(mm));
        self.anon_vmas[av].vmas.push(vma);
        self.vma_layout_changed();
        let v = &mut self.vmas[vma];
        v.anon_vma = Some(av);
        v.chain = vec![av];
    }

    /// `do_wp_page` on a private anonymous mapping: reuse the page if it is
    /// exclusive or can be made so, otherwise copy it (always order 0).
    fn do_wp_page(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot) -> Fault {
        let e = self.pt.entry(pte);
        if e.is_special() {
            return self.wp_page_copy(ctx, vmf, pte, None);
        }
        let pfn = e.pfn();
        let key = self
            .folio_key_of_pfn(ctx.pa, pfn)
            .unwrap_or_else(|| unreachable!("a private anonymous PTE maps non-anon page {pfn:#x}"));
        let exclusive = ctx.pa.memmap.page(pfn).flags().contains(PageFlags::ANON_EXCLUSIVE);
        if exclusive || self.wp_can_reuse_anon_folio(ctx, key, vmf.vma) {
            ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::ANON_EXCLUSIVE);
            // wp_page_reuse
            ctx.pa.events.count(VmEvent::Pgreuse, 1);
            let flags = Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vmf.vma);
            self.pt.set_slot(pte, e.with(flags));
            return Fault::Done;
        }
        self.wp_page_copy(ctx, vmf, pte, Some((key, pfn)))
    }

    /// `wp_can_reuse_anon_folio`, with `__wp_can_reuse_large_anon_folio`
    /// for large folios (CONFIG_MM_ID): all references are mappings of this
    /// mm, and more than one page of the folio is mapped.
    fn wp_can_reuse_anon_folio(&mut self, ctx: &mut Ctx, key: usize, vma: VmaId) -> bool {
        let meta = &self.folios[key];
        let refcount = ctx.pa.memmap.page(meta.pfn).refcount() as i32;
        if meta.is_large() {
            if meta.large_mapcount <= 1 || meta.maybe_mapped_shared {
                return false;
            }
            if meta.swap.is_some() {
                self.folio_free_swap(ctx, key);
            }
            let refcount = ctx.pa.memmap.page(self.folios[key].pfn).refcount() as i32;
            return self.folios[key].large_mapcount == refcount;
        }
        let swapcache = i32::from(meta.swap.is_some());
        if refcount > 1 + swapcache {
            return false;
        }
        if swapcache > 0 {
            self.folio_free_swap(ctx, key);
        }
        if ctx.pa.memmap.page(self.folios[key].pfn).refcount() != 1 {
            return false;
        }
        self.folio_move_anon_rmap(key, vma);
        true
    }

    /// `folio_move_anon_rmap`: an exclusive folio moves to the VMA's own anon_vma.
    pub(crate) fn folio_move_anon_rmap(&mut self, key: usize, vma: VmaId) {
        let new = self.vmas[vma].anon_vma.expect("faulting VMA has an anon_vma");
        let old = self.folios[key].anon_vma;
        if old == new {
            return;
        }
        self.folios[key].anon_vma = new;
        self.anon_vmas[new].nr_folios += 1;
        self.put_anon_vma_folio(old);
    }

    /// `__wp_page_copy_user`: the old page's contents into the new one.
    fn copy_user_page(&mut self, ctx: &mut Ctx, src_pfn: u64, new: Folio) {
        self.work.pages_copied += 1;
        ctx.backing
            .copy(largo_types::Pfn(src_pfn), new.pfn, 1)
            .unwrap_or_else(|e| unreachable!("page copy outside the backing: {e}"));
    }

    /// `wp_page_copy`: a new exclusive order-0 page replaces the mapped
    /// one (zeroed for the zero page, else a copy).
    fn wp_page_copy(&mut self, ctx: &mut Ctx, vmf: &VmFault, pte: Slot, old: Option<(usize, u64)>) -> Fault {
        let orig = self.pt.entry(pte);
        self.anon_vma_prepare(vmf.vma);
        if let Some((key, _)) = old {
            self.folio_ref_add(ctx.pa, key, 1);
        }
        let memcg = self.mm_memcg(vmf.mm);
        let Some(new) = self.folio_prealloc(ctx, memcg, old.is_none()) else {
            if let Some((key, _)) = old {
                self.folio_put_refs(ctx, key, 1);
            }
            return Fault::Oom;
        };
        // pte_same, checked after the copy: reclaim, run by the
        // allocation, may have unmapped the old page meanwhile (the fault's
        // reference only keeps it from being freed or split). Then the new
        // folio goes and the access faults again.
        if let Some((_, pfn)) = old {
            self.copy_user_page(ctx, pfn, new);
        }
        if self.pt.entry(pte) != orig {
            self.mem_cgroup_uncharge(ctx, memcg, 1);
            self.free_unused_folio(ctx, new);
            if let Some((key, _)) = old {
                self.folio_put_refs(ctx, key, 1);
            }
            return Fault::Retry;
        }
        if let Some((_, pfn)) = old {
            let written = ctx.pa.memmap.page(pfn).flags() & PageFlags::USER_WRITTEN;
            ctx.pa.memmap.page_mut(new.pfn.0).insert_flags(written);
        } else {
            self.mms[vmf.mm].rss_anon += 1;
        }
        ctx.pa.memmap.page_mut(new.pfn.0).set_refcount(1);
        let addr = vmf.address & !(self.page_size() - 1);
        self.add_new_anon_rmap(ctx, new, vmf.vma, addr, false);
        let flags = Pte::YOUNG | Pte::DIRTY | self.vma_write_bit(vmf.vma);
        self.pt.set_slot(pte, Pte::leaf(new.pfn.0, flags));
        if let Some((key, pfn)) = old {
            self.remove_rmap_ptes(ctx.pa, key, pfn, 1, vmf.mm);
            self.folio_put_refs(ctx, key, 2);
        }
        Fault::Done
    }
}

/// A user store at byte `offset` of page `pfn`: the page is marked
/// written, and on the ram backing the byte lands in its frame.
#[inline]
pub(super) fn store_user_page(ctx: &mut Ctx, pfn: u64, offset: u64) {
    ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::USER_WRITTEN);
    store_user_data(ctx, pfn, offset);
}

/// The byte a user store writes, in a ram backing (its mark,
/// `PageFlags::USER_WRITTEN`, made by the caller).
#[inline]
pub(super) fn store_user_data(ctx: &mut Ctx, pfn: u64, offset: u64) {
    if ctx.ram {
        ctx.backing
            .write(largo_types::Pfn(pfn), offset, &[WRITE_BYTE])
            .unwrap_or_else(|e| unreachable!("mapped page outside the backing: {e}"));
    }
}

/// The accessed/dirty bits an access sets.
#[inline]
pub(crate) fn access_bits(write: bool) -> u64 {
    if write {
        Pte::YOUNG | Pte::DIRTY
    } else {
        Pte::YOUNG
    }
}
