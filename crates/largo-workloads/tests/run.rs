//! Running the built-in workloads: exact counts, determinism, every
//! workload on every preset under the invariant checkers, tasks.

use largo_mm::{Machine, MachineConfig};
use largo_types::Preset;
use largo_workloads::builtin::{catalog, parse};
use largo_workloads::{run, RunOptions, RunOutcome, TaskMode};

fn machine(preset: Preset, knobs: &[(&str, &str)]) -> Machine {
    Machine::new(MachineConfig {
        preset,
        knobs: knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..MachineConfig::default()
    })
    .unwrap()
}

fn run_spec(m: &mut Machine, spec: &str, opts: &RunOptions) -> RunOutcome {
    let (def, spec) = parse(spec).unwrap();
    run(m, def, &spec, opts, &mut |_, _| {}).unwrap()
}

fn always(kb: u64) -> (String, String) {
    (
        format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
        "always".into(),
    )
}

#[test]
fn page_fault1_counts_match_the_kernel_exactly() {
    let cases: [(&[u64], i64, u64); 3] = [(&[64], 4096, 4096), (&[16, 32, 64], 4096, 4096), (&[], 0, 65536)];
    for (sizes, allocs, faults) in cases {
        let knobs: Vec<(String, String)> = sizes.iter().map(|&kb| always(kb)).collect();
        let knobs: Vec<(&str, &str)> = knobs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut m = machine(Preset::X86_64, &knobs);
        let out = run_spec(&mut m, "page_fault1:iterations=2", &RunOptions::default());
        let c = &out.counters;
        assert_eq!(c.mthp("64kB", "anon_fault_alloc"), allocs, "{sizes:?}");
        assert_eq!(c.vmstat("pgfault"), faults, "{sizes:?}");
        assert_eq!(
            c.mthp_total("anon_fault_alloc"),
            allocs,
            "no other size used: {sizes:?}"
        );
        assert_eq!(c.vmstat("nr_anon_pages"), 0, "everything unmapped at the end");
    }
    let mut m = machine(
        Preset::X86_64,
        &[("transparent_hugepage/hugepages-2048kB/enabled", "always")],
    );
    let out = run_spec(&mut m, "page_fault1:iterations=2", &RunOptions::default());
    assert_eq!(out.counters.vmstat("thp_fault_alloc"), 128);
    assert_eq!(out.peak.anon_kb, 128 * 1024);
}

#[test]
fn runs_are_deterministic() {
    let opts = RunOptions {
        nr_tasks: 3,
        seed: 42,
        ..RunOptions::default()
    };
    let k = always(64);
    let a = run_spec(
        &mut machine(Preset::X86_64, &[(&k.0, &k.1)]),
        "anon-w-rand:size=16M",
        &opts,
    );
    let b = run_spec(
        &mut machine(Preset::X86_64, &[(&k.0, &k.1)]),
        "anon-w-rand:size=16M",
        &opts,
    );
    assert_eq!(a.counters, b.counters);
    assert_eq!(a.resolved, b.resolved);
    assert_eq!(a.counters.vmstat("pgfault"), 3 * 256);
}

#[test]
fn every_workload_on_every_preset_keeps_the_invariants() {
    for preset in Preset::ALL {
        for def in catalog() {
            let mut m = machine(preset, &[("transparent_hugepage/enabled", "always")]);
            // Small sizes: the checkers walk the whole machine.
            let spec = def.parse(def.name).unwrap();
            let mut small = spec.clone();
            for (name, value) in small.params.iter_mut() {
                if *name == "size" || *name == "fill" {
                    *value = (*value).min(8 << 20);
                }
                if def.name == "collapse" && *name == "size" {
                    // MADV_COLLAPSE needs one whole PMD range (32 MiB with 16K pages).
                    let page_size = preset.geometry().page_size();
                    *value = (*value).max(page_size / 8 * page_size);
                }
                if *name == "iterations" {
                    *value = 1;
                }
                if *name == "node" {
                    *value = 0; // one node: move_pages to where the pages are
                }
            }
            let opts = RunOptions {
                nr_tasks: 2,
                check_every: 50,
                ..RunOptions::default()
            };
            let out = run(&mut m, def, &small, &opts, &mut |_, _| {})
                .unwrap_or_else(|e| panic!("{} on {}: {e}", def.name, preset.name()));
            assert_eq!(out.problems, Default::default(), "{} on {}", def.name, preset.name());
            assert_eq!(m.vm().node_stats()[0].anon_mapped, 0, "{} left memory mapped", def.name);
        }
    }
}

#[test]
fn threads_share_one_address_space() {
    let opts = RunOptions {
        nr_tasks: 4,
        mode: TaskMode::Thread,
        check_every: 100,
        ..RunOptions::default()
    };
    let mut m = machine(Preset::X86_64, &[]);
    let out = run_spec(&mut m, "page_fault1:size=8M,iterations=1", &opts);
    assert_eq!(out.counters.vmstat("pgfault"), 4 * 2048);
    // One mm: one PGD and shared upper tables.
    assert!(out.peak.pagetables_kb < 4 * 4 * 8, "{}", out.peak.pagetables_kb);
}

#[test]
fn anon_cow_seq_copies_every_page_in_the_child() {
    let k = always(64);
    let mut m = machine(Preset::X86_64, &[(&k.0, &k.1)]);
    let out = run_spec(&mut m, "anon-cow-seq:size=16M", &RunOptions::default());
    let c = &out.counters;
    assert_eq!(c.mthp("64kB", "anon_fault_alloc"), 256);
    assert_eq!(c.vmstat("pgfault"), 256 + 4096);
    assert_eq!(c.work.vm.pages_copied, 4096);
    assert_eq!(out.peak.anon_kb, 32 * 1024, "parent and child copies");
    assert!(matches!(
        out.resolved[0][2],
        largo_workloads::op::ResolvedOp::Fork { .. }
    ));
}

#[test]
fn sparse_touches_show_large_folio_bloat() {
    let k = always(64);
    let mut base = machine(Preset::X86_64, &[]);
    let mut big = machine(Preset::X86_64, &[(&k.0, &k.1)]);
    let a = run_spec(&mut base, "sparse:size=64M", &RunOptions::default());
    let b = run_spec(&mut big, "sparse:size=64M", &RunOptions::default());
    assert_eq!(a.peak.anon_kb, 1024 * 4, "one 4K page per 64K");
    assert_eq!(b.peak.anon_kb, 64 * 1024, "one 64K folio per 64K");
}

#[test]
fn munmap_partial_feeds_the_deferred_split_queue() {
    let k = always(64);
    let mut m = machine(Preset::X86_64, &[(&k.0, &k.1)]);
    let out = run_spec(&mut m, "munmap-partial:size=32M", &RunOptions::default());
    let c = &out.counters;
    assert_eq!(c.mthp("64kB", "split_deferred"), 512);
    assert_eq!(c.mthp("64kB", "split"), 512, "drop_caches split them all");
    assert_eq!(c.mthp("64kB", "nr_anon"), 0);
    assert!(c.locks.split_queue_lock >= 512);
}

/// The checked-in cost profile records the host kernel's page_fault1
/// kernel time at each folio size (among its other fit points) (measured by `largo calibrate`); the
/// model's estimate of the 4K / 64K ratio must stay within 15% of the
/// host's, for the model's counts as they are now.
#[test]
fn the_kernel_time_estimate_follows_the_host_between_4k_and_64k() {
    use largo_workloads::cost::Profile;
    let profile = Profile::default_profile();
    let point = |size: &str| {
        profile
            .fit
            .iter()
            .find(|f| f.point.starts_with("page_fault1:") && f.point.ends_with(&format!(" @ {size}")))
            .unwrap_or_else(|| panic!("the profile has no page_fault1 point at {size}"))
    };
    let host_ratio = point("4kB").host_ns / point("64kB").host_ns;
    let spec = point("4kB").point.split(" @ ").next().unwrap().to_string();
    let estimate = |knobs: &[(&str, &str)]| {
        let mut m = machine(Preset::X86_64, knobs);
        let out = run_spec(&mut m, &spec, &RunOptions::default());
        profile.estimate(&out.counters).kernel_ns
    };
    let k = always(64);
    let model_ratio = estimate(&[]) / estimate(&[(&k.0, &k.1)]);
    let error = (model_ratio - host_ratio) / host_ratio;
    println!(
        "4K/64K kernel time: host {host_ratio:.2}, largo {model_ratio:.2} ({:+.1}%)",
        error * 100.0
    );
    assert!(error.abs() <= 0.15, "host {host_ratio:.2} vs largo {model_ratio:.2}");
}

#[test]
fn move_pages_workload_migrates_every_page_to_the_other_node() {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 4 << 30,
        nr_nodes: 2,
        knobs: vec![always(64)],
        ..MachineConfig::default()
    })
    .unwrap();
    let out = run_spec(&mut m, "move-pages:size=64M", &RunOptions::default());
    let c = &out.counters;
    assert_eq!(c.vmstat("pgmigrate_success"), 16384);
    assert_eq!(c.vmstat("pgmigrate_fail"), 0);
    assert_eq!(c.mthp("64kB", "anon_fault_alloc"), 1024);
    assert!(out.problems.failed_syscalls.is_empty(), "{:?}", out.problems);
    m.check().unwrap();
    // One node: the call fails with ENODEV, reported, nothing moves.
    let mut one = machine(Preset::X86_64, &[]);
    let out = run_spec(&mut one, "move-pages:size=4M", &RunOptions::default());
    assert_eq!(out.counters.vmstat("pgmigrate_success"), 0);
    assert!(out.problems.failed_syscalls[0].contains("ENODEV"));
}

#[test]
fn fragment_shows_what_defrag_buys_thp_faults() {
    let run_with = |defrag: &str| {
        let mut m = Machine::new(MachineConfig {
            mem_bytes: 2 << 30,
            knobs: vec![always(2048), ("transparent_hugepage/defrag".into(), defrag.into())],
            ..MachineConfig::default()
        })
        .unwrap();
        let out = run_spec(&mut m, "fragment:fill=1900M,size=128M", &RunOptions::default());
        m.check().unwrap();
        (
            out.counters.vmstat("thp_fault_alloc"),
            out.counters.vmstat("compact_stall"),
            out.counters.vmstat("pgmigrate_success"),
        )
    };
    let (thp_never, stalls_never, _) = run_with("never");
    let (thp_always, stalls_always, migrated) = run_with("always");
    assert_eq!(stalls_never, 0);
    assert!(thp_never < 64, "order-0 holes leave few free 2M blocks: {thp_never}");
    assert_eq!(thp_always, 64, "direct compaction makes every THP");
    assert!(stalls_always > 0 && migrated > 0);
}
