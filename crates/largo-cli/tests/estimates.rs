//! The end-to-end estimates on the command line: `--json`'s cost.user_ns,
//! cost.by_entry, tlb and locks sections, `--seed-table`, `--tlb`,
//! `--thp-policy`, and the model side of `largo bench tlb`.

mod common;

use common::{json_lines, largo, stdout};

#[test]
fn run_json_has_the_estimates() {
    let lines = json_lines(&[
        "run",
        "anon-chase:size=64M,passes=1",
        "--config",
        "4K:--thp-enabled never",
        "--config",
        "2M:--thp 2M",
        "--cpus",
        "4",
        "--json",
    ]);
    assert_eq!(lines.len(), 2);
    for j in &lines {
        let cost = &j["cost"];
        assert!(cost["user_ns"].as_u64().unwrap() > 0, "{cost}");
        let by: u64 = cost["by_entry"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let total = cost["kernel_ns"].as_u64().unwrap();
        assert!(by.abs_diff(total) <= 16, "by_entry sums to kernel_ns: {by} vs {total}");
        let kthreads = cost["by_entry"]["kthreads"].as_u64().unwrap_or(0);
        assert!(
            cost["task_kernel_ns"].as_u64().unwrap().abs_diff(total - kthreads) <= 1,
            "{cost}"
        );
        let tlb = &j["tlb"];
        for k in ["pmd", "contpte", "coalesced", "base"] {
            assert!(tlb["coverage"][k].is_u64(), "{tlb}");
        }
        assert!(tlb["streams"]["walks"].is_u64() && tlb["reach_kb"].is_u64(), "{tlb}");
        for lock in ["zone_lock", "lru_lock", "split_queue_lock"] {
            assert!(j["locks"][lock]["est_wait_ns"].is_number(), "{}", j["locks"]);
        }
        assert_eq!(j["contention"]["cpus"], 4);
    }
    let walks = |j: &serde_json::Value| j["tlb"]["streams"]["walks"].as_u64().unwrap();
    assert!(walks(&lines[0]) > 10 * walks(&lines[1]), "2M translations miss less");
    assert_eq!(lines[1]["tlb"]["coverage"]["pmd"].as_u64().unwrap(), 65536);
}

#[test]
fn walks_without_page_walk_caches_fetch_every_level() {
    let walk = |tlb: &str| {
        let j = &json_lines(&["run", "anon-chase:size=64M,passes=1", "--tlb", tlb, "--json"])[0];
        let s = &j["tlb"]["streams"];
        (s["walks"].as_u64().unwrap(), s["walk_ns"].as_f64().unwrap())
    };
    let (walks, with_pwc) = walk("pwc=1");
    let (walks_again, without) = walk("pwc=0");
    assert_eq!(walks, walks_again, "the same misses");
    // A 4K walk on x86's 4 levels fetches 4 entries instead of 1.
    assert!((without / with_pwc - 4.0).abs() < 1e-9, "{with_pwc} vs {without}");
}

#[test]
fn the_seed_table_has_its_columns() {
    let out = stdout(&[
        "run",
        "anon-chase:size=64M,passes=1",
        "--config",
        "4K:--thp-enabled never",
        "--config",
        "64K:--thp 64K",
        "--seed-table",
    ]);
    for col in ["real-time ms", "kern-time ms", "user-time ms", "memory kB"] {
        assert!(out.contains(col), "{out}");
    }
    assert!(out.lines().any(|l| l.contains("64K") && l.contains('%')), "{out}");
    // A trace has no access stream: its user time is n/a.
    let out = stdout(&["run", "sort-words", "--thp", "64K", "--seed-table"]);
    assert!(out.contains("n/a"), "{out}");
}

#[test]
fn bad_tlb_and_policy_values_say_why() {
    for (args, want) in [
        (&["run", "page_fault1", "--tlb", "l2=100,ways=3"][..], "multiple"),
        (&["run", "page_fault1", "--tlb", "speed=1"][..], "unknown TLB parameter"),
        (
            &["run", "page_fault1", "--thp-policy", "greedy"][..],
            "unknown order policy",
        ),
        (&["run", "page_fault1", "--thp-policy", "ingens:util=0"][..], "util=0"),
        (
            &["bench", "tlb", "--patterns", "seq", "--model-only"][..],
            "no native side",
        ),
    ] {
        let out = largo(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn bench_tlb_prints_one_object_per_cell() {
    let lines = json_lines(&[
        "bench",
        "tlb",
        "--model-only",
        "--ranges",
        "64M",
        "--sizes",
        "4K,2M",
        "--patterns",
        "chase",
        "--json",
    ]);
    assert_eq!(lines.len(), 2);
    for j in &lines {
        assert_eq!(j["bench"], "tlb");
        assert_eq!(j["range_mib"], 64);
        assert_eq!(j["pattern"], "chase");
        assert!(j["largo_ns"].as_f64().unwrap() > 0.0);
        assert!(j["host_ns"].is_null(), "--model-only");
    }
    assert!(
        lines[1]["largo_ns"].as_f64() < lines[0]["largo_ns"].as_f64(),
        "2M faster than 4K"
    );
}

#[test]
fn the_adaptive_policy_keeps_sparse_memory_down() {
    let lines = json_lines(&[
        "run",
        "sparse:size=64M",
        "--config",
        "static:--thp 64K",
        "--config",
        "adaptive:--thp 64K --thp-policy adaptive",
        "--json",
    ]);
    let peak = |j: &serde_json::Value| j["peak"]["anon_kb"].as_u64().unwrap();
    assert_eq!(peak(&lines[0]), 64 * 1024);
    assert_eq!(peak(&lines[1]), 4 * 1024);
}

#[test]
fn traces_take_the_tlb_overrides() {
    let coalesced = |extra: &[&str]| {
        let mut args = vec!["run", "xz-compress", "--thp", "64K", "--json"];
        args.extend_from_slice(extra);
        json_lines(&args)[0]["tlb"]["coverage"]["coalesced"].as_u64().unwrap()
    };
    assert!(coalesced(&[]) > 0, "64K folios coalesce on the x86 preset");
    assert_eq!(coalesced(&["--tlb", "coalesce=1"]), 0, "not without coalescing");
}
