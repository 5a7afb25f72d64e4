//! A run of user accesses, `stride` bytes apart (a workload's sequential
//! touch, MAP_POPULATE, the aging generators' writes). Each access is exactly
//! [`Vm::access`]: a hit if the page tables allow it, otherwise the fault
//! path. What differs is the walk: like the MMU, which takes every hit in
//! a page table from one cached walk, the run walks once per leaf table
//! and then reads consecutive entries, instead of walking from the root
//! for every access. A run of 64 KiB folios is 1 fault and 15 hits per
//! folio, a PMD-mapped THP 1 fault and 511 hits: the hits are most of the
//! accesses, and they cost a few instructions each here. The faults of a
//! run share their work too when they map new order-0 folios
//! (`fault_run.rs`), and when they may map large ones
//! (`large_fault_run.rs`, which also takes the hits in each new folio).

use super::fault::{access_bits, store_user_page};
use super::fault_run::{FaultRun, Pages};
use super::types::{Access, Pid, VmError};
use super::{Ctx, Vm};

/// What a run of accesses did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessRun {
    /// Accesses made, the one that stopped the run included.
    pub done: u64,
    /// Of those, accesses to memory the model does not hold
    /// ([`Access::NotModelled`]).
    pub not_modelled: u64,
    /// The outcome of the access that stopped the run (never `Hit`,
    /// `Faulted` or `NotModelled`); `None` when all were made.
    pub stop: Option<Result<Access, VmError>>,
}

impl AccessRun {
    /// Counts one more access, made with `outcome`; returns whether it
    /// stops the run.
    fn count(&mut self, outcome: Result<Access, VmError>) -> bool {
        self.done += 1;
        match outcome {
            Ok(Access::Hit | Access::Faulted) => false,
            Ok(Access::NotModelled) => {
                self.not_modelled += 1;
                false
            }
            outcome => {
                self.stop = Some(outcome);
                true
            }
        }
    }

    /// Counts the faults a fault run made (a stop included, which ends
    /// this run: the loop's condition sees it); returns whether it made
    /// any, so that the loop goes on after them.
    fn count_faults(&mut self, faults: FaultRun) -> bool {
        self.done += faults.done;
        self.stop = faults.stop;
        faults.done > 0
    }
}

impl Vm {
    /// Makes `count` accesses by `pid` at `start`, `start + stride`, ...,
    /// each with the same effect as [`Vm::access`] at its address, in
    /// order. Stops after the first access that is not a hit, a handled
    /// fault or an unmodelled access (SIGSEGV, SIGBUS, OOM or an error).
    pub fn access_run(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        start: u64,
        stride: u64,
        count: u64,
        write: bool,
    ) -> AccessRun {
        let mut run = AccessRun::default();
        while run.done < count && run.stop.is_none() {
            // Hits through one leaf table at a time; a walk that finds
            // none leaves access `run.done` to the fault path.
            let hits = self.hit_run(ctx, pid, start, stride, run.done, count, write);
            run.done += hits;
            if hits > 0 {
                continue;
            }
            let addr = start.wrapping_add(run.done.wrapping_mul(stride));
            if write && stride == self.page_size() {
                // A first touch of anonymous memory, fault after fault.
                let faults = self.anon_fault_run(
                    ctx,
                    pid,
                    count - run.done,
                    |k| addr + k * stride,
                    Pages::Consecutive,
                    false,
                );
                if run.count_faults(faults) {
                    continue;
                }
                // Faults that may map large folios, each with the hits
                // in the rest of its folio.
                let faults = self.anon_large_fault_run(ctx, pid, addr, count - run.done);
                if run.count_faults(faults) {
                    continue;
                }
            }
            if run.count(self.access_fault(ctx, pid, addr, write, false)) {
                break;
            }
        }
        run
    }

    /// Up to `count` accesses by `pid`, access `k` at `addr_of(k)`, each
    /// with the same effect as [`Vm::access`] at its address made as a
    /// machine operation of its own: a recorded program's run of page
    /// faults, or its touch of a range. Write faults that map new order-0
    /// folios go as a run (`fault_run.rs`) while their pages go one way
    /// (each after the one before, or each before it) within one page
    /// table; the other accesses go one by one.
    ///
    /// Returns early, with no stop, after an access that leaves work for
    /// the end of its operation ([`Vm::operation_work_pending`]: folios a
    /// batch drain released, slab objects to charge): the caller ends the
    /// operation there ([`crate::Machine::with_vm`]) and makes the rest
    /// in the next, so every access sees what it would see alone. Stops
    /// as [`Vm::access_run`] does.
    pub fn access_page_run(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        count: u64,
        addr_of: impl Fn(u64) -> u64,
        write: bool,
    ) -> AccessRun {
        let mut run = AccessRun::default();
        while run.done < count && run.stop.is_none() && !self.operation_work_pending() {
            let first = run.done;
            let addr = addr_of(first);
            if write {
                let faults = self.anon_fault_run(ctx, pid, count - first, |k| addr_of(first + k), Pages::Any, true);
                if run.count_faults(faults) {
                    continue;
                }
            }
            if run.count(self.access(ctx, pid, addr, write)) {
                break;
            }
        }
        run
    }

    /// Whether the end of the current machine operation has work to do
    /// ([`crate::Machine::with_vm`]: slab objects to charge or free,
    /// folios a batch drain released to free). Without it, ending the
    /// operation changes nothing.
    pub fn operation_work_pending(&self) -> bool {
        !self.slab_pending.is_empty() || !self.lru_drained_dead.is_empty()
    }

    /// The accesses from number `first` on (of `count`) that hit through
    /// the leaf table mapping access `first`, made as [`Vm::access`] makes
    /// a hit (accessed and dirty bits, the store). Returns how many; 0
    /// when access `first` itself is no hit.
    #[allow(clippy::too_many_arguments)]
    fn hit_run(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        start: u64,
        stride: u64,
        first: u64,
        count: u64,
        write: bool,
    ) -> u64 {
        let Ok(mm) = self.task_mm(pid) else {
            return 0;
        };
        let root = self.mms[mm].pgd;
        let addr = start.wrapping_add(first.wrapping_mul(stride));
        // Above TASK_SIZE the page tables map nothing for the user (the
        // walk would wrap the top index onto a user entry): no hit.
        let task_size = self.pt.shape.task_size;
        if addr >= task_size {
            return 0;
        }
        let Some((table, index, level)) = self.pt.leaf(root, addr) else {
            return 0;
        };
        if !self.hit_at(ctx, table, index, level, addr, write) {
            return 0;
        }
        if level == 0 && stride == self.page_size() {
            return 1 + self.hit_pte_run(ctx, table, index, addr, count - first - 1, write);
        }
        // The addresses this table maps share their bits above it (the
        // root maps them all); a walk from the root for any of them ends
        // in this table as long as the tree above it does not change,
        // and hits change only leaf entries.
        let above = level + 1;
        let table_shift = if above < self.pt.shape.levels {
            self.pt.shape.level_shift(above)
        } else {
            u64::BITS
        };
        let table_key = addr.checked_shr(table_shift).unwrap_or(0);
        // One page apart, the accesses after a hit through a huge leaf
        // that fall in the same leaf hit it too.
        let sequential = stride == self.page_size();
        let mut n = 1;
        if sequential {
            n += self.hit_rest_of_leaf(ctx, (table, index, level), addr, count - first - n, write);
        }
        while first + n < count {
            let a = start.wrapping_add((first + n).wrapping_mul(stride));
            if a.checked_shr(table_shift).unwrap_or(0) != table_key || a >= task_size {
                break;
            }
            let index = self.pt.shape.index(level, a);
            if !self.hit_at(ctx, table, index, level, a, write) {
                break;
            }
            n += 1;
            if sequential {
                n += self.hit_rest_of_leaf(ctx, (table, index, level), a, count - first - n, write);
            }
        }
        n
    }

    /// After a hit at `addr` through the huge leaf `index` of `table` at
    /// `level`, the hits of up to `left` more accesses one page apart in
    /// the same leaf (below TASK_SIZE): [`Vm::hit_at`] set the leaf's bits
    /// already, so each is only its store. Returns how many (0 for a PTE).
    fn hit_rest_of_leaf(
        &mut self,
        ctx: &mut Ctx,
        (table, index, level): (usize, usize, u32),
        addr: u64,
        left: u64,
        write: bool,
    ) -> u64 {
        if level == 0 {
            return 0;
        }
        let page_shift = self.page_shift();
        let leaf_pages = 1u64 << (level * self.pt.shape.bits_per_level);
        let first_page = (addr >> page_shift) & (leaf_pages - 1);
        let below_top = (self.pt.shape.task_size - 1 - addr) >> page_shift;
        let m = left.min(leaf_pages - first_page - 1).min(below_top);
        let e = self.pt.get(table, index);
        if write && !e.is_special() {
            let offset = addr & ((1 << page_shift) - 1);
            for page in first_page + 1..=first_page + m {
                store_user_page(ctx, e.pfn() + page, offset);
            }
        }
        m
    }

    /// The sequential case of [`Vm::hit_run`]: after a hit through entry
    /// `index` of the PTE table `table` at `addr`, the hits of up to
    /// `left` more accesses one page apart, through the entries that
    /// follow in the same table (and below TASK_SIZE), each made as
    /// [`Vm::hit_at`] makes it. Returns how many.
    fn hit_pte_run(&mut self, ctx: &mut Ctx, table: usize, index: usize, addr: u64, left: u64, write: bool) -> u64 {
        let page_size = self.page_size();
        let in_table = (self.pt.shape.entries_at(0) - index - 1) as u64;
        let below_top = (self.pt.shape.task_size - 1 - addr) / page_size;
        let max = left.min(in_table).min(below_top) as usize;
        let offset = addr & (page_size - 1);
        let bits = access_bits(write);
        let hits = self.pt.hit_ptes(table, index + 1, max, write, bits, |e| {
            if write && !e.is_special() {
                store_user_page(ctx, e.pfn(), offset);
            }
        });
        hits as u64
    }

    /// The access at `a` through entry `index` of the leaf table `table`
    /// at `level`, if that entry allows it: the MMU sets the accessed (and
    /// dirty) bits and the store lands. Every hit is made here, those of
    /// [`Vm::access`] included. Returns whether it was a hit; nothing
    /// changes otherwise.
    #[inline(always)]
    pub(super) fn hit_at(
        &mut self,
        ctx: &mut Ctx,
        table: usize,
        index: usize,
        level: u32,
        a: u64,
        write: bool,
    ) -> bool {
        let e = self.pt.get(table, index);
        if !e.present() || (level > 0 && e.is_table()) || (write && !e.writable()) {
            return false;
        }
        // A write to a young but clean entry still dirties it (the MMU
        // sets each bit it finds clear): a lazyfree page written after a
        // read must not be discarded as clean.
        let bits = access_bits(write);
        if !e.has_all(bits) {
            self.pt.set_hw(table, index, e.with(bits));
        }
        if write {
            self.store_through(ctx, e, level, a);
        }
        true
    }
}
