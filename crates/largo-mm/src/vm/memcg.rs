//! The VM's side of memory cgroups (mm/memcontrol.c, mm/memcontrol-v1.c):
//! which memcg a charge goes to and the swap-out/swap-in transfers of
//! charges.

use super::types::MmId;
use super::{Ctx, Vm};
use crate::memmap::Folio;
use crate::page_alloc::gfp::Gfp;
use crate::swap::SwapEntry;

impl Vm {
    /// Creates the memcg the workload's tasks run in (limit in pages,
    /// `memory.swappiness` from `vm.swappiness` now): every address space
    /// made from now on belongs to it.
    pub fn create_workload_memcg(&mut self, limit_pages: u64) -> usize {
        let id = self.memcg.create(limit_pages, self.swappiness);
        self.ensure_lruvecs(self.memcg.len());
        self.default_memcg = id as u16;
        id
    }

    /// The memcg the workload's tasks run in, if one was created.
    pub fn workload_memcg(&self) -> Option<usize> {
        (self.default_memcg != 0).then_some(self.default_memcg as usize)
    }

    /// The memcg user pages of `mm` are charged to (`get_mem_cgroup_from_mm`).
    #[inline]
    pub(crate) fn mm_memcg(&self, mm: MmId) -> usize {
        self.mms[mm].memcg as usize
    }

    /// `mem_cgroup_swapin_charge_folio`'s memcg: the one the slot's
    /// charge was recorded to, else `mm`'s, else the root.
    pub(crate) fn swapin_memcg(&self, entry: SwapEntry, mm: Option<MmId>) -> usize {
        let id = self.swap.device(entry).cgroup_id(entry.offset) as usize;
        if id != 0 && self.memcg.exists(id) {
            return id;
        }
        mm.map_or(0, |m| self.mm_memcg(m))
    }

    /// `vm.swappiness` or, for a memcg, its `memory.swappiness`.
    pub(crate) fn memcg_swappiness(&self, memcg: usize) -> u64 {
        self.memcg.swappiness(memcg).unwrap_or(self.swappiness)
    }

    /// `mem_cgroup_charge` of a new folio to `memcg` with `gfp`; on
    /// failure nothing is charged.
    #[inline]
    pub(crate) fn mem_cgroup_charge(&mut self, ctx: &mut Ctx, folio: Folio, memcg: usize, gfp: Gfp) -> bool {
        self.try_charge_memcg(ctx, memcg, gfp, folio.nr_pages(), true)
    }

    /// `memcg1_swapout`: a folio leaving the swap cache for swap gives
    /// its memory charge back; its slots record the memcg (done by the
    /// caller) and count as the memcg's swap.
    pub(crate) fn memcg_swapout(&mut self, ctx: &mut Ctx, key: usize) {
        let memcg = self.folios[key].memcg as usize;
        let nr = self.folios[key].nr_pages();
        let swapped = self.swap.cgroup_pages(memcg as u16);
        self.memcg.uncharge_folio_to_swap(memcg, nr, swapped);
        let _ = ctx;
        self.folios[key].memcg = 0;
    }

    /// `memcg1_swapin`: the slots' swap charge goes at once (the folio was
    /// charged anew).
    pub(crate) fn memcg_swapin(&mut self, ctx: &mut Ctx, entry: SwapEntry, nr: u64) {
        let _ = ctx;
        for i in 0..nr {
            let slot = entry.plus(i);
            self.swap.device_mut(slot).set_cgroup_id(slot.offset, 1, 0);
        }
    }
}

/// `MAX_RECLAIM_RETRIES`.
const MAX_RECLAIM_RETRIES: u32 = 16;
/// `PAGE_ALLOC_COSTLY_ORDER`: charges above it never OOM-kill.
const COSTLY_PAGES: u64 = 8;

impl Vm {
    /// `try_charge_memcg`: the cpu's stock, else a batch (when the gfp may
    /// at least wake kswapd) or exactly `nr` pages against the limit; over
    /// it, a gfp that may block reclaims the memcg, drains the stocks,
    /// retries up to `MAX_RECLAIM_RETRIES` times (without limit while
    /// reclaim progresses for small charges) and, for at most 8 pages,
    /// OOM-kills in the memcg. `user` charges are folios (`pgpgin`); page
    /// tables are kernel memory. Nothing is charged to the root.
    #[inline]
    pub(crate) fn try_charge_memcg(&mut self, ctx: &mut Ctx, memcg: usize, gfp: Gfp, nr: u64, user: bool) -> bool {
        // The root memcg has no limit: nothing to charge.
        memcg == 0 || self.try_charge_memcg_limited(ctx, memcg, gfp, nr, user)
    }

    /// [`Vm::try_charge_memcg`] for a memcg other than the root.
    fn try_charge_memcg_limited(&mut self, ctx: &mut Ctx, memcg: usize, gfp: Gfp, nr: u64, user: bool) -> bool {
        // 6.18's source charges exactly `nr` pages (no stock refill) for a
        // gfp without reclaim bits (`gfpflags_allow_spinning`), as
        // GFP_TRANSHUGE_LIGHT is, and so does the 6.18.44-fc-v595 host
        // build; the fc-v769 build tries the batch first for those too (a
        // failed 64K charge there costs `failcnt` two), which
        // `largo/memcg_thp_charge_batch` selects: then only an empty gfp
        // (`alloc_pages_nolock`) skips the batch.
        let allow_spinning = if self.thp.memcg_thp_charge_batch {
            !gfp.is_empty()
        } else {
            gfp.intersects(crate::page_alloc::gfp::GFP_RECLAIM)
        };
        let allow_blocking = gfp.contains(Gfp::DIRECT_RECLAIM);
        let mut batch = nr.max(crate::memcg::MEMCG_CHARGE_BATCH);
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        let mut passed_oom = false;
        // Objects the operation made so far are charged first (the kernel
        // allocated them before these pages).
        self.flush_slab_ops(ctx);
        // Folios a drain released were uncharged as it ran.
        self.free_drained(ctx);
        loop {
            if self.memcg.consume_stock(ctx.cpu, memcg, nr) {
                break;
            }
            if !allow_spinning {
                batch = nr;
            }
            if self.memcg.get_mut(memcg).memory.try_charge(batch) {
                if batch > nr {
                    self.memcg.refill_stock(ctx.cpu, memcg, batch - nr);
                }
                break;
            }
            if batch > nr {
                batch = nr;
                continue;
            }
            if !allow_blocking {
                return false;
            }
            let reclaimed = self.try_to_free_mem_cgroup_pages(ctx, memcg, nr);
            if self.memcg.get(memcg).memory.margin() >= nr {
                continue;
            }
            if !drained {
                self.memcg.drain_all_stock(memcg);
                self.drain_all_obj_stock(memcg);
                drained = true;
                continue;
            }
            if gfp.contains(Gfp::NORETRY) {
                return false;
            }
            if reclaimed > 0 && nr <= COSTLY_PAGES {
                continue;
            }
            if retries > 0 {
                retries -= 1;
                continue;
            }
            if gfp.contains(Gfp::RETRY_MAYFAIL) || passed_oom || nr > COSTLY_PAGES {
                return false;
            }
            if !self.mem_cgroup_oom(ctx, memcg) {
                return false;
            }
            passed_oom = true;
            retries = MAX_RECLAIM_RETRIES;
        }
        let swapped = self.swap.cgroup_pages(memcg as u16);
        let g = self.memcg.get_mut(memcg);
        g.memsw_watermark = g.memsw_watermark.max(g.memory.usage + swapped);
        if user {
            g.stat.pgpgin += 1;
        } else {
            g.kmem_pages += nr;
        }
        true
    }

    /// The memory charge of a freed folio of `nr` pages (`pgpgout`).
    pub(crate) fn mem_cgroup_uncharge(&mut self, ctx: &mut Ctx, memcg: usize, nr: u64) {
        let _ = ctx;
        if memcg == 0 {
            return;
        }
        let g = self.memcg.get_mut(memcg);
        g.memory.uncharge(nr);
        g.stat.pgpgout += 1;
    }

    /// A freed page table's kernel-memory charge goes to the cpu's stock
    /// (`obj_cgroup_uncharge_pages` -> `refill_stock`).
    pub(crate) fn memcg_kmem_uncharge(&mut self, ctx: &mut Ctx, memcg: usize, nr: u64) {
        if memcg == 0 {
            return;
        }
        self.memcg.get_mut(memcg).kmem_pages -= nr;
        self.memcg.refill_stock(ctx.cpu, memcg, nr);
    }

    /// `mem_cgroup_oom`: the charge fails and the memcg's OOM kill is
    /// left for the fault's end (`pagefault_out_of_memory`), where no
    /// fault holds the victim's memory (see `Vm::memcg_out_of_memory`).
    fn mem_cgroup_oom(&mut self, ctx: &mut Ctx, memcg: usize) -> bool {
        let _ = ctx;
        self.memcg_oom_pending = Some(memcg);
        false
    }

    /// `mem_cgroup_out_of_memory`: the process of the memcg with the most
    /// memory (anon, shmem, swap entries, page tables; the later one on a
    /// tie) is killed and its memory freed. Returns the victim's thread
    /// group, `None` when the memcg has no process.
    pub(crate) fn memcg_out_of_memory(
        &mut self,
        ctx: &mut Ctx,
        memcg: usize,
        trigger: super::types::Pid,
    ) -> Option<super::types::Pid> {
        let mut victim: Option<(u64, super::types::Pid)> = None;
        for t in self.tasks.values().filter(|t| t.alive && t.pid == t.tgid) {
            if self.mms[t.mm].memcg as usize != memcg {
                continue;
            }
            let mm = &self.mms[t.mm];
            let points = mm.rss_anon + mm.rss_shmem + mm.swap_ents + mm.nr_pgtables;
            if victim.is_none_or(|(best, _)| points >= best) {
                victim = Some((points, t.pid));
            }
        }
        let (_, pid) = victim?;
        self.memcg.get_mut(memcg).oom_kill += 1;
        Some(self.oom_kill_process(ctx, pid, trigger))
    }
}
