//! `largo advise`: the candidate mixes, the ranking, the bloat budget, the
//! sysfs commands, recording first with `-- CMD`, and bad input.

mod common;

use common::{assert_usage_error, largo_env, stdout};
use serde_json::Value;

fn advise_json(args: &[&str]) -> Value {
    let mut all = vec!["advise"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = stdout(&all);
    let mut lines = out.lines();
    let j: Value = serde_json::from_str(lines.next().expect("one line")).expect("JSON");
    assert!(lines.next().is_none(), "one JSON object");
    j
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

#[test]
fn a_recorded_program_gets_the_fastest_mix_within_the_budget() {
    let j = advise_json(&["lua-build"]);
    let cands = j["candidates"].as_array().unwrap();
    assert_eq!(
        cands.len(),
        31,
        "baseline + 14 mixes x always/madvise + 2 order policies"
    );
    // The order policies are ranked but never recommended.
    let policies: Vec<&Value> = cands.iter().filter(|c| c["policy"] != "static").collect();
    assert_eq!(policies.len(), 2, "adaptive and ingens");
    assert!(policies.iter().all(|c| c["mix"] != j["recommendation"]["mix"]));
    // The Pareto front: undominated in kernel time, peak memory, TLB reach.
    let front: Vec<&str> = j["pareto_front"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(front.contains(&"4K only"), "the least memory: {front:?}");
    let fastest = cands[0]["mix"].as_str().unwrap();
    assert!(front.contains(&fastest), "the fastest: {front:?}");
    for c in cands {
        let dominated = front.iter().any(|name| {
            let o = cands.iter().find(|x| x["mix"] == *name).unwrap();
            f(&o["kernel_ns"]) <= f(&c["kernel_ns"])
                && f(&o["peak_anon_kb"]) <= f(&c["peak_anon_kb"])
                && f(&o["tlb_reach_kb"]) >= f(&c["tlb_reach_kb"])
                && o["mix"] != c["mix"]
        });
        let on_front = front.contains(&c["mix"].as_str().unwrap());
        assert!(!(on_front && dominated), "{} is on the front but dominated", c["mix"]);
    }
    assert_eq!(j["baseline"], "4K only");
    // Ranked by estimated kernel time.
    let times: Vec<f64> = cands.iter().map(|c| f(&c["kernel_ns"])).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let base = cands.iter().find(|c| c["mix"] == "4K only").unwrap();
    assert_eq!(f(&base["kernel_time_change_pct"]), 0.0);
    assert_eq!(f(&base["large_folio_share"]), 0.0);
    // The recommendation: the first candidate within 5% bloat.
    let rec = &j["recommendation"];
    assert!(f(&rec["peak_memory_change_pct"]) <= 5.0);
    let first_within = cands.iter().find(|c| c["within_budget"] == true).unwrap();
    assert_eq!(rec["mix"], first_within["mix"]);
    assert!(
        f(&rec["kernel_time_change_pct"]) < -20.0,
        "large folios pay off for a compiler: {rec}"
    );
    assert!(f(&rec["large_folio_share"]) > 0.5);
    // Something faster exists but bloats more: the budget decided.
    assert!(cands[0]["within_budget"] == false, "{}", cands[0]);
    // One sysfs write per anonymous size, matching the recommendation.
    let cmds: Vec<&str> = j["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(cmds.len(), 8);
    for (size, mode) in rec["enabled"].as_object().unwrap() {
        let want = format!(
            "echo {} > /sys/kernel/mm/transparent_hugepage/hugepages-{size}/enabled",
            mode.as_str().unwrap()
        );
        assert!(cmds.contains(&want.as_str()), "{want} not in {cmds:?}");
    }
}

#[test]
fn the_bloat_budget_moves_the_recommendation() {
    let strict = advise_json(&["lua-build", "--max-bloat", "0"]);
    let loose = advise_json(&["lua-build", "--max-bloat", "50"]);
    assert!(f(&strict["recommendation"]["peak_memory_change_pct"]) <= 0.0);
    assert_eq!(strict["recommendation"]["mix"], "4K only");
    assert_eq!(loose["recommendation"]["rank"], 1);
    assert!(f(&loose["recommendation"]["kernel_ns"]) < f(&strict["recommendation"]["kernel_ns"]));
}

#[test]
fn madvise_mixes_help_only_where_the_program_madvises() {
    // 2 MiB advised, 2 MiB not: always helps both halves, madvise one.
    let path = common::temp_file(
        "half-advised.trace",
        "largo-trace 1\n\
         1 mmap 0x7f0000000000 4M rw- private,anonymous\n\
         1 madvise 0x7f0000000000 2M hugepage\n\
         1 touch 0x7f0000000000 4M w\n\
         1 exit\n",
    );
    let j = advise_json(&[path.to_str().unwrap(), "--max-bloat", "100"]);
    let by_mix = |mix: &str| {
        j["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["mix"] == mix)
            .unwrap_or_else(|| panic!("no {mix}"))
            .clone()
    };
    let base = f(&by_mix("4K only")["pgfault"]);
    let always = f(&by_mix("2M")["pgfault"]);
    let advised = f(&by_mix("2M (madvise)")["pgfault"]);
    assert_eq!(always, 2.0);
    assert_eq!(advised, 1.0 + 512.0);
    assert_eq!(base, 1024.0);
    assert_eq!(j["recommendation"]["mix"], "2M", "{}", j["recommendation"]);
}

#[test]
fn the_table_names_the_recommendation_and_the_commands() {
    let out = stdout(&["advise", "sqlite-cc"]);
    assert!(out.contains("<- recommended"), "{out}");
    let rec = out
        .lines()
        .find(|l| l.starts_with("recommendation: "))
        .expect("a recommendation line");
    assert!(rec.contains("anon kernel time"), "{rec}");
    let cmds = out.lines().filter(|l| l.trim_start().starts_with("echo ")).count();
    assert_eq!(cmds, 8, "{out}");
    let words: Vec<&str> = out
        .split(|c: char| c.is_whitespace() || c == '│' || c == '┆')
        .filter(|w| !w.is_empty())
        .collect();
    assert!(
        words.windows(3).any(|w| w == ["madvise", "mixes", "alike"]),
        "sqlite never madvises: {out}"
    );
}

#[test]
fn bad_input_says_why() {
    let cases: [(&[&str], &str); 4] = [
        (&["advise"], "WORKLOAD"),
        (&["advise", "lua-build", "--max-bloat", "-3"], "percentage"),
        (&["advise", "lua-build", "--machine", "arm64-64k"], "4 KiB"),
        (&["advise", "lua-build", "--", "true"], "cannot be used"),
    ];
    for (args, needle) in cases {
        assert_usage_error(args, needle);
    }
}

/// `-- CMD`: recorded on this host first (root and tracefs needed), for
/// this host: the profile probed against it, the estimates stated against
/// the program's whole kernel time measured now. The program spends most
/// of its time in the kernel (dd clearing its 16 MB buffer from /dev/zero
/// 8 times), so two runs' tick-sampled kernel time is never 0; a sort of
/// zeros, mostly user time, once measured 0 in both.
#[test]
fn a_command_is_recorded_then_advised() {
    let cache_dir = tempfile::tempdir().expect("a temporary directory");
    let cache = cache_dir.path().join("cache");
    let out = largo_env(
        &[
            "advise",
            "--json",
            "--no-recalibrate",
            "--runs",
            "2",
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=16M",
            "count=8",
            "status=none",
        ],
        &[("LARGO_CACHE_DIR", cache.to_str().unwrap())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("cannot record on this host") {
        largo_host::skip::skip("a_command_is_recorded_then_advised", err.trim());
        return;
    }
    assert!(out.status.success(), "{err}");
    let j: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(j["faults"], "cold");
    let base = j["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["mix"] == "4K only")
        .expect("the baseline");
    assert!(f(&base["pgfault"]) > 1000.0, "dd's buffer is 16 MB: {base}");
    assert_eq!(j["commands"].as_array().unwrap().len(), 8);
    // For this host: its machine, a probe of the profile, the whole time.
    assert!(j["machine"].as_str().unwrap().contains("1 node"), "{}", j["machine"]);
    assert_eq!(j["probe"]["checked"], true, "{}", j["probe"]);
    assert_eq!(j["probe"]["recalibrated"], false, "--no-recalibrate");
    let points = j["probe"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert!(points.iter().all(|p| f(&p["host_ns"]) > 0.0), "{points:?}");
    assert!(f(&j["whole_kernel_ms"]) > 0.0, "{j}");
    assert!(j["whole_kernel_source"].as_str().unwrap().contains("2 runs"));
    assert!(j.get("verified").is_none(), "no --verify");
    // Nothing was cached: no recalibration happened.
    assert!(!cache.exists());
}

/// `--verify`: the baseline and the model's best candidates run natively,
/// and the recommendation is the best measured of them.
#[test]
fn verify_measures_the_top_candidates_and_recommends_the_best_measured() {
    if !largo_host::skip::recorder_ready("verify_measures_the_top_candidates_and_recommends_the_best_measured") {
        return;
    }
    let cache_dir = tempfile::tempdir().expect("a temporary directory");
    let cache = cache_dir.path().join("cache");
    let out = largo_env(
        &[
            "advise",
            "--json",
            "--verify",
            "--no-recalibrate",
            "--runs",
            "3",
            "--top",
            "2",
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=32M",
            "count=4",
        ],
        &[("LARGO_CACHE_DIR", cache.to_str().unwrap())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let j: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let verified = j["verified"].as_array().expect("verified");
    assert_eq!(verified.len(), 3, "the baseline and the top 2: {verified:?}");
    assert_eq!(verified[0]["mix"], "4K only");
    assert_eq!(f(&verified[0]["host_kernel_change_pct"]), 0.0);
    for v in verified {
        assert_eq!(v["runs"], 3);
        // dd's kernel work (faulting and zeroing 32 MB, the reads) is
        // measured: more than nothing.
        assert!(f(&v["host_wall_ms"]) > 0.0, "{v}");
        for k in [
            "host_sys_ms",
            "host_sys_ci_ms",
            "host_user_ms",
            "est_kernel_change_pct",
            "host_kernel_change_pct",
        ] {
            assert!(v.get(k).is_some(), "{k} missing from {v}");
        }
    }
    // The recommendation is the verified mix with the least kernel time.
    let best = verified
        .iter()
        .min_by(|a, b| f(&a["host_sys_ms"]).total_cmp(&f(&b["host_sys_ms"])))
        .unwrap();
    assert_eq!(j["recommendation"]["mix"], best["mix"], "{j}");
    // The two measured candidates are the model's two best within the
    // budget, mixes with identical results counted once.
    let mut seen = Vec::new();
    let mut top = Vec::new();
    for c in j["candidates"].as_array().unwrap() {
        let key = (
            c["kernel_ns"].clone(),
            c["pgfault"].clone(),
            c["peak_anon_kb"].clone(),
            c["large_folio_share"].clone(),
        );
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if c["mix"] != "4K only" && c["within_budget"] == true && top.len() < 2 {
            top.push(c["mix"].clone());
        }
    }
    let measured: Vec<Value> = verified[1..].iter().map(|v| v["mix"].clone()).collect();
    assert_eq!(measured, top);
}
