//! The `largo` command as a user runs it.

use std::process::{Command, Output};

fn largo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(args)
        .output()
        .expect("largo runs")
}

fn stdout(args: &[&str]) -> String {
    let out = largo(args);
    assert!(
        out.status.success(),
        "largo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The host file, or `None` (and a note in the test output) if unreadable.
fn host_file(path: &str) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Some(s),
        Err(e) => {
            println!("host comparison skipped: cannot read {path}: {e}");
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
    let cases: [(&[&str], &str); 7] = [
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
