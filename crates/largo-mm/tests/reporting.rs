//! Free page reporting as mm/page_reporting.c does it: the delayed pass,
//! the per-list budget, batches of 32, PG_reported, refaults, the order
//! knob, the seed trigger, the retention watermark, and the ram backing
//! really giving memory back.

use largo_mm::gfp::GFP_HIGHUSER_MOVABLE;
use largo_mm::machine::Balloon;
use largo_mm::memmap::PageFlags;
use largo_mm::reporting::{PrState, PAGE_REPORTING_CAPACITY, PAGE_REPORTING_DELAY_NS};
use largo_mm::{Folio, Machine, MachineConfig};
use largo_physmem::BackingKind;
use largo_types::MigrateType;

const SEC: u64 = 1_000_000_000;

fn machine(mem_mb: u64, backing: BackingKind, knobs: &[(&str, &str)]) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: mem_mb << 20,
        kernel_reserved_bytes: 1 << 20,
        backing,
        balloon: Some(Balloon {
            order: 0,
            ack_latency_ns: 50_000,
        }),
        knobs: knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..MachineConfig::default()
    })
    .unwrap()
}

/// Free blocks of `order` and above, and how many of them are reported,
/// in the zones big enough to pass the pass's gate (free above the low
/// watermark plus 32 blocks of the reporting order: not the 16 MiB DMA
/// zone, whose blocks are never reported, as on the host).
fn free_and_reported(m: &Machine, min_order: usize) -> (u64, u64) {
    m.page_alloc()
        .zones()
        .iter()
        .filter(|z| z.managed_pages > 2 * (32 << 9))
        .flat_map(|z| z.free_area.iter().skip(min_order))
        .fold((0, 0), |(f, r), a| (f + a.nr_free, r + a.nr_reported))
}

/// Runs passes until the device goes idle; returns how many ran.
fn report_everything(m: &mut Machine) -> u64 {
    let before = m.reporting().stats.passes;
    for _ in 0..200 {
        m.advance_time(PAGE_REPORTING_DELAY_NS);
        if m.reporting().state == PrState::Idle && m.reporting().due_ns.is_none() {
            break;
        }
    }
    m.check().unwrap();
    m.reporting().stats.passes - before
}

#[test]
fn the_first_pass_runs_2s_after_registration_within_the_budget() {
    let mut m = machine(4096, BackingKind::Sim, &[]);
    assert_eq!(m.reporting().order(9), 9, "the device's order: pageblock_order");
    assert_eq!(m.reporting().state, PrState::Requested);
    m.advance_time(SEC);
    assert_eq!(m.reporting().stats.passes, 0, "not before 2 s");
    // The budget of each list: DIV_ROUND_UP(nr_free, 32 * 16) report
    // calls, plus the one that finds it spent; plus one leftover batch
    // per zone.
    let cap = PAGE_REPORTING_CAPACITY as u64;
    let bound: u64 = m
        .page_alloc()
        .zones()
        .iter()
        .map(|z| {
            let area = &z.free_area[10];
            let lists = area.free_list.iter().filter(|l| !l.is_empty()).count() as u64;
            lists * (area.nr_free.div_ceil(cap * 16) + 1) * cap + cap
        })
        .sum();
    m.advance_time(SEC);
    let s = m.reporting().stats.clone();
    assert_eq!(s.passes, 1);
    assert_eq!(s.timeline[0].t_ms, 2000 + s.report_calls * 50 / 1000);
    let order10 = s.reported_pages_by_order[10];
    assert!(order10 <= bound, "{order10} order-10 blocks in one pass, bound {bound}");
    assert!(order10 >= cap);
    // Not everything fit: another pass is due 2 s after this one ended.
    assert_eq!(m.reporting().state, PrState::Requested);
    let end = m.now_ns();
    assert_eq!(m.reporting().due_ns, Some(end + PAGE_REPORTING_DELAY_NS));
    m.check().unwrap();
    let passes = report_everything(&mut m);
    assert!(passes >= 2, "{passes}");
    let (free, reported) = free_and_reported(&m, 9);
    assert_eq!(
        free, reported,
        "an idle machine ends with every block >= order 9 reported"
    );
    let (free_low, reported_low) = free_and_reported(&m, 0);
    assert_eq!(reported_low, reported, "nothing below the reporting order");
    assert!(free_low > free);
    // Passes are at least 2 s apart.
    let t: Vec<u64> = m.reporting().stats.timeline.iter().map(|s| s.t_ms).collect();
    assert!(t.windows(2).all(|w| w[1] - w[0] >= 2000), "{t:?}");
}

#[test]
fn allocation_clears_pg_reported_and_counts_host_refaults() {
    let mut m = machine(2048, BackingKind::Sim, &[]);
    report_everything(&mut m);
    let (_, reported_before) = free_and_reported(&m, 9);
    // Order 10: freed straight to the buddy lists (order 9 would go
    // through a pcp list, which never notifies).
    let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 10).unwrap().unwrap();
    assert_eq!(
        m.reporting().stats.host_refault_pages,
        1024,
        "a reported 4 MiB block came back"
    );
    assert!(!m
        .page_alloc()
        .memmap()
        .page(f.pfn.0)
        .flags()
        .contains(PageFlags::REPORTED));
    let (_, reported_after) = free_and_reported(&m, 9);
    assert!(reported_after < reported_before, "the block left the reported count");
    m.check().unwrap();
    // Freeing it requests a pass; it is reported again (after merging).
    m.free_folio(0, f).unwrap();
    assert_eq!(m.reporting().state, PrState::Requested);
    report_everything(&mut m);
    let (free, reported) = free_and_reported(&m, 9);
    assert_eq!(free, reported);
}

#[test]
fn small_frees_do_not_request_a_pass() {
    let mut m = machine(2048, BackingKind::Sim, &[]);
    report_everything(&mut m);
    let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 3).unwrap().unwrap();
    let passes = m.reporting().stats.passes;
    // Order 3 freed goes to a pcp list, or merges below order 9: no request.
    m.free_folio(0, f).unwrap();
    assert_eq!(m.reporting().state, PrState::Idle);
    m.advance_time(10 * SEC);
    assert_eq!(m.reporting().stats.passes, passes);
}

#[test]
fn the_order_knob_and_the_seed_trigger() {
    let mut m = machine(2048, BackingKind::Sim, &[("page_reporting/page_reporting_order", "10")]);
    report_everything(&mut m);
    assert_eq!(m.reporting().stats.reported_pages_by_order[9], 0, "order 10 only");
    assert!(m.reporting().stats.reported_pages_by_order[10] > 0);
    let bad = m.set_knob("page_reporting/page_reporting_order", "11");
    assert!(bad.is_err(), "beyond MAX_PAGE_ORDER");

    // Seed trigger: a pass only once 32 unreported blocks of an order wait.
    let mut m = machine(2048, BackingKind::Sim, &[("page_reporting/trigger", "seed")]);
    report_everything(&mut m);
    let folios: Vec<Folio> = (0..40)
        .map(|_| m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 10).unwrap().unwrap())
        .collect();
    let mut freed = 0;
    for f in folios {
        m.free_folio(0, f).unwrap();
        freed += 1;
        let requested = m.reporting().state == PrState::Requested;
        assert_eq!(requested, freed >= 32, "after {freed} frees");
    }
}

#[test]
fn the_retention_watermark_keeps_free_memory_unreported() {
    let mut m = machine(2048, BackingKind::Sim, &[("page_reporting/retain_kbytes", "262144")]);
    report_everything(&mut m);
    let pa = m.page_alloc();
    let free_pages: i64 = pa.zones().iter().map(|z| z.stat.nr_free_pages).sum();
    let reported_pages: u64 = pa
        .zones()
        .iter()
        .flat_map(|z| z.free_area.iter().enumerate())
        .map(|(o, a)| a.nr_reported << o)
        .sum();
    let unreported = free_pages as u64 - reported_pages;
    assert!(unreported >= 65536, "256 MiB stays unreported: {unreported} pages");
    assert!(
        unreported < 65536 + 4 * 1024 + 8192,
        "and not much more: {unreported} pages"
    );
}

#[test]
fn ram_backing_gives_the_memory_back_to_the_host() {
    let mut m = machine(1024, BackingKind::Ram, &[]);
    report_everything(&mut m);
    // 256 MiB allocated and written (zeroed through the backing: resident),
    // in 4 MiB folios that free straight to the buddy lists.
    let folios: Vec<Folio> = (0..64)
        .map(|_| {
            m.alloc_pages(0, GFP_HIGHUSER_MOVABLE | largo_mm::gfp::Gfp::ZERO, 10)
                .unwrap()
                .unwrap()
        })
        .collect();
    for f in &folios {
        m.backing_mut().write(f.pfn, 0, &[0xa5; 4096]).unwrap();
    }
    let resident_before = m.backing().resident_bytes().unwrap();
    for f in folios {
        m.free_folio(0, f).unwrap();
    }
    let kib_before = m.reporting().stats.reported_kib;
    report_everything(&mut m);
    let reported_bytes = (m.reporting().stats.reported_kib - kib_before) << 10;
    let resident_after = m.backing().resident_bytes().unwrap();
    assert!(reported_bytes >= 256 << 20, "{reported_bytes}");
    let dropped = resident_before - resident_after;
    assert!(
        dropped as f64 >= 0.9 * (256u64 << 20) as f64,
        "resident {resident_before} -> {resident_after}"
    );
}

/// The host's zones as /proc/zoneinfo and /proc/pagetypeinfo showed them
/// on the development machine (24 GiB, Normal partly initialised).
fn host_shape() -> largo_mm::machine::MachineShape {
    use largo_mm::page_alloc::shape::ZoneShape;
    use largo_types::ZoneType;
    let row = |v: [u64; 11]| v;
    let zone = |zone_type, managed_pages, per_mt: [[u64; 11]; 3], blocks: [u64; 3]| {
        let free = (0..11)
            .map(|o| [per_mt[0][o], per_mt[1][o], per_mt[2][o], 0, 0, 0])
            .collect();
        ZoneShape {
            nid: 0,
            zone_type,
            managed_pages,
            free,
            blocks: [blocks[0], blocks[1], blocks[2], 0, 0, 0],
        }
    };
    largo_mm::machine::MachineShape {
        zones: vec![
            zone(
                ZoneType::Dma32,
                772808,
                [row([0; 11]), row([2, 3, 0, 2, 3, 2, 1, 4, 4, 2, 752]), row([0; 11])],
                [0, 1528, 0],
            ),
            zone(
                ZoneType::Normal,
                1802240,
                [
                    row([51, 257, 610, 407, 259, 181, 130, 99, 48, 0, 0]),
                    row([15117, 11741, 6118, 2383, 482, 127, 85, 36, 14, 4, 982]),
                    row([2031, 2211, 1432, 404, 79, 9, 3, 1, 0, 0, 0]),
                ],
                [134, 3320, 66],
            ),
        ],
        reported_from_order: Some(9),
    }
}

fn shaped_like_the_host() -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: 24 << 30,
        balloon: Some(Balloon {
            order: 0,
            ack_latency_ns: 0,
        }),
        shape: Some(host_shape()),
        ..MachineConfig::default()
    })
    .unwrap()
}

#[test]
fn a_machine_shaped_like_the_host_has_its_free_lists() {
    let m = shaped_like_the_host();
    m.check().unwrap();
    let shape = host_shape();
    for (z, s) in m
        .page_alloc()
        .zones()
        .iter()
        .filter(|z| z.managed())
        .zip([None, Some(0), Some(1)])
    {
        let Some(i) = s else { continue };
        let want = &shape.zones[i];
        assert_eq!(z.managed_pages, want.managed_pages, "{}", z.name());
        // Exact at the reporting orders; below them the zone may run out
        // of room (a free block's buddy must be held), so the free pages
        // come within 1% of the snapshot's.
        let shaped = m.shaped().iter().find(|s| s.name.ends_with(z.name())).unwrap();
        let (got, want_free) = (shaped.free_pages as f64, shaped.target_free_pages as f64);
        assert!(
            (got - want_free).abs() <= 0.01 * want_free,
            "{}: {got} vs {want_free}",
            z.name()
        );
        for (order, area) in z.free_area.iter().enumerate().skip(9) {
            for mt in [MigrateType::Unmovable, MigrateType::Movable, MigrateType::Reclaimable] {
                assert_eq!(
                    area.list(mt).nr as u64,
                    want.free[order][mt.index()],
                    "{} order {order} {mt:?}",
                    z.name()
                );
            }
        }
        let reported: u64 = z.free_area.iter().skip(9).map(|a| a.nr_reported).sum();
        let free: u64 = z.free_area.iter().skip(9).map(|a| a.nr_free).sum();
        assert_eq!(reported, free);
    }
}

#[test]
fn a_shaped_zone_grows_its_deferred_memory_before_falling_back() {
    let mut m = shaped_like_the_host();
    let zone = |m: &Machine, t: largo_types::ZoneType| {
        let z = m.page_alloc().zones().iter().find(|z| z.zone_type == t).unwrap();
        (z.managed_pages, z.stat.nr_free_pages)
    };
    let (normal_before, normal_free) = zone(&m, largo_types::ZoneType::Normal);
    let (_, dma32_free) = zone(&m, largo_types::ZoneType::Dma32);
    // Take more than Normal has free: it grows instead of spilling.
    let want = normal_free as u64 + (1 << 18);
    let mut held = Vec::new();
    while (held.len() as u64) << 10 < want {
        held.push(m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 10).unwrap().unwrap());
    }
    let (normal_after, _) = zone(&m, largo_types::ZoneType::Normal);
    let (_, dma32_after) = zone(&m, largo_types::ZoneType::Dma32);
    assert!(
        normal_after > normal_before,
        "Normal grew: {normal_before} -> {normal_after}"
    );
    assert_eq!((normal_after - normal_before) % 32768, 0, "a section at a time");
    assert_eq!(dma32_after, dma32_free, "nothing came from DMA32");
    m.check().unwrap();
}

/// virtio_balloon on arm64 with 64 KiB pages asks for order 5 (2 MiB):
/// with the 512 MiB pageblock order nothing short of a whole free
/// pageblock would ever be reported. Elsewhere the order stays the
/// pageblock order.
#[test]
fn virtio_balloon_reports_2m_blocks_on_arm64_64k_and_pageblocks_elsewhere() {
    use largo_types::Preset;
    let boot = |preset: Preset, mem: u64| {
        Machine::new(MachineConfig {
            preset,
            mem_bytes: mem,
            kernel_reserved_bytes: 1 << 20,
            balloon: Some(Balloon::virtio(preset, 0)),
            ..MachineConfig::default()
        })
        .unwrap()
    };
    let mut arm = boot(Preset::Arm64_64k, 4 << 30);
    assert_eq!(arm.geometry().pageblock_order, 13);
    assert_eq!(arm.reporting().order(arm.geometry().pageblock_order), 5);
    report_everything(&mut arm);
    let by_order = &arm.reporting().stats.reported_pages_by_order;
    assert!(by_order.iter().sum::<u64>() > 0, "{by_order:?}");
    assert!(
        by_order.iter().take(5).all(|&n| n == 0),
        "nothing below order 5 is reported: {by_order:?}"
    );
    let x86 = boot(Preset::X86_64, 1 << 30);
    assert_eq!(x86.reporting().order(x86.geometry().pageblock_order), 9);
}
