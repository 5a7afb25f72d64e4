//! `largo validate` and `largo calibrate` on this host (root, mTHP
//! sysfs). In a test binary of their own: nothing else may fault memory
//! on the host while they change the global THP knobs.

use std::process::Command;
use std::sync::Mutex;

/// One test at a time: another `largo` faulting memory on the host while a
/// validation measures would only add noise.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn validate_agrees_with_this_host_and_calibrate_fits_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let largo = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_largo"))
            .args(args)
            .output()
            .expect("largo runs")
    };
    let out = largo(&[
        "validate",
        "page_fault1:size=16M,iterations=1",
        "--config",
        "64K:--thp 64K",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("cannot validate against this host") {
        println!("host validation not run here: {}", err.trim());
        return;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{err}");
    let line = text.lines().find(|l| l.contains("under 64K")).expect("the 64K case");
    assert!(line.starts_with("agree "), "{text}");
    assert!(
        line.contains("layout equal") && line.contains("64kB/anon_fault_alloc 256"),
        "{text}"
    );
    // A scenario file with its own configuration, as JSON.
    let dir = std::env::temp_dir().join(format!("largo-cli-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.trace");
    std::fs::write(
        &file,
        "largo-trace 1\n@scenario tiny\n@describe one 64K block\n1 mmap 0x7f0000000000 64K rw- private,anonymous\n1 touch 0x7f0000000000 64K w\n1 exit\n",
    )
    .unwrap();
    let out = largo(&[
        "validate",
        file.to_str().unwrap(),
        "--config",
        "64K:--thp 64K",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["scenario"], "tiny");
    assert_eq!(j["match"], true);
    assert_eq!(j["largo"]["mthp"]["64kB"]["anon_fault_alloc"], 1);
    assert_eq!(j["host"]["mthp"]["64kB"]["anon_fault_alloc"], 1);
    assert_eq!(j["host"]["layout"]["aligned"]["4"], 16);
    std::fs::remove_dir_all(&dir).unwrap();

    let out = largo(&["calibrate", "--iterations", "2", "--repeats", "1", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points: Vec<&str> = p["fit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["point"].as_str().unwrap())
        .collect();
    let pf1 = points.iter().filter(|p| p.starts_with("page_fault1:")).count();
    assert_eq!(pf1, 9, "4K and every mTHP size up to 2M: {points:?}");
    for other in ["anon-r-seq:", "mmap1:", "anon-cow-seq:", "munmap-partial:"] {
        assert!(
            points.iter().any(|p| p.starts_with(other)),
            "no {other} point: {points:?}"
        );
    }
    assert!(p["costs"]["fault"].as_f64().unwrap() > 0.0);
    assert!(!p["cold_fit"].as_array().unwrap().is_empty());
    assert!(p["cold_costs"]["fault"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_fault_reports_both_sides() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args([
            "bench",
            "fault",
            "--sizes",
            "4K,64K",
            "--iterations",
            "1",
            "--runs",
            "1",
            "--json",
        ])
        .output()
        .expect("largo runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["pages"], 32768, "one 128 MiB loop of 4 KiB pages");
        assert!(l["largo_pages_per_s"].as_f64().unwrap() > 0.0);
        if largo_host_available() {
            assert!(l["host_pages_per_s"].as_f64().unwrap() > 0.0);
        } else {
            println!("host side not measured here");
        }
    }
}

fn largo_host_available() -> bool {
    std::fs::metadata("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled").is_ok()
        && std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .map(|l| l.split_whitespace().nth(2) == Some("0"))
            })
            .unwrap_or(false)
}
