//! Accounted kernel objects of the address space: VMAs, anon_vmas and
//! their chains are charged by the byte to the memcg of the task making
//! them (`__memcg_slab_post_alloc_hook`) and given back when freed
//! (`__memcg_slab_free_hook`), through the cpu's object stock.
//!
//! The VM records each allocation and free as it restructures its maps;
//! the charges run at the next charge of pages or when the operation
//! ends, in order. An object freed in the operation that made it (a VMA
//! inserted and merged away at once, where the kernel would have grown
//! its neighbour) was never allocated by the kernel: the two cancel,
//! except for caches freed through RCU (`SlabCache::freed_by_rcu`), whose
//! frees wait for their callback (`Vm::rcu_callbacks`).

use super::{Ctx, MmId, Vm};
use crate::memcg::{SlabCache, SlabOp, Unchargeable};
use crate::page_alloc::gfp::GFP_KERNEL;

/// A callback `call_rcu` queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RcuCallback {
    /// An accounted slab object's free (its free hook).
    Slab(SlabOp),
    /// A batch entry of `tlb_remove_table`: the page-table page `pfn`,
    /// charged to `memcg` (0: none).
    Table { pfn: u64, memcg: usize },
}

impl Vm {
    /// An object of `cache` made for `mm` (charged to its memcg).
    pub(crate) fn slab_alloc(&mut self, mm: MmId, cache: SlabCache, count: usize) {
        self.slab_alloc_memcg(self.mms[mm].memcg, cache, count);
    }

    /// An object of `cache` made for a task of `memcg` (0: not charged).
    pub(crate) fn slab_alloc_memcg(&mut self, memcg: u16, cache: SlabCache, count: usize) {
        if memcg == 0 {
            return;
        }
        for _ in 0..count {
            self.slab_pending.push(SlabOp {
                memcg,
                cache,
                alloc: true,
            });
        }
    }

    /// An object of `cache` charged to `memcg` freed.
    pub(crate) fn slab_free(&mut self, memcg: u16, cache: SlabCache, count: usize) {
        if memcg == 0 {
            return;
        }
        for _ in 0..count {
            // An object freed through RCU was allocated all the same: its
            // charge stands until the callback runs.
            let made_now = match cache.freed_by_rcu() {
                true => None,
                false => self
                    .slab_pending
                    .iter()
                    .rposition(|op| op.alloc && op.memcg == memcg && op.cache == cache),
            };
            match made_now {
                Some(i) => {
                    self.slab_pending.remove(i);
                }
                None => self.slab_pending.push(SlabOp {
                    memcg,
                    cache,
                    alloc: false,
                }),
            }
        }
    }

    /// Runs the recorded charges and uncharges.
    pub(crate) fn flush_slab_ops(&mut self, ctx: &mut Ctx) {
        if self.slab_pending.is_empty() {
            return;
        }
        for op in std::mem::take(&mut self.slab_pending) {
            let bytes = op.cache.charged_bytes();
            if op.alloc {
                self.obj_cgroup_charge(ctx, op.memcg as usize, bytes);
            } else if op.cache.freed_by_rcu() {
                // call_rcu: the free hook runs in the callback.
                self.rcu_pending.push((ctx.cpu, RcuCallback::Slab(op)));
            } else {
                self.refill_obj_stock(ctx, op.memcg as usize, bytes, true);
            }
        }
    }

    /// The RCU callbacks queued so far run (`rcu_do_batch`), each on the
    /// cpu that queued it: the objects' bytes go back to that cpu's
    /// object stock. A cpu busy with a task's faults and reclaim runs
    /// them only once it idles (measured on this host: the page-cache
    /// nodes that memcg reclaim of clean shmem folios frees come back in
    /// the softirq of the idle cpu after the task's last step, not during
    /// its faults), so the callers are the points where the task's cpu
    /// goes idle: time passing, the task's stop before a snapshot, no
    /// task left.
    pub fn rcu_callbacks(&mut self, ctx: &mut Ctx) {
        self.flush_slab_ops(ctx);
        if self.rcu_pending.is_empty() {
            return;
        }
        let cpu = ctx.cpu;
        for (queued_on, callback) in std::mem::take(&mut self.rcu_pending) {
            ctx.cpu = queued_on;
            match callback {
                RcuCallback::Slab(op) => {
                    self.refill_obj_stock(ctx, op.memcg as usize, op.cache.charged_bytes(), true);
                }
                RcuCallback::Table { pfn, memcg } => self.release_table_page(ctx, pfn, memcg),
            }
        }
        ctx.cpu = cpu;
    }

    /// Whether RCU callbacks (accounted objects, page tables) wait to run.
    pub fn rcu_callbacks_pending(&self) -> bool {
        !self.rcu_pending.is_empty()
    }

    /// `obj_cgroup_charge_account`: from the cpu's object stock, else
    /// whole pages charged (kernel memory) with the rest stocked. A charge
    /// the limit refuses is forced (the model does not fail the syscall).
    fn obj_cgroup_charge(&mut self, ctx: &mut Ctx, memcg: usize, bytes: u64) {
        if self.memcg.obj.consume(ctx.cpu, memcg, bytes) {
            return;
        }
        let page = self.page_size();
        let nr_pages = bytes.div_ceil(page);
        if !self.try_charge_memcg(ctx, memcg, GFP_KERNEL, nr_pages, false) {
            // Forced: no OOM kill follows.
            self.memcg_oom_pending = None;
            let g = self.memcg.get_mut(memcg);
            g.memory.charge(nr_pages);
            g.kmem_pages += nr_pages;
        }
        let rest = nr_pages * page - bytes;
        self.refill_obj_stock(ctx, memcg, rest, false);
    }

    /// `refill_obj_stock`, with the pages it gives back uncharged.
    fn refill_obj_stock(&mut self, ctx: &mut Ctx, memcg: usize, bytes: u64, allow_uncharge: bool) {
        let page = self.page_size();
        let (drained, back) = self.memcg.obj.refill(ctx.cpu, memcg, bytes, allow_uncharge, page);
        if let Some(d) = drained {
            self.obj_drained(d);
        }
        if let Some(b) = back {
            // obj_cgroup_uncharge_pages: through the memcg's charge stock.
            self.memcg.get_mut(b.memcg).kmem_pages -= b.nr_pages;
            self.memcg.refill_stock(ctx.cpu, b.memcg, b.nr_pages);
        }
    }

    /// `drain_obj_stock`'s whole pages leave the memcg's counter.
    fn obj_drained(&mut self, d: Unchargeable) {
        let g = self.memcg.get_mut(d.memcg);
        g.kmem_pages -= d.nr_pages;
        g.memory.uncharge(d.nr_pages);
    }

    /// An object of a cgroup outside the model freed on `ctx.cpu`
    /// (`refill_obj_stock` of another objcg): the cpu's object stock is
    /// drained, its whole pages uncharged, the rest parked. A validation's
    /// native task sees this when its parent's SIGSTOP is dequeued (the
    /// sigqueue is charged to the sender).
    pub fn foreign_obj_free(&mut self, ctx: &mut Ctx) {
        self.flush_slab_ops(ctx);
        let page = self.page_size();
        if let Some(d) = self.memcg.obj.drain_cpu(ctx.cpu, page) {
            self.obj_drained(d);
        }
    }

    /// The object stocks `drain_all_stock` flushes along with the charge
    /// stocks.
    pub(crate) fn drain_all_obj_stock(&mut self, memcg: usize) {
        let page = self.page_size();
        for d in self.memcg.obj.drain_all(memcg, page) {
            self.obj_drained(d);
        }
    }
}
