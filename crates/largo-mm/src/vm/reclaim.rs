//! The VM's part of reclaim (mm/vmscan.c `shrink_node`, `shrink_slab`,
//! `shrink_folio_list` for lazyfree folios; mm/shrinker.c `do_shrink_slab`;
//! fs/drop_caches.c) and the OOM killer (mm/oom_kill.c).
//!
//! Without swap or page cache, what reclaim can free is: clean lazyfree
//! folios (MADV_FREE), the deferred split queue (splitting frees unmapped
//! and zero-filled pages), and the unused huge zero folio. Each reclaim
//! pass discards lazyfree folios up to its target, then asks the deferred
//! split shrinker to scan one batch (`SHRINK_BATCH`); the kernel's
//! priority-scaled slab pressure is not modelled.

use largo_physmem::copy::Vanilla;
use largo_physmem::Backing;

use super::pgtable::Pte;
use super::types::Pid;
use super::{Ctx, Vm};
use crate::memmap::PageFlags;
use crate::page_alloc::{MigrationTarget, PageAlloc, Reclaim};
use crate::stats::VmEvent;

/// `SHRINK_BATCH`.
const SHRINK_BATCH: u64 = 128;

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
        let mut ctx = Ctx {
            pa,
            backing: &mut *self.backing,
            cpu,
        };
        self.vm.reclaim_lazyfree(&mut ctx, nid, nr_to_reclaim, kswapd);
        self.vm.shrink_slab(&mut ctx, nid, SHRINK_BATCH);
        let after = ctx.pa.nr_free_pages() + ctx.pa.nr_pcp_pages();
        after.saturating_sub(before)
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
        let mut ctx = Ctx {
            pa,
            backing: &mut *self.backing,
            cpu,
        };
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

    /// Discards clean lazyfree folios of `nid`, oldest first, up to
    /// `target` pages; a folio written since MADV_FREE becomes swap-backed
    /// again and stays. Returns pages discarded.
    fn reclaim_lazyfree(&mut self, ctx: &mut Ctx, nid: usize, target: u64, kswapd: bool) -> u64 {
        let mut reclaimed = 0;
        let mut rounds = self.lazyfree.len();
        while reclaimed < target && rounds > 0 {
            rounds -= 1;
            let Some((key, pfn)) = self.lazyfree.pop_front() else {
                break;
            };
            let valid = self.folios.get(key).is_some_and(|m| m.pfn == pfn && m.lazyfree);
            if !valid {
                continue;
            }
            if self.node_of(ctx.pa, pfn) != nid {
                self.lazyfree.push_back((key, pfn));
                continue;
            }
            if self.folio_has_extra_refs(ctx.pa, key) {
                // Someone holds a reference (a CoW fault in progress): the
                // discard would fail its refcount check; try again later.
                self.lazyfree.push_back((key, pfn));
                continue;
            }
            let nr = self.folios[key].nr_pages();
            let (scan, steal) = if kswapd {
                (VmEvent::PgscanKswapd, VmEvent::PgstealKswapd)
            } else {
                (VmEvent::PgscanDirect, VmEvent::PgstealDirect)
            };
            ctx.pa.events.count(scan, nr);
            ctx.pa.events.count(VmEvent::PgscanFile, nr);
            let mappings = self.rmap_walk(key);
            let dirty = mappings.iter().any(|m| {
                (0..if m.level == 0 { m.nr as usize } else { 1 })
                    .any(|j| self.pt.get(m.slot.table, m.slot.index + j).has(Pte::DIRTY))
            });
            if dirty {
                // try_to_unmap_one found a dirty PTE: folio_set_swapbacked.
                self.folios[key].lazyfree = false;
                ctx.pa.memmap.page_mut(pfn).insert_flags(PageFlags::SWAPBACKED);
                self.lru_del(ctx.pa, pfn, true, nr as i64);
                self.lru_add(ctx.pa, pfn, false, nr as i64);
                continue;
            }
            for m in mappings {
                if m.level == 1 {
                    self.zap_huge_pmd(ctx, m.mm, m.slot);
                    continue;
                }
                for j in 0..m.nr as usize {
                    self.pt.set(m.slot.table, m.slot.index + j, Pte::NONE);
                }
                self.mms[m.mm].rss_anon -= m.nr;
                self.remove_rmap_ptes(ctx.pa, key, pfn + m.page_offset, m.nr, m.mm);
                self.folio_put_refs(ctx, key, m.nr as u32);
            }
            ctx.pa.events.count(steal, nr);
            ctx.pa.events.count(VmEvent::PgstealFile, nr);
            ctx.pa.events.count(VmEvent::Pglazyfreed, nr);
            reclaimed += nr;
        }
        reclaimed
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
    /// (anonymous RSS plus page tables; ties go to the later one), all its
    /// threads, and free its memory.
    pub(crate) fn out_of_memory(&mut self, ctx: &mut Ctx, trigger: Pid) {
        let mut victim: Option<(u64, Pid)> = None;
        for t in self.tasks.values().filter(|t| t.alive && t.pid == t.tgid) {
            let mm = &self.mms[t.mm];
            let points = mm.rss_anon + mm.nr_pgtables;
            if victim.is_none_or(|(best, _)| points >= best) {
                victim = Some((points, t.pid));
            }
        }
        let (_, victim) = victim.unwrap_or((0, trigger));
        let tgid = self.tasks.get(&victim).map_or(victim, |t| t.tgid);
        let rss_pages = self.tasks.get(&victim).map_or(0, |t| self.mms[t.mm].rss_anon);
        let members: Vec<Pid> = self
            .tasks
            .values()
            .filter(|t| t.alive && t.tgid == tgid)
            .map(|t| t.pid)
            .collect();
        for pid in members {
            if let Some(t) = self.tasks.get_mut(&pid) {
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
    }
}
