//! TLB reach and contiguity coverage of a run's anonymous memory.
//!
//! When anonymous memory peaks, the run records how it is mapped
//! ([`MappedLayout`], from the counters the kernel keeps: PMD-mapped THP
//! pages (`NR_ANON_THPS`) and, per order, the large folios mapped whole
//! (`nr_anon` less `nr_anon_partially_mapped`)). The TLB geometry
//! ([`TlbGeometry`]) says which of those a TLB entry can cover whole:
//! a PMD mapping always; on arm64 a folio of at least the contiguous-bit
//! range (`cont_pte_order`: 64K with 4K pages, 2M with 16K and 64K
//! pages), whose PTEs the kernel folds (`contpte_set_ptes`); with 4K
//! pages, a group of `coalesce_pages` aligned contiguous PTEs (x86 AMD
//! coalescing, arm64 HPA), which a fully mapped folio of at least that
//! many pages always is. Everything else
//! takes an entry per base page. This is thpmaps' `--cont` view of the
//! footprint, computed from counters instead of a page-table walk, which
//! assumes PTE-mapped folios are naturally aligned in the address space
//! (anonymous faults always map them so; mremap can move them off it).

pub mod sim;
pub mod stream;

use largo_mm::Machine;
use largo_types::TlbGeometry;
use serde::Serialize;

/// Orders a layout keeps (0..=13: the PMD order of 64K pages).
pub const ORDERS: usize = 14;

/// Anonymous memory by how it is mapped, in base pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MappedLayout {
    pub page_shift: u32,
    /// Pages mapped anonymously (`NR_ANON_MAPPED`).
    pub anon_pages: u64,
    /// Pages of PMD-mapped THPs (`NR_ANON_THPS`).
    pub pmd_pages: u64,
    /// By order: pages of large folios mapped whole by PTEs.
    pub pte_folio_pages: [u64; ORDERS],
}

impl MappedLayout {
    /// The machine's anonymous memory now.
    pub fn read(m: &Machine) -> MappedLayout {
        use largo_mm::vm::stats::MthpStat;
        let stats = m.vm().node_stats();
        let anon: i64 = stats.iter().map(|s| s.anon_mapped).sum();
        let pmd: i64 = stats.iter().map(|s| s.anon_thps).sum();
        let pmd_order = m.geometry().pmd_order;
        let mthp = &m.vm().mthp;
        let mut pte_folio_pages = [0; ORDERS];
        for order in m
            .geometry()
            .anon_orders()
            .filter(|&o| o < pmd_order && (o as usize) < ORDERS)
        {
            let whole = mthp.get(order, MthpStat::NrAnon) - mthp.get(order, MthpStat::NrAnonPartiallyMapped);
            pte_folio_pages[order as usize] = (whole.max(0) as u64) << order;
        }
        MappedLayout {
            page_shift: m.geometry().page_shift,
            anon_pages: anon.max(0) as u64,
            pmd_pages: pmd.max(0) as u64,
            pte_folio_pages,
        }
    }
}

/// Footprint by the translation that covers it, kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// PMD-mapped.
    pub pmd: u64,
    /// In arm64 contiguous-bit ranges.
    pub contpte: u64,
    /// In coalescing (x86 AMD) or HPA (arm64) groups.
    pub coalesced: u64,
    /// One entry per base page.
    pub base: u64,
}

/// The TLB's view of the footprint at its peak.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TlbReport {
    /// Anonymous footprint at the peak, kB.
    pub footprint_kb: u64,
    pub coverage: Coverage,
    /// TLB entries the footprint needs (one per PMD mapping, contiguous
    /// range, coalesced group or base page).
    pub entries_needed: u64,
    /// What the second-level TLB covers of the footprint: all of it when
    /// its entries suffice, else its entries times the footprint's mean
    /// coverage per entry.
    pub reach_kb: u64,
    /// The geometry's source.
    pub tlb: String,
    /// The workload's declared access streams through the TLB: accesses,
    /// first-level misses, walks (`misses`), walk time and the user-time
    /// estimate. `None` for workloads that declare none (traces carry no
    /// per-access stream: their user time is not estimated).
    pub streams: Option<stream::StreamReport>,
}

impl TlbReport {
    /// The report for a run's peak on machine `m` with TLBs `tlb`.
    pub fn at_peak(m: &Machine, peak: &crate::run::Peak, tlb: &TlbGeometry) -> TlbReport {
        let geo = m.geometry();
        TlbReport::new(&peak.layout, geo.cont_pte_order, geo.pmd_order, tlb)
    }

    /// With the figures of the run's access streams.
    pub fn with_streams(mut self, streams: Option<stream::StreamReport>) -> TlbReport {
        self.streams = streams;
        self
    }

    /// The report for `layout` on a machine with `cont_pte_order` (arm64)
    /// and PMD order `pmd_order`, TLBs `tlb`.
    pub fn new(layout: &MappedLayout, cont_pte_order: Option<u32>, pmd_order: u32, tlb: &TlbGeometry) -> TlbReport {
        let kb = |pages: u64| pages << layout.page_shift >> 10;
        let mut cov = Coverage::default();
        let mut entries = layout.pmd_pages >> pmd_order;
        let mut large = layout.pmd_pages;
        cov.pmd = kb(layout.pmd_pages);
        let coalesce = if layout.page_shift == 12 {
            tlb.coalesce_pages.max(1) as u64
        } else {
            1
        };
        for (order, &pages) in layout.pte_folio_pages.iter().enumerate() {
            let nr = 1u64 << order;
            if pages == 0 {
                continue;
            }
            if cont_pte_order.is_some_and(|c| order as u32 >= c) {
                let span = 1u64 << cont_pte_order.unwrap();
                cov.contpte += kb(pages);
                entries += pages / span;
            } else if coalesce > 1 && nr >= coalesce {
                cov.coalesced += kb(pages);
                entries += pages / coalesce;
            } else {
                continue;
            }
            large += pages;
        }
        let base_pages = layout.anon_pages.saturating_sub(large);
        cov.base = kb(base_pages);
        entries += base_pages;
        let footprint_kb = kb(layout.anon_pages);
        let reach_kb = if entries <= tlb.l2_entries as u64 {
            footprint_kb
        } else {
            (footprint_kb as u128 * tlb.l2_entries as u128 / entries as u128) as u64
        };
        TlbReport {
            footprint_kb,
            coverage: cov,
            entries_needed: entries,
            reach_kb,
            tlb: tlb.source.clone(),
            streams: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_types::Preset;

    fn layout(anon: u64, pmd: u64, order4: u64) -> MappedLayout {
        let mut l = MappedLayout {
            page_shift: 12,
            anon_pages: anon,
            pmd_pages: pmd,
            ..MappedLayout::default()
        };
        l.pte_folio_pages[4] = order4;
        l
    }

    #[test]
    fn reach_grows_with_the_translation_size() {
        let x86 = Preset::X86_64.tlb();
        // 64 MiB of base pages: 16384 entries for 3072 slots.
        let base = TlbReport::new(&layout(16384, 0, 0), None, 9, &x86);
        assert_eq!(base.coverage.base, 65536);
        assert_eq!(base.reach_kb, 3072 * 4);
        // The same in 64K folios: coalesced by 4 on x86.
        let folios = TlbReport::new(&layout(16384, 0, 16384), None, 9, &x86);
        assert_eq!(folios.coverage.coalesced, 65536);
        assert_eq!(folios.entries_needed, 4096);
        assert_eq!(folios.reach_kb, 3072 * 16);
        // On arm64 (contpte 64K) one entry per folio.
        let arm = TlbReport::new(&layout(16384, 0, 16384), Some(4), 9, &Preset::Arm64_4k.tlb());
        assert_eq!((arm.coverage.contpte, arm.entries_needed), (65536, 1024));
        assert_eq!(arm.reach_kb, 65536, "1024 entries fit in 1280");
        // PMD-mapped: 32 entries.
        let pmd = TlbReport::new(&layout(16384, 16384, 0), None, 9, &x86);
        assert_eq!((pmd.coverage.pmd, pmd.entries_needed, pmd.reach_kb), (65536, 32, 65536));
    }
}
