//! Page migration of anonymous folios (mm/migrate.c): `migrate_pages`
//! with `migrate_pages_batch`'s two phases, and `move_pages(2)`.
//!
//! Batches are cut at `NR_MAX_BATCHED_MIGRATION` base pages (the PMD
//! size). Phase 1 (unmap) allocates each destination on the target node
//! (`alloc_migration_target`, `__GFP_THISNODE`) and checks the folio can
//! move (no reference beyond its mappings, `folio_expected_ref_count`);
//! a large folio whose destination cannot be allocated is split and its
//! pieces migrate in an extra pass, counting one failure. One batched TLB
//! flush follows. Phase 2 (move) moves every folio: page-table entries,
//! rmap and per-page state, LRU and node counters, the deferred split
//! queue, and the data through the copy policy, inside each move
//! (vanilla) or once for the whole batch after the metadata moved (the
//! seed's batch copy). Nothing runs concurrently in the model, so the
//! migration entries of the unmap phase are never observed and phase 2
//! rewrites the entries directly; the work is counted as the kernel does
//! it (two PTE writes per mapped page).

use largo_physmem::copy::{CopyJob, CopyPolicy};
use largo_types::Pfn;

use super::types::{Pid, VmError};
use super::{reclaim, Ctx, Vm};
use crate::memmap::Folio;
use crate::page_alloc::MigrationTarget;
use crate::stats::VmEvent;

/// `NR_MAX_MIGRATE_PAGES_RETRY`: passes over a folio in all.
pub const NR_MAX_MIGRATE_PAGES_RETRY: u32 = 10;
/// `NR_MAX_MIGRATE_ASYNC_RETRY`: passes of the batched asynchronous try.
pub const NR_MAX_MIGRATE_ASYNC_RETRY: u32 = 3;
/// `NR_MAX_MIGRATE_SYNC_RETRY`: passes of each folio's synchronous retry.
pub const NR_MAX_MIGRATE_SYNC_RETRY: u32 = NR_MAX_MIGRATE_PAGES_RETRY - NR_MAX_MIGRATE_ASYNC_RETRY;

/// What `migrate_pages` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MigrateResult {
    /// Folios not migrated (a split large folio counts once); the
    /// syscall's return value.
    pub nr_failed: u64,
    /// Base pages migrated (`pgmigrate_success`).
    pub nr_succeeded: u64,
    /// Base pages not migrated (`pgmigrate_fail`).
    pub nr_failed_pages: u64,
    /// Batches, each with one batched TLB flush.
    pub nr_batches: u64,
    /// Large folios split because no destination could be allocated.
    pub nr_split: u64,
}

impl std::ops::AddAssign for MigrateResult {
    fn add_assign(&mut self, r: MigrateResult) {
        self.nr_failed += r.nr_failed;
        self.nr_succeeded += r.nr_succeeded;
        self.nr_failed_pages += r.nr_failed_pages;
        self.nr_batches += r.nr_batches;
        self.nr_split += r.nr_split;
    }
}

/// Why a folio could not be unmapped for migration.
enum UnmapError {
    /// Referenced beyond its mappings (`-EAGAIN`, retried, then permanent).
    Busy,
    /// No destination memory (`-ENOMEM`).
    NoMem,
}

impl Vm {
    /// Failure injection (tests): every `every`-th folio a migration tries
    /// to unmap is refused as busy; 0 turns it off.
    pub fn inject_migrate_failures(&mut self, every: u32) {
        self.migrate_fail_every = every;
    }

    /// `migrate_pages(MIGRATE_SYNC)`: moves the anon folios `keys` to
    /// destinations from `target` in batches, copying their data with
    /// `copy`.
    pub fn migrate_pages(
        &mut self,
        ctx: &mut Ctx,
        keys: &[usize],
        target: &mut MigrationTarget,
        copy: &dyn CopyPolicy,
    ) -> MigrateResult {
        let mut result = MigrateResult::default();
        let batch_pages = 1u64 << self.pmd_order();
        // The folios leave the LRU first (`folio_isolate_lru` after
        // `lru_add_drain_all`): reclaim that allocating a destination may
        // run cannot take them away meanwhile.
        self.lru_add_drain_all(ctx.pa);
        for &k in keys {
            self.lru_forget(ctx.pa, super::lru::FolioRef::Anon(k));
        }
        let mut pending: Vec<usize> = keys.to_vec();
        let mut split_pieces = Vec::new();
        while !pending.is_empty() {
            // `list_cut_before`: the batch ends where it reaches the limit.
            let mut n = 0;
            let mut pages = 0;
            while n < pending.len() && pages < batch_pages {
                pages += self.folios[pending[n]].nr_pages();
                n += 1;
            }
            let batch: Vec<usize> = pending.drain(..n).collect();
            // migrate_pages_sync: the batch asynchronously (3 passes), then
            // each folio still busy on its own (7 passes; batching locked
            // folios in sync mode could deadlock).
            let busy = self.migrate_pages_batch(
                ctx,
                &batch,
                target,
                copy,
                NR_MAX_MIGRATE_ASYNC_RETRY,
                &mut result,
                &mut split_pieces,
            );
            for key in busy {
                let still = self.migrate_pages_batch(
                    ctx,
                    &[key],
                    target,
                    copy,
                    NR_MAX_MIGRATE_SYNC_RETRY,
                    &mut result,
                    &mut split_pieces,
                );
                for key in still {
                    self.count_permanent_failure(ctx, key, &mut result);
                }
            }
        }
        // Pieces of split folios: one best-effort pass, not counted as failures.
        if !split_pieces.is_empty() {
            let mut extra = MigrateResult::default();
            let mut none = Vec::new();
            for chunk in split_pieces.chunks(batch_pages as usize) {
                self.migrate_pages_batch(
                    ctx,
                    chunk,
                    target,
                    copy,
                    NR_MAX_MIGRATE_ASYNC_RETRY,
                    &mut extra,
                    &mut none,
                );
            }
            result.nr_succeeded += extra.nr_succeeded;
            result.nr_batches += extra.nr_batches;
        }
        // putback_movable_pages and the moved folios' putback: every folio
        // of the list that is still there goes back on the LRU.
        for &k in keys.iter().chain(split_pieces.iter()) {
            let r = super::lru::FolioRef::Anon(k);
            if self.folios.contains(k) && !self.lru_is_on(r) {
                self.folio_add_lru(ctx.pa, ctx.cpu, r);
            }
        }
        ctx.pa.events.count(VmEvent::PgmigrateSuccess, result.nr_succeeded);
        ctx.pa.events.count(VmEvent::PgmigrateFail, result.nr_failed_pages);
        result
    }

    /// A folio that could not move: one failure, its pages in `pgmigrate_fail`.
    fn count_permanent_failure(&mut self, ctx: &mut Ctx, key: usize, result: &mut MigrateResult) {
        result.nr_failed += 1;
        result.nr_failed_pages += self.folios[key].nr_pages();
        if self.folios[key].order == self.pmd_order() {
            ctx.pa.events.count(VmEvent::ThpMigrationFail, 1);
        }
    }

    /// `migrate_pages_batch`: up to `nr_pass` passes unmapping the folios
    /// (destinations allocated; a busy folio is retried in the next pass),
    /// one TLB flush, then every unmapped folio moved and its data copied.
    /// Returns the folios still busy after the last pass.
    #[allow(clippy::too_many_arguments)]
    fn migrate_pages_batch(
        &mut self,
        ctx: &mut Ctx,
        batch: &[usize],
        target: &mut MigrationTarget,
        copy: &dyn CopyPolicy,
        nr_pass: u32,
        result: &mut MigrateResult,
        split_pieces: &mut Vec<usize>,
    ) -> Vec<usize> {
        let mut unmapped = Vec::new();
        let mut retry: Vec<usize> = batch.to_vec();
        for _ in 0..nr_pass {
            if retry.is_empty() {
                break;
            }
            let mut again = Vec::new();
            for key in std::mem::take(&mut retry) {
                if self.unmap_or_fail(ctx, key, target, result, split_pieces, &mut unmapped) {
                    again.push(key);
                }
            }
            retry = again;
        }
        self.move_unmapped(ctx, &unmapped, copy, result);
        retry
    }

    /// One unmap attempt of `key`: unmapped (queued in `unmapped`), split,
    /// or failed for good; true if busy (to be retried).
    fn unmap_or_fail(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        target: &mut MigrationTarget,
        result: &mut MigrateResult,
        split_pieces: &mut Vec<usize>,
        unmapped: &mut Vec<(usize, Folio)>,
    ) -> bool {
        let (order, nr) = (self.folios[key].order, self.folios[key].nr_pages());
        let is_thp = order == self.pmd_order();
        match self.migrate_folio_unmap(ctx, key, target) {
            Ok(dst) => unmapped.push((key, dst)),
            Err(UnmapError::Busy) => return true,
            Err(UnmapError::NoMem) => {
                // -ENOMEM: a large folio is split and its pieces try again
                // (one failure counted); a small one, or one that cannot
                // be split, fails for good.
                let pfn = self.folios[key].pfn;
                if order == 0 || !self.split_anon_folio(ctx, key) {
                    self.count_permanent_failure(ctx, key, result);
                    return false;
                }
                result.nr_split += 1;
                result.nr_failed += 1;
                if is_thp {
                    ctx.pa.events.count(VmEvent::ThpMigrationSplit, 1);
                    ctx.pa.events.count(VmEvent::ThpMigrationFail, 1);
                }
                split_pieces.extend((pfn..pfn + nr).filter_map(|p| self.folio_key_of_pfn(ctx.pa, p)));
            }
        }
        false
    }

    /// The move phase of a batch, after its one TLB flush.
    fn move_unmapped(
        &mut self,
        ctx: &mut Ctx,
        unmapped: &[(usize, Folio)],
        copy: &dyn CopyPolicy,
        result: &mut MigrateResult,
    ) {
        if unmapped.is_empty() {
            return;
        }
        result.nr_batches += 1;
        let mut pte_mapped = false;
        let mut jobs = Vec::with_capacity(unmapped.len());
        for &(key, dst) in unmapped {
            let src = self.folios[key].pfn;
            let is_thp = self.folios[key].order == self.pmd_order();
            let job = CopyJob {
                src: Pfn(src),
                dst: dst.pfn,
                nr_pages: dst.nr_pages(),
            };
            pte_mapped |= self.migrate_folio_move(ctx, key, dst);
            if copy.batched() {
                jobs.push(job);
            } else {
                copy.copy(ctx.backing, &[job])
                    .unwrap_or_else(|e| unreachable!("migration copy inside the backing: {e}"));
            }
            self.free_migrated_source(ctx, src, dst.order);
            result.nr_succeeded += dst.nr_pages();
            if is_thp {
                ctx.pa.events.count(VmEvent::ThpMigrationSuccess, 1);
            }
        }
        self.work.migrate_folios += unmapped.len() as u64;
        self.work.migrate_flushes += u64::from(pte_mapped);
        if !jobs.is_empty() {
            copy.copy(ctx.backing, &jobs)
                .unwrap_or_else(|e| unreachable!("migration copy inside the backing: {e}"));
        }
    }

    /// `migrate_folio_unmap`: the folio must have no reference beyond its
    /// mappings; its destination comes from `target`
    /// ([`PageAlloc::alloc_migration_dst`]).
    fn migrate_folio_unmap(
        &mut self,
        ctx: &mut Ctx,
        key: usize,
        target: &mut MigrationTarget,
    ) -> Result<Folio, UnmapError> {
        self.migrate_attempts += 1;
        let injected =
            self.migrate_fail_every > 0 && self.migrate_attempts.is_multiple_of(self.migrate_fail_every as u64);
        if injected || self.folio_has_extra_refs(ctx.pa, key) {
            return Err(UnmapError::Busy);
        }
        let order = self.folios[key].order;
        let mut reclaimer = reclaim::VmReclaim {
            vm: self,
            backing: &mut *ctx.backing,
        };
        ctx.pa
            .alloc_migration_dst(ctx.cpu, target, order, &mut reclaimer)
            .ok_or(UnmapError::NoMem)
    }

    /// `migrate_folio_move`: every mapping now points into `dst`, which
    /// takes over the folio's per-page state, its metadata, its place on
    /// the LRU, in the node counters and on the deferred split queue.
    /// True if a PTE mapped it (its unmap waits for the batch's TLB
    /// flush); each PMD mapping counts its own flush.
    fn migrate_folio_move(&mut self, ctx: &mut Ctx, key: usize, dst: Folio) -> bool {
        let mut pte_mapped = false;
        let (src, nr) = {
            let m = &self.folios[key];
            (m.pfn, m.nr_pages())
        };
        let (old_nid, new_nid) = (self.node_of(ctx.pa, src), self.node_of(ctx.pa, dst.pfn.0));
        for m in self.rmap_walk(key) {
            if m.level == 1 {
                self.work.migrate_flushes += 1;
            } else {
                pte_mapped = true;
            }
            let entries = if m.level == 1 { 1 } else { m.nr as usize };
            for i in 0..entries {
                let index = m.slot.index + i;
                let e = self.pt.get(m.slot.table, index);
                let moved = e.with_pfn(e.pfn() - src + dst.pfn.0);
                // try_to_migrate writes a migration entry, remove_migration_ptes the new PTE.
                self.pt.set(m.slot.table, index, moved);
                self.pt.set(m.slot.table, index, moved);
            }
        }
        let queued = self.folios[key].deferred.is_some();
        if queued {
            self.deferred_unlink(old_nid, key);
        }
        let r = super::lru::FolioRef::Anon(key);
        let was_on = self.lru_is_on(r);
        self.lru_forget(ctx.pa, r);
        let mut mapped = 0;
        for i in 0..nr {
            let record = *ctx.pa.memmap.page(src + i);
            if record.mapcount() > 0 {
                mapped += 1;
            }
            *ctx.pa.memmap.page_mut(dst.pfn.0 + i) = record;
        }
        let meta = &mut self.folios[key];
        meta.pfn = dst.pfn.0;
        // A PMD mapping maps every page (per-page mapcounts count PTEs only).
        let thps = if meta.entire_mapcount > 0 { nr as i64 } else { 0 };
        if thps > 0 {
            mapped = nr as i64;
        }
        self.node_stat[old_nid].anon_mapped -= mapped;
        self.node_stat[new_nid].anon_mapped += mapped;
        self.node_stat[old_nid].anon_thps -= thps;
        self.node_stat[new_nid].anon_thps += thps;
        if was_on {
            self.folio_add_lru(ctx.pa, ctx.cpu, r);
        }
        if queued {
            self.deferred_push_tail(new_nid, key);
        }
        pte_mapped
    }

    /// The source frames after the move: their records cleared, freed.
    fn free_migrated_source(&mut self, ctx: &mut Ctx, src: u64, order: u32) {
        for p in src..src + (1 << order) {
            ctx.pa.memmap.page_mut(p).clear();
        }
        ctx.pa.prep_new_page(src, order);
        ctx.pa
            .free_folio(ctx.cpu, Folio { pfn: Pfn(src), order })
            .unwrap_or_else(|e| unreachable!("migrated source {src:#x} not freeable: {e}"));
    }
}

/// `-EFAULT`, `-ENOENT`, `-EACCES`, `-EBUSY` as `move_pages` stores them.
pub const EFAULT: i32 = -14;
pub const ENOENT: i32 = -2;
pub const EACCES: i32 = -13;
pub const EBUSY: i32 = -16;

/// What `move_pages(2)` returns: 0, or the number of pages not migrated,
/// and the status of each entry (a node id or a negative errno; entries
/// after an abort stay `None`, unwritten).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovePages {
    pub ret: i64,
    pub status: Vec<Option<i32>>,
    pub result: MigrateResult,
}

impl Vm {
    /// `move_pages(pid, count, pages, nodes, status, MPOL_MF_MOVE)`
    /// (`kernel_move_pages`, `do_pages_move`, `do_pages_stat`): with
    /// `nodes` `None`, the node of each page; else each page's folio moved
    /// to its node, consecutive entries for one node migrated together.
    pub fn move_pages(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        pages: &[u64],
        nodes: Option<&[i32]>,
        copy: &dyn CopyPolicy,
    ) -> Result<MovePages, VmError> {
        let mm = self.task_mm(pid)?;
        let mut out = MovePages {
            ret: 0,
            status: vec![None; pages.len()],
            result: MigrateResult::default(),
        };
        let Some(nodes) = nodes else {
            for (i, &addr) in pages.iter().enumerate() {
                out.status[i] = Some(
                    self.page_status(ctx, mm, addr)
                        .map_or_else(|e| e, |(nid, _)| nid as i32),
                );
            }
            return Ok(out);
        };
        if nodes.len() != pages.len() {
            return Err(VmError::Invalid("nodes and pages differ in length"));
        }
        let nr_nodes = self.node_stat.len() as i32;
        let n = pages.len();
        let mut run: Vec<usize> = Vec::new();
        // `current_node` of do_pages_move: -1 when nothing is queued.
        let mut current = -1;
        let mut start = 0;
        for i in 0..n {
            let node = nodes[i];
            if node < 0 || node >= nr_nodes || !self.node_has_memory(ctx, node as usize) {
                // out_flush: what is queued still moves; then -ENODEV.
                let failed = self.move_pages_and_store_status(ctx, &mut run, current, start, i, &mut out, copy);
                out.ret = if failed > 0 {
                    failed + (n - i) as i64
                } else {
                    VmError::NoNode(node).errno() as i64
                };
                return Ok(out);
            }
            if current < 0 {
                current = node;
                start = i;
            } else if node != current {
                let failed = self.move_pages_and_store_status(ctx, &mut run, current, start, i, &mut out, copy);
                if failed > 0 {
                    out.ret = failed + (n - i) as i64;
                    return Ok(out);
                }
                start = i;
                current = node;
            }
            // add_page_for_migration: queued, or a status of its own.
            let status = match self.page_status(ctx, mm, pages[i]) {
                Err(e) => e,
                Ok((nid, _)) if nid as i32 == current => current,
                Ok((_, key)) => {
                    // folio_maybe_mapped_shared (CONFIG_MM_ID): a small
                    // folio by its mapcount, a large one by its flag.
                    let meta = &self.folios[key];
                    let shared = if meta.order == 0 {
                        self.folio_mapcount(ctx.pa, key) > 1
                    } else {
                        meta.maybe_mapped_shared
                    };
                    if shared {
                        EACCES
                    } else if run.contains(&key) {
                        EBUSY
                    } else {
                        run.push(key);
                        continue;
                    }
                }
            };
            out.status[i] = Some(status);
            // Not queued: what is queued so far moves now.
            let failed = self.move_pages_and_store_status(ctx, &mut run, current, start, i, &mut out, copy);
            if failed > 0 {
                out.ret = failed - 1 + (n - i) as i64;
                return Ok(out);
            }
            current = -1;
        }
        out.ret = self.move_pages_and_store_status(ctx, &mut run, current, start, n, &mut out, copy);
        Ok(out)
    }

    /// `move_pages_and_store_status`: migrates what is queued for `node`
    /// and, if every folio moved, writes the node into the status of the
    /// entries `start..end` (all queued ones); returns the folios that
    /// failed. Nothing queued: nothing written.
    #[allow(clippy::too_many_arguments)]
    fn move_pages_and_store_status(
        &mut self,
        ctx: &mut Ctx,
        run: &mut Vec<usize>,
        node: i32,
        start: usize,
        end: usize,
        out: &mut MovePages,
        copy: &dyn CopyPolicy,
    ) -> i64 {
        if run.is_empty() || node < 0 {
            return 0;
        }
        let r = self.migrate_pages(ctx, run, &mut MigrationTarget::ThisNode(node as usize), copy);
        run.clear();
        out.result += r;
        if r.nr_failed > 0 {
            return r.nr_failed as i64;
        }
        for s in &mut out.status[start..end] {
            *s = Some(node);
        }
        0
    }

    /// The node and folio of the page at `addr`: `-EFAULT` without a VMA
    /// or on the (huge) zero page, `-ENOENT` if nothing is mapped there
    /// (`folio_walk_start(FW_ZEROPAGE)` in `do_pages_stat_array` and
    /// `add_page_for_migration`, as this host's 6.18 kernel answers).
    fn page_status(&self, ctx: &Ctx, mm: super::types::MmId, addr: u64) -> Result<(usize, usize), i32> {
        if self.mms[mm].vma_at(addr, &self.vmas).is_none() {
            return Err(EFAULT);
        }
        let pfn = self.follow_page(mm, addr)?;
        let key = self.folio_key_of_pfn(ctx.pa, pfn).ok_or(ENOENT)?;
        Ok((self.node_of(ctx.pa, self.folios[key].pfn), key))
    }

    /// `folio_walk_start(FW_ZEROPAGE)`: the frame of the anonymous page
    /// mapped at `addr`; `-EFAULT` for the (huge) zero page, `-ENOENT`
    /// for nothing mapped.
    fn follow_page(&self, mm: super::types::MmId, addr: u64) -> Result<u64, i32> {
        let root = self.mms[mm].pgd;
        let (table, index, level) = self.pt.leaf(root, addr).ok_or(ENOENT)?;
        let e = self.pt.get(table, index);
        if !e.present() {
            return Err(ENOENT);
        }
        if e.is_special() {
            return Err(EFAULT);
        }
        Ok(if level == 1 {
            e.pfn() + ((addr >> self.page_shift()) & ((1 << self.pmd_order()) - 1))
        } else {
            e.pfn()
        })
    }

    /// The frame mapped at `addr` in `pid`'s address space, if an
    /// anonymous page (not the zero page) is mapped there.
    pub fn translate(&self, pid: Pid, addr: u64) -> Option<u64> {
        let mm = self.task_mm(pid).ok()?;
        self.follow_page(mm, addr).ok()
    }

    /// The frame of the page-table page whose entry maps `addr` (the PTE
    /// table, or the PMD table for a PMD mapping).
    pub fn page_table_pfn(&self, pid: Pid, addr: u64) -> Option<u64> {
        let mm = self.task_mm(pid).ok()?;
        let (table, _, _) = self.pt.leaf(self.mms[mm].pgd, addr)?;
        Some(self.pt.pages[table].pfn)
    }

    /// `move_pages` of every base page of `[addr, addr + len)` to `node`,
    /// one entry per page as a program passes them (trace events and
    /// workloads). Pages not present would only get an -ENOENT or -EFAULT
    /// status and move nothing, so only present pages are passed: the work
    /// and memory follow what is mapped, whatever `len` says.
    pub fn move_range(
        &mut self,
        ctx: &mut Ctx,
        pid: Pid,
        addr: u64,
        len: u64,
        node: u32,
        copy: &dyn CopyPolicy,
    ) -> Result<MovePages, VmError> {
        let mm = self.task_mm(pid)?;
        let pages = self.pt.present_pages(self.mms[mm].pgd, addr, addr.saturating_add(len));
        let nodes = vec![node as i32; pages.len()];
        self.move_pages(ctx, pid, &pages, Some(&nodes), copy)
    }

    fn node_has_memory(&self, ctx: &Ctx, nid: usize) -> bool {
        ctx.pa.zones().iter().any(|z| z.nid == nid && z.managed())
    }
}
