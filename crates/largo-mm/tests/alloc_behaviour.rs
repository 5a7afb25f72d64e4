//! The allocator decisions that must match Linux, one behaviour per test.

use largo_mm::gfp::{Gfp, GFP_ATOMIC, GFP_HIGHUSER_MOVABLE, GFP_KERNEL};
use largo_mm::page_alloc::{zone_index, FreeError};
use largo_mm::stats::render::vmstat_value;
use largo_mm::{Folio, Machine, MachineConfig};
use largo_types::{MigrateType, Pfn, ZoneType};

fn small(mem_mb: u64) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: mem_mb << 20,
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    })
    .unwrap()
}

fn alloc(m: &mut Machine, gfp: Gfp, order: u32) -> Folio {
    m.alloc_pages(0, gfp, order)
        .unwrap()
        .expect("allocation should succeed")
}

fn blocks_of(m: &Machine, zone: ZoneType, mt: MigrateType) -> usize {
    let pa = m.page_alloc();
    let z = pa.zone(0, zone);
    let pb = m.geometry().pageblock_nr_pages();
    (z.zone_start_pfn..z.zone_end_pfn())
        .step_by(pb as usize)
        .filter(|&pfn| pa.pageblock_migratetype(pfn) == mt)
        .count()
}

#[test]
fn pcp_is_lifo_and_drains_to_the_buddy_lists() {
    // 3 GiB: everything is DMA32, whose pageset has batch 63.
    let mut m = small(3 << 10);
    let zi = zone_index(0, ZoneType::Dma32);
    let a = alloc(&mut m, GFP_KERNEL, 0);
    let batch_left = m.page_alloc().pcp(zi, 0).count;
    assert!(
        batch_left > 0,
        "the first order-0 allocation refills the pcp with a batch"
    );
    m.free_folio(0, a).unwrap();
    assert_eq!(m.page_alloc().pcp(zi, 0).count, batch_left + 1);
    let b = alloc(&mut m, GFP_KERNEL, 0);
    assert_eq!(a, b, "the pcp hands back the page freed last");
    m.free_folio(0, b).unwrap();
    m.page_alloc_mut().drain_pages(0);
    assert_eq!(m.page_alloc().pcp(zi, 0).count, 0);
    m.check().unwrap();
}

#[test]
fn orders_outside_the_pcp_bypass_it() {
    let mut m = small(3 << 10);
    let zi = zone_index(0, ZoneType::Dma32);
    assert!(m.page_alloc().pcp_allowed_order(3));
    assert!(m.page_alloc().pcp_allowed_order(9), "pageblock order is cached");
    assert!(
        !m.page_alloc().pcp_allowed_order(4),
        "mTHP orders 4..8 always take the zone lock"
    );
    let f = alloc(&mut m, GFP_HIGHUSER_MOVABLE, 5);
    m.free_folio(0, f).unwrap();
    assert_eq!(m.page_alloc().pcp(zi, 0).count, 0);
    let t = alloc(&mut m, GFP_HIGHUSER_MOVABLE, 9);
    // A pageblock-order refill takes max(batch >> order, 2) = 2 blocks.
    assert_eq!(m.page_alloc().pcp(zi, 0).count, 512);
    m.free_folio(0, t).unwrap();
    assert_eq!(
        m.page_alloc().pcp(zi, 0).count,
        1024,
        "a freed THP-order block waits on the pcp"
    );
}

#[test]
fn unmovable_fallback_claims_a_whole_pageblock() {
    // Every pageblock boots MOVABLE; the first unmovable allocation must
    // take over a whole block rather than pollute one.
    let mut m = Machine::new(MachineConfig {
        mem_bytes: (4 << 30) + (256 << 20),
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    })
    .unwrap();
    assert_eq!(blocks_of(&m, ZoneType::Normal, MigrateType::Unmovable), 0);
    let f = alloc(&mut m, GFP_KERNEL, 0);
    assert!(f.pfn.0 >= (4u64 << 30) >> 12, "GFP_KERNEL prefers ZONE_NORMAL");
    // ALLOC_NOFRAGMENT only claims whole pageblocks; the largest free block
    // (MAX_PAGE_ORDER, two pageblocks) is claimed, both its pageblocks retyped.
    assert_eq!(blocks_of(&m, ZoneType::Normal, MigrateType::Unmovable), 2);
    assert_eq!(m.page_alloc().pageblock_migratetype(f.pfn.0), MigrateType::Unmovable);
    assert!(
        m.page_alloc().zone(0, ZoneType::Normal).watermark_boost == 0,
        "claiming a whole free block is not a fragmenting fallback: no boost"
    );
    m.check().unwrap();
}

#[test]
fn zone_limits_are_respected() {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 8 << 30,
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    })
    .unwrap();
    for _ in 0..64 {
        let f = alloc(&mut m, GFP_KERNEL | Gfp::DMA32, 2);
        assert!(f.end_pfn().0 <= (4u64 << 30) >> 12);
        let d = alloc(&mut m, GFP_KERNEL | Gfp::DMA, 0);
        assert!(d.pfn.0 < (16u64 << 20) >> 12);
    }
    assert!(vmstat_value(&m, "pgalloc_dma") > 0);
    assert!(vmstat_value(&m, "pgalloc_dma32") >= 64 * 4);
    m.check().unwrap();
}

#[test]
fn watermarks_stop_normal_allocations_but_not_atomic_ones() {
    let mut m = small(64);
    let mut live = Vec::new();
    while let Some(f) = m.alloc_pages(0, GFP_KERNEL, 0).unwrap() {
        live.push(f);
    }
    let pa = m.page_alloc();
    let dma32 = pa.zone(0, ZoneType::Dma32);
    let free = dma32.stat.nr_free_pages as u64;
    assert!(
        free <= dma32.min_wmark_pages() + 1,
        "GFP_KERNEL stopped with {free} free pages, min watermark {}",
        dma32.min_wmark_pages()
    );
    assert!(
        vmstat_value(&m, "allocstall_normal") > 0,
        "the failure went through direct reclaim"
    );
    let atomic = m.alloc_pages(0, GFP_ATOMIC, 0).unwrap();
    assert!(atomic.is_some(), "GFP_ATOMIC may dip below the min watermark");
    live.extend(atomic);
    for f in live {
        m.free_folio(1, f).unwrap();
    }
    m.check().unwrap();
}

#[test]
fn counters_track_allocations_and_frees() {
    let mut m = small(64);
    let pgfree_boot = vmstat_value(&m, "pgfree");
    assert_eq!(
        pgfree_boot,
        m.page_alloc().managed_pages(),
        "boot frees every managed page once"
    );
    let f = alloc(&mut m, GFP_HIGHUSER_MOVABLE, 4);
    assert_eq!(vmstat_value(&m, "pgalloc_dma32"), 16);
    m.free_folio(0, f).unwrap();
    assert_eq!(vmstat_value(&m, "pgfree"), pgfree_boot + 16);
    assert_eq!(vmstat_value(&m, "numa_hit"), 1);
    assert_eq!(vmstat_value(&m, "nr_free_pages"), m.page_alloc().managed_pages());
}

#[test]
fn split_gives_independent_folios() {
    let mut m = small(64);
    let f = alloc(&mut m, GFP_HIGHUSER_MOVABLE, 3);
    let parts = m.split_folio(f, 1).unwrap();
    assert_eq!(parts.len(), 4);
    assert_eq!(parts[1].pfn, f.pfn + 2);
    m.check().unwrap();
    for p in parts {
        m.free_folio(0, p).unwrap();
    }
    m.check().unwrap();
}

#[test]
fn bad_frees_are_errors_not_panics() {
    let mut m = small(64);
    let f = alloc(&mut m, GFP_HIGHUSER_MOVABLE, 2);
    let tail = Folio {
        pfn: f.pfn + 1,
        order: 0,
    };
    assert!(matches!(m.free_folio(0, tail), Err(FreeError::NotAllocated { .. })));
    let wrong_order = Folio { pfn: f.pfn, order: 3 };
    assert!(matches!(
        m.free_folio(0, wrong_order),
        Err(FreeError::OrderMismatch { .. })
    ));
    m.free_folio(0, f).unwrap();
    assert!(m.free_folio(0, f).is_err(), "double free");
    assert!(matches!(
        m.free_folio(
            0,
            Folio {
                pfn: Pfn(u64::MAX / 2),
                order: 0
            }
        ),
        Err(FreeError::OutOfRange { .. })
    ));
    assert!(m.alloc_pages(0, GFP_KERNEL, 11).is_err(), "order above MAX_PAGE_ORDER");
    assert!(m.alloc_pages(7, GFP_KERNEL, 0).is_err(), "no such cpu");
    m.check().unwrap();
}

#[test]
fn a_terabyte_machine_boots_on_a_small_host() {
    let m = Machine::new(MachineConfig {
        mem_bytes: 1 << 40,
        ..MachineConfig::default()
    })
    .unwrap();
    let total_kb = largo_mm::stats::render::meminfo_kb(&m, "MemTotal");
    let vmemmap_kb = (1u64 << 40) / 4096 * 64 / 1024;
    assert!(
        total_kb > (1u64 << 30) - vmemmap_kb - (64 << 10),
        "MemTotal {total_kb} kB"
    );
    assert!(total_kb < 1 << 30);
    assert_eq!(
        m.sparse().blocks.len() as u64,
        (1u64 << 40) / (1 << 30),
        "1 GiB memory blocks"
    );
}

#[test]
fn gfp_zero_really_clears_memory_on_ram() {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 64 << 20,
        kernel_reserved_bytes: 1 << 20,
        backing: largo_physmem::BackingKind::Ram,
        ..MachineConfig::default()
    })
    .unwrap();
    let f = alloc(&mut m, GFP_KERNEL, 1);
    m.backing_mut().write(f.pfn + 1, 100, b"stale data").unwrap();
    m.free_folio(0, f).unwrap();
    let g = alloc(&mut m, GFP_KERNEL | Gfp::ZERO, 1);
    assert_eq!(f, g, "the pcp hands the same block back");
    let mut buf = [0xffu8; 10];
    m.backing().read(g.pfn + 1, 100, &mut buf).unwrap();
    assert_eq!(buf, [0; 10]);
    assert!(m.backing().resident_bytes().unwrap() >= 8192);
}
