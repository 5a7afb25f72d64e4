//! Compaction: on a machine whose free memory is scattered in order-0
//! holes, PMD THP faults fall back with `defrag=never` and succeed through
//! direct compaction with `defrag=always`, moving the `compact_*`
//! counters as the kernel's would; `compact_memory` rebuilds free
//! pageblocks; the fragmentation index reads as debugfs prints it.

mod common;

use common::{anon_task, PAGE};
use largo_mm::compaction;
use largo_mm::gfp::GFP_KERNEL;
use largo_mm::machine::Machine;
use largo_mm::stats::VmEvent;
use largo_mm::vm::{Advice, MapFlags, Prot};
use largo_mm::MachineConfig;
use largo_physmem::BackingKind;

/// A 1 GiB machine almost full of 4K anon pages, every other one then
/// dropped, and the free 2 MiB blocks that remain (the watermark reserve)
/// taken by unmovable kernel allocations: plenty of free memory, no free
/// 2 MiB block.
fn fragmented(defrag: &str) -> (Machine, u32) {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 1 << 30,
        nr_cpus: 2,
        backing: BackingKind::Sim,
        knobs: vec![
            ("transparent_hugepage/enabled".into(), "never".into()),
            ("transparent_hugepage/defrag".into(), defrag.into()),
        ],
        ..MachineConfig::default()
    })
    .unwrap();
    let free = m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
    let len = (free - 4096) * PAGE;
    let (pid, addr) = anon_task(&mut m, len, None);
    for i in (0..len / PAGE).step_by(2) {
        m.with_vm(0, |vm, ctx| {
            vm.madvise(ctx, pid, addr + i * PAGE, PAGE, Advice::DontNeed)
        })
        .unwrap();
    }
    while m.alloc_pages(0, GFP_KERNEL, 9).unwrap().is_some() {}
    m.set_knob("transparent_hugepage/enabled", "always").unwrap();
    (m, pid)
}

/// Faults 32 MiB of fresh anon memory; returns THPs allocated.
fn thp_faults(m: &mut Machine, pid: u32) -> u64 {
    let len = 32 << 20;
    let prot = Prot::READ | Prot::WRITE;
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let addr = m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, 0, len, prot, flags)).unwrap();
    let before = m.page_alloc().events.get(VmEvent::ThpFaultAlloc);
    for a in (addr..addr + len).step_by(PAGE as usize) {
        m.with_vm(0, |vm, ctx| vm.access(ctx, pid, a, true)).unwrap();
    }
    m.page_alloc().events.get(VmEvent::ThpFaultAlloc) - before
}

#[test]
fn defrag_always_compacts_and_thp_faults_succeed_where_never_falls_back() {
    let (mut never, pid) = fragmented("never");
    assert!(never.page_alloc().nr_free_pages() > 100_000, "half the memory is free");
    // The setup's own kernel allocations may have compacted: count from here.
    let base: Vec<u64> = VmEvent::ALL.iter().map(|&e| never.page_alloc().events.get(e)).collect();
    let thp_never = thp_faults(&mut never, pid);
    let ev_never = |e: VmEvent| never.page_alloc().events.get(e) - base[e as usize];
    assert_eq!(ev_never(VmEvent::CompactStall), 0, "defrag=never never stalls");
    assert!(ev_never(VmEvent::ThpFaultFallback) >= 14, "no free 2M block: fallbacks");

    let (mut always, pid) = fragmented("always");
    let base: Vec<u64> = VmEvent::ALL
        .iter()
        .map(|&e| always.page_alloc().events.get(e))
        .collect();
    let thp_always = thp_faults(&mut always, pid);
    let ev = |m: &Machine, e: VmEvent| m.page_alloc().events.get(e) - base[e as usize];
    assert!(
        thp_always >= thp_never + 10,
        "compaction made 2M blocks: {thp_always} THPs vs {thp_never}"
    );
    assert!(ev(&always, VmEvent::CompactStall) > 0);
    assert!(ev(&always, VmEvent::CompactSuccess) > 0);
    assert!(ev(&always, VmEvent::CompactMigrateScanned) > 0);
    assert!(ev(&always, VmEvent::CompactFreeScanned) > 0);
    assert!(ev(&always, VmEvent::CompactIsolated) > 0);
    assert!(ev(&always, VmEvent::PgmigrateSuccess) > 0);
    assert!(
        always.page_alloc().work.compaction_captures > 0,
        "compaction_capture took freed blocks"
    );
    assert!(
        ev(&always, VmEvent::CompactStall)
            >= (ev(&always, VmEvent::CompactSuccess) + ev(&always, VmEvent::CompactFail))
    );
    println!(
        "32 MiB of THP faults: defrag=never {thp_never} THPs, defrag=always {thp_always} THPs; \
         compact_stall {} success {} fail {} migrate_scanned {} free_scanned {} pgmigrate_success {}",
        ev(&always, VmEvent::CompactStall),
        ev(&always, VmEvent::CompactSuccess),
        ev(&always, VmEvent::CompactFail),
        ev(&always, VmEvent::CompactMigrateScanned),
        ev(&always, VmEvent::CompactFreeScanned),
        ev(&always, VmEvent::PgmigrateSuccess)
    );
    always.check().unwrap();
    never.check().unwrap();
}

#[test]
fn compact_memory_rebuilds_free_pageblocks_and_the_indices_follow() {
    let (mut m, _) = fragmented("never");
    let zi = m.page_alloc().zones().iter().position(|z| z.name() == "DMA32").unwrap();
    let index_before = compaction::fragmentation_index(&m.page_alloc().zones()[zi], 9);
    let unusable_before = compaction::unusable_free_index(&m.page_alloc().zones()[zi], 9);
    assert!(index_before > 900, "failure would be fragmentation: {index_before}");
    assert!(
        unusable_before > 900,
        "free memory is in small blocks: {unusable_before}"
    );
    let blocks_before: u64 = m.page_alloc().zones()[zi].free_area[9..]
        .iter()
        .map(|a| a.nr_free)
        .sum();
    let migrated = m.compact_memory();
    assert!(migrated > 10_000, "{migrated} pages migrated");
    let blocks_after: u64 = m.page_alloc().zones()[zi].free_area[9..]
        .iter()
        .map(|a| a.nr_free)
        .sum();
    assert!(
        blocks_after > blocks_before + 100,
        "{blocks_before} -> {blocks_after} free 2M+ blocks"
    );
    assert_eq!(
        compaction::fragmentation_index(&m.page_alloc().zones()[zi], 9),
        -1000,
        "a 2M block is free now"
    );
    assert!(compaction::unusable_free_index(&m.page_alloc().zones()[zi], 9) < unusable_before);
    m.check().unwrap();
    let text = largo_mm::compaction::render_extfrag_index(m.page_alloc());
    assert!(text.starts_with("Node 0, zone      DMA "), "{text}");
    assert!(text.contains("-1.000"), "{text}");
    let unusable = largo_mm::compaction::render_unusable_index(m.page_alloc());
    assert_eq!(unusable.lines().count(), text.lines().count());
}

#[test]
fn kcompactd_compacts_proactively_when_the_score_is_high() {
    let node_score = |m: &Machine| compaction::fragmentation_score_node(m.geometry(), m.page_alloc().zones(), 0);
    let (mut off, _) = fragmented("never");
    off.set_knob("vm/compaction_proactiveness", "0").unwrap();
    let before = node_score(&off);
    assert!(before > 90, "order-0 holes everywhere: score {before}");
    off.advance_time(5_000_000_000);
    assert_eq!(node_score(&off), before, "proactiveness 0: kcompactd leaves it");
    assert_eq!(off.page_alloc().events.get(VmEvent::CompactDaemonMigrateScanned), 0);

    let (mut on, _) = fragmented("never");
    let scanned = on.page_alloc().events.get(VmEvent::CompactDaemonMigrateScanned);
    on.advance_time(400_000_000);
    assert_eq!(node_score(&on), before, "the timer fires every 500 ms");
    on.advance_time(200_000_000);
    let after = node_score(&on);
    println!("proactive compaction: fragmentation score {before} -> {after}");
    assert!(after <= 80, "compacted to 100 - proactiveness: {after}");
    assert!(on.page_alloc().events.get(VmEvent::CompactDaemonMigrateScanned) > scanned);
    on.check().unwrap();
}
