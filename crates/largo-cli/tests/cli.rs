//! The `largo` command as a user runs it.

mod common;

use common::{largo, stdout};

/// The host file, or `None` (and a note in the test output) if unreadable.
fn host_file(path: &str) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Some(s),
        Err(e) => {
            largo_host::skip::skip("host comparison", &format!("cannot read {path}: {e}"));
            None
        }
    }
}

/// "Node 0, zone   Normal" prefixes of a buddyinfo-style file.
fn zone_prefixes(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("Node"))
        .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn buddyinfo_has_the_hosts_zones_and_columns() {
    let ours = stdout(&["show", "buddyinfo", "--mem", "24G"]);
    assert_eq!(
        zone_prefixes(&ours),
        ["Node 0, zone DMA", "Node 0, zone DMA32", "Node 0, zone Normal"]
    );
    for line in ours.lines() {
        assert_eq!(line.len(), "Node 0, zone   Normal ".len() + 11 * 7, "{line:?}");
    }
    if let Some(host) = host_file("/proc/buddyinfo") {
        let host_lines: Vec<&str> = host.lines().collect();
        let our_lines: Vec<&str> = ours.lines().collect();
        assert_eq!(zone_prefixes(&host), zone_prefixes(&ours), "same zones as this machine");
        for (h, o) in host_lines.iter().zip(&our_lines) {
            assert_eq!(h.len(), o.len(), "column layout differs:\nhost: {h:?}\nours: {o:?}");
        }
    }
}

#[test]
fn pagetypeinfo_headers_match_the_host_byte_for_byte() {
    let ours = stdout(&["show", "pagetypeinfo", "--mem", "24G"]);
    let Some(host) = host_file("/proc/pagetypeinfo") else {
        return;
    };
    let headers = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("Node"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(headers(&ours), headers(&host));
    let line_shapes = |t: &str| -> Vec<(String, usize)> {
        t.lines()
            .filter(|l| l.starts_with("Node"))
            .map(|l| {
                let label: Vec<&str> = l
                    .split_whitespace()
                    .enumerate()
                    .take_while(|(i, t)| *i < 2 || !t.chars().all(|c| c.is_ascii_digit()))
                    .map(|(_, t)| t)
                    .collect();
                (label.join(" "), l.len())
            })
            .collect()
    };
    assert_eq!(line_shapes(&ours), line_shapes(&host));
}

#[test]
fn zoneinfo_vmstat_and_meminfo_have_the_hosts_lines() {
    let names = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| {
                l.split(|c: char| c.is_ascii_digit())
                    .next()
                    .unwrap_or("")
                    .trim_end()
                    .to_string()
            })
            .collect()
    };
    for (file, path) in [
        ("zoneinfo", "/proc/zoneinfo"),
        ("vmstat", "/proc/vmstat"),
        ("meminfo", "/proc/meminfo"),
    ] {
        let ours = stdout(&["show", file, "--mem", "24G"]);
        if let Some(host) = host_file(path) {
            assert_eq!(names(&ours), names(&host), "{file}: lines differ from {path}");
        }
    }
}

#[test]
fn arm64_64k_has_512m_pageblocks() {
    let out = stdout(&["show", "pagetypeinfo", "--machine", "arm64-64k", "--mem", "4G"]);
    assert!(
        out.starts_with("Page block order: 13\nPages per block:  8192\n"),
        "{out}"
    );
    let orders = out.lines().nth(3).unwrap();
    assert!(orders.ends_with("    13 "), "14 order columns: {orders:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_status_2() {
    let cases: [(&[&str], &str); 14] = [
        (&["run", "page_fault2"], "page_fault2"),
        (&["run", "page_fault1:pages=3"], "pages"),
        (&["run", "page_fault1:size=lots"], "lots"),
        (&["run", "page_fault1", "--thp", "48K"], "48K"),
        (&["run", "page_fault1", "--thp", "64K=sometimes"], "sometimes"),
        (&["run", "page_fault1", "--thp", "8M"], "hugepages-8192kB"),
        (&["run", "page_fault1", "--config", "a:--mem 1Q"], "1Q"),
        (&["show", "buddyinfo", "--mem", "12X"], "12X"),
        (&["show", "buddyinfo", "--machine", "sparc"], "sparc"),
        (&["show", "buddyinfo", "--max-page-order", "20"], "--section-bits"),
        (&["show", "buddyinfo", "--set", "vm/bogus=1"], "vm/bogus"),
        (&["show", "buddyinfo", "--set", "vm/min_free_kbytes=lots"], "lots"),
        (&["show", "buddyinfo", "--mem", "64T"], "64T"),
        (&["show", "nosuchfile"], "nosuchfile"),
    ];
    for (args, needle) in cases {
        let out = largo(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "largo {args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "largo {args:?} printed {err:?}");
        assert!(err.contains(needle), "largo {args:?}: {err:?} does not name {needle}");
    }
}

#[test]
fn knobs_change_the_watermarks() {
    let before = stdout(&["show", "zoneinfo", "--mem", "3G"]);
    let after = stdout(&["show", "zoneinfo", "--mem", "3G", "--set", "vm/min_free_kbytes=131072"]);
    let min = |t: &str| -> u64 {
        let dma32 = t.split("zone    DMA32").nth(1).unwrap();
        dma32
            .lines()
            .find(|l| l.trim_start().starts_with("min "))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(min(&after) > min(&before), "{} -> {}", min(&before), min(&after));
    let never = stdout(&["list", "knobs", "--mem", "3G"]);
    assert!(never.contains("always [madvise] never"));
    assert!(never.contains("transparent_hugepage/hugepages-2048kB/enabled"));
}

#[test]
fn list_presets_shows_every_preset() {
    let out = stdout(&["list", "presets"]);
    for name in ["x86_64", "arm64-4k", "arm64-16k", "arm64-64k"] {
        assert!(out.contains(name), "{name} missing");
    }
}

#[test]
fn a_terabyte_meminfo() {
    let out = stdout(&["show", "meminfo", "--mem", "1T"]);
    let total: u64 = out
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(total > 1_000_000_000 && total < (1 << 30), "MemTotal {total} kB");
}

#[test]
fn bench_alloc_json_has_the_documented_keys() {
    let out = stdout(&[
        "bench",
        "alloc",
        "--json",
        "--ops",
        "20000",
        "--runs",
        "1",
        "--pcp-iters",
        "1000",
        "--mem",
        "256M",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["bench"], "alloc");
    assert_eq!(v["ops"], 20000);
    for key in [
        "largo_ns_per_op",
        "buddy_system_allocator_ns_per_op",
        "ratio",
        "pcp_order0_alloc_free_ns",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {v}");
    }
    assert_eq!(v["largo_failures"], 0);
}

fn run_json(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    common::json_lines(&all)
}

#[test]
fn run_json_has_the_kernels_exact_counts() {
    let cases: [(&[&str], &str, u64, u64); 3] = [
        (&["--thp", "64K"], "64kB", 4096, 4096),
        (&["--thp", "16K,32K,64K"], "64kB", 4096, 4096),
        (&["--thp-enabled", "madvise"], "64kB", 0, 65536),
    ];
    for (flags, size, allocs, faults) in cases {
        let mut args = vec!["page_fault1:iterations=2"];
        args.extend_from_slice(flags);
        let lines = run_json(&args);
        assert_eq!(lines.len(), 1, "{flags:?}: one configuration, one workload");
        let j = &lines[0];
        assert_eq!(j["mthp"][size]["anon_fault_alloc"], allocs, "{flags:?}");
        assert_eq!(j["vmstat"]["pgfault"], faults, "{flags:?}");
        let per_size: u64 = j["mthp"]
            .as_object()
            .unwrap()
            .values()
            .map(|s| s["anon_fault_alloc"].as_u64().unwrap())
            .sum();
        assert_eq!(per_size, allocs, "{flags:?}: no other size allocated");
        for key in [
            "vmstat",
            "mthp",
            "meminfo",
            "buddyinfo",
            "cost",
            "peak",
            "config",
            "workload",
            "machine",
            "seed",
            "largo_version",
        ] {
            assert!(!j[key].is_null(), "{flags:?}: no {key}");
        }
        assert!(j["cost"]["kernel_ns"].as_u64().unwrap() > 0);
    }
    let j = &run_json(&["page_fault1:iterations=2", "--thp", "2M=always"])[0];
    assert_eq!(j["vmstat"]["thp_fault_alloc"], 128);
    assert!(j["memcg"].is_null(), "no --memcg-max, no memcg section");
    assert_eq!(j["swap"]["total_kb"], 0);
}

#[test]
fn run_json_has_swap_and_memcg_sections_under_a_limit() {
    // 64 MiB of 64K folios in a 32 MiB memcg with a zram device: the
    // excess swaps out, the read pass swaps it back in.
    let lines = run_json(&[
        "swap-pressure:size=64M,passes=1",
        "--thp",
        "64K",
        "--swap",
        "1G",
        "--memcg-max",
        "32M",
    ]);
    let j = &lines[0];
    // SwapTotal leaves out the header page, as swapon does.
    assert_eq!(j["swap"]["total_kb"], (1 << 20) - 4);
    let pswpout = j["swap"]["pswpout"].as_u64().unwrap();
    assert!(pswpout >= (32 << 20) / 4096, "at least the excess went out: {pswpout}");
    assert_eq!(j["swap"]["pswpout"], j["vmstat"]["pswpout"]);
    assert_eq!(j["memcg"]["max_kb"], 32 << 10);
    assert_eq!(j["memcg"]["peak_kb"], 32 << 10, "usage reached the limit");
    assert!(j["memcg"]["failcnt"].as_u64().unwrap() > 0);
    assert_eq!(j["memcg"]["oom_kill"], 0);
    assert!(j["mthp"]["64kB"]["swpout"].as_u64().unwrap() > 0);
    assert!(j["mthp"]["64kB"]["swpin"].as_u64().unwrap() > 0);
    assert!(!j["khugepaged"]["full_scans"].is_null());
}

#[test]
fn run_without_arguments_compares_the_six_configurations() {
    let out = stdout(&["run"]);
    let header = out.lines().find(|l| l.contains("16K-pages")).expect("a table header");
    for name in ["4K", "16K-pages", "64K-pages", "4K+16K", "4K+16K+32K", "4K+16K+32K+64K"] {
        assert!(header.contains(name), "{name} missing from {header}");
    }
    for w in [
        "page_fault1:",
        "malloc1:",
        "anon-w-seq:",
        "anon-r-seq:",
        "anon-cow-seq:",
        "sparse:",
        "munmap-partial:",
    ] {
        assert!(out.lines().any(|l| l.starts_with(w)), "no table for {w}");
    }
    // Every non-baseline cell carries its change against the baseline.
    let faults = out.lines().find(|l| l.contains("pgfault")).unwrap();
    assert_eq!(faults.matches('%').count(), 5, "{faults}");
}

#[test]
fn run_configs_and_tasks() {
    let lines = run_json(&[
        "anon-w-seq:size=8M",
        "--tasks",
        "3",
        "--mode",
        "thread",
        "--config",
        "base:",
        "--config",
        "big:--thp 64K",
    ]);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["config"], "base");
    assert_eq!(lines[0]["vmstat"]["pgfault"], 3 * 2048);
    assert_eq!(lines[1]["mthp"]["64kB"]["anon_fault_alloc"], 3 * 128);
    assert!(
        lines[1]["locks"]["zone_lock"]["acquisitions"].as_u64().unwrap() >= 2 * 3 * 128,
        "order-4 folios go through the zone lock"
    );
}

#[test]
fn show_after_a_workload_has_its_memory_mapped() {
    let meminfo = stdout(&["show", "meminfo", "anon-w-seq:size=64M"]);
    let anon = meminfo.lines().find(|l| l.starts_with("AnonPages:")).unwrap();
    assert!(anon.ends_with(" 65536 kB"), "{anon}");
    let thp = stdout(&["show", "thpmaps", "page_fault1:iterations=1,size=32M", "--thp", "64K"]);
    assert!(
        thp.lines().any(
            |l| l.split_whitespace().collect::<Vec<_>>() == ["anon-thp-pte-aligned-64kB:", "32768", "kB", "(100%)"]
        ),
        "{thp}"
    );
    assert!(
        thp.contains("anon-thp-pte-partial:                  0 kB ( 0%)"),
        "thpmaps column layout: {thp}"
    );
    let pmd = stdout(&["show", "meminfo", "anon-w-seq:size=64M", "--thp", "2M=always"]);
    assert!(
        pmd.lines()
            .any(|l| l.starts_with("AnonHugePages:") && l.ends_with(" 65536 kB")),
        "{pmd}"
    );
    let stats = stdout(&["show", "mthp", "page_fault1:iterations=1,size=32M", "--thp", "32K"]);
    assert!(
        stats.lines().any(|l| l == "hugepages-32kB/stats/anon_fault_alloc:1024"),
        "{stats}"
    );
}

#[test]
fn list_workloads_shows_parameters() {
    let out = stdout(&["list", "workloads"]);
    for w in [
        "page_fault1",
        "malloc1",
        "mmap1",
        "anon-w-seq",
        "anon-w-rand",
        "anon-r-seq",
        "anon-cow-seq",
        "sparse",
        "memhog",
        "munmap-partial",
    ] {
        assert!(out.contains(w), "{w} not listed");
    }
    assert!(out.contains("iterations=4"));
}

#[test]
fn node_mem_sizes_each_node() {
    let text = stdout(&["show", "zoneinfo", "--node-mem", "6G,2G"]);
    let managed_of = |node: &str| -> u64 {
        let mut total = 0;
        let mut in_node = false;
        for l in text.lines() {
            if l.starts_with("Node ") {
                in_node = l.starts_with(&format!("Node {node},"));
            } else if in_node && l.trim_start().starts_with("present") {
                total += l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
            }
        }
        total
    };
    let (n0, n1) = (managed_of("0") as f64, managed_of("1") as f64);
    // Node boundaries round up to a section (128 MiB).
    let ratio = n0 / n1;
    assert!(
        (2.7..3.4).contains(&ratio),
        "node 0 has about three times the memory of node 1: {n0} / {n1}"
    );
    let out = largo(&["show", "zoneinfo", "--node-mem", "6G,2G", "--nodes", "3"]);
    assert_eq!(out.status.code(), Some(2));
}
