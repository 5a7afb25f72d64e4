//! Workloads with free page reporting: idle time, memhog's timeline,
//! churn's host refaults and their cost, the retention watermark, and no
//! cost when there is nothing to report.

use largo_mm::machine::Balloon;
use largo_mm::{Machine, MachineConfig};
use largo_workloads::builtin::parse;
use largo_workloads::cost::Profile;
use largo_workloads::{run, RunOptions, RunOutcome};

fn machine(mem_gb: u64, balloon: bool, knobs: &[(&str, &str)]) -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: mem_gb << 30,
        balloon: balloon.then_some(Balloon {
            order: 0,
            ack_latency_ns: 20_000,
        }),
        knobs: knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..MachineConfig::default()
    })
    .unwrap()
}

fn run_spec(m: &mut Machine, spec: &str) -> RunOutcome {
    let (def, spec) = parse(spec).unwrap();
    run(m, def, &spec, &RunOptions::default(), &mut |_, _| {}).unwrap()
}

#[test]
fn memhog_is_reported_in_passes_2s_apart_while_it_idles() {
    let mut m = machine(8, true, &[]);
    let out = run_spec(&mut m, "memhog:size=2G,settle=60s,idle=20s");
    let r = out.reporting.expect("a reporting device");
    let after: Vec<_> = r.timeline.iter().filter(|s| s.t_ms > r.first_free_t_ms).collect();
    assert!(after.len() >= 2, "{:?}", r.timeline);
    assert!(
        after[0].t_ms >= r.first_free_t_ms + 2000,
        "the first pass 2 s after the free"
    );
    assert!(after.windows(2).all(|w| w[1].t_ms - w[0].t_ms >= 2000));
    let reported_since = r.reported_kib - r.reported_kib_before_free;
    assert!(
        reported_since >= 1536 << 10,
        "most of the 2 GiB freed is reported: {reported_since} KiB"
    );
    assert_eq!(m.now_ns() / 1_000_000_000, 80, "settle + idle + the memhog's work");
    m.check().unwrap();
}

#[test]
fn churn_refaults_cost_kernel_time_and_retention_reduces_them() {
    let churn = "churn:size=1G,cycles=6,idle=30s";
    let mut plain = machine(4, true, &[]);
    let plain = run_spec(&mut plain, churn);
    let mut kept = machine(4, true, &[("page_reporting/retain_kbytes", "1048576")]);
    let kept = run_spec(&mut kept, churn);
    let refaults = |o: &RunOutcome| o.reporting.as_ref().unwrap().host_refault_pages;
    assert!(refaults(&plain) > 500_000, "{}", refaults(&plain));
    assert!(
        refaults(&kept) * 2 < refaults(&plain),
        "retaining 1 GiB: {} vs {}",
        refaults(&kept),
        refaults(&plain)
    );
    let p = Profile::default_profile();
    let est = |o: &RunOutcome| p.estimate(&o.counters);
    let term = |o: &RunOutcome| est(o).terms["host_refault"].ns;
    assert!(term(&plain) > 0.0);
    assert!(est(&kept).kernel_ns < est(&plain).kernel_ns);
}

#[test]
fn with_nothing_to_report_page_fault1_costs_the_same() {
    let thp = [("transparent_hugepage/hugepages-2048kB/enabled", "always")];
    let spec = "page_fault1:iterations=8";
    let p = Profile::default_profile();
    let mut off = machine(16, false, &thp);
    let without = p.estimate(&run_spec(&mut off, spec).counters).kernel_ns;
    // Reporting on, nothing reported yet: every free of a THP notifies,
    // and that is all.
    let mut on = machine(16, true, &thp);
    let out = run_spec(&mut on, spec);
    let with = p.estimate(&out.counters).kernel_ns;
    let extra = (with - without) / without;
    println!(
        "page_fault1 2M, reporting on, nothing reported: {:+.3}% estimated kernel time",
        extra * 100.0
    );
    assert!(extra <= 0.01, "{with} vs {without}");
    assert_eq!(out.reporting.unwrap().host_refault_pages, 0);
    // Once the idle machine has reported everything, the first iteration's
    // THPs come from reported memory: host refaults, at a cost.
    let mut idle = machine(16, true, &thp);
    idle.advance_time(600_000_000_000);
    let before = p.estimate(&largo_workloads::report::Counters::read(&idle)).kernel_ns;
    let out = run_spec(&mut idle, spec);
    let refaulted = p.estimate(&out.counters).kernel_ns - before;
    let r = out.reporting.unwrap();
    let one_iteration = 128u64 << 20 >> 12;
    assert!(
        (one_iteration..one_iteration + 256).contains(&r.host_refault_pages),
        "one iteration's THPs (and a few page tables): {}",
        r.host_refault_pages
    );
    println!(
        "after everything was reported: {:+.1}% (the first iteration refaults)",
        (refaulted - without) / without * 100.0
    );
    assert!(refaulted > without);
}
