//! Memory hotplug: a 2 MiB subsection full of in-use anon pages goes
//! offline (its pages migrate, every byte intact on ram) and online again;
//! a block holding an unmovable page refuses with the kernel's reason and
//! leaves the machine exactly as before; mainline 128 MiB blocks on a
//! two-node machine move their pages to the other node.

use largo_mm::gfp::GFP_KERNEL;
use largo_mm::hotplug::HotplugError;
mod common;

use common::{anon_task, assert_intact_outside, PAGE};
use largo_mm::machine::Machine;
use largo_mm::stats::VmEvent;
use largo_mm::MachineConfig;
use largo_physmem::BackingKind;
use largo_types::GeometryOverrides;

fn machine(mem: u64, nodes: usize, backing: BackingKind, block: Option<u64>) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: mem,
        nr_nodes: nodes,
        nr_cpus: 2,
        backing,
        overrides: GeometryOverrides::default(),
        memory_block_bytes: block,
        ..MachineConfig::default()
    })
    .unwrap()
}

fn pattern(i: u64) -> Vec<u8> {
    (0..PAGE).map(|b| ((i * 53 + b * 3) % 241) as u8).collect()
}

fn snapshot(m: &Machine) -> (String, String, String, u64) {
    (
        largo_mm::stats::render::buddyinfo(m),
        largo_mm::stats::render::pagetypeinfo(m),
        largo_mm::stats::render::zoneinfo(m),
        m.page_alloc().managed_pages(),
    )
}

fn events(m: &Machine) -> Vec<u64> {
    VmEvent::ALL.iter().map(|&e| m.page_alloc().events.get(e)).collect()
}

#[test]
fn a_subsection_of_in_use_anon_pages_goes_offline_and_online_with_bytes_intact() {
    let mut m = machine(1 << 30, 1, BackingKind::Ram, Some(2 << 20));
    let len = 64 << 20;
    let (pid, addr) = anon_task(&mut m, len, Some(&pattern));
    let managed = m.page_alloc().managed_pages();
    // The subsection holding the middle of the mapping: all in-use anon.
    let pfn = m.vm().translate(pid, addr + len / 2).unwrap();
    let block = m.memory_block_of(pfn).unwrap();
    let (start, end) = (block * 512, block * 512 + 512);
    let in_block = (0..len / PAGE)
        .filter(|i| (start..end).contains(&m.vm().translate(pid, addr + i * PAGE).unwrap()))
        .count();
    assert!(in_block >= 400, "the subsection is mostly anon pages ({in_block})");
    m.offline_memory_block(block).unwrap();
    m.check().unwrap();
    assert!(!m.sparse().pfn_online(start));
    assert!(m.sparse().pfn_online(start - 1) || start == 0);
    assert_eq!(m.page_alloc().managed_pages(), managed - 512);
    assert!(m.page_alloc().events.get(VmEvent::PgmigrateSuccess) >= in_block as u64);
    assert_intact_outside(&m, pid, addr, len, &pattern, start, end);
    m.online_memory_block(block).unwrap();
    m.check().unwrap();
    assert!(m.sparse().pfn_online(start));
    assert_eq!(m.page_alloc().managed_pages(), managed);
    // Online again twice is a no-op; offline of a bad id is -EINVAL.
    m.online_memory_block(block).unwrap();
    assert_eq!(m.offline_memory_block(1 << 40).unwrap_err().errno(), -22);
}

#[test]
fn an_unmovable_page_fails_offlining_and_leaves_the_machine_as_it_was() {
    let mut m = machine(1 << 30, 1, BackingKind::Sim, Some(2 << 20));
    let (pid, addr) = anon_task(&mut m, 32 << 20, None);
    let kernel = m.alloc_pages(0, GFP_KERNEL, 0).unwrap().unwrap();
    let table = m.vm().page_table_pfn(pid, addr).unwrap();
    // Offlining drains the cpus' LRU batches before it isolates (as
    // `lru_cache_disable` does), refused or not: drain them first.
    m.lru_add_drain_all();
    for (what, pfn) in [("kernel page", kernel.pfn.0), ("page table", table)] {
        let block = m.memory_block_of(pfn).unwrap();
        let before = snapshot(&m);
        let ev = events(&m);
        let err = m.offline_memory_block(block).unwrap_err();
        match &err {
            HotplugError::Offline {
                reason,
                errno,
                pfn: bad,
                ..
            } => {
                assert_eq!(*reason, "failure to isolate range", "{what}");
                assert_eq!(*errno, -16);
                assert!(bad.is_some(), "{what}: names the page");
            }
            other => panic!("{what}: {other}"),
        }
        assert!(err.to_string().starts_with("memory offlining [pfn"), "{err}");
        assert_eq!(snapshot(&m), before, "{what}: the machine changed");
        assert_eq!(events(&m), ev, "{what}: counters moved");
        assert!(m.sparse().pfn_online(pfn));
        m.check().unwrap();
    }
}

#[test]
fn mainline_section_blocks_on_two_nodes_move_their_pages_to_the_other_node() {
    let mut m = machine(2 << 30, 2, BackingKind::Sim, None);
    let (pid, addr) = anon_task(&mut m, 96 << 20, None);
    let pfn = m.vm().translate(pid, addr + (95 << 20)).unwrap();
    // Block 0 holds the BIOS hole and the DMA zone: "memory holes".
    let err = m.offline_memory_block(0).unwrap_err();
    assert!(err.to_string().contains("due to memory holes"), "{err}");
    let block = m.memory_block_of(pfn).unwrap().max(1);
    let b = m.sparse().block(block).unwrap().clone();
    assert_eq!(b.nr_pages, 32768, "a 128 MiB block of one section");
    // Unaligned requests are refused before anything happens.
    assert!(matches!(
        m.offline_pages(b.start_pfn + 512, 512),
        Err(HotplugError::Invalid(_))
    ));
    m.offline_memory_block(block).unwrap();
    m.check().unwrap();
    let moved = (0..(96u64 << 20) / PAGE)
        .map(|i| m.vm().translate(pid, addr + i * PAGE).unwrap())
        .find(|&p| m.page_alloc().zones()[m.page_alloc().page_zone_index(p).unwrap()].nid == 1);
    assert!(moved.is_some(), "some page migrated to node 1");
    m.online_memory_block(block).unwrap();
    m.check().unwrap();
}

#[test]
fn hot_added_memory_is_onlined_used_offlined_and_removed() {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 1 << 30,
        maxmem_bytes: Some(2 << 30),
        nr_cpus: 2,
        ..MachineConfig::default()
    })
    .unwrap();
    let managed = m.page_alloc().managed_pages();
    let region = m.layout().hotplug_region.unwrap();
    assert_eq!(region.len(), 1 << 18, "1 GiB of hot-add space");
    let block = m.sparse().memory_block_bytes >> 12;
    let ids: Vec<u64> = (region.start..region.end)
        .step_by(block as usize)
        .map(|p| p / block)
        .collect();
    m.check().unwrap();
    // Removing online memory, adding outside the region or twice: refused.
    let online = m.sparse().blocks[3].id;
    let err = m.remove_memory_block(online).unwrap_err();
    assert_eq!(err.errno(), -16, "{err}");
    assert!(
        m.add_memory(0, 0, block).is_err(),
        "boot RAM is not in the hot-add region"
    );
    for &id in &ids {
        m.add_memory_block(0, id).unwrap();
    }
    assert!(m.add_memory_block(0, ids[0]).is_err(), "already present");
    m.check().unwrap();
    assert_eq!(m.page_alloc().managed_pages(), managed, "added memory starts offline");
    // online_movable: ZONE_MOVABLE, so nothing unmovable lands there and
    // the memory can be removed again.
    for &id in &ids {
        m.online_memory_block_movable(id).unwrap();
    }
    let movable = m.page_alloc().zones().iter().find(|z| z.name() == "Movable").unwrap();
    assert_eq!(movable.present_pages, 1 << 18);
    m.check().unwrap();
    assert_eq!(m.page_alloc().managed_pages(), managed + (1 << 18));
    // 1.5 GiB of anon memory fits only with the added gigabyte.
    let (pid, addr) = anon_task(&mut m, 1536 << 20, None);
    assert_eq!(m.page_alloc().events.get(VmEvent::OomKill), 0);
    let top = *ids.last().unwrap();
    let in_top = (0..(1536u64 << 20) / PAGE)
        .filter(|i| m.vm().translate(pid, addr + i * PAGE).unwrap() / block == top)
        .count();
    assert!(in_top > 0, "the added memory is used");
    // Free a third, then take the top block out again: its pages move.
    m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, 512 << 20)).unwrap();
    m.offline_memory_block(top).unwrap();
    m.remove_memory_block(top).unwrap();
    m.check().unwrap();
    assert!(m.sparse().block(top).is_none(), "the block device is gone");
    assert!(!m.sparse().pfn_valid(top * block), "no memmap any more");
    assert_eq!(m.page_alloc().managed_pages(), managed + (1 << 18) - block);
    for i in (512u64 << 20) / PAGE..(1536u64 << 20) / PAGE {
        let p = m.vm().translate(pid, addr + i * PAGE).unwrap();
        assert_ne!(p / block, top, "page {i} left in the removed block");
    }
    // And it can come back.
    m.add_memory_block(0, top).unwrap();
    m.online_memory_block_movable(top).unwrap();
    m.check().unwrap();
}
