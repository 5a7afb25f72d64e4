//! Property test: migration under a random workload on the `ram` backing
//! never changes a byte. A task writes versioned patterns into random
//! pages of one mapping (mTHP sizes random) and moves random ranges
//! between two nodes with every copy policy, failures injected in the
//! middle of batches, and compacts memory, allocates contiguous ranges and
//! takes 2 MiB memory blocks offline and online around its pages (all of
//! which migrate them); after every step each written page still holds
//! its last pattern and every invariant holds.
//!
//! `PROPTEST_CASES=N` changes the number of sequences (default 64).

use largo_mm::vm::{MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::copy::{BatchCopy, CopyPolicy, MtCopy, Vanilla};
use largo_physmem::BackingKind;
use largo_types::{GeometryOverrides, Pfn};
use proptest::prelude::*;

const PAGE: u64 = 4096;

#[derive(Clone, Debug)]
enum Op {
    /// Write a new version into pages `first..first + nr` (wrapping).
    Write { first: u64, nr: u64 },
    /// move_pages of `nr` pages from `first` to `node`.
    Move {
        first: u64,
        nr: u64,
        node: i32,
        policy: usize,
        fail_every: u32,
    },
    /// `compact_memory`: every zone compacted whole.
    Compact,
    /// `alloc_contig_range` of the 2^order pages around the frame of
    /// mapping page `at` (if mapped), freed again.
    Contig { at: u64, order: u32 },
    /// The 2 MiB memory block holding mapping page `at` offline and back online.
    Hotplug { at: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u64>(), 1u64..200).prop_map(|(first, nr)| Op::Write { first, nr }),
        2 => (any::<u64>(), 1u64..600, 0i32..2, 0usize..3, prop_oneof![3 => Just(0u32), 1 => 1u32..5])
            .prop_map(|(first, nr, node, policy, fail_every)| Op::Move { first, nr, node, policy, fail_every }),
        1 => Just(Op::Compact),
        1 => (any::<u64>(), 0u32..=10).prop_map(|(at, order)| Op::Contig { at, order }),
        1 => any::<u64>().prop_map(|at| Op::Hotplug { at }),
    ]
}

fn pattern(page: u64, version: u64) -> Vec<u8> {
    (0..PAGE)
        .map(|b| ((page * 2654435761 + version * 40503 + b * 31) % 253) as u8)
        .collect()
}

fn policy(i: usize) -> Box<dyn CopyPolicy> {
    match i {
        0 => Box::new(Vanilla),
        1 => Box::new(BatchCopy),
        _ => Box::new(MtCopy::new(2, 4)),
    }
}

fn run(sizes: Vec<&'static str>, nr_pages: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 128 << 20,
        nr_nodes: 2,
        backing: BackingKind::Ram,
        overrides: GeometryOverrides {
            section_bits: Some(24),
            ..Default::default()
        },
        kernel_reserved_bytes: 1 << 20,
        memory_block_bytes: Some(2 << 20),
        knobs: sizes
            .iter()
            .map(|s| {
                (
                    format!("transparent_hugepage/hugepages-{s}/enabled"),
                    "always".to_string(),
                )
            })
            .collect(),
        ..MachineConfig::default()
    })
    .unwrap();
    let len = nr_pages * PAGE;
    let (pid, base) = m.with_vm(0, |vm, ctx| {
        let pid = vm.spawn(ctx).unwrap();
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let base = vm.mmap(ctx, pid, 0, len, Prot::READ | Prot::WRITE, flags).unwrap();
        (pid, base)
    });
    let mut version: Vec<Option<u64>> = vec![None; nr_pages as usize];
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Write { first, nr } => {
                for k in 0..nr {
                    let p = (first + k) % nr_pages;
                    let addr = base + p * PAGE;
                    m.with_vm(0, |vm, ctx| vm.access(ctx, pid, addr, true)).unwrap();
                    let v = version[p as usize].map_or(0, |v| v + 1);
                    let pfn = m.vm().translate(pid, addr).expect("written page mapped");
                    m.backing_mut().write(Pfn(pfn), 0, &pattern(p, v)).unwrap();
                    version[p as usize] = Some(v);
                }
            }
            Op::Move {
                first,
                nr,
                node,
                policy: pol,
                fail_every,
            } => {
                let first = first % nr_pages;
                let nr = nr.min(nr_pages - first);
                let pages: Vec<u64> = (0..nr).map(|k| base + (first + k) * PAGE).collect();
                let nodes = vec![node; pages.len()];
                let copy = policy(pol);
                m.with_vm(0, |vm, _| vm.inject_migrate_failures(fail_every));
                let out = m
                    .with_vm(0, |vm, ctx| {
                        vm.move_pages(ctx, pid, &pages, Some(&nodes), copy.as_ref())
                    })
                    .unwrap();
                m.with_vm(0, |vm, _| vm.inject_migrate_failures(0));
                prop_assert!(out.ret >= 0, "step {}: ret {}", step, out.ret);
            }
            Op::Compact => {
                m.compact_memory();
            }
            Op::Contig { at, order } => {
                let nr = 1u64 << order;
                if let Some(pfn) = m.vm().translate(pid, base + (at % nr_pages) * PAGE) {
                    let start = pfn & !(nr - 1);
                    if let Ok(Some(folio)) = m.alloc_contig_range(start, start + nr) {
                        m.free_contig_folio(folio);
                    }
                }
            }
            Op::Hotplug { at } => {
                let block = m
                    .vm()
                    .translate(pid, base + (at % nr_pages) * PAGE)
                    .and_then(|pfn| m.memory_block_of(pfn));
                if let Some(id) = block {
                    if m.offline_memory_block(id).is_ok() {
                        m.online_memory_block(id).unwrap();
                    }
                }
            }
        }
        m.check()
            .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
        for (p, v) in version.iter().enumerate() {
            let Some(v) = *v else { continue };
            let pfn = m
                .vm()
                .translate(pid, base + p as u64 * PAGE)
                .expect("written page mapped");
            let mut buf = vec![0u8; PAGE as usize];
            m.backing().read(Pfn(pfn), 0, &mut buf).unwrap();
            prop_assert!(
                buf == pattern(p as u64, v),
                "step {} {:?}: page {} changed",
                step,
                op,
                p
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn migration_never_changes_a_byte(
        sizes in prop::sample::subsequence(vec!["16kB", "64kB", "2048kB"], 0..=3),
        nr_pages in 64u64..1500,
        ops in proptest::collection::vec(op(), 1..25),
    ) {
        run(sizes, nr_pages, ops)?;
    }
}
