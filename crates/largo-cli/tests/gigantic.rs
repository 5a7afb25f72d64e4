//! Issue 7 as a user runs it: `largo bench gigantic --json`, `largo
//! hotplug`, `largo show extfrag_index`, `--buddy-beyond-section`.

mod common;

use common::{assert_usage_error, json_lines, largo, stdout};

#[test]
fn bench_gigantic_prints_one_sample_per_variant_and_step() {
    let all = json_lines(&["bench", "gigantic", "--mem", "4G", "--steps", "2", "--json"]);
    let (lines, faults): (Vec<_>, Vec<_>) = all.iter().cloned().partition(|j| j["experiment"] == "gigantic");
    assert_eq!(lines.len(), 4 * 2, "4 variants x 2 steps");
    // The page-fault comparison: 2 workloads x MAX_PAGE_ORDER 10 and 19.
    assert_eq!(faults.len(), 4);
    for j in &faults {
        assert_eq!(j["experiment"], "gigantic-faults");
        assert!(
            j["kernel_ns"].as_f64().unwrap() > 0.0 && j["buddy_levels"].as_u64().unwrap() > 0,
            "{j}"
        );
    }
    let levels = |v: &str| {
        faults.iter().find(|j| j["variant"] == v).unwrap()["buddy_levels"]
            .as_u64()
            .unwrap()
    };
    assert!(
        levels("max19+2G-sections") > levels("max10+contig"),
        "deeper buddies walk more levels"
    );
    for j in &lines {
        assert_eq!(j["experiment"], "gigantic");
        for k in ["success_2m", "success_32m", "success_1g"] {
            let r = j[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&r), "{j}");
        }
    }
    let variants: Vec<&str> = lines.iter().map(|j| j["variant"].as_str().unwrap()).collect();
    for v in ["max10+contig", "max18", "max18+gigapageblocks", "max19+2G-sections"] {
        assert!(variants.contains(&v), "{v} missing");
    }
    assert_eq!(lines[1]["t_s"], 2);
    // Same seed, same numbers (sim runs are deterministic).
    let again = json_lines(&["bench", "gigantic", "--mem", "4G", "--steps", "2", "--json"]);
    assert_eq!(all, again);
    // A machine too small for 1 GiB folios still ages and reports (no OOM kill stops it).
    let small = json_lines(&["bench", "gigantic", "--mem", "1G", "--steps", "1", "--json"]);
    assert!(small
        .iter()
        .filter(|j| j["experiment"] == "gigantic")
        .all(|j| j["success_1g"] == 0.0));
}

#[test]
fn hotplug_offlines_a_subsection_under_a_workload_and_names_failures() {
    let out = stdout(&[
        "hotplug",
        "--mem",
        "1G",
        "--memory-block-size",
        "2M",
        "--workload",
        "anon-w-seq:size=256M",
        "offline:200",
        "online:200",
    ]);
    assert!(out.contains("memory200: offline (pgmigrate_success +"), "{out}");
    assert!(out.contains("memory200: online"), "{out}");
    let o = largo(&["hotplug", "--mem", "1G", "offline:0"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("failed due to memory holes"), "{text}");
    assert_usage_error(&["hotplug", "--mem", "1G", "sideways:3"], "not a hotplug step");
    assert_usage_error(
        &["hotplug", "--mem", "1G", "--memory-block-size", "3M", "list"],
        "power of two",
    );
}

#[test]
fn extfrag_files_and_buddies_beyond_a_section() {
    let text = stdout(&["show", "extfrag_index", "--mem", "2G"]);
    assert!(text.starts_with("Node 0, zone      DMA -1.000"), "{text}");
    let text = stdout(&[
        "show",
        "buddyinfo",
        "--mem",
        "4G",
        "--max-page-order",
        "18",
        "--buddy-beyond-section",
    ]);
    let normal = text.lines().find(|l| l.contains("Normal")).unwrap();
    assert_eq!(normal.split_whitespace().count(), 4 + 19, "orders 0..=18: {normal}");
    assert_usage_error(
        &["show", "buddyinfo", "--max-page-order", "18"],
        "--buddy-beyond-section",
    );
}
