//! Gigantic folios: a 1 GiB block straight from the buddy allocator with
//! MAX_PAGE_ORDER 18 (buddies merging across 128 MiB sections), and from
//! `alloc_contig_pages` at MAX_PAGE_ORDER 10 with movable anon memory
//! migrated out of the way (bytes intact on ram); failure on an unmovable
//! page leaves the machine exactly as it was.

use largo_mm::gfp::{GFP_HIGHUSER_MOVABLE, GFP_KERNEL};
mod common;

use common::{anon_task, assert_intact_outside, PAGE};
use largo_mm::machine::Machine;
use largo_mm::stats::VmEvent;
use largo_mm::MachineConfig;
use largo_physmem::BackingKind;
use largo_types::GeometryOverrides;

const GIB_PAGES: u64 = 1 << 18;

fn machine(mem: u64, backing: BackingKind, ov: GeometryOverrides) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: mem,
        nr_cpus: 2,
        backing,
        overrides: ov,
        ..MachineConfig::default()
    })
    .unwrap()
}

/// Everything an observer of the allocator can see, for before/after equality.
fn snapshot(m: &Machine) -> (String, String, u64, u64) {
    let pa = m.page_alloc();
    (
        largo_mm::stats::render::buddyinfo(m),
        largo_mm::stats::render::pagetypeinfo(m),
        pa.nr_free_pages(),
        pa.nr_pcp_pages(),
    )
}

fn pattern(i: u64) -> Vec<u8> {
    (0..PAGE).map(|b| ((i * 37 + b * 11) % 253) as u8).collect()
}

#[test]
fn max_page_order_18_hands_out_a_1g_folio_from_the_buddy_allocator() {
    let ov = GeometryOverrides {
        max_page_order: Some(18),
        buddy_beyond_section: true,
        ..Default::default()
    };
    let mut m = machine(8 << 30, BackingKind::Sim, ov);
    m.check().unwrap();
    let free_before = m.page_alloc().nr_free_pages();
    let folio = m
        .alloc_pages(0, GFP_HIGHUSER_MOVABLE, 18)
        .unwrap()
        .expect("a free 1 GiB block");
    assert_eq!(folio.nr_pages(), GIB_PAGES);
    assert_eq!(folio.pfn.0 % GIB_PAGES, 0, "naturally aligned");
    // It spans eight 128 MiB sections.
    let shift = m.geometry().pfn_section_shift();
    assert_eq!((folio.end_pfn().0 - 1) >> shift, (folio.pfn.0 >> shift) + 7);
    m.check().unwrap();
    assert_eq!(
        m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages(),
        free_before - GIB_PAGES
    );
    m.free_folio(0, folio).unwrap();
    m.check().unwrap();
    assert_eq!(m.page_alloc().nr_free_pages(), free_before, "every page came back");
    // And the freed block merged back to order 18.
    let again = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 18).unwrap();
    assert_eq!(again.map(|f| f.pfn), Some(folio.pfn));
}

#[test]
fn alloc_contig_pages_migrates_anon_pages_out_of_a_1g_range_on_ram() {
    let mut m = machine(3 << 30, BackingKind::Ram, GeometryOverrides::default());
    // Fill most of memory so every 1 GiB candidate holds anon pages.
    let len = 1536 << 20;
    let (pid, addr) = anon_task(&mut m, len, Some(&pattern));
    let free_before = m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
    let folio = m
        .alloc_contig_pages(GIB_PAGES, 0)
        .unwrap()
        .expect("a 1 GiB range emptied");
    assert_eq!(folio.order, 18);
    assert_eq!(folio.pfn.0 % GIB_PAGES, 0);
    let moved = m.page_alloc().events.get(VmEvent::PgmigrateSuccess);
    assert!(moved > 0, "the range held anon pages that had to move");
    m.check().unwrap();
    // Every page still reads its pattern and none lies in the folio.
    assert_intact_outside(&m, pid, addr, len, &pattern, folio.pfn.0, folio.end_pfn().0);
    m.free_contig_folio(folio);
    m.check().unwrap();
    let free_after = m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
    assert_eq!(free_after, free_before, "the gigantic folio went back whole");
}

#[test]
fn an_unmovable_page_fails_the_range_and_changes_nothing() {
    let mut m = machine(2 << 30, BackingKind::Sim, GeometryOverrides::default());
    let (pid, addr) = anon_task(&mut m, 256 << 20, None);
    let kernel = m.alloc_pages(0, GFP_KERNEL, 0).unwrap().unwrap();
    // Ranges of 32 MiB: one around the kernel page, one around an anon
    // page's page table (unmovable too), one of anon pages only.
    const NR: u64 = 1 << 13;
    let pte_table = m.vm().page_table_pfn(pid, addr).unwrap();
    let anon = m.vm().translate(pid, addr).unwrap();
    for (what, pfn) in [("kernel page", kernel.pfn.0), ("page table", pte_table)] {
        let start = pfn & !(NR - 1);
        let before = snapshot(&m);
        let events_before: Vec<u64> = VmEvent::ALL.iter().map(|&e| m.page_alloc().events.get(e)).collect();
        let err = m.alloc_contig_range(start, start + NR).unwrap_err();
        assert!(err.to_string().contains("EBUSY"), "{what}: {err}");
        assert!(err.to_string().contains("unmovable page at pfn"), "{what}: {err}");
        assert_eq!(
            snapshot(&m),
            before,
            "{what}: a failed range left the allocator changed"
        );
        let events_after: Vec<u64> = VmEvent::ALL.iter().map(|&e| m.page_alloc().events.get(e)).collect();
        assert_eq!(events_before, events_after, "{what}: no counter moved");
        m.check().unwrap();
    }
    let start = anon & !(NR - 1);
    if (start..start + NR).contains(&pte_table) || (start..start + NR).contains(&kernel.pfn.0) {
        return;
    }
    let folio = m.alloc_contig_range(start, start + NR).unwrap().unwrap();
    assert_ne!(m.vm().translate(pid, addr), Some(anon), "the anon page moved");
    m.check().unwrap();
    m.free_contig_folio(folio);
    m.check().unwrap();
}

#[test]
fn compaction_frees_a_1g_buddy_block_at_max_page_order_18() {
    // Anon memory in ZONE_MOVABLE (page tables stay in Normal), scattered
    // over every gigabyte: fill the zone, then drop every other 16 MiB.
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 8 << 30,
        movable_bytes: 4 << 30,
        // 4 KiB folios: compaction never moves folios of pageblock order.
        knobs: vec![("transparent_hugepage/enabled".into(), "never".into())],
        nr_cpus: 2,
        overrides: GeometryOverrides {
            max_page_order: Some(18),
            buddy_beyond_section: true,
            ..Default::default()
        },
        ..MachineConfig::default()
    })
    .unwrap();
    let len = (4 << 30) - (64 << 20);
    let (pid, addr) = anon_task(&mut m, len, None);
    for off in (0..len).step_by(32 << 20) {
        m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr + off, 16 << 20))
            .unwrap();
    }
    let zi = m
        .page_alloc()
        .zones()
        .iter()
        .position(|z| z.name() == "Movable")
        .unwrap();
    let free_1g = |m: &Machine| m.page_alloc().zones()[zi].free_area[18].nr_free;
    assert_eq!(free_1g(&m), 0, "no free gigabyte before compaction");
    // compact_memory takes no target from whole free pageblocks: with
    // memory in 16 MiB free and used runs it has nowhere to migrate to.
    m.compact_memory();
    assert_eq!(free_1g(&m), 0);
    // Take the free gigabytes of the other zones first (no direct
    // compaction: its failure would defer the next attempt).
    let mut held = Vec::new();
    let light = GFP_HIGHUSER_MOVABLE.difference(largo_mm::gfp::Gfp::DIRECT_RECLAIM);
    while let Some(f) = m.alloc_pages(0, light, 18).unwrap() {
        held.push(f);
    }
    let successes = m.page_alloc().events.get(VmEvent::CompactSuccess);
    // Direct compaction for order 18 may split free pageblocks.
    let gfp = GFP_HIGHUSER_MOVABLE | largo_mm::gfp::Gfp::COMP | largo_mm::gfp::Gfp::RETRY_MAYFAIL;
    let folio = m
        .alloc_pages_compact(0, gfp, 18)
        .unwrap()
        .expect("direct compaction made a 1 GiB folio");
    assert_eq!(m.page_alloc().page_zone_index(folio.pfn.0), Some(zi));
    assert!(m.page_alloc().events.get(VmEvent::CompactSuccess) > successes);
    m.check().unwrap();
    m.free_folio(0, folio).unwrap();
    assert!(free_1g(&m) > 0);
    for f in held {
        m.free_folio(0, f).unwrap();
    }
    m.check().unwrap();
}

#[test]
fn a_range_of_any_length_comes_back_as_base_pages() {
    let mut m = machine(1 << 30, BackingKind::Sim, GeometryOverrides::default());
    let (pid, addr) = anon_task(&mut m, 64 << 20, None);
    // A page in the middle of the mapping, away from the page tables.
    let at = addr + (32 << 20);
    let pfn = m.vm().translate(pid, at).unwrap();
    // Three pageblocks and a bit: not a power of two, not block-aligned at the end.
    let start = pfn & !511;
    let end = start + 3 * 512 + 100;
    let free_before = m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
    let got = m
        .with_reclaim(|pa, r| pa.compactor().alloc_contig_range(start, end, false, 0, r))
        .unwrap();
    assert!(got.is_none(), "no compound folio without __GFP_COMP");
    m.check().unwrap();
    for p in start..end {
        let page = m.page_alloc().memmap().page(p);
        assert_eq!(
            (page.refcount(), page.order()),
            (1, 0),
            "pfn {p:#x} is an order-0 page with one reference"
        );
    }
    assert_ne!(m.vm().translate(pid, at), Some(pfn), "the anon page moved out");
    let free_mid = m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
    assert_eq!(
        free_mid + (end - start),
        free_before,
        "exactly the range left the free pages"
    );
    m.page_alloc_mut().compactor().free_contig_range(start, end - start);
    m.check().unwrap();
    assert_eq!(
        m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages(),
        free_before
    );
}

#[test]
fn buddies_beyond_sections_never_merge_across_holes_or_zones() {
    // MAX_PAGE_ORDER 20 (4 GiB blocks) on 8 GiB: the PCI hole 3G..4G sits
    // inside DMA32's span and DMA ends at 16M, so DMA32's largest free
    // blocks are the two aligned gigabytes 1G..2G and 2G..3G.
    let ov = GeometryOverrides {
        max_page_order: Some(20),
        buddy_beyond_section: true,
        ..Default::default()
    };
    let mut m = machine(8 << 30, BackingKind::Sim, ov);
    m.check().unwrap();
    let dma32 = m.page_alloc().zones().iter().position(|z| z.name() == "DMA32").unwrap();
    let area = |m: &Machine, o: usize| m.page_alloc().zones()[dma32].free_area[o].nr_free;
    assert_eq!(
        area(&m, 19) + area(&m, 20),
        0,
        "no block reaches over the hole or into DMA"
    );
    assert!(area(&m, 18) >= 1, "the gigabytes below the hole merged");
    // Normal (4G..9G) holds an aligned 4 GiB block: one order-20 folio.
    let folio = m
        .alloc_pages(0, GFP_HIGHUSER_MOVABLE, 20)
        .unwrap()
        .expect("a 4 GiB buddy");
    assert_eq!(folio.pfn.0, 1 << 20, "at 4 GiB, the only aligned 4 GiB of RAM");
    assert!(m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 20).unwrap().is_none());
    m.free_folio(0, folio).unwrap();
    m.check().unwrap();
}

#[test]
fn alloc_contig_pages_refuses_what_is_not_a_power_of_two() {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 256 << 20,
        ..MachineConfig::default()
    })
    .unwrap();
    for bad in [0, 3, 1000] {
        let r = m.alloc_contig_pages(bad, 0);
        assert!(
            matches!(r, Err(largo_mm::page_alloc::AllocError::NotAPowerOfTwo(n)) if n == bad),
            "{bad}: {r:?}"
        );
    }
    assert!(m.alloc_contig_pages(512, 0).unwrap().is_some());
    m.check().unwrap();
}
