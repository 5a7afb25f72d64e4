//! Runs of order-0 anonymous write faults: a first touch of memory that
//! no mTHP size may back, page after page (page_fault1 at 4K, a program
//! writing its heap), top down (a buffer filled from its end, as sort
//! does), or every few pages. Each fault is exactly the one
//! [`Vm::access`] would take: `handle_mm_fault` -> `do_anonymous_page` ->
//! `folio_prealloc` -> `folio_add_new_anon_rmap` -> `set_pte`, then the
//! store. What the run saves is what the faults share: the task, the VMA
//! and its checks, the order decision (none allowed) and the walk to the
//! PTE table are found once, and each next fault reads its entry of that
//! table, as `hit_pte_run` does for hits. Nothing a fault does depends on
//! where the fault before it was, so the direction and the gaps change
//! nothing but which entries the run reads.
//!
//! The run keeps to the case whose faults cannot change what it found:
//! the root memcg (a limit's reclaim or OOM kill could), a static order
//! policy (a dynamic one may promote around the page), no mTHP order
//! allowed in the VMA. Its pages go one way, so no two faults are in one
//! page. It ends at the first entry that is not none, outside the VMA
//! or the table, after a fault that woke kswapd (its reclaim may unmap
//! pages of this table), and at a failed allocation; the general path
//! takes it from there.

use super::fault::store_user_data;
use super::order::Orders;
use super::pgtable::Pte;
use super::rmap::{NewAnon, NewPage};
use super::types::{Access, AnonVmaId, MmId, Pid, VmError, VmFlags, VmaId};
use super::{Ctx, Vm};
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::{Gfp, GFP_HIGHUSER_MOVABLE, GFP_KERNEL};
use crate::stats::VmEvent;

/// How much the fault runs took on (diagnostics only: not a counter of
/// the modelled machine, which is the same with runs and without).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultRunStats {
    /// Runs that made at least one fault.
    pub runs: u64,
    /// Faults made in runs.
    pub faults: u64,
    /// Of those, faults given a page of a batch of pcp allocations.
    pub batched: u64,
    /// Runs of faults that may map large folios (`large_fault_run.rs`)
    /// that made at least one fault.
    pub large_runs: u64,
    /// Accesses made in those runs: their faults and the hits in the
    /// folios they mapped.
    pub large_accesses: u64,
}

/// Counts of a run's faults not yet added to their counters
/// ([`Vm::flush_run_counts`]).
#[derive(Default)]
struct RunCounts {
    /// Faults begun (`pgfault`).
    faults: u64,
    /// Folios mapped.
    mapped: u64,
}

/// What a fault run's caller knows of the pages its accesses fall in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pages {
    /// Access `k` is in the `k`-th page after the first's.
    Consecutive,
    /// Nothing: each is read from its address.
    Any,
}

/// What a run of faults did: the faults completed, and the outcome that
/// ended the run when it was not simply the end of the run's reach.
pub(super) struct FaultRun {
    pub done: u64,
    pub stop: Option<Result<Access, VmError>>,
}

impl Vm {
    /// Whether access runs take anonymous write faults as runs (the
    /// default: order-0 runs here, runs that may map large folios in
    /// `large_fault_run.rs`) or one by one through the general path: the
    /// two give the same machine, which tests check.
    pub fn set_fault_runs(&mut self, on: bool) {
        self.fault_runs = on;
    }

    /// What the fault runs took on so far.
    pub fn fault_run_stats(&self) -> FaultRunStats {
        self.fault_run_stats
    }

    /// Up to `count` write accesses by `pid`, access `k` at `addr_of(k)`
    /// (at any offset in its page), as long as each is in one page table
    /// and VMA with the first, each in a later page than the one before or
    /// each in an earlier one ([`Vm::run_nones`]), and a fault on a none
    /// PTE that maps a new order-0 folio, each made as
    /// [`Vm::access_fault`] makes it. With `per_operation`, each access
    /// is a machine operation of its own to the caller, and the run ends
    /// after one that leaves work for the end of its operation
    /// ([`Vm::operation_work_pending`]). Returns how many were made (0:
    /// the first access is not such a fault, or the run's conditions do
    /// not hold; the caller takes the general path for it).
    pub(super) fn anon_fault_run(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        count: u64,
        addr_of: impl Fn(u64) -> u64,
        pages: Pages,
        per_operation: bool,
    ) -> FaultRun {
        let addr = addr_of(0);
        let none = FaultRun { done: 0, stop: None };
        // A size enabled `always` gives every VMA a large order: known
        // here without the task or the VMA (the common case of an mTHP
        // configuration, whose faults are few and large).
        let always_orders = self.thp.size_masks()[0] & ((1 << (self.pmd_order() + 1)) - 1);
        if always_orders != 0 {
            return none;
        }
        let Some((mm, vma)) = self.fault_run_vma(pid, addr) else {
            return none;
        };
        // No mTHP order and no PMD order: every fault's folio is order 0
        // (`alloc_anon_folio` falls to `folio_prealloc`, and
        // `__handle_mm_fault` never tries the PMD).
        let all_orders: Orders = (1 << (self.pmd_order() + 1)) - 1;
        if self.allowable_orders(vma, all_orders) != 0 {
            return none;
        }
        let Some(table) = self.pt.lookup(self.mms[mm].pgd, addr, 0) else {
            return none;
        };
        let write_bit = self.vma_write_bit(vma);
        let nones = self.run_nones(table, vma, count, &addr_of, pages);
        let (page_size, page_shift) = (self.page_size(), self.page_shift());
        // A PTE's index in its table: the low bits of its page number.
        let index_mask = self.pt.shape.entries_at(0) - 1;
        // `add_new_anon_rmap`'s flags: exclusive, inactive, charged to the
        // root memcg (the run's condition).
        let new_anon = NewAnon {
            exclusive: true,
            active: false,
            workingset: false,
            memcg: 0,
        };
        if nones == 0 {
            return none;
        }
        // do_anonymous_page's anon_vma_prepare: the first fault's prepares
        // the VMA's, the others find it.
        self.anon_vma_prepare(vma);
        self.memcg_oom_pending = None;
        let mut pfns = std::mem::take(&mut self.fault_run_pfns);
        let mut next_pfn = 0;
        let mut run = none;
        let anon_vma = self.vmas[vma].anon_vma.expect("anon_vma_prepare ran");
        // `linear_page_index`: each page's offset in the VMA's anon_vma.
        let (vm_start, vm_pgoff) = (self.vmas[vma].start, self.vmas[vma].pgoff);
        let mut counts = RunCounts::default();
        let one_node = self.node_stat.len() == 1;
        while run.done < nones {
            // access_fault: a fault is counted before it is handled.
            counts.faults += 1;
            let left = nones - run.done;
            if next_pfn == pfns.len() {
                // Whatever takes the next pages may reclaim or kill:
                // it sees the faults counted so far.
                self.flush_run_counts(ctx, mm, anon_vma, &mut counts);
            }
            let Some(folio) = self.anon_fault_run_folio(ctx, &mut pfns, &mut next_pfn, left, per_operation) else {
                self.flush_run_counts(ctx, mm, anon_vma, &mut counts);
                self.run_pending_kswapd(ctx);
                // None: the fault is made again, by the caller's general path
                // (counted again, as the kernel's retry counts it).
                run.stop = self.pagefault_out_of_memory(ctx, pid);
                if run.stop.is_some() {
                    run.done += 1;
                }
                break;
            };
            let a = addr_of(run.done);
            let index = (a >> page_shift) as usize & index_mask;
            // The rss, the (order-0, so uncounted) mTHP fault allocation
            // and the rmap's counts go in `counts`.
            counts.mapped += 1;
            if !one_node {
                let nid = self.node_of(ctx.pa, folio.pfn.0);
                self.node_stat[nid].anon_mapped += 1;
            }
            // The page's first reference, and the mark of the store through
            // the entry about to be set, go into its record with the
            // rmap's: nothing in between reads them. Not the mark when
            // kswapd is to run first (woken by this fault's allocation;
            // nothing after it wakes kswapd): its reclaim decides whether
            // the store finds the page.
            let stored = !ctx.pa.kswapd_pending();
            let page = NewPage {
                first_ref: true,
                flags: if stored {
                    PageFlags::USER_WRITTEN
                } else {
                    PageFlags::empty()
                },
            };
            let page_index = vm_pgoff + ((a - vm_start) >> page_shift);
            self.add_new_anon_rmap_order0_uncounted(ctx, folio.pfn.0, anon_vma, page_index, new_anon, page);
            self.pt
                .set_ptes(table, index, folio.pfn.0, 1, Pte::YOUNG | Pte::DIRTY | write_bit);
            run.done += 1;
            debug_assert_eq!(stored, !ctx.pa.kswapd_pending(), "the rmap woke kswapd");
            if !stored {
                self.flush_run_counts(ctx, mm, anon_vma, &mut counts);
                self.run_pending_kswapd(ctx);
                // The store goes through whatever kswapd left of the
                // entry (it may have reclaimed the page just mapped).
                let e = self.pt.get(table, index);
                if e.present() {
                    self.store_through(ctx, e, 0, a);
                }
                break;
            }
            // The rest of the store, through the entry just set.
            store_user_data(ctx, folio.pfn.0, a & (page_size - 1));
            if per_operation && self.operation_work_pending() {
                // The fault left work for the end of its operation (its
                // LRU add drained a batch that held released folios): the
                // caller ends the operation before the next access.
                break;
            }
        }
        self.flush_run_counts(ctx, mm, anon_vma, &mut counts);
        // A batch serves only faults the run makes: it ends with a fault
        // that runs kswapd only at its last page (the pop that woke it, or
        // a batch of one while a wakeup was pending), and with one that
        // leaves work for its operation only where `faults_in_operation`
        // cut it. A page taken and not mapped would be lost.
        assert_eq!(next_pfn, pfns.len(), "pages allocated for faults not made");
        if run.done > 0 {
            self.fault_run_stats.runs += 1;
            self.fault_run_stats.faults += run.done;
        }
        pfns.clear();
        self.fault_run_pfns = pfns;
        run
    }

    /// The mm of `pid` and its VMA at `addr` when a run of faults (of
    /// order-0 folios here, of any order in `large_fault_run.rs`) may
    /// start there: runs on, a static order policy, the root memcg's task
    /// (ruled out before its VMA), a writable, accessible, private
    /// anonymous VMA. `None` sends the access to the general path.
    pub(super) fn fault_run_vma(&self, pid: Pid, addr: u64) -> Option<(MmId, VmaId)> {
        if !self.fault_runs || !self.thp.policy.is_static() || addr >= self.pt.shape.task_size {
            return None;
        }
        let mm = self.task_mm(pid).ok()?;
        if self.mm_memcg(mm) != 0 {
            return None;
        }
        let vma = self.find_vma(mm, addr)?;
        let v = &self.vmas[vma];
        let anonymous = v.flags.contains(VmFlags::WRITE) && v.flags.accessible() && v.is_anonymous();
        (anonymous && !self.is_shmem_vma(vma)).then_some((mm, vma))
    }

    /// Adds the run's faults and mapped folios not yet counted to their
    /// counters, and starts counting again: `pgfault` per fault; per
    /// folio mapped the rss, the rmap call, the new folio, the anon_vma's
    /// folios and the node's `anon_mapped`, as
    /// [`Vm::add_new_anon_rmap_order0`] counts them.
    fn flush_run_counts(&mut self, ctx: &mut Ctx, mm: MmId, anon_vma: AnonVmaId, counts: &mut RunCounts) {
        let RunCounts { faults, mapped } = std::mem::take(counts);
        ctx.pa.events.count(VmEvent::Pgfault, faults);
        if mapped == 0 {
            return;
        }
        self.mms[mm].rss_anon += mapped;
        self.work.rmap_calls += mapped;
        self.work.rmap_pages += mapped;
        self.work.folios_new += mapped;
        self.anon_vmas[anon_vma].nr_folios += mapped;
        if self.node_stat.len() == 1 {
            self.node_stat[0].anon_mapped += mapped as i64;
        }
    }

    /// How many of the accesses `addr_of(0)`, `addr_of(1)`, ... (up to
    /// `count`) the run may make as faults on none entries of the PTE
    /// table `table`, which maps the first: those before the first access
    /// outside `vma` or that table, at an entry that is not none, or in a
    /// page that does not continue the run's direction (each page after
    /// the one before, or each before it: no page twice, so no fault of
    /// the run finds an entry an earlier one set). With
    /// [`Pages::Consecutive`], the entries are read as one stretch.
    fn run_nones(&self, table: usize, vma: usize, count: u64, addr_of: &impl Fn(u64) -> u64, pages: Pages) -> u64 {
        let page_shift = self.page_shift();
        let table_pages = self.pt.shape.entries_at(0) as u64;
        let index_mask = table_pages as usize - 1;
        let entries = &self.pt.pages[table].entries;
        let first = addr_of(0);
        let page = first >> page_shift;
        // The pages the run may reach: those of the VMA in this table.
        let table_first = page & !(table_pages - 1);
        let lowest = table_first.max(self.vmas[vma].start >> page_shift);
        let highest = (table_first + table_pages - 1).min((self.vmas[vma].end - 1) >> page_shift);
        let none_at = |p: u64| entries[p as usize & index_mask].is_none();
        if count == 0 || page < lowest || page > highest || !none_at(page) {
            return 0;
        }
        if pages == Pages::Consecutive {
            // Pages `page`, `page + 1`, ... up to the table's or the VMA's
            // end: their entries are one stretch of the table.
            let reach = count.min(highest - page + 1) as usize;
            let first = page as usize & index_mask;
            let stretch = &entries[first..first + reach];
            return stretch.iter().position(|e| !e.is_none()).unwrap_or(reach) as u64;
        }
        // Up: each page above the one before; down: each below.
        let up = count < 2 || addr_of(1) >> page_shift > page;
        let mut last = page;
        let mut n = 1;
        if up {
            while n < count {
                let next = addr_of(n) >> page_shift;
                if next <= last || next > highest || !none_at(next) {
                    break;
                }
                (last, n) = (next, n + 1);
            }
        } else {
            while n < count {
                let next = addr_of(n) >> page_shift;
                if next >= last || next < lowest || !none_at(next) {
                    break;
                }
                (last, n) = (next, n + 1);
            }
        }
        n
    }

    /// Of the `left` faults the run may still make, how many the batch of
    /// pcp allocations may serve: with `per_operation`, only those up to
    /// the one after which the run ends for its operation's work (a cpu
    /// `lru_add` batch holding a released folio ends it after the fault
    /// that fills the batch, whose move leaves that folio to be freed; a
    /// slab object pending, after this fault). A page the batch took for
    /// a fault the run does not make would be lost.
    fn faults_in_operation(&self, cpu: usize, left: u64, per_operation: bool) -> u64 {
        if !per_operation {
            return left;
        }
        // A guard: the run's slab objects (the anon_vma of a VMA's first
        // fault) are the root memcg's, which charges none.
        if !self.slab_pending.is_empty() {
            return 1;
        }
        left.min(self.lru_adds_to_release(cpu).unwrap_or(u64::MAX))
    }

    /// Fills `pfns` with the next batch of pcp allocations for the run's
    /// faults, when the last is used up ([`Vm::anon_fault_run_folio`]).
    #[inline(never)]
    fn anon_fault_run_batch(&mut self, ctx: &mut Ctx, pfns: &mut Vec<u64>, left: u64, per_operation: bool) {
        pfns.clear();
        let gfp = GFP_HIGHUSER_MOVABLE | Gfp::ZERO;
        // A kswapd wakeup already pending (left by an allocation
        // outside a fault) runs after this fault and ends the run.
        let faults = if ctx.pa.kswapd_pending() {
            1
        } else {
            self.faults_in_operation(ctx.cpu, left, per_operation)
        };
        ctx.pa.alloc_pcp_run(ctx.cpu, gfp, faults as usize, pfns);
        // Every page of a batch goes to a fault of the run.
        self.fault_run_stats.batched += pfns.len() as u64;
        // The zeroing of each page (`__GFP_ZERO`), for the batch at once:
        // no fault reads a page before its own.
        self.work.pages_zeroed += pfns.len() as u64;
        ctx.backing
            .zero_each(pfns)
            .unwrap_or_else(|e| unreachable!("allocated memory outside the backing: {e}"));
    }

    /// `folio_prealloc` of a zeroed order-0 folio charged to the root
    /// memcg, for the run's next fault: the next of the pages a batch of
    /// pcp allocations took ([`PageAlloc::alloc_pcp_run`], up to `left`
    /// of them, each the page its fault would have been given), else the
    /// general allocation. `None` when that fails. A batch serves only
    /// the faults the run will make ([`Vm::faults_in_operation`]).
    ///
    /// [`PageAlloc::alloc_pcp_run`]: crate::page_alloc::PageAlloc::alloc_pcp_run
    #[inline]
    fn anon_fault_run_folio(
        &mut self,
        ctx: &mut Ctx,
        pfns: &mut Vec<u64>,
        next: &mut usize,
        left: u64,
        per_operation: bool,
    ) -> Option<Folio> {
        if *next == pfns.len() {
            self.anon_fault_run_batch(ctx, pfns, left, per_operation);
            *next = 0;
        }
        let Some(&pfn) = pfns.get(*next) else {
            return self.folio_prealloc(ctx, 0, true);
        };
        *next += 1;
        let folio = Folio {
            pfn: largo_types::Pfn(pfn),
            order: 0,
        };
        // The rest of alloc_folio and folio_prealloc (the batch zeroed its
        // pages): the charge (to the root memcg, which always takes it).
        let charged = self.mem_cgroup_charge(ctx, folio, 0, GFP_KERNEL);
        debug_assert!(charged, "the root memcg refused a charge");
        Some(folio)
    }
}
