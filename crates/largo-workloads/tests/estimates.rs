//! The end-to-end estimates: user time through the TLB model, kernel time
//! by entry, lock waits at N CPUs.

use std::collections::BTreeMap;

use largo_mm::{Machine, MachineConfig};
use largo_workloads::contention::{estimate, Concurrency};
use largo_workloads::cost::{Faults, Profile};
use largo_workloads::{RunOptions, RunOutcome, Workload};

fn run_on(workload: &str, sizes_kb: &[u64], cpus: usize) -> (RunOutcome, Workload) {
    let w = Workload::parse(workload).unwrap();
    let knobs = sizes_kb
        .iter()
        .map(|kb| {
            (
                format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
                "always".to_string(),
            )
        })
        .collect();
    let config = w.machine_config(&MachineConfig {
        mem_bytes: 4 << 30,
        nr_cpus: cpus,
        knobs,
        ..MachineConfig::default()
    });
    let mut m = Machine::new(config).unwrap();
    let out = w.run(&mut m, &RunOptions::default(), &mut |_, _| {}).unwrap();
    (out, w)
}

#[test]
fn a_pointer_chase_misses_less_with_larger_translations() {
    let user = |sizes: &[u64]| {
        let (out, _) = run_on("anon-chase:size=256M,passes=2", sizes, 2);
        let s = out.tlb.streams.expect("anon-chase declares a stream");
        assert_eq!(s.counts.accesses, 2 * 65536, "one access per 4 KiB per pass");
        (s.counts.walks, s.user_ns)
    };
    let (walks_4k, ns_4k) = user(&[]);
    let (walks_64k, ns_64k) = user(&[64]);
    let (walks_2m, ns_2m) = user(&[2048]);
    println!("walks 4K {walks_4k} 64K {walks_64k} 2M {walks_2m}; ns {ns_4k:.0} {ns_64k:.0} {ns_2m:.0}");
    assert!(
        walks_4k > walks_64k && walks_64k > walks_2m,
        "coalescing and PMD entries cut walks"
    );
    assert_eq!(walks_2m, 128, "128 PMD entries fit the TLB: one walk each");
    assert!(ns_4k > ns_64k && ns_64k > ns_2m);
}

#[test]
fn traces_report_coverage_but_no_user_time() {
    let (out, _) = run_on("lua-build", &[64], 2);
    assert!(out.tlb.streams.is_none(), "a trace has no access stream");
    assert!(out.tlb.coverage.coalesced > 0 && out.tlb.reach_kb > 0);
    assert_eq!(
        out.tlb.coverage.base + out.tlb.coverage.coalesced + out.tlb.coverage.pmd + out.tlb.coverage.contpte,
        out.tlb.footprint_kb
    );
}

#[test]
fn kernel_time_by_entry_adds_up_to_the_estimate() {
    let profile = Profile::default_profile();
    for (workload, sizes) in [("page_fault1:iterations=2", &[][..]), ("lua-build", &[64][..])] {
        let (out, w) = run_on(workload, sizes, 2);
        let total = profile.estimate_at(&out.counters, w.faults()).kernel_ns;
        let by = profile.by_entry(&out.entries, w.faults());
        let sum: f64 = by.values().sum();
        assert!(
            (sum - total).abs() <= total * 1e-9 + 1.0,
            "{workload}: {sum} vs {total}"
        );
        assert!(by["fault"] > by["munmap"], "{workload}: {by:?}");
        assert!(by["munmap"] > 0.0, "{workload}: {by:?}");
    }
    // A recorded compiler enters through brk, mmap, mprotect, exit, execve.
    let (out, w) = run_on("lua-build", &[], 2);
    let by = profile.by_entry(&out.entries, w.faults());
    for e in ["brk", "mmap", "mprotect", "exit", "execve"] {
        assert!(by.get(e).is_some_and(|&ns| ns > 0.0), "{e}: {by:?}");
    }
}

#[test]
fn lock_waits_grow_with_cpus_and_shrink_with_larger_folios() {
    let profile = Profile::default_profile();
    let waits = |sizes: &[u64], cpus: usize| {
        let (out, w) = run_on("lua-build", sizes, cpus);
        let kernel_ns = profile.estimate_at(&out.counters, w.faults()).kernel_ns;
        let c = estimate(
            &out.counters,
            &profile,
            Faults::Cold,
            kernel_ns,
            0.0,
            Concurrency {
                tasks: 1,
                threads: false,
                cpus,
                nodes: 1,
                memory: largo_types::Preset::X86_64.memory_bandwidth(),
            },
        );
        c.kernel_ns_with_waits / c.kernel_ns
    };
    let (a8, a160) = (waits(&[], 8), waits(&[], 160));
    let (b8, b160) = (waits(&[64], 8), waits(&[64], 160));
    println!("kernel time with waits / without: 4K j8 {a8:.3} j160 {a160:.3}; 64K j8 {b8:.3} j160 {b160:.3}");
    assert!(a8 >= 1.0 && a160 > a8, "waits grow with the CPUs");
    assert!(b160 < a160, "64K folios take the zone and lru locks less often");
}

/// `swap-pressure` on a 512 MiB machine with 1 GiB of zram swap, with a
/// memcg limit or without.
fn swap_run(workload: &str, memcg_max: Option<u64>) -> BTreeMap<&'static str, f64> {
    let w = Workload::parse(workload).unwrap();
    let config = w.machine_config(&MachineConfig {
        mem_bytes: 512 << 20,
        swap: vec![largo_mm::swap::SwapSpec::parse("1G").unwrap()],
        memcg_max_bytes: memcg_max,
        ..MachineConfig::default()
    });
    let mut m = Machine::new(config).unwrap();
    let out = w.run(&mut m, &RunOptions::default(), &mut |_, _| {}).unwrap();
    Profile::default_profile().by_entry(&out.entries, w.faults())
}

#[test]
fn reclaim_is_charged_to_the_task_or_to_kswapd() {
    // Under a memcg limit the task reclaims for its own charges.
    let by = swap_run("swap-pressure:size=128M,passes=1", Some(32 << 20));
    println!("memcg-limited: {by:?}");
    assert!(by.get("reclaim").is_some_and(|&ns| ns > 0.0), "{by:?}");
    assert_eq!(by["kswapd"], 0.0, "{by:?}");
    // A working set larger than the machine wakes kswapd; its work is a
    // kernel thread's.
    let by = swap_run("swap-pressure:size=768M,passes=0", None);
    println!("global pressure: {by:?}");
    assert!(by.get("kswapd").is_some_and(|&ns| ns > 0.0), "{by:?}");
    // Reading swapped memory back costs swap-ins, in the fault entry.
    let fault = |passes: u32| swap_run(&format!("swap-pressure:size=128M,passes={passes}"), Some(32 << 20))["fault"];
    assert!(fault(2) > 1.5 * fault(0), "swap-ins are faults' work");
}

#[test]
fn coalescing_saves_entries_but_not_page_table_lines() {
    // 1 GiB chased: 16K folios coalesce 4 PTEs per entry, but the walks
    // still read one PTE per 4K page, so the leaf working set (and the
    // cost of each walk) is that of 4K pages; only PMD leaves shrink it.
    let walk_ns_per_walk = |sizes: &[u64]| {
        let (out, _) = run_on("anon-chase:size=1G,passes=1", sizes, 2);
        let s = out.tlb.streams.unwrap();
        s.walk_ns / s.counts.walks as f64
    };
    let (w4k, w16k, w2m) = (
        walk_ns_per_walk(&[]),
        walk_ns_per_walk(&[16]),
        walk_ns_per_walk(&[2048]),
    );
    assert!(
        (w4k - w16k).abs() < w4k * 1e-3,
        "a coalesced walk costs a 4K walk: {w4k} vs {w16k}"
    );
    assert!(w2m < w4k, "PMD leaves are 512 times fewer: {w2m} vs {w4k}");
}

#[test]
fn address_order_walks_reuse_the_line_of_ptes() {
    // Stride over 64 MiB of 4K pages: every access walks; 7 of 8 walks
    // find their PTE in the line the previous walk read.
    let (out, _) = run_on("anon-chase:size=64M,passes=1,pattern=stride", &[], 2);
    let s = out.tlb.streams.unwrap();
    let g = largo_types::Preset::X86_64.tlb();
    assert_eq!(s.counts.walks, 16384);
    let expect = 16384.0 / 8.0 * (g.walk_ns + 7.0 * g.walk_near_ns);
    assert!((s.walk_ns - expect).abs() < 1e-6, "{} vs {expect}", s.walk_ns);
}

#[test]
fn arm64_hpa_coalesces_16k_folios_and_contpte_folds_64k() {
    let run = |kb: u64| {
        let w = Workload::parse("anon-w-seq:size=64M").unwrap();
        let mut knobs = vec![];
        if kb > 4 {
            knobs.push((
                format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
                "always".to_string(),
            ));
        }
        let mut m = Machine::new(MachineConfig {
            preset: largo_types::Preset::Arm64_4k,
            mem_bytes: 1 << 30,
            knobs,
            ..MachineConfig::default()
        })
        .unwrap();
        w.run(&mut m, &RunOptions::default(), &mut |_, _| {}).unwrap().tlb
    };
    let (t16, t64) = (run(16), run(64));
    assert_eq!(t16.coverage.coalesced, 65536, "HPA: 4 pages an entry");
    assert_eq!(t16.entries_needed, 16384 / 4);
    assert_eq!((t64.coverage.contpte, t64.coverage.coalesced), (65536, 0));
    assert_eq!(t64.entries_needed, 16384 / 16);
}

/// `unfitted_ns` (what reclaim calibration subtracts from each point's
/// target) is the estimate less exactly the fitted groups' terms, on a
/// run with reclaim, swap-out and swap-in in it.
#[test]
fn the_priors_share_is_the_estimate_less_the_fitted_terms() {
    use largo_workloads::cost::{unfitted_ns, RECLAIM_FIT_GROUPS};
    let w = Workload::parse("swap-pressure:size=256M,passes=1").unwrap();
    let config = w.machine_config(&MachineConfig {
        mem_bytes: 512 << 20,
        swap: vec![largo_mm::swap::SwapSpec::parse("1G").unwrap()],
        memcg_max_bytes: Some(64 << 20),
        ..MachineConfig::default()
    });
    let mut m = Machine::new(config).unwrap();
    let out = w.run(&mut m, &RunOptions::default(), &mut |_, _| {}).unwrap();
    let profile = Profile::default_profile();
    let estimate = profile.estimate(&out.counters);
    let fitted: f64 = RECLAIM_FIT_GROUPS
        .iter()
        .flat_map(|(_, terms)| terms.iter())
        .map(|t| estimate.terms[t].ns)
        .sum();
    for t in ["reclaim_folio", "swap_out", "swap_in"] {
        assert!(estimate.terms[t].count > 0, "{t} never counted: {:?}", estimate.terms);
    }
    let rest = unfitted_ns(&out.counters, &profile.costs, RECLAIM_FIT_GROUPS);
    assert!(rest > 0.0 && fitted > 0.0);
    assert!(
        (rest + fitted - estimate.kernel_ns).abs() <= estimate.kernel_ns * 1e-9,
        "{rest} + {fitted} vs {}",
        estimate.kernel_ns
    );
}
