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
