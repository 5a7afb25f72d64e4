//! Runs of anonymous write faults whose folios may be large: a first
//! touch of memory, page after page, that the order-0 runs
//! (`fault_run.rs`) decline, which they do wherever a large order could
//! be allowed (any size `always`, or an order allowed in the VMA):
//! page_fault1 at 16K or 64K, a program writing its heap under an mTHP
//! configuration. Each fault is exactly the one [`Vm::access`] would take:
//! `handle_mm_fault` -> `do_anonymous_page` -> `alloc_anon_folio` (the
//! same order decision, fallbacks and counters, order 0 included) ->
//! `folio_add_new_anon_rmap` -> `set_ptes`, then the store; the accesses
//! that follow in the folio just mapped are hits, whose only effect is
//! their store (the fault's entries are young, dirty and writable
//! already). What the run saves is what the faults share: the task, the
//! VMA and its checks and the walk to the PTE table are found once, and a
//! hit in the new folio needs no walk and no entry read.
//!
//! The run keeps to the conditions that keep what it found true from
//! fault to fault: the root memcg (a limit's reclaim or OOM kill could
//! change the tables), a static order policy (a dynamic one may promote
//! around the page), a private writable anonymous VMA, and an existing
//! PTE table (no PMD fault: `__handle_mm_fault` finds a table under the
//! PMD entry, and no table is allocated). It ends at the first entry that
//! is not none, at the end of the VMA or the table, after a fault that ran
//! kswapd (its reclaim may unmap pages of this table), and at a failed
//! fault; the general path takes it from there.

use super::fault::{store_user_page, VmFault};
use super::fault_run::FaultRun;
use super::types::{Pid, VmaId};
use super::{Ctx, Vm};
use crate::stats::VmEvent;

impl Vm {
    /// Up to `count` write accesses by `pid`, one page apart from `addr`,
    /// made as [`Vm::access_run`] makes them from a first access that
    /// faults on a none PTE: each fault as [`Vm::access_fault`] makes it,
    /// and the accesses in the rest of its folio as hits. Returns how many
    /// accesses were made, and the outcome that stopped the run (an OOM
    /// kill of this task). 0 and no stop: the run's conditions do not hold
    /// for the first access, or its fault failed and is to be made again
    /// (counted again, as the kernel's retry is; not in the root memcg,
    /// where a failed fault ends in the global OOM killer); the caller
    /// takes the general path for it.
    pub(super) fn anon_large_fault_run(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64, count: u64) -> FaultRun {
        let none = FaultRun { done: 0, stop: None };
        let Some((mm, vma)) = self.fault_run_vma(pid, addr) else {
            return none;
        };
        let Some(table) = self.pt.lookup(self.mms[mm].pgd, addr, 0) else {
            return none;
        };
        let reach = count.min(self.pages_in_table_and_vma(vma, addr));
        let (page_size, page_shift) = (self.page_size(), self.page_shift());
        let offset = addr & (page_size - 1);
        let mut run = none;
        while run.done < reach {
            let a = addr + run.done * page_size;
            let index = self.pt.shape.index(0, a);
            if !self.pt.get(table, index).is_none() {
                break;
            }
            // access_fault's loop, for a fault of the root memcg's task.
            self.memcg_oom_pending = None;
            ctx.pa.events.count(VmEvent::Pgfault, 1);
            // do_anonymous_page under the PMD entry that points to `table`.
            self.anon_vma_prepare(vma);
            let Some(folio) = self.alloc_anon_folio(ctx, vma, table, a) else {
                self.run_pending_kswapd(ctx);
                // VM_FAULT_OOM: the fault is made again by the caller's
                // general path (counted again, as the kernel's retry
                // counts it), unless this task was the victim.
                run.stop = self.pagefault_out_of_memory(ctx, pid);
                if run.stop.is_some() {
                    run.done += 1;
                }
                break;
            };
            let vmf = VmFault {
                mm,
                vma,
                address: a,
                write: true,
                small_only: false,
            };
            self.map_anon_folio(ctx, &vmf, table, folio);
            // access_fault: kswapd woken by the fault runs before its
            // store.
            let kswapd = ctx.pa.kswapd_pending();
            self.run_pending_kswapd(ctx);
            // The store, through whatever kswapd left of the entry.
            let e = self.pt.get(table, index);
            if e.present() {
                self.store_through(ctx, e, 0, a);
            }
            run.done += 1;
            if kswapd {
                break;
            }
            // The accesses in the rest of the folio hit its entries,
            // which the fault made young, dirty and writable: each is
            // only its store.
            let page = a >> page_shift;
            let folio_first = page & !((1u64 << folio.order) - 1);
            let after = folio_first + folio.nr_pages() - page - 1;
            let hits = after.min(reach - run.done);
            let pfn = folio.pfn.0 + (page - folio_first);
            for k in 1..=hits {
                store_user_page(ctx, pfn + k, offset);
            }
            run.done += hits;
        }
        if run.done > 0 {
            self.fault_run_stats.large_runs += 1;
            self.fault_run_stats.large_accesses += run.done;
        }
        run
    }

    /// How many pages from `addr`'s on lie in both `vma` and the PTE
    /// table that maps `addr`.
    fn pages_in_table_and_vma(&self, vma: VmaId, addr: u64) -> u64 {
        let page_shift = self.page_shift();
        let table_pages = self.pt.shape.entries_at(0) as u64;
        let page = addr >> page_shift;
        let table_end = (page & !(table_pages - 1)) + table_pages;
        let vma_end = self.vmas[vma].end >> page_shift;
        table_end.min(vma_end).saturating_sub(page)
    }
}
