//! Property tests: random sequences of allocator operations on tiny
//! machines, with the invariant checker after every step.
//!
//! `PROPTEST_CASES=N` changes the number of sequences (default 3000).

use largo_mm::gfp::{Gfp, GFP_ATOMIC, GFP_HIGHUSER_MOVABLE, GFP_KERNEL, GFP_NOWAIT, GFP_TRANSHUGE_LIGHT};
use largo_mm::machine::Balloon;
use largo_mm::page_alloc::isolation::IsolateMode;
use largo_mm::page_alloc::NoReclaim;
use largo_mm::{Folio, Machine, MachineConfig};
use largo_types::{GeometryOverrides, Preset};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        cpu: usize,
        order: u32,
        gfp: usize,
    },
    Free {
        idx: usize,
    },
    Get {
        idx: usize,
    },
    Put {
        idx: usize,
    },
    Split {
        idx: usize,
        new_order: u32,
    },
    Drain {
        cpu: usize,
    },
    Decay {
        cpu: usize,
    },
    Kswapd,
    MinFree {
        kbytes: u64,
    },
    HighFraction {
        fraction: u64,
    },
    ThpEnabled {
        on: bool,
    },
    /// Simulated time passes (free page reporting runs when due).
    Advance {
        ms: u64,
    },
    /// `alloc_contig_range` of 2^order pages at an aligned place (no
    /// migration: the allocator alone), freed at once.
    Contig {
        at: u64,
        order: u32,
    },
    /// Isolate the pageblocks of 2^order pages at an aligned place and undo.
    Isolate {
        at: u64,
        order: u32,
    },
    /// The gigapageblock grouping on or off.
    Gigablocks {
        on: bool,
    },
    ReportingOrder {
        order: u32,
    },
}

const GFPS: [Gfp; 6] = [
    GFP_KERNEL,
    GFP_HIGHUSER_MOVABLE,
    GFP_KERNEL.union(Gfp::RECLAIMABLE),
    GFP_KERNEL.union(Gfp::DMA32),
    GFP_ATOMIC,
    GFP_TRANSHUGE_LIGHT,
];

fn op(max_order: u32) -> impl Strategy<Value = Op> {
    let order = prop_oneof![
        6 => 0u32..=3,
        3 => 0u32..=max_order,
        1 => Just(max_order),
    ];
    prop_oneof![
        40 => (0usize..3, order, 0usize..GFPS.len()).prop_map(|(cpu, order, gfp)| Op::Alloc { cpu, order, gfp }),
        25 => any::<usize>().prop_map(|idx| Op::Free { idx }),
        3 => any::<usize>().prop_map(|idx| Op::Get { idx }),
        5 => any::<usize>().prop_map(|idx| Op::Put { idx }),
        5 => (any::<usize>(), 0u32..=max_order).prop_map(|(idx, new_order)| Op::Split { idx, new_order }),
        3 => (0usize..3).prop_map(|cpu| Op::Drain { cpu }),
        3 => (0usize..3).prop_map(|cpu| Op::Decay { cpu }),
        1 => Just(Op::Kswapd),
        1 => (128u64..8192).prop_map(|kbytes| Op::MinFree { kbytes }),
        1 => prop_oneof![Just(0u64), Just(8), Just(64)].prop_map(|fraction| Op::HighFraction { fraction }),
        1 => any::<bool>().prop_map(|on| Op::ThpEnabled { on }),
        4 => (0u64..5000).prop_map(|ms| Op::Advance { ms }),
        1 => (0u32..=max_order).prop_map(|order| Op::ReportingOrder { order }),
        2 => (any::<u64>(), 0u32..=max_order + 2).prop_map(|(at, order)| Op::Contig { at, order }),
        2 => (any::<u64>(), 0u32..=max_order + 2).prop_map(|(at, order)| Op::Isolate { at, order }),
        1 => any::<bool>().prop_map(|on| Op::Gigablocks { on }),
    ]
}

/// Small machines of every preset shape; 2-node variants use small sections.
fn machine() -> impl Strategy<Value = MachineConfig> {
    let x86 = (prop_oneof![Just(32u64), Just(48), Just(64)], 1usize..=3).prop_map(|(mem_mb, cpus)| MachineConfig {
        mem_bytes: mem_mb << 20,
        nr_cpus: cpus,
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    });
    let numa = (1usize..=3).prop_map(|cpus| MachineConfig {
        mem_bytes: 64 << 20,
        nr_nodes: 2,
        nr_cpus: cpus,
        overrides: GeometryOverrides {
            section_bits: Some(24),
            ..Default::default()
        },
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    });
    let movable = Just(MachineConfig {
        mem_bytes: (4 << 30) + (64 << 20),
        movable_bytes: 32 << 20,
        kernel_reserved_bytes: 1 << 20,
        overrides: GeometryOverrides {
            max_page_order: Some(9),
            ..Default::default()
        },
        ..MachineConfig::default()
    });
    let arm =
        prop_oneof![Just(Preset::Arm64_4k), Just(Preset::Arm64_16k), Just(Preset::Arm64_64k)].prop_map(|preset| {
            MachineConfig {
                preset,
                mem_bytes: 64 << 20,
                kernel_reserved_bytes: 1 << 20,
                ..MachineConfig::default()
            }
        });
    // Buddies beyond the section: MAX_PAGE_ORDER 14 (64 MiB) with 16 MiB sections.
    let beyond = Just(MachineConfig {
        mem_bytes: 128 << 20,
        kernel_reserved_bytes: 1 << 20,
        overrides: GeometryOverrides {
            max_page_order: Some(14),
            section_bits: Some(24),
            buddy_beyond_section: true,
            ..Default::default()
        },
        ..MachineConfig::default()
    });
    let base = prop_oneof![4 => x86, 2 => numa, 1 => movable, 2 => arm, 2 => beyond];
    // Half the machines have a free page reporting device, reporting from
    // a low order (tiny zones never pass the gate at pageblock order).
    (
        base,
        any::<bool>(),
        1u32..=5,
        any::<bool>(),
        prop_oneof![Just(0u64), Just(2048)],
    )
        .prop_map(|(mut config, balloon, order, seed, retain)| {
            if balloon {
                config.balloon = Some(Balloon {
                    order: 0,
                    ack_latency_ns: 10_000,
                });
                config.knobs.extend([
                    ("page_reporting/page_reporting_order".into(), order.to_string()),
                    (
                        "page_reporting/trigger".into(),
                        if seed { "seed" } else { "mainline" }.into(),
                    ),
                    ("page_reporting/retain_kbytes".into(), retain.to_string()),
                ]);
            }
            config
        })
}

fn pick(live: &[Folio], idx: usize) -> Option<usize> {
    (!live.is_empty()).then(|| idx % live.len())
}

fn apply(m: &mut Machine, live: &mut Vec<Folio>, refs: &mut Vec<u32>, op: &Op) {
    let cpus = m.config().nr_cpus;
    match *op {
        Op::Alloc { cpu, order, gfp } => {
            let gfp = GFPS[gfp];
            let order = order.min(m.geometry().max_page_order);
            if let Some(f) = m.alloc_pages(cpu % cpus, gfp, order).expect("valid request") {
                assert_eq!(f.order, order);
                live.push(f);
                refs.push(1);
            }
        }
        Op::Free { idx } => {
            if let Some(i) = pick(live, idx) {
                let f = live.swap_remove(i);
                let r = refs.swap_remove(i);
                for _ in 0..r {
                    m.page_alloc_mut().folio_put(0, f).expect("live folio");
                }
                assert!(
                    m.page_alloc().check_folio(f).is_err(),
                    "freed folio still looks allocated"
                );
            }
        }
        Op::Get { idx } => {
            if let Some(i) = pick(live, idx) {
                m.page_alloc_mut().folio_get(live[i]).expect("live folio");
                refs[i] += 1;
            }
        }
        Op::Put { idx } => {
            if let Some(i) = pick(live, idx) {
                let freed = m.page_alloc_mut().folio_put(i % cpus, live[i]).expect("live folio");
                refs[i] -= 1;
                assert_eq!(freed, refs[i] == 0);
                if freed {
                    live.swap_remove(i);
                    refs.swap_remove(i);
                }
            }
        }
        Op::Split { idx, new_order } => {
            if let Some(i) = pick(live, idx) {
                let f = live[i];
                let res = m.split_folio(f, new_order);
                if new_order >= f.order || refs[i] != 1 {
                    assert!(
                        res.is_err(),
                        "split {f:?} to {new_order} with {} refs should fail",
                        refs[i]
                    );
                } else {
                    let parts = res.expect("splittable folio");
                    assert_eq!(parts.len() as u64, 1 << (f.order - new_order));
                    live.swap_remove(i);
                    refs.swap_remove(i);
                    refs.extend(parts.iter().map(|_| 1));
                    live.extend(parts);
                }
            }
        }
        Op::Drain { cpu } => m.page_alloc_mut().drain_pages(cpu % cpus),
        Op::Decay { cpu } => {
            for zi in 0..m.page_alloc().zones().len() {
                m.page_alloc_mut().decay_pcp_high(cpu % cpus, zi);
            }
        }
        Op::Kswapd => m.page_alloc_mut().run_kswapd(),
        Op::MinFree { kbytes } => m.set_knob("vm/min_free_kbytes", &kbytes.to_string()).unwrap(),
        Op::HighFraction { fraction } => m
            .set_knob("vm/percpu_pagelist_high_fraction", &fraction.to_string())
            .unwrap(),
        Op::ThpEnabled { on } => m
            .set_knob("transparent_hugepage/enabled", if on { "madvise" } else { "never" })
            .unwrap(),
        Op::Advance { ms } => m.advance_time(ms * 1_000_000),
        Op::Contig { at, order } => {
            let nr = 1u64 << order;
            let start = (at % m.layout().max_pfn) & !(nr - 1);
            let free = |m: &Machine| m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
            let before = free(m);
            let got = m
                .page_alloc_mut()
                .compactor()
                .alloc_contig_range(start, start + nr, true, 0, &mut NoReclaim);
            if let Ok(Some(folio)) = got {
                assert_eq!(free(m) + nr, before, "the range came out of the free pages");
                m.free_contig_folio(folio);
            }
            assert_eq!(
                free(m),
                before,
                "alloc_contig_range without migration changes nothing net"
            );
        }
        Op::Isolate { at, order } => {
            let pb = m.geometry().pageblock_nr_pages();
            let nr = (1u64 << order).max(pb);
            let start = (at % m.layout().max_pfn) & !(nr - 1);
            let pa = m.page_alloc_mut();
            if pa
                .start_isolate_page_range(start, start + nr, IsolateMode::ContigAlloc)
                .is_ok()
            {
                pa.undo_isolate_page_range(start, start + nr);
            }
        }
        Op::Gigablocks { on } => m.set_knob("largo/gigapageblocks", if on { "1" } else { "0" }).unwrap(),
        Op::ReportingOrder { order } => {
            let order = order.min(m.geometry().max_page_order);
            m.set_knob("page_reporting/page_reporting_order", &order.to_string())
                .unwrap()
        }
    }
}

fn run(config: MachineConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut m = Machine::new(config).expect("valid machine");
    let managed = m.page_alloc().managed_pages();
    let mut live = Vec::new();
    let mut refs = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        apply(&mut m, &mut live, &mut refs, op);
        let report = m
            .check()
            .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
        let live_pages: u64 = live.iter().map(Folio::nr_pages).sum();
        prop_assert_eq!(report.allocated_pages, live_pages, "step {} {:?}", step, op);
        prop_assert_eq!(report.free_pages + report.pcp_pages + report.allocated_pages, managed);
    }
    // Freeing everything and draining must merge memory back together.
    for (f, r) in live.iter().zip(&refs) {
        for _ in 0..*r {
            m.page_alloc_mut().folio_put(0, *f).expect("live folio");
        }
    }
    m.page_alloc_mut().drain_all_pages();
    let report = m
        .check()
        .map_err(|e| TestCaseError::fail(format!("after freeing all: {e}")))?;
    prop_assert_eq!(report.free_pages, managed);
    // Reporting never lost a page: whatever was reported, every page is
    // free again and the host-discarded frames are all free ones.
    prop_assert!(m.reporting().discarded.nr_pages() <= managed);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1500),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_sequences_keep_every_invariant(
        config in machine(),
        ops in proptest::collection::vec(op(13), 1..150),
    ) {
        run(config, ops)?;
    }
}

/// The same operations on two machines, one refilling its pcp lists a
/// free block at a time (`rmqueue_bulk_split`, the default) and one page
/// by page through `__rmqueue`: every allocation gets the same pfn, and
/// the counters, the work and the /proc files agree after every step.
fn run_both_refills(config: MachineConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut machines = [
        Machine::new(config.clone()).expect("valid machine"),
        Machine::new(config).expect("valid machine"),
    ];
    machines[1].page_alloc_mut().set_bulk_split(false);
    let mut live = [Vec::new(), Vec::new()];
    let mut refs = [Vec::new(), Vec::new()];
    let seen = |m: &Machine| {
        let files: String = largo_mm::stats::render::ProcFile::ALL
            .iter()
            .map(|f| f.render(m))
            .collect();
        (
            m.check().map(|r| format!("{r:?}")).map_err(|e| e.to_string()),
            m.page_alloc().work,
            files,
        )
    };
    for (step, op) in ops.iter().enumerate() {
        for (i, m) in machines.iter_mut().enumerate() {
            apply(m, &mut live[i], &mut refs[i], op);
        }
        prop_assert_eq!(&live[0], &live[1], "step {} {:?}: other pages", step, op);
        let (split, page_by_page) = (seen(&machines[0]), seen(&machines[1]));
        prop_assert!(
            split == page_by_page,
            "step {} {:?}:\n{:?}\n{:?}",
            step,
            op,
            split,
            page_by_page
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).map_or(300, |n: u32| n / 10),
        ..ProptestConfig::default()
    })]

    #[test]
    fn refilling_a_block_at_a_time_changes_nothing(
        config in prop_oneof![3 => machine(), 1 => cma_machine()],
        ops in proptest::collection::vec(op(13), 1..150),
    ) {
        run_both_refills(config, ops)?;
    }
}

/// A machine whose CMA area holds most of its memory: from the start,
/// `__rmqueue` takes a movable request's pages from CMA first (more than
/// half the zone's free pages are CMA), page by page as the counts move.
fn cma_machine() -> impl Strategy<Value = MachineConfig> {
    (1usize..=2).prop_map(|cpus| MachineConfig {
        mem_bytes: 64 << 20,
        nr_cpus: cpus,
        kernel_reserved_bytes: 1 << 20,
        cma: vec![largo_mm::cma::CmaSpec {
            bytes: 40 << 20,
            nid: None,
        }],
        ..MachineConfig::default()
    })
}

/// Pressure: allocate until failure with every kind of request, then free
/// everything; nothing is lost and the free memory merges back.
#[test]
fn exhaustion_fails_cleanly_and_recovers() {
    for preset in [Preset::X86_64, Preset::Arm64_16k] {
        let mut m = Machine::new(MachineConfig {
            preset,
            mem_bytes: 64 << 20,
            kernel_reserved_bytes: 1 << 20,
            ..MachineConfig::default()
        })
        .unwrap();
        let managed = m.page_alloc().managed_pages();
        let initial_blocks = largo_mm::stats::render::buddyinfo(&m);
        let mut live = Vec::new();
        for gfp in [GFP_HIGHUSER_MOVABLE, GFP_KERNEL, GFP_NOWAIT, GFP_ATOMIC] {
            for order in [3, 0] {
                while let Some(f) = m.alloc_pages(1, gfp, order).unwrap() {
                    live.push(f);
                }
            }
        }
        let report = m.check().unwrap();
        assert!(
            report.allocated_pages > managed * 9 / 10,
            "{preset:?}: only {} of {managed} allocated",
            report.allocated_pages
        );
        for f in live {
            m.free_folio(0, f).unwrap();
        }
        m.page_alloc_mut().drain_all_pages();
        let report = m.check().unwrap();
        assert_eq!(report.free_pages, managed);
        assert_eq!(
            largo_mm::stats::render::buddyinfo(&m),
            initial_blocks,
            "{preset:?}: free memory did not merge back"
        );
    }
}
