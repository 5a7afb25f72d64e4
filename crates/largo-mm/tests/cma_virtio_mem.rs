//! CMA areas and a virtio-mem device: movable memory fills CMA pageblocks
//! by the 6.18 rules and `cma_alloc` migrates it out again (bytes intact
//! on ram); unmovable memory never lands there; virtio-mem plugs and
//! unplugs sub-blocks of a pageblock, fake-offlines what is unplugged and
//! removes emptied memory blocks.

mod common;

use common::{anon_task, assert_intact_outside, PAGE};
use largo_mm::cma::CmaSpec;
use largo_mm::gfp::GFP_KERNEL;
use largo_mm::machine::Machine;
use largo_mm::stats::render::{meminfo, pagetypeinfo, vmstat};
use largo_mm::virtio_mem::{Mode, VirtioMemSpec};
use largo_mm::MachineConfig;
use largo_physmem::BackingKind;
use largo_types::MigrateType;

const MIB: u64 = 1 << 20;

fn cma_machine(backing: BackingKind) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: 2 << 30,
        backing,
        cma: vec![CmaSpec {
            bytes: 256 * MIB,
            nid: None,
        }],
        ..MachineConfig::default()
    })
    .unwrap()
}

/// MAX_PAGE_ORDER 18, 1 GiB sections and a 1 GiB pageblock.
fn gigabyte_pageblocks() -> largo_types::GeometryOverrides {
    largo_types::GeometryOverrides {
        max_page_order: Some(18),
        pageblock_order: Some(18),
        section_bits: Some(30),
        pageblock_beyond_pmd: true,
        ..Default::default()
    }
}

fn vmstat_value(m: &Machine, name: &str) -> u64 {
    let text = vmstat(m);
    let line = text
        .lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no {name}"));
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_cma_area_is_reserved_activated_and_reported() {
    let m = cma_machine(BackingKind::Sim);
    let area = &m.page_alloc().cma_areas()[0];
    assert_eq!(area.count, 256 * MIB / PAGE);
    // 2 GiB: no room above 4 GiB, so the area is taken top-down, before
    // the memmap: it ends where RAM does.
    let pb = m.geometry().pageblock_nr_pages();
    assert_eq!((area.base_pfn + area.count) * PAGE, 2 << 30);
    for pfn in (area.base_pfn..area.base_pfn + area.count).step_by(pb as usize) {
        assert_eq!(m.page_alloc().pageblock_migratetype(pfn), MigrateType::Cma);
    }
    let info = meminfo(&m);
    assert!(info.contains("CmaTotal:         262144 kB"), "{info}");
    assert!(info.contains("CmaFree:          262144 kB"), "{info}");
    assert_eq!(vmstat_value(&m, "nr_free_cma"), 256 * MIB / PAGE);
    assert!(pagetypeinfo(&m).contains("type          CMA"));
    // The host's kernel (no CMA) prints none of it.
    let plain = Machine::new(MachineConfig {
        mem_bytes: 2 << 30,
        ..MachineConfig::default()
    })
    .unwrap();
    assert!(!meminfo(&plain).contains("CmaTotal"));
    assert!(!vmstat(&plain).contains("cma_alloc_success"));
    assert!(!pagetypeinfo(&plain).contains("CMA"));
    m.check().unwrap();
}

#[test]
fn movable_memory_fills_cma_and_cma_alloc_migrates_it_out() {
    let mut m = cma_machine(BackingKind::Ram);
    let (base, count) = {
        let a = &m.page_alloc().cma_areas()[0];
        (a.base_pfn, a.count)
    };
    // Unmovable allocations never use CMA, whatever is free there.
    for _ in 0..2000 {
        let f = m.alloc_pages(0, GFP_KERNEL, 0).unwrap().unwrap();
        assert!(
            !(base..base + count).contains(&f.pfn.0),
            "GFP_KERNEL page {:#x} in CMA",
            f.pfn.0
        );
    }
    // Anon memory: once CMA is over half of what is free, it goes there.
    let len = 1600 * MIB;
    let fill = |i: u64| (i as u32).to_le_bytes().repeat(PAGE as usize / 4);
    let (pid, addr) = anon_task(&mut m, len, Some(&fill));
    // __rmqueue balances: CMA is taken first whenever it holds more than
    // half the zone's free pages, so the two end up about even.
    let free_cma = vmstat_value(&m, "nr_free_cma");
    let free = vmstat_value(&m, "nr_free_pages");
    assert!(
        free_cma < count * 3 / 4,
        "anon memory went into the CMA area: {free_cma} of {count} free"
    );
    assert!(
        free_cma <= free / 2 + 1024,
        "CMA {free_cma} of {free} free pages: not balanced"
    );
    // cma_alloc takes 64 MiB back, migrating the anon pages away.
    let nr = 64 * MIB / PAGE;
    let got = m.cma_alloc(0, nr, 0).unwrap();
    let pfn = got.pfn.unwrap_or_else(|| panic!("cma_alloc failed: {:?}", got.error));
    assert!(pfn >= base && pfn + nr <= base + count);
    assert_intact_outside(&m, pid, addr, len, &fill, pfn, pfn + nr);
    assert_eq!(vmstat_value(&m, "cma_alloc_success"), 1);
    assert_eq!(m.page_alloc().cma_areas()[0].available_count, count - nr);
    m.check().unwrap();
    assert!(m.cma_release(0, pfn, nr));
    assert!(!m.cma_release(0, pfn, nr), "a second release is refused");
    assert_eq!(m.page_alloc().cma_areas()[0].available_count, count);
    // More than the area holds fails and is counted.
    let too_big = m.cma_alloc(0, count + 1, 0).unwrap();
    assert!(too_big.pfn.is_none());
    assert_eq!(vmstat_value(&m, "cma_alloc_fail"), 1);
    m.check().unwrap();
}

#[test]
fn a_1g_pageblock_makes_a_small_cma_area_a_gigabyte() {
    let m = Machine::new(MachineConfig {
        mem_bytes: 8 << 30,
        overrides: gigabyte_pageblocks(),
        cma: vec![CmaSpec {
            bytes: 4 * MIB,
            nid: None,
        }],
        ..MachineConfig::default()
    })
    .unwrap();
    let a = &m.page_alloc().cma_areas()[0];
    assert_eq!(a.count * PAGE, 1 << 30);
    assert_eq!(a.base_pfn * PAGE, 4 << 30, "bottom-up from 4 GiB");
    m.check().unwrap();
}

/// A 1 GiB device of 2 MiB blocks in ZONE_NORMAL, `plugged` at boot.
fn device(plugged: u64) -> VirtioMemSpec {
    VirtioMemSpec {
        region_bytes: 1 << 30,
        block_bytes: 2 * MIB,
        plugged_bytes: plugged,
        movable: false,
    }
}

fn virtio_machine(block: u64, movable: bool) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: 2 << 30,
        virtio_mem: Some(VirtioMemSpec {
            region_bytes: 1 << 30,
            block_bytes: block,
            plugged_bytes: 512 * MIB,
            movable,
        }),
        ..MachineConfig::default()
    })
    .unwrap()
}

#[test]
fn virtio_mem_plugs_into_memory_blocks_and_unplugs_sub_blocks() {
    let mut m = virtio_machine(2 * MIB, false);
    let dev = m.virtio_mem().unwrap();
    assert_eq!(dev.mode, Mode::Sbm);
    assert_eq!(dev.sb_pages * PAGE, 2 * MIB);
    assert_eq!(dev.plugged_pages * PAGE, 512 * MIB);
    assert_eq!(dev.added_units().count(), 4, "four 128 MiB memory blocks");
    let managed_before = m.page_alloc().managed_pages();
    // A plug of 3 MiB moves one 2 MiB sub-block; the rest is never reached.
    let r = m.virtio_mem_resize(515 * MIB).unwrap();
    assert_eq!(r.plugged_after_bytes, 514 * MIB);
    assert_eq!(m.page_alloc().managed_pages(), managed_before + 2 * MIB / PAGE);
    m.check().unwrap();
    let report = m.check().unwrap();
    assert_eq!(
        report.fake_offline_pages * PAGE,
        126 * MIB,
        "the fifth block's unplugged sub-blocks"
    );
    // Unplugging two sub-blocks: the partly plugged fifth block goes
    // first (and, empty, is removed), then the highest of the fourth.
    let r = m.virtio_mem_resize(510 * MIB).unwrap();
    assert_eq!(r.plugged_after_bytes, 510 * MIB, "{r:?}");
    assert_eq!((r.units_added, r.units_removed), (0, 1), "{r:?}");
    let report = m.check().unwrap();
    assert_eq!(report.fake_offline_pages * PAGE, 2 * MIB);
    // Unplug everything: the blocks go offline and are removed.
    let r = m.virtio_mem_resize(0).unwrap();
    assert_eq!(r.plugged_after_bytes, 0, "{r:?}");
    assert_eq!(m.virtio_mem().unwrap().added_units().count(), 0);
    assert_eq!(m.page_alloc().managed_pages(), managed_before - 512 * MIB / PAGE);
    m.check().unwrap();
}

#[test]
fn an_unmovable_page_keeps_its_sub_block_plugged() {
    let mut m = virtio_machine(2 * MIB, false);
    // Fill boot RAM so kernel allocations land in the device's memory.
    let mut kernel = Vec::new();
    while let Ok(Some(f)) = m.alloc_pages(0, GFP_KERNEL, 0) {
        kernel.push(f);
        if kernel.len() > 600_000 {
            break;
        }
    }
    let dev = m.virtio_mem().unwrap();
    let (lo, hi) = (dev.addr_pfn, dev.end_pfn());
    let pinned = kernel.iter().filter(|f| (lo..hi).contains(&f.pfn.0)).count();
    assert!(pinned > 0, "kernel pages reached the device memory");
    let r = m.virtio_mem_resize(0).unwrap();
    assert!(r.sub_blocks_busy > 0, "{r:?}");
    assert_eq!(r.errno, Some("-EBUSY"));
    assert!(r.first_busy.as_deref().unwrap().contains("-EBUSY"), "{r:?}");
    assert!(r.plugged_after_bytes > 0);
    m.check().unwrap();
    // In ZONE_MOVABLE only movable memory lands: anon memory fills the
    // device first (the highest zone), migrates away, everything unplugs.
    let mut m = virtio_machine(2 * MIB, true);
    let dev = m.virtio_mem().unwrap();
    assert_eq!(dev.zone, largo_types::ZoneType::Movable);
    let (lo, hi) = (dev.addr_pfn, dev.end_pfn());
    let (pid, addr) = anon_task(&mut m, 1 << 30, None);
    let in_device = (0..(1u64 << 30) / PAGE)
        .filter(|i| (lo..hi).contains(&m.vm().translate(pid, addr + i * PAGE).unwrap()))
        .count();
    assert!(in_device > 0, "anon memory went to the device's ZONE_MOVABLE");
    let migrated = m.page_alloc().events.get(largo_mm::stats::VmEvent::PgmigrateSuccess);
    let r = m.virtio_mem_resize(0).unwrap();
    assert_eq!(r.plugged_after_bytes, 0, "{r:?}");
    assert!(m.page_alloc().events.get(largo_mm::stats::VmEvent::PgmigrateSuccess) - migrated >= in_device as u64);
    m.check().unwrap();
}

#[test]
fn device_memory_is_the_drivers_and_a_failed_add_is_an_error() {
    let mut m = virtio_machine(2 * MIB, false);
    let dev = m.virtio_mem().unwrap();
    let (start, nr) = (dev.addr_pfn, dev.unit_pages);
    assert!(
        m.add_memory(0, start + 4 * nr, nr).is_err(),
        "the device region is not free for add"
    );
    // ZONE_NORMAL above a ZONE_MOVABLE: the kernel zone cannot grow over it.
    let err = Machine::new(MachineConfig {
        mem_bytes: 6 << 30,
        movable_bytes: 512 * MIB,
        virtio_mem: Some(device(256 * MIB)),
        ..MachineConfig::default()
    })
    .err()
    .expect("refused");
    assert!(err.to_string().contains("adding memory failed"), "{err}");
    // Two nodes: the device joins the last one.
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 2 << 30,
        nr_nodes: 2,
        virtio_mem: Some(device(256 * MIB)),
        ..MachineConfig::default()
    })
    .unwrap();
    let start = m.virtio_mem().unwrap().addr_pfn;
    assert_eq!(
        m.page_alloc().zones()[m.page_alloc().page_zone_index(start).unwrap()].nid,
        1
    );
    m.virtio_mem_resize(0).unwrap();
    m.check().unwrap();
}

#[test]
fn a_1g_pageblock_takes_virtio_mem_to_big_blocks() {
    let m = Machine::new(MachineConfig {
        mem_bytes: 4 << 30,
        overrides: gigabyte_pageblocks(),
        virtio_mem: Some(VirtioMemSpec {
            region_bytes: 2 << 30,
            block_bytes: 2 * MIB,
            plugged_bytes: 1 << 30,
            movable: false,
        }),
        ..MachineConfig::default()
    })
    .unwrap();
    let dev = m.virtio_mem().unwrap();
    assert_eq!(dev.mode, Mode::Bbm);
    assert_eq!(dev.sb_pages * PAGE, 1 << 30);
    m.check().unwrap();
}
