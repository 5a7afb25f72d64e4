//! Scanning one LRU list (mm/vmscan.c, v6.18): `isolate_lru_folios`
//! takes folios off the tail (a large folio counts all its pages against
//! the scan), `shrink_inactive_list` reclaims them, `shrink_active_list`
//! deactivates them, `move_folios_to_lru` puts survivors back at the
//! head; `reclaim_pages` is MADV_PAGEOUT's list.

use std::collections::VecDeque;

use super::super::lru::{FolioRef, LruList};
use super::super::{Ctx, Vm};
use super::{Reclaimer, ScanControl, SWAP_CLUSTER_MAX};
use crate::stats::VmEvent;

impl Vm {
    /// `isolate_lru_folios`: up to `nr_to_scan` pages from the tail of
    /// `lru` of lruvec `lv`, each taken off with a reference. Returns the
    /// folios (oldest first) and the pages scanned.
    pub(crate) fn isolate_lru_folios(
        &mut self,
        ctx: &mut Ctx,
        lv: usize,
        lru: LruList,
        nr_to_scan: u64,
    ) -> (VecDeque<FolioRef>, u64) {
        self.locks.lru += 1;
        let mut taken = VecDeque::new();
        let mut scanned = 0;
        while scanned < nr_to_scan {
            let Some(r) = self.lruvecs[lv].tail(lru) else {
                break;
            };
            let nr = self.folio_nr_pages(r);
            scanned += nr;
            self.lruvec_del(ctx.pa, r);
            if self.lru_state(r).held_by_batch() {
                // Queued in another cpu's deactivate, lazyfree or activate batch (the
                // local batches were drained): that batch's reference would
                // keep the kernel from freeing it (a released one it could
                // still swap), so the model leaves it to the batch's move
                // and rotates it.
                self.lruvec_add(ctx.pa, r, false);
                continue;
            }
            self.folio_ref_get(ctx, r);
            taken.push_back(r);
        }
        let nid = lv % self.node_stat.len();
        let nr_taken: u64 = taken.iter().map(|&r| self.folio_nr_pages(r)).sum();
        if !lru.is_file() {
            self.node_stat[nid].isolated_anon += nr_taken as i64;
        }
        (taken, scanned)
    }

    /// `move_folios_to_lru`: survivors to the head of the list their
    /// flags choose, in processing order (so the last processed is the
    /// youngest); each drops its isolation reference, the last one freeing
    /// the folio.
    pub(crate) fn move_folios_to_lru(&mut self, ctx: &mut Ctx, folios: &[FolioRef]) {
        self.locks.lru += 1;
        self.locks.lru_folios += folios.len() as u64;
        for &r in folios {
            if self.folio_ref_put(ctx, r) {
                continue;
            }
            self.lruvec_add(ctx.pa, r, false);
            if self.lru_state(r).active {
                let (pfn, order) = self.folio_pfn_order(r);
                let nid = self.node_of(ctx.pa, pfn);
                self.workingset_age_nonresident(nid, self.folio_memcg(r), 1 << order);
            }
        }
    }

    /// `shrink_inactive_list`. Returns the pages reclaimed.
    pub(crate) fn shrink_inactive_list(
        &mut self,
        ctx: &mut Ctx,
        lv: usize,
        lru: LruList,
        nr_to_scan: u64,
        sc: &mut ScanControl,
    ) -> u64 {
        self.lru_add_drain(ctx);
        let (list, scanned) = self.isolate_lru_folios(ctx, lv, lru, nr_to_scan);
        let nr_taken: u64 = list.iter().map(|&r| self.folio_nr_pages(r)).sum();
        let file = lru.is_file();
        let global = !sc.cgroup_reclaim();
        if let Some(e) = scan_event(sc.reclaimer, global) {
            ctx.pa.events.count(e, scanned);
        }
        ctx.pa
            .events
            .count(if file { VmEvent::PgscanFile } else { VmEvent::PgscanAnon }, scanned);
        if nr_taken == 0 {
            return 0;
        }
        let stat = self.shrink_folio_list(ctx, list, sc, false);
        self.move_folios_to_lru(ctx, &stat.survivors);
        self.finish_writeback(ctx, &stat.writeback);
        let nid = lv % self.node_stat.len();
        if !file {
            self.node_stat[nid].isolated_anon -= nr_taken as i64;
        }
        if let Some(e) = steal_event(sc.reclaimer, global) {
            ctx.pa.events.count(e, stat.nr_reclaimed);
        }
        ctx.pa.events.count(
            if file {
                VmEvent::PgstealFile
            } else {
                VmEvent::PgstealAnon
            },
            stat.nr_reclaimed,
        );
        self.lru_note_cost(lv, file, stat.nr_pageout, scanned - stat.nr_reclaimed);
        stat.nr_reclaimed
    }

    /// `shrink_active_list`: every folio taken off the active tail goes to
    /// the inactive head (anon is never kept active here), its young bits
    /// cleared, `PG_workingset` set.
    pub(crate) fn shrink_active_list(
        &mut self,
        ctx: &mut Ctx,
        lv: usize,
        lru: LruList,
        nr_to_scan: u64,
        sc: &mut ScanControl,
    ) {
        self.lru_add_drain(ctx);
        let (list, scanned) = self.isolate_lru_folios(ctx, lv, lru, nr_to_scan);
        let nr_taken: u64 = list.iter().map(|&r| self.folio_nr_pages(r)).sum();
        if !sc.cgroup_reclaim() {
            ctx.pa.events.count(VmEvent::Pgrefill, scanned);
        }
        self.reclaiming_in_background = sc.reclaimer.is_kernel_thread();
        self.reclaim_work_mut().folios += list.len() as u64;
        let mut inactive = Vec::with_capacity(list.len());
        for r in list {
            self.folio_referenced(r, sc.target_memcg);
            let s = self.lru_state_mut(r);
            s.active = false;
            s.workingset = true;
            inactive.push(r);
        }
        let nr_deactivate: u64 = inactive.iter().map(|&r| self.folio_nr_pages(r)).sum();
        self.move_folios_to_lru(ctx, &inactive);
        ctx.pa.events.count(VmEvent::Pgdeactivate, nr_deactivate);
        let nid = lv % self.node_stat.len();
        if !lru.is_file() {
            self.node_stat[nid].isolated_anon -= nr_taken as i64;
        }
    }

    /// Asynchronous swap writes complete once the pass is over.
    pub(crate) fn finish_writeback(&mut self, ctx: &mut Ctx, keys: &[usize]) {
        for &k in keys {
            self.end_swap_writeback(ctx, k);
        }
    }

    /// `lru_note_cost`: reclaim's cost of an LRU type, decayed when it
    /// outgrows a quarter of the lruvec's pages; the parent (root) lruvec
    /// counts too.
    pub(crate) fn lru_note_cost(&mut self, lv: usize, file: bool, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;
        if cost == 0 {
            return;
        }
        let nr_nodes = self.node_stat.len();
        let mut chain = vec![lv];
        if lv >= nr_nodes {
            chain.push(lv % nr_nodes);
        }
        for l in chain {
            let size = self.lruvec_size_total(l);
            let v = &mut self.lruvecs[l];
            if file {
                v.file_cost += cost;
            } else {
                v.anon_cost += cost;
            }
            if v.file_cost + v.anon_cost > size / 4 {
                v.file_cost /= 2;
                v.anon_cost /= 2;
            }
        }
    }

    /// `reclaim_pages` (MADV_PAGEOUT): the isolated folios, deactivated,
    /// go through `shrink_folio_list` ignoring references, with no scan
    /// counters; the survivors go back through the cpu's `lru_add` batch.
    pub(crate) fn reclaim_pages(&mut self, ctx: &mut Ctx, folios: Vec<FolioRef>) -> u64 {
        if folios.is_empty() {
            return 0;
        }
        for &r in &folios {
            self.lru_state_mut(r).active = false;
        }
        let mut sc = ScanControl::new(0, Reclaimer::Madvise, None, 60);
        let stat = self.shrink_folio_list(ctx, folios.into(), &mut sc, true);
        for &r in &stat.survivors {
            if self.folio_ref_put(ctx, r) {
                continue;
            }
            self.folio_add_lru(ctx.pa, ctx.cpu, r);
        }
        self.finish_writeback(ctx, &stat.writeback);
        stat.nr_reclaimed
    }
}

/// `PGSCAN_KSWAPD + reclaimer_offset`, counted only outside memcg reclaim.
fn scan_event(who: Reclaimer, global: bool) -> Option<VmEvent> {
    if !global {
        return None;
    }
    match who {
        Reclaimer::Kswapd => Some(VmEvent::PgscanKswapd),
        Reclaimer::Direct => Some(VmEvent::PgscanDirect),
        Reclaimer::Khugepaged => Some(VmEvent::PgscanKhugepaged),
        Reclaimer::Madvise => None,
    }
}

/// `PGSTEAL_KSWAPD + reclaimer_offset`.
fn steal_event(who: Reclaimer, global: bool) -> Option<VmEvent> {
    if !global {
        return None;
    }
    match who {
        Reclaimer::Kswapd => Some(VmEvent::PgstealKswapd),
        Reclaimer::Direct => Some(VmEvent::PgstealDirect),
        Reclaimer::Khugepaged => Some(VmEvent::PgstealKhugepaged),
        Reclaimer::Madvise => None,
    }
}
