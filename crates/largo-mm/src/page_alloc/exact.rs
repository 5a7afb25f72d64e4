//! Laying a booted machine's memory out exactly as a host snapshot
//! ([`crate::snapshot::HostSnapshot`]) found it: every free buddy block
//! at its pfn and order on the free list of its pageblock's migratetype,
//! every other frame the model manages held as allocated (in use
//! elsewhere), frames the host had not initialised yet withheld as
//! deferred memory, frames it reserved withheld for good (so each zone
//! manages what the host's manages), and every pageblock typed as the
//! snapshot says.
//!
//! Not a kernel path: it stands for the history that brought the host
//! there (as [`super::shape`] does from counts alone). Frames the model
//! reserved at boot but the host had free cannot be freed and are
//! counted in [`ExactLayout::free_pages_unplaced`].

use largo_types::{MigrateType, MIGRATE_TYPES};

use super::PageAlloc;
use crate::memmap::PageFlags;
use crate::snapshot::{aligned_blocks, HostSnapshot, PfnKind};

/// How the layout came out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExactLayout {
    /// Free pages in the snapshot.
    pub snapshot_free_pages: u64,
    /// Free pages in the model afterwards.
    pub free_pages: u64,
    /// Snapshot-free frames the model does not manage (reserved at its
    /// boot, or outside its zones).
    pub free_pages_unplaced: u64,
    /// Frames withheld as not yet initialised.
    pub uninit_pages: u64,
    /// Frames the model would have managed that the host did not: its
    /// PG_reserved and offline frames and its holes (and pfns past the
    /// snapshot's end): out of the zone for good.
    pub withheld_pages: u64,
    /// Frames the model reserved at boot that the host manages: now in
    /// the zone.
    pub adopted_pages: u64,
}

impl PageAlloc {
    /// Lays the free memory out as `snap`. Call on a freshly booted
    /// machine, before any workload.
    /// `zero_pfn` (the model's zero page) is never handed out.
    pub fn shape_exact(&mut self, snap: &HostSnapshot, zero_pfn: u64) -> ExactLayout {
        self.drain_all_pages();
        let mut out = ExactLayout {
            snapshot_free_pages: snap
                .kinds
                .iter()
                .filter(|&&b| b == PfnKind::Free as u8 || b == PfnKind::PcpFree as u8)
                .count() as u64,
            ..ExactLayout::default()
        };
        self.type_every_pageblock(snap);
        let regions = self.take_every_free_block();
        let mut placed_free = 0u64;
        for (zi, pfn, order) in regions {
            placed_free += self.lay_out_region(zi, pfn, order, snap, &mut out);
        }
        placed_free += self.adopt_model_reserved(snap, zero_pfn, &mut out);
        out.free_pages_unplaced = out.snapshot_free_pages.saturating_sub(placed_free);
        let pb_pages = self.geo.pageblock_nr_pages();
        for zi in 0..self.zones.len() {
            self.zones[zi].deferred.sort_unstable();
            // The highatomic reserve is the HighAtomic pageblocks it holds.
            let (start, end) = (self.zones[zi].zone_start_pfn, self.zones[zi].zone_end_pfn());
            let nr_high = (start.next_multiple_of(pb_pages)..end)
                .step_by(pb_pages as usize)
                .filter(|&pb| self.pageblocks.migratetype(pb) == MigrateType::HighAtomic)
                .count() as u64;
            self.zones[zi].nr_reserved_highatomic = nr_high * pb_pages;
        }
        self.recompute_after_shaping();
        out.free_pages = self.zones.iter().map(|z| z.stat.nr_free_pages.max(0) as u64).sum();
        out
    }

    /// Every pageblock of every zone takes the snapshot's type (Isolate,
    /// a transient state, becomes Movable), before any block is freed, so
    /// each free block goes to its pageblock's list.
    fn type_every_pageblock(&mut self, snap: &HostSnapshot) {
        let pb_pages = self.geo.pageblock_nr_pages();
        for zi in 0..self.zones.len() {
            if !self.zones[zi].managed() {
                continue;
            }
            let (start, end) = (self.zones[zi].zone_start_pfn, self.zones[zi].zone_end_pfn());
            let mut pb = start / pb_pages * pb_pages;
            while pb < end {
                let mt = MigrateType::ALL
                    .get(snap.migratetype_index(pb))
                    .copied()
                    .filter(|&m| m.index() < MIGRATE_TYPES && m != MigrateType::Isolate && m != MigrateType::Cma)
                    .unwrap_or(MigrateType::Movable);
                self.set_pageblock_migratetype(pb.max(start), mt);
                pb += pb_pages;
            }
        }
    }

    /// Takes every free block off the free lists: `(zone, pfn, order)`,
    /// the memory the model manages and could give the snapshot's layout.
    fn take_every_free_block(&mut self) -> Vec<(usize, u64, u32)> {
        let mut out = Vec::new();
        for zi in 0..self.zones.len() {
            for order in 0..=self.geo.max_page_order {
                for mt in MigrateType::ALL {
                    while let Some(pfn) = self.zones[zi].free_area[order as usize].list(mt).first() {
                        self.del_page_from_free_list(zi, pfn, order, mt);
                        self.account_freepages(zi, -(1i64 << order), mt);
                        out.push((zi, pfn, order));
                    }
                }
            }
        }
        out.sort_unstable_by_key(|&(_, pfn, _)| pfn);
        out
    }

    /// Lays out the block `[pfn, pfn + 2^order)` taken off the free lists;
    /// returns the pages freed.
    fn lay_out_region(&mut self, zi: usize, pfn: u64, order: u32, snap: &HostSnapshot, out: &mut ExactLayout) -> u64 {
        let end = pfn + (1u64 << order);
        let mut freed = 0;
        let mut at = pfn;
        while at < end {
            let kind = snap.kind(at);
            let mut run_end = at + 1;
            while run_end < end && same_class(snap.kind(run_end), kind) {
                run_end += 1;
            }
            match kind {
                PfnKind::Free | PfnKind::PcpFree => {
                    for (s, e) in self.mergeable_segments(at, run_end) {
                        for (p, o) in aligned_blocks(s, e, self.geo.max_page_order) {
                            self.release_exact(zi, p, o);
                            freed += 1 << o;
                        }
                    }
                }
                PfnKind::Uninit => {
                    self.withhold_frames(zi, at, run_end - at, true);
                    out.uninit_pages += run_end - at;
                }
                PfnKind::Reserved | PfnKind::Hole | PfnKind::Offline => {
                    self.withhold_frames(zi, at, run_end - at, false);
                    out.withheld_pages += run_end - at;
                }
                _ => {
                    for (p, o) in aligned_blocks(at, run_end, self.geo.max_page_order) {
                        self.prep_new_page(p, o);
                    }
                }
            }
            at = run_end;
        }
        freed
    }

    /// `[start, end)` cut at every pageblock boundary across which free
    /// blocks cannot merge (6.18 `__free_one_page`: a HighAtomic or
    /// Isolate pageblock does not merge with another type).
    fn mergeable_segments(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let pb_pages = self.geo.pageblock_nr_pages();
        let mergeable = |mt: MigrateType| mt.index() < largo_types::MIGRATE_PCPTYPES;
        let mut out = Vec::new();
        let mut from = start;
        let mut b = (start / pb_pages + 1) * pb_pages;
        while b < end {
            let (x, y) = (self.pageblocks.migratetype(b - 1), self.pageblocks.migratetype(b));
            if x != y && (!mergeable(x) || !mergeable(y)) {
                out.push((from, b));
                from = b;
            }
            b += pb_pages;
        }
        out.push((from, end));
        out
    }

    /// Frames the model reserved at its own boot (its kernel image and
    /// memmap placement) that the host manages join the zone as the
    /// snapshot has them, so each zone manages what the host's manages;
    /// returns the pages freed.
    fn adopt_model_reserved(&mut self, snap: &HostSnapshot, zero_pfn: u64, out: &mut ExactLayout) -> u64 {
        let mut freed = 0;
        for zi in 0..self.zones.len() {
            let (start, end) = (self.zones[zi].zone_start_pfn, self.zones[zi].zone_end_pfn());
            if !self.zones[zi].managed() {
                continue;
            }
            for pfn in start..end.min(snap.header.nr_pfns) {
                let kind = snap.kind(pfn);
                if pfn == zero_pfn
                    || matches!(
                        kind,
                        PfnKind::Hole | PfnKind::Reserved | PfnKind::Uninit | PfnKind::Offline
                    )
                    || !self.memmap.page(pfn).flags().contains(PageFlags::RESERVED)
                {
                    continue;
                }
                self.memmap.page_mut(pfn).remove_flags(PageFlags::RESERVED);
                self.zones[zi].managed_pages += 1;
                out.adopted_pages += 1;
                if matches!(kind, PfnKind::Free | PfnKind::PcpFree) {
                    self.release_exact(zi, pfn, 0);
                    freed += 1;
                } else {
                    self.prep_new_page(pfn, 0);
                }
            }
        }
        freed
    }

    /// Frees a block of the layout (no reporting notification).
    fn release_exact(&mut self, zi: usize, pfn: u64, order: u32) {
        self.memmap.page_mut(pfn).clear();
        let mt = self.pageblocks.migratetype(pfn);
        // A free block above the pageblock order has one type (the kernel
        // sets the range when it takes or merges one): its first
        // pageblock's, whatever the inference said of the others.
        if order > self.geo.pageblock_order {
            self.change_pageblock_range(pfn, order, mt);
        }
        let fpi = super::Fpi {
            skip_report_notify: true,
            to_tail: false,
        };
        self.__free_one_page(zi, pfn, order, mt, fpi);
    }

    /// Frames the host does not manage: PG_reserved ones for good, and
    /// those it had not initialised until deferred init brings them in.
    fn withhold_frames(&mut self, zi: usize, pfn: u64, nr: u64, deferred: bool) {
        for p in pfn..pfn + nr {
            let page = self.memmap.page_mut(p);
            page.clear();
            page.set_flags(PageFlags::RESERVED);
        }
        self.zones[zi].managed_pages -= nr;
        if deferred {
            self.zones[zi].deferred.push((pfn, nr));
        }
    }
}

/// Runs are cut where the class changes: free, uninitialised, withheld
/// (reserved, hole, offline), or held.
fn same_class(a: PfnKind, b: PfnKind) -> bool {
    let class = |k: PfnKind| match k {
        PfnKind::Free | PfnKind::PcpFree => 0,
        PfnKind::Uninit => 1,
        PfnKind::Reserved | PfnKind::Hole | PfnKind::Offline => 2,
        _ => 3,
    };
    class(a) == class(b)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use largo_types::{MigrateType, MIGRATE_TYPES};

    use crate::machine::{Machine, MachineConfig};
    use crate::snapshot::{HostSnapshot, PfnKind};

    const NR: u64 = 1 << 18; // 1 GiB of 4 KiB pfns

    /// 1 GiB: every other page free in [64K, 128K), one free 4 MiB block
    /// at 128K, the top 256 MiB not initialised, the rest anonymous
    /// memory; pageblock 128 Unmovable.
    fn snapshot() -> HostSnapshot {
        let mut kinds = vec![PfnKind::Anon as u8; NR as usize];
        for p in 0..4096 {
            kinds[p] = PfnKind::Hole as u8;
        }
        for p in (65536..131072).step_by(2) {
            kinds[p] = PfnKind::Free as u8;
        }
        for p in 131072..132096 {
            kinds[p] = PfnKind::Free as u8;
        }
        for p in 196608..NR as usize {
            kinds[p] = PfnKind::Uninit as u8;
        }
        let kinds: Vec<PfnKind> = kinds.into_iter().map(|b| PfnKind::from_u8(b).unwrap()).collect();
        let mut snap = HostSnapshot::from_kinds(&kinds, 9, Vec::new());
        snap.pageblock_mt[128] = MigrateType::Unmovable.index() as u8;
        snap
    }

    fn free_count(m: &Machine, order: usize, mt: MigrateType) -> u64 {
        m.page_alloc()
            .zones()
            .iter()
            .map(|z| {
                z.free_area
                    .get(order)
                    .map_or(0, |a| a.list(mt).iter(&m.page_alloc().memmap.pages).count() as u64)
            })
            .sum()
    }

    #[test]
    fn a_machine_boots_with_the_snapshots_free_blocks_where_they_were() {
        let m = Machine::new(MachineConfig {
            mem_bytes: 1 << 30,
            snapshot: Some(Arc::new(snapshot())),
            ..MachineConfig::default()
        })
        .unwrap();
        let e = m.exact_layout().expect("laid out from the snapshot").clone();
        assert_eq!(e.snapshot_free_pages, 32768 + 1024);
        // The model's own memmap sits at the top of its memory (16 MiB for
        // 1 GiB): the rest of the uninitialised range is withheld.
        assert_eq!(e.uninit_pages, 65536 - 4096);
        // Every snapshot-free page the model manages is free, nothing else.
        assert_eq!(e.free_pages + e.free_pages_unplaced, e.snapshot_free_pages);
        assert_eq!(e.free_pages_unplaced, 0, "the model manages all of [64K, 132K)");
        // The holes stay order-0 (their buddies are held); the 4 MiB block is whole.
        let order0: u64 = (0..MIGRATE_TYPES).map(|i| free_count(&m, 0, MigrateType::ALL[i])).sum();
        assert_eq!(order0, 32768);
        assert_eq!(free_count(&m, 10, MigrateType::Movable), 1);
        // The holes in the Unmovable pageblock are on the Unmovable list.
        assert_eq!(free_count(&m, 0, MigrateType::Unmovable), 256);
        let pa = m.page_alloc();
        assert_eq!(pa.pageblocks.migratetype(128 << 9), MigrateType::Unmovable);
        assert_eq!(pa.pageblocks.migratetype(131072), MigrateType::Movable);
        // The uninitialised top is out of the zone until deferred init.
        let deferred: u64 = pa.zones().iter().flat_map(|z| z.deferred.iter().map(|d| d.1)).sum();
        assert_eq!(deferred, 65536 - 4096);
        // The holes the snapshot had where the model has memory are out of
        // the zones, not held memory: DMA's first 4096 pfns.
        assert!(e.withheld_pages > 0);
        m.check().unwrap();
    }

    #[test]
    fn deferred_memory_comes_back_when_an_allocation_needs_it() {
        let mut m = Machine::new(MachineConfig {
            mem_bytes: 1 << 30,
            snapshot: Some(Arc::new(snapshot())),
            ..MachineConfig::default()
        })
        .unwrap();
        // 8 MiB in 4 MiB blocks: one is free, the other must come from
        // memory deferred init hands over.
        let gfp = crate::page_alloc::gfp::GFP_HIGHUSER_MOVABLE;
        let a = m.alloc_pages(0, gfp, 10).unwrap().expect("the free 4 MiB block");
        let b = m
            .alloc_pages(0, gfp, 10)
            .unwrap()
            .expect("a block from deferred memory");
        assert_eq!(a.pfn.0, 131072);
        assert!(b.pfn.0 >= 196608, "from the formerly uninitialised top: {}", b.pfn.0);
        m.check().unwrap();
    }
}
