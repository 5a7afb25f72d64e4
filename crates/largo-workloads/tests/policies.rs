//! Order policies (`largo/thp_policy`) on the built-in workloads: the
//! memory and kernel-time targets of `adaptive`, promotion under `ingens`,
//! and `static` being the kernel exactly.

use largo_mm::{Machine, MachineConfig};
use largo_workloads::builtin::parse;
use largo_workloads::cost::Profile;
use largo_workloads::{run, RunOptions, RunOutcome};

/// Every anonymous size of the x86 machine `always`, then `policy`.
fn machine(sizes_kb: &[u64], policy: &str) -> Machine {
    let mut knobs: Vec<(String, String)> = sizes_kb
        .iter()
        .map(|kb| {
            (
                format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
                "always".into(),
            )
        })
        .collect();
    knobs.push(("largo/thp_policy".into(), policy.into()));
    Machine::new(MachineConfig {
        mem_bytes: 4 << 30,
        knobs,
        ..MachineConfig::default()
    })
    .unwrap()
}

fn run_on(m: &mut Machine, spec: &str) -> RunOutcome {
    let (def, spec) = parse(spec).unwrap();
    let out = run(m, def, &spec, &RunOptions::default(), &mut |_, _| {}).unwrap();
    m.check().unwrap();
    out
}

const ALL: &[u64] = &[16, 32, 64, 2048];

#[test]
fn adaptive_keeps_a_sparse_writer_near_base_page_memory() {
    let spec = "sparse:size=128M,stride=64K";
    let base = run_on(&mut machine(&[], "static"), spec).peak.anon_kb;
    let static64 = run_on(&mut machine(&[64], "static"), spec).peak.anon_kb;
    let adaptive = run_on(&mut machine(ALL, "adaptive"), spec).peak.anon_kb;
    println!("sparse peak anon: 4K {base} kB, static 64K {static64} kB, adaptive {adaptive} kB");
    assert_eq!(static64, 16 * base, "static 64K maps a whole folio per written page");
    assert!(adaptive * 2 <= base * 3, "adaptive {adaptive} kB vs 4K {base} kB");
}

#[test]
fn adaptive_is_near_the_best_static_mix_on_sequential_writers() {
    let profile = Profile::default_profile();
    for spec in ["page_fault1:iterations=2", "anon-w-seq:size=256M"] {
        let est = |sizes: &[u64], policy: &str| {
            let out = run_on(&mut machine(sizes, policy), spec);
            profile.estimate(&out.counters).kernel_ns
        };
        let best = [&[][..], &[64], &[16, 32, 64], ALL]
            .iter()
            .map(|s| est(s, "static"))
            .fold(f64::INFINITY, f64::min);
        let adaptive = est(ALL, "adaptive");
        println!("{spec}: adaptive {adaptive:.0} ns, best static {best:.0} ns");
        assert!(
            adaptive <= best * 1.03,
            "{spec}: adaptive {adaptive:.0} vs best {best:.0}"
        );
    }
}

#[test]
fn ingens_promotes_populated_blocks_and_keeps_sparse_memory() {
    let mut m = machine(&[64], "ingens");
    let out = run_on(&mut m, "anon-w-seq:size=64M");
    let c = &out.counters;
    assert_eq!(c.work.vm.promotions, 1024, "every 64K block promoted once full");
    assert_eq!(c.mthp("64kB", "anon_fault_alloc"), 0, "faults map base pages");
    assert!(c.work.vm.pages_copied >= 1024 * 15, "the populated pages are copied");
    let sparse = run_on(&mut machine(&[64], "ingens"), "sparse:size=64M").peak.anon_kb;
    assert_eq!(sparse, 64 * 1024 / 16, "one base page per 64K");
    // At 25% a block of 16 pages is promoted on its 4th page.
    let out = run_on(&mut machine(&[64], "ingens:util=25"), "sparse:size=64M,stride=16K");
    assert_eq!(out.counters.work.vm.promotions, 1024);
    assert_eq!(out.peak.anon_kb, 64 * 1024);
}

#[test]
fn the_static_policy_is_the_kernel() {
    let spec = "munmap-partial:size=32M";
    let a = run_on(&mut machine(ALL, "static"), spec);
    let mut knobs_only = Machine::new(MachineConfig {
        mem_bytes: 4 << 30,
        knobs: ALL
            .iter()
            .map(|kb| {
                (
                    format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
                    "always".into(),
                )
            })
            .collect(),
        ..MachineConfig::default()
    })
    .unwrap();
    let b = run_on(&mut knobs_only, spec);
    assert_eq!(
        serde_json::to_value(&a.counters).unwrap(),
        serde_json::to_value(&b.counters).unwrap()
    );
    let policy = knobs_only
        .knobs()
        .into_iter()
        .find(|k| k.path == "largo/thp_policy")
        .unwrap();
    assert_eq!(policy.value, "static");
}
