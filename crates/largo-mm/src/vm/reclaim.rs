//! The VM's part of reclaim (mm/vmscan.c `shrink_node` through the LRU
//! reclaim in `vmscan/`, `shrink_slab`; mm/shrinker.c `do_shrink_slab`;
//! fs/drop_caches.c) and the OOM killer (mm/oom_kill.c).
//!
//! A reclaim pass runs the priority loop over the node's lruvecs
//! (`vmscan/node.rs`: lazyfree folios on the file lists are discarded,
//! anonymous folios are swapped out when there is swap), then asks the
//! deferred split shrinker to scan one batch (`SHRINK_BATCH`) and drops
//! the unused huge zero folio; the kernel's priority-scaled slab pressure
//! is not modelled for global reclaim. Memcg limit reclaim runs the
//! memcg-aware deferred split shrinker per priority, scaled as
//! `do_shrink_slab` does (`vmscan/node.rs` `shrink_slab_memcg`).

use largo_physmem::copy::Vanilla;
use largo_physmem::Backing;

use super::types::Pid;
use super::{Ctx, Vm};
use crate::memmap::PageFlags;
use crate::page_alloc::{MigrationTarget, PageAlloc, Reclaim};
use crate::stats::VmEvent;

/// `SHRINK_BATCH`.
pub(crate) const SHRINK_BATCH: u64 = 128;

/// An OOM kill: who was killed, for whose allocation, and how big it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OomKill {
    pub victim: Pid,
    pub trigger: Pid,
    pub rss_pages: u64,
}

/// The VM as the page allocator's reclaimer.
pub(crate) struct VmReclaim<'a> {
    pub vm: &'a mut Vm,
    pub backing: &'a mut dyn Backing,
}

impl Reclaim for VmReclaim<'_> {
    fn reclaim(&mut self, pa: &mut PageAlloc, cpu: usize, nid: usize, nr_to_reclaim: u64, kswapd: bool) -> u64 {
        let before = pa.nr_free_pages() + pa.nr_pcp_pages();
        let mut ctx = Ctx::new(pa, &mut *self.backing, cpu);
        self.vm.try_to_free_pages(&mut ctx, nid, nr_to_reclaim, kswapd);
        self.vm.shrink_slab(&mut ctx, nid, SHRINK_BATCH);
        let after = ctx.pa.nr_free_pages() + ctx.pa.nr_pcp_pages();
        after.saturating_sub(before)
    }

    fn lru_add_drain_all(&mut self, pa: &mut PageAlloc) {
        self.vm.lru_add_drain_all(pa);
        // folios_put: the folios only a batch held are freed now.
        let mut ctx = super::Ctx::new(pa, &mut *self.backing, 0);
        self.vm.free_drained(&mut ctx);
    }

    /// Compaction, contiguous allocation and offlining migrate through
    /// rmap with the mainline copy; a head that is still an LRU folio
    /// afterwards did not move.
    fn migrate_folios(
        &mut self,
        pa: &mut PageAlloc,
        cpu: usize,
        pfns: &[u64],
        target: &mut MigrationTarget,
    ) -> Vec<u64> {
        let keys: Vec<usize> = pfns.iter().filter_map(|&p| self.vm.folio_key_of_pfn(pa, p)).collect();
        let mut ctx = Ctx::new(pa, &mut *self.backing, cpu);
        self.vm.migrate_pages(&mut ctx, &keys, target, &Vanilla);
        pfns.iter()
            .copied()
            .filter(|&p| {
                let page = ctx.pa.memmap.page(p);
                ctx.pa.memmap.is_folio_head(p) && page.flags().contains(PageFlags::LRU)
            })
            .collect()
    }
}

impl Vm {
    /// One `shrink_slab` pass: the deferred split queue of `nid`, then the
    /// huge zero folio. Returns objects freed (folios split, pages of the
    /// huge zero folio).
    fn shrink_slab(&mut self, ctx: &mut Ctx, nid: usize, nr_to_scan: u64) -> u64 {
        let mut freed = 0;
        if self.deferred[nid].len > 0 {
            freed += self.deferred_split_scan(ctx, nid, nr_to_scan);
        }
        freed + self.shrink_huge_zero_page(ctx)
    }

    /// `echo MODE > /proc/sys/vm/drop_caches`: bit 1 drops the page cache
    /// (there is none), bit 2 runs every shrinker until it frees little
    /// (`drop_slab`: rounds while `freed >> round > 1`; each shrinker scans
    /// twice its count in batches, as `do_shrink_slab` at priority 0).
    pub fn drop_caches(&mut self, ctx: &mut Ctx, mode: u32) {
        if mode & 1 != 0 {
            ctx.pa.events.count(VmEvent::DropPagecache, 1);
        }
        if mode & 2 == 0 {
            return;
        }
        let mut shift = 0;
        loop {
            let mut freed = 0;
            for nid in 0..self.deferred.len() {
                freed += self.shrink_deferred_fully(ctx, nid);
            }
            freed += self.shrink_huge_zero_page(ctx);
            if freed >> shift <= 1 {
                break;
            }
            shift += 1;
        }
        ctx.pa.events.count(VmEvent::DropSlab, 1);
    }

    /// `do_shrink_slab` of the deferred split shrinker at priority 0.
    fn shrink_deferred_fully(&mut self, ctx: &mut Ctx, nid: usize) -> u64 {
        let freeable = self.deferred[nid].len;
        if freeable == 0 {
            return 0;
        }
        let mut total_scan = 2 * freeable;
        let mut freed = 0;
        while total_scan >= SHRINK_BATCH || total_scan >= freeable {
            let nr = SHRINK_BATCH.min(total_scan);
            let split = self.deferred_split_scan(ctx, nid, nr);
            if split == 0 && self.deferred[nid].len == 0 {
                break;
            }
            freed += split;
            total_scan -= nr;
            if total_scan == 0 {
                break;
            }
        }
        freed
    }

    /// `out_of_memory`: kill the process with the highest `oom_badness`
    /// (resident anon and shmem, swap entries and page tables; ties go to
    /// the later one), all its
    /// threads, and free its memory.
    pub(crate) fn out_of_memory(&mut self, ctx: &mut Ctx, trigger: Pid) {
        let mut victim: Option<(u64, Pid)> = None;
        for t in self.tasks.values().filter(|t| t.alive && t.pid == t.tgid) {
            let mm = &self.mms[t.mm];
            let points = mm.rss_anon + mm.rss_shmem + mm.swap_ents + mm.nr_pgtables;
            if victim.is_none_or(|(best, _)| points >= best) {
                victim = Some((points, t.pid));
            }
        }
        let (_, victim) = victim.unwrap_or((0, trigger));
        self.oom_kill_process(ctx, victim, trigger);
    }

    /// `oom_kill_process`: the victim's whole thread group is killed and
    /// its memory freed (`oom_kill`). Returns the thread group.
    pub(crate) fn oom_kill_process(&mut self, ctx: &mut Ctx, victim: Pid, trigger: Pid) -> Pid {
        let tgid = self.tasks.get(&victim).map_or(victim, |t| t.tgid);
        let rss_pages = self.tasks.get(&victim).map_or(0, |t| self.mms[t.mm].rss_anon);
        let members: Vec<Pid> = self
            .tasks
            .values()
            .filter(|t| t.alive && t.tgid == tgid)
            .map(|t| t.pid)
            .collect();
        for pid in members {
            if let Some(t) = self.task_mut(pid) {
                t.oom_killed = true;
            }
            let _ = self.exit(ctx, pid);
        }
        ctx.pa.events.count(VmEvent::OomKill, 1);
        self.oom_kills.push(OomKill {
            victim: tgid,
            trigger,
            rss_pages,
        });
        tgid
    }
}
