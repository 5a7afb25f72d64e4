//! Page migration: move_pages between two nodes on the ram backing with
//! every copy policy (bytes intact, mappings and counters right), the
//! status array's errors, batching, splitting when the target is full.

mod common;

use common::{anon_task, PAGE};
use largo_mm::machine::Machine;
use largo_mm::vm::migrate::{EACCES, EBUSY, EFAULT};
use largo_mm::vm::{MapFlags, Prot};
use largo_mm::MachineConfig;
use largo_physmem::copy::{BatchCopy, CopyPolicy, MtCopy, Vanilla};
use largo_physmem::BackingKind;
use largo_types::{GeometryOverrides, Pfn};

fn two_nodes(backing: BackingKind, knobs: &[(&str, &str)]) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: 512 << 20,
        nr_nodes: 2,
        nr_cpus: 2,
        backing,
        overrides: GeometryOverrides {
            section_bits: Some(24),
            ..Default::default()
        },
        kernel_reserved_bytes: 1 << 20,
        knobs: knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..MachineConfig::default()
    })
    .unwrap()
}

fn node_of(m: &Machine, pfn: u64) -> usize {
    let zi = m.page_alloc().page_zone_index(pfn).unwrap();
    m.page_alloc().zones()[zi].nid
}

fn pattern(i: u64) -> Vec<u8> {
    (0..PAGE).map(|b| ((i * 131 + b * 7) % 251) as u8).collect()
}

/// A task with `len` bytes written on node 0 (cpu 0), each page holding its pattern.
fn populated(m: &mut Machine, len: u64) -> (u32, u64) {
    anon_task(m, len, Some(&pattern))
}

#[test]
fn move_pages_moves_folios_whole_and_their_bytes_with_every_policy() {
    let policies: Vec<Box<dyn CopyPolicy>> = vec![Box::new(Vanilla), Box::new(BatchCopy), Box::new(MtCopy::new(2, 4))];
    for (thp, len) in [("64kB", 1u64 << 20), ("2048kB", 4 << 20)] {
        for copy in &policies {
            let knob = format!("transparent_hugepage/hugepages-{thp}/enabled");
            let mut m = two_nodes(BackingKind::Ram, &[(&knob, "always")]);
            let (pid, addr) = populated(&mut m, len);
            let first = m.vm().translate(pid, addr).unwrap();
            assert_eq!(node_of(&m, first), 0);
            // Every page asked for: the first address of a folio queues
            // it; the second finds it isolated (EBUSY), which moves what is
            // queued at once (do_pages_move); the rest find it on node 1.
            let pages: Vec<u64> = (0..len / PAGE).map(|i| addr + i * PAGE).collect();
            let heads: Vec<u64> = pages
                .iter()
                .map(|&a| {
                    let pfn = m.vm().translate(pid, a).unwrap();
                    m.page_alloc().memmap().folio_head(pfn).unwrap()
                })
                .collect();
            let nodes = vec![1; pages.len()];
            let out = m
                .with_vm(0, |vm, ctx| {
                    vm.move_pages(ctx, pid, &pages, Some(&nodes), copy.as_ref())
                })
                .unwrap();
            assert_eq!(out.ret, 0, "{}", copy.name());
            for (i, s) in out.status.iter().enumerate() {
                let second = heads.iter().position(|&h| h == heads[i]).map(|f| f + 1) == Some(i);
                assert_eq!(*s, Some(if second { EBUSY } else { 1 }), "entry {i}");
            }
            assert!(
                heads.iter().filter(|&&h| h == heads[heads.len() / 2]).count() > 1,
                "large folios"
            );
            assert_eq!(out.result.nr_succeeded, len / PAGE);
            m.check().unwrap();
            for i in 0..len / PAGE {
                let pfn = m.vm().translate(pid, addr + i * PAGE).unwrap();
                assert_eq!(node_of(&m, pfn), 1, "page {i} on node 1");
                let mut buf = vec![0u8; PAGE as usize];
                m.backing().read(Pfn(pfn), 0, &mut buf).unwrap();
                assert!(buf == pattern(i), "{} {thp}: page {i} changed", copy.name());
            }
            let c = |name| largo_mm::stats::render::vmstat_value(&m, name);
            assert_eq!(c("pgmigrate_success"), len / PAGE);
            if thp == "2048kB" {
                assert_eq!(c("thp_migration_success"), len / (2 << 20));
            }
            // The node counters moved with the pages.
            assert_eq!(m.vm().node_stats()[1].anon_mapped as u64, len / PAGE);
            assert_eq!(m.vm().node_stats()[0].anon_mapped, 0);
        }
    }
}

#[test]
fn status_reports_each_entry() {
    let mut m = two_nodes(BackingKind::Sim, &[]);
    let (pid, addr) = populated(&mut m, 64 << 10);
    // A read-only page maps the zero page: EFAULT (6.18, checked against
    // the host in largo-host/tests/move_pages.rs); no VMA: EFAULT.
    let ro = m
        .with_vm(0, |vm, ctx| {
            vm.mmap(ctx, pid, 0, 4096, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS)
        })
        .unwrap();
    m.with_vm(0, |vm, ctx| vm.access(ctx, pid, ro, false)).unwrap();
    let pages = [addr, ro, 0x1000, addr + PAGE];
    let q = m
        .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &pages, None, &Vanilla))
        .unwrap();
    assert_eq!(q.status, vec![Some(0), Some(EFAULT), Some(EFAULT), Some(0)]);
    let out = m
        .with_vm(0, |vm, ctx| {
            vm.move_pages(ctx, pid, &pages, Some(&[1, 1, 1, 0]), &Vanilla)
        })
        .unwrap();
    assert_eq!(out.ret, 0);
    assert_eq!(out.status, vec![Some(1), Some(EFAULT), Some(EFAULT), Some(0)]);
    // Shared with a forked child: EACCES without MPOL_MF_MOVE_ALL.
    m.with_vm(0, |vm, ctx| vm.fork(ctx, pid)).unwrap();
    let out = m
        .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &[addr], Some(&[0]), &Vanilla))
        .unwrap();
    assert_eq!(out.status, vec![Some(EACCES)]);
    // A node without memory: -ENODEV, the status left unwritten.
    let out = m
        .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &[addr], Some(&[5]), &Vanilla))
        .unwrap();
    assert_eq!((out.ret, out.status), (-19, vec![None]));
    m.check().unwrap();
}

#[test]
fn a_thp_that_cannot_move_whole_is_split_and_moved_in_pieces() {
    let knobs = [("transparent_hugepage/hugepages-2048kB/enabled", "always")];
    let mut m = two_nodes(BackingKind::Sim, &knobs);
    let (pid, addr) = populated(&mut m, 2 << 20);
    // Fragment node 1: no free 2 MiB block left there.
    let mut held = Vec::new();
    while let Ok(Some(f)) = m.page_alloc_mut().alloc_pages_node(
        1,
        1,
        largo_mm::gfp::GFP_HIGHUSER_MOVABLE | largo_mm::gfp::Gfp::THISNODE,
        9,
        &mut largo_mm::page_alloc::NoReclaim,
    ) {
        held.push(f);
    }
    let out = m
        .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &[addr], Some(&[1]), &BatchCopy))
        .unwrap();
    let c = |name| largo_mm::stats::render::vmstat_value(&m, name);
    assert_eq!(c("thp_migration_split"), 1);
    assert_eq!(c("thp_migration_fail"), 1);
    assert_eq!(out.ret, 1, "a split folio counts as one failure");
    assert!(c("pgmigrate_success") > 0, "its pieces moved");
    m.check().unwrap();
}

#[test]
fn a_failure_in_the_middle_of_a_batch_leaves_everything_consistent() {
    let knobs = [("transparent_hugepage/hugepages-64kB/enabled", "always")];
    let mut m = two_nodes(BackingKind::Ram, &knobs);
    let (pid, addr) = populated(&mut m, 1 << 20);
    let base = addr.next_multiple_of(64 << 10);
    let pages: Vec<u64> = (0..8).map(|i| base + i * (64 << 10)).collect();
    // Every third unmap attempt busy: -EAGAIN is retried (3 batched
    // passes, then 7 per folio), so every folio moves in the end.
    m.with_vm(0, |vm, _| vm.inject_migrate_failures(3));
    let out = m
        .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &pages, Some(&[1; 8]), &BatchCopy))
        .unwrap();
    assert_eq!(
        (out.ret, out.result.nr_failed),
        (0, 0),
        "transient failures are retried"
    );
    assert_eq!(out.result.nr_succeeded, 8 * 16);
    m.check().unwrap();
    // Every attempt busy: each folio fails for good after all its passes;
    // nothing moves back, the statuses of the run stay unwritten.
    m.with_vm(0, |vm, _| vm.inject_migrate_failures(1));
    let out = m
        .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &pages, Some(&[0; 8]), &BatchCopy))
        .unwrap();
    m.with_vm(0, |vm, _| vm.inject_migrate_failures(0));
    assert_eq!((out.ret, out.result.nr_failed), (8, 8));
    assert!(out.status.iter().all(Option::is_none), "{:?}", out.status);
    let c = |name| largo_mm::stats::render::vmstat_value(&m, name);
    assert_eq!(c("pgmigrate_fail"), 8 * 16);
    m.check().unwrap();
    let on_node1 = pages
        .iter()
        .filter(|&&a| node_of(&m, m.vm().translate(pid, a).unwrap()) == 1)
        .count();
    assert_eq!(on_node1, 8);
    // Every byte still where the task sees it.
    for i in 0..(1u64 << 20) / PAGE {
        let pfn = m.vm().translate(pid, addr + i * PAGE).unwrap();
        let mut buf = vec![0u8; PAGE as usize];
        m.backing().read(Pfn(pfn), 0, &mut buf).unwrap();
        assert!(buf == pattern(i), "page {i}");
    }
}

/// The work around the copy that the migration cost terms price: a folio
/// per folio moved, a TLB flush per batch that unmapped PTE-mapped folios
/// (`try_to_unmap_flush` after the unmap pass, batches of at most 512 base
/// pages) and one per PMD-mapped THP (`pmdp_invalidate`).
#[test]
fn migration_counts_its_folios_and_tlb_flushes() {
    // (mTHP knob, folio bytes, folios, expected flushes)
    let cases: [(Option<&str>, u64, u64, u64); 3] = [
        (None, PAGE, 256, 1),
        (Some("64kB"), 64 << 10, 64, 2),
        (Some("2048kB"), 2 << 20, 2, 2),
    ];
    for (thp, folio, nr, flushes) in cases {
        let knob = thp.map(|t| format!("transparent_hugepage/hugepages-{t}/enabled"));
        let knobs: Vec<(&str, &str)> = knob.iter().map(|k| (k.as_str(), "always")).collect();
        let mut m = two_nodes(BackingKind::Sim, &knobs);
        let (pid, addr) = anon_task(&mut m, folio * nr, None);
        // One address per folio: every folio queued, moved in full batches.
        let pages: Vec<u64> = (0..nr).map(|i| addr + i * folio).collect();
        let nodes = vec![1; pages.len()];
        let before = m.vm().work;
        let out = m
            .with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &pages, Some(&nodes), &Vanilla))
            .unwrap();
        assert_eq!(out.ret, 0);
        let after = m.vm().work;
        assert_eq!(after.migrate_folios - before.migrate_folios, nr, "{thp:?}");
        assert_eq!(after.migrate_flushes - before.migrate_flushes, flushes, "{thp:?}");
    }
}
