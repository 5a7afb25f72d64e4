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
    if !largo_host::skip::host_ready("validate_agrees_with_this_host_and_calibrate_fits_it") {
        return;
    }
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
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{err}");
    let line = text.lines().find(|l| l.contains("under 64K")).expect("the 64K case");
    assert!(line.starts_with("agree "), "{text}");
    assert!(
        line.contains("layout equal") && line.contains("64kB/anon_fault_alloc 256"),
        "{text}"
    );
    // A scenario file with its own configuration, as JSON.
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().to_path_buf();
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
    // The cold fit's two terms trade off on a noisy 2-vCPU host with two
    // iterations: interleaved runs gave fault 348-1585 ns beside page_zero
    // 490-742 ns, and once fault 0. Neither may be negative; a cold 4K
    // fault that zeroes its page costs something.
    let cold = |term: &str| p["cold_costs"][term].as_f64().unwrap();
    assert!(cold("fault") >= 0.0 && cold("page_zero") >= 0.0, "{}", p["cold_costs"]);
    assert!(cold("fault") + cold("page_zero") > 0.0, "{}", p["cold_costs"]);
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
            "3",
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
            // The median of the alternating pairs' ratios: the model
            // skips the exception, the page clearing and the cache misses
            // the kernel pays, so it is several times faster at any size.
            let ratio = l["ratio"].as_f64().unwrap();
            assert!(ratio > 2.0, "largo / host {ratio} at {}", l["size"]);
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

/// The settings `largo record` changes: every THP size, the tracefs
/// files it writes. `None` where unreadable.
fn recorder_settings() -> Vec<(String, Option<String>)> {
    let mut files: Vec<String> = std::fs::read_dir("/sys/kernel/mm/transparent_hugepage")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("enabled").is_file())
                .map(|p| p.join("enabled").display().to_string())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.push("/sys/kernel/mm/transparent_hugepage/enabled".into());
    for f in [
        "tracing_on",
        "buffer_size_kb",
        "options/event-fork",
        "set_event_pid",
        "set_event",
    ] {
        files.push(format!("/sys/kernel/tracing/{f}"));
    }
    files
        .into_iter()
        .map(|f| {
            let v = std::fs::read_to_string(&f).ok();
            (f, v)
        })
        .collect()
}

#[test]
fn record_restores_everything_and_its_trace_validates() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !largo_host::skip::recorder_ready("record_restores_everything_and_its_trace_validates") {
        return;
    }
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().to_path_buf();
    // A deterministic program nobody here wrote: sort(1) on 300k numbers.
    let input = dir.join("numbers.txt");
    let numbers: String = (0..300_000u64)
        .map(|i| format!("{}\n", (i * 7919) % 1_000_003))
        .collect();
    std::fs::write(&input, numbers).unwrap();
    let trace = dir.join("sort.ltb.gz");
    let before = recorder_settings();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_largo"))
            .args(args)
            .output()
            .expect("largo runs")
    };
    let sort = ["sort", "-n", input.to_str().unwrap()];
    let mut args = vec!["record", "-o", trace.to_str().unwrap(), "--"];
    args.extend(sort);
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(recorder_settings(), before, "record restored every setting");
    // The trace replays with the program's faults.
    let out = run(&["replay", trace.to_str().unwrap(), "--json", "--thp", "64K"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["vmstat"]["pgfault"].as_u64().unwrap() > 200, "{}", j["vmstat"]);
    assert!(
        j["mthp"]["64kB"]["anon_fault_alloc"].as_u64().unwrap() > 100,
        "{}",
        j["mthp"]
    );
    // And agrees with the program run natively.
    let mut args = vec![
        "validate",
        "trace",
        trace.to_str().unwrap(),
        "--repeats",
        "1",
        "--config",
        "4K:",
        "--config",
        "64K:--thp 64K",
        "--",
    ];
    args.extend(sort);
    let out = run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("64K: within tolerance"), "{text}");
    assert_eq!(recorder_settings(), before, "validate restored every setting");

    // SIGTERM in the middle of a recording: the command dies, the
    // recorder stops and restores everything.
    let mut child = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args([
            "record",
            "-o",
            dir.join("sleep.trace").to_str().unwrap(),
            "--",
            "sleep",
            "30",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let during = recorder_settings();
    assert_ne!(during, before, "the recorder changed settings while recording");
    nix_kill(child.id(), "TERM");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed().as_secs() < 15, "record did not stop on SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(started.elapsed().as_secs() < 10);
    println!("record after SIGTERM: {status}");
    assert_eq!(recorder_settings(), before, "restored after SIGTERM");
}

fn nix_kill(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// Free page reporting on this host against a model shaped like it.
#[test]
fn reporting_comparison_runs_against_this_host() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // It writes and frees 4 GiB on the host: only where it may (root).
    if !largo_host::skip::host_ready("reporting_comparison_runs_against_this_host") {
        return;
    }
    if !std::path::Path::new("/sys/module/page_reporting/parameters/reported_kib").exists() {
        largo_host::skip::skip(
            "reporting_comparison_runs_against_this_host",
            "the host exposes no reporting counters",
        );
        return;
    }
    let figure = std::env::temp_dir().join(format!("largo-reporting-{}.svg", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args([
            "validate",
            "reporting",
            "--size",
            "4G",
            "--idle",
            "16s",
            "--json",
            "--plot",
        ])
        .arg(&figure)
        .output()
        .expect("largo runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let j: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    println!(
        "host per pass {} / largo per pass {} / verdict {}",
        j["host_per_pass_kib"], j["largo_per_pass_kib"], j["match"]
    );
    // Whether the two sides agree depends on the host's free lists at that
    // moment (which blocks the 4 GiB came from, how much of Normal the
    // lazily initialising kernel manages by then, what other tests of this
    // run did to host memory): on the quiet host of the notes they agree;
    // on a fragmented one they may not, so the verdict is printed, not
    // asserted. What must hold: the host experiment ran and reported, and
    // the model reported the freed memory in passes 2 s apart.
    // The model boots from an exact snapshot: where the host's free blocks
    // were small, the freed memory merges into little that is reportable
    // on both sides (the host's pcp lists, held in the model, can still
    // complete a few merges the model cannot), so the model may report
    // nothing when the host reports tens of MiB.
    let host: Vec<u64> = serde_json::from_value(j["host_per_pass_kib"].clone()).unwrap();
    assert!(!host.is_empty(), "the host reported: {j}");
    assert!(j["match"].is_boolean());
    assert!(
        j["exact_layout"]["snapshot_free_pages"].as_u64().is_some_and(|n| n > 0),
        "the model was laid out from an exact snapshot: {j}"
    );
    let times: Vec<u64> = j["largo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["t_ms"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 2000), "{times:?}");
    // --plot: both timelines drawn.
    let svg = std::fs::read_to_string(&figure).expect("the figure is written");
    assert!(svg.contains("time since the free (s)") && svg.contains("host") && svg.contains("largo"));
    let _ = std::fs::remove_file(&figure);
}

/// `largo validate --suite programs NAME`: a shipped program (sort-words,
/// whose input the project's script generates) run natively under each
/// configuration and the mix `advise` recommends, on a model of this host,
/// with the estimate of each kernel-time change beside the host's.
#[test]
fn the_programs_suite_sets_estimates_beside_the_hosts_changes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "the_programs_suite_sets_estimates_beside_the_hosts_changes";
    if !largo_host::skip::host_ready(name) {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/recorded-programs.sh");
    let inputs = Command::new("sh").arg(script).arg("corpus-inputs").output();
    match inputs {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            largo_host::skip::skip(
                name,
                &format!("no inputs: {}", String::from_utf8_lossy(&o.stderr).trim()),
            );
            return;
        }
        Err(e) => {
            largo_host::skip::skip(name, &format!("no inputs: {e}"));
            return;
        }
    }
    let cache = std::env::temp_dir().join(format!("largo-programs-suite-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args([
            "validate",
            "--suite",
            "programs",
            "sort-words",
            "--repeats",
            "2",
            "--no-recalibrate",
            "--json",
        ])
        .env("LARGO_CACHE_DIR", &cache)
        .output()
        .expect("largo runs");
    let err = String::from_utf8_lossy(&out.stderr);
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(rows.len(), 5, "4 configurations and the recommendation: {err}");
    assert!(rows.iter().all(|r| r["program"] == "sort-words"));
    assert_eq!(rows[0]["config"], "4K");
    assert_eq!(rows[0]["host_kernel_change_pct"], 0.0);
    assert!(
        rows[4]["config"].as_str().unwrap().starts_with("recommended: "),
        "{}",
        rows[4]
    );
    for r in &rows {
        assert_eq!(r["host_kernel_runs_ns"].as_array().unwrap().len(), 2, "{r}");
        assert!(r["host_kernel_ms"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(
            r["est_kernel_change_pct"].is_number() && r["agrees"].is_boolean(),
            "{r}"
        );
    }
    // sort's faults at 4K are the trace's, on the host too.
    assert_eq!(rows[0]["within_tolerance"], true, "{}", rows[0]);
    // Sorting 27 MB with 64K folios: largo estimates a large saving. Its
    // share of the whole kernel time divides by the host's noisy baseline
    // (42-170 ms here), so the size is judged on the estimates alone.
    let k64 = rows.iter().find(|r| r["config"] == "4K+64K").expect("4K+64K");
    assert!(k64["est_kernel_change_pct"].as_f64().unwrap() < 0.0, "{k64}");
    let est_ms = |r: &serde_json::Value| r["est_anon_kernel_ms"].as_f64().expect("est_anon_kernel_ms");
    assert!(est_ms(k64) < 0.5 * est_ms(&rows[0]), "{k64} against {}", rows[0]);
    assert!(!cache.exists(), "--no-recalibrate caches nothing");
}

#[test]
fn entries_validation_times_the_memory_syscalls_and_restores_tracing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "entries_validation_times_the_memory_syscalls_and_restores_tracing";
    if !largo_host::skip::recorder_ready(name) {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/recorded-programs.sh");
    match Command::new("sh").arg(script).arg("corpus-inputs").output() {
        Ok(o) if o.status.success() => {}
        other => {
            largo_host::skip::skip(name, &format!("no inputs: {other:?}"));
            return;
        }
    }
    let before = recorder_settings();
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(["validate", "entries", "sort-words", "--runs", "2", "--json"])
        .output()
        .expect("largo runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(recorder_settings(), before, "THP and tracefs settings restored");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let munmap = |kib: u64| {
        lines
            .iter()
            .find(|l| l["call"] == "munmap" && l["folio_kib"] == kib)
            .unwrap_or_else(|| panic!("munmap at {kib}K in {lines:?}"))
            .clone()
    };
    let (m4, m64) = (munmap(4), munmap(64));
    assert!(m4["host_ms"].as_f64().unwrap() > 0.0 && m4["largo_ms"].as_f64().unwrap() > 0.0);
    // Unmapping 64K folios is cheaper on both sides (fewer folios and rmap calls).
    assert!(m64["host_change_pct"].as_f64().unwrap() < 0.0, "{m64}");
    assert!(m64["largo_change_pct"].as_f64().unwrap() < 0.0, "{m64}");
}

#[test]
fn bench_tlb_and_contention_measure_the_host_side() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "bench_tlb_and_contention_measure_the_host_side";
    if !largo_host::skip::host_ready(name) {
        return;
    }
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_largo"))
            .args(args)
            .output()
            .expect("largo runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let tlb = json(&[
        "bench",
        "tlb",
        "--ranges",
        "16M",
        "--sizes",
        "4K,2M",
        "--patterns",
        "chase",
        "--trials",
        "1",
        "--repeats",
        "1",
        "--steps",
        "100000",
        "--json",
    ]);
    assert_eq!(tlb.len(), 2);
    for c in &tlb {
        assert!(c["host_ns"].as_f64().unwrap() > 0.0, "{c}");
        assert!(
            c["host_folio_share"].as_f64().unwrap() > 0.9,
            "the size asked was mapped: {c}"
        );
    }
    let cont = json(&[
        "bench",
        "contention",
        "--sizes",
        "4K",
        "--size",
        "16M",
        "--iterations",
        "2",
        "--rounds",
        "1",
        "--json",
    ]);
    assert_eq!(cont.len(), 2, "processes and threads");
    for c in &cont {
        assert!(c["host_ns_per_page_1"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["largo_change_pct"].as_f64().unwrap() >= 0.0, "{c}");
    }
}

#[test]
fn calibrate_reclaim_fits_memcg_reclaim_to_zram() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "calibrate_reclaim_fits_memcg_reclaim_to_zram";
    if !largo_host::skip::host_ready(name) {
        return;
    }
    if !largo_host::hostswap::active_swaps().is_empty()
        || !std::path::Path::new(largo_host::hostswap::MEMCG_ROOT).exists()
    {
        largo_host::skip::skip(name, "the host swaps already or has no cgroup v1 memory controller");
        return;
    }
    // A host point is its least limited run less its least unlimited one
    // over five rounds of system time; in one full-suite run on this VM a
    // point's unlimited runs spread from 151 to 193 ms and one point missed
    // by 25.5%. A point may miss by a quarter; the fit as a whole may not.
    // On a noisier day the unlimited runs of one point spread from 54 to
    // 366 ms, so a calibration whose fit misses is made once more: the
    // fit must reproduce the host in one of two calibrations.
    let mut misses = Vec::new();
    for _ in 0..2 {
        let (errors, text) = calibrate_reclaim_once();
        let mean_abs = errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64;
        if errors.iter().all(|e| e.abs() < 35.0) && mean_abs < 20.0 {
            return;
        }
        misses.push(format!("{errors:?}\n{text}"));
    }
    panic!("the fit missed the host in both calibrations:\n{}", misses.join("\n"));
}

/// One `largo calibrate --reclaim`, its terms checked: each point's error
/// (the fit against the host, in percent) and the printed table.
fn calibrate_reclaim_once() -> (Vec<f64>, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("profile.json");
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(["calibrate", "--reclaim", "--rounds", "5", "--output"])
        .arg(&file)
        .output()
        .expect("largo runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        largo_host::hostswap::active_swaps().is_empty(),
        "the zram device is swapped off"
    );
    let p = largo_workloads::cost::Profile::from_json(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // Every term is fitted, none negative. Reclaiming and compressing a
    // 4K page (a folio's reclaim plus its swap-out: at 4K the two counts
    // are equal, so only their sum is well determined on a noisy host,
    // where a 64K pass can take longer than a 4K one), and reading one
    // back, cost between a few hundred ns and tens of us on any current
    // machine.
    for term in ["reclaim_folio", "swap_out", "swap_in"] {
        let ns = p.cost(term);
        assert!(ns.is_finite() && ns >= 0.0, "{term} = {ns} ns\n{text}");
        assert!(!p.priors.iter().any(|t| t == term), "{term} is fitted");
    }
    // swap_in is as poorly determined alone on this 2-vCPU VM (fits of
    // 0 and 84 ns happened while the points were reproduced within 20%):
    // bounded with the rest of a page's round trip.
    let round_trip = p.cost("reclaim_folio") + p.cost("swap_out") + p.cost("swap_in");
    for (what, ns) in [
        ("reclaim_folio + swap_out", p.cost("reclaim_folio") + p.cost("swap_out")),
        ("reclaim_folio + swap_out + swap_in", round_trip),
    ] {
        assert!((100.0..50_000.0).contains(&ns), "{what} = {ns} ns\n{text}");
    }
    // Each point's reclaim time is reproduced by the fit.
    let errors: Vec<f64> = text
        .lines()
        .filter(|l| l.contains("swap-pressure"))
        .filter_map(|l| {
            l.split('┆')
                .nth(4)?
                .trim()
                .trim_end_matches(['%', '│', ' '])
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(errors.len(), 4, "{text}");
    (errors, text)
}

/// The free blocks of orders 0 and 1 of every zone, as /proc/buddyinfo
/// counts them now.
fn small_free_blocks() -> [i64; 2] {
    let text = std::fs::read_to_string("/proc/buddyinfo").expect("/proc/buddyinfo");
    let mut sums = [0i64; 2];
    for line in text.lines() {
        // "Node 0, zone   Normal   c0 c1 c2 ..."
        let counts: Vec<i64> = line.split_whitespace().skip(4).filter_map(|w| w.parse().ok()).collect();
        for (sum, count) in sums.iter_mut().zip(&counts) {
            *sum += count;
        }
    }
    sums
}

/// Waits (up to 30 s) until the host's small free blocks hold about
/// still for a second: a test before this one may leave the host freeing
/// memory for seconds (on an AMD EPYC host, three snapshots 2 s apart each found a
/// thousand order-0 or order-1 blocks fewer than pagetypeinfo counted
/// right after them; alone, the snapshot agreed at once).
fn wait_for_settled_free_blocks() {
    let mut last = small_free_blocks();
    for _ in 0..30 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let now = small_free_blocks();
        // Half the snapshot check's tolerance (a fifth of the count plus
        // 200) in one second: an idle VM host may move thousands of
        // order-0 blocks a second (2,000-3,000 measured on one with
        // kdamond running), which only matters when few are free.
        let settled = now.iter().zip(&last).all(|(a, b)| (a - b).abs() <= b / 10 + 100);
        if settled {
            return;
        }
        last = now;
    }
    println!("the host's free blocks did not settle in 30 s; snapshotting anyway");
}

#[test]
fn a_host_snapshot_boots_a_model_and_predicts_a_burst() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "a_host_snapshot_boots_a_model_and_predicts_a_burst";
    if !largo_host::skip::host_ready(name) {
        return;
    }
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_largo"))
            .args(args)
            .output()
            .expect("largo runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().to_path_buf();
    let file = dir.join("host.lsnap");
    // The free runs split into buddy blocks as pagetypeinfo counted them.
    // The host moves between the two reads (a test before this one may
    // still be freeing memory: 1847 order-0 blocks counted, 7 found once),
    // so a snapshot that disagrees is taken again, up to three times.
    // pagetypeinfo caps each count at 100000 (">100000"): a capped sum is a
    // lower bound.
    let agrees = |j: &serde_json::Value| {
        j["free_blocks"].as_array().unwrap().iter().all(|pair| {
            let (found, counted) = (pair[0].as_f64().unwrap(), pair[1].as_f64().unwrap());
            if counted >= 100_000.0 {
                found >= 0.8 * counted
            } else {
                (found - counted).abs() <= 0.2 * counted + 200.0
            }
        })
    };
    let mut tries = Vec::new();
    let j = loop {
        wait_for_settled_free_blocks();
        let j: serde_json::Value = serde_json::from_str(
            run(&["host", "snapshot", "-o", file.to_str().unwrap(), "--json"])
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert!(
            j["file_bytes"].as_u64().unwrap() > 0 && j["pages"]["free"].as_u64().unwrap() > 0,
            "{j}"
        );
        if agrees(&j) {
            break j;
        }
        tries.push(j);
        assert!(tries.len() < 3, "three snapshots disagree with pagetypeinfo: {tries:?}");
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    // The model booted from it has those free blocks.
    let buddy = run(&[
        "show",
        "buddyinfo",
        "--machine",
        &format!("snapshot:{}", file.display()),
    ]);
    let order10: u64 = buddy
        .lines()
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum();
    let snap10 = j["free_blocks"][10][0].as_u64().unwrap();
    // Whole 2 MiB runs the snapshot takes for pcp-free are free in the
    // model, where each may merge into one more order-10 block.
    let pcp_runs = j["pages"]["pcp-free"].as_u64().unwrap_or(0) / 512;
    let slack = snap10 / 50 + 2;
    assert!(
        order10 + slack >= snap10 && order10 <= snap10 + slack + pcp_runs,
        "{buddy} vs {snap10} (+ up to {pcp_runs} from pcp-free runs)"
    );
    // The invariant checkers hold on a machine booted from it, through a run.
    run(&[
        "run",
        "page_fault1:size=64M,iterations=1",
        "--machine",
        &format!("snapshot:{}", file.display()),
        "--check",
        "2000",
        "--thp",
        "64K,2M",
    ]);
    // A small burst on the quiet host: every counter agrees.
    let burst = run(&["validate", "burst", "--size", "256M", "--sizes", "64K,2M"]);
    assert!(burst.contains("AGREE"), "{burst}");
    // The fragmenter fragments and lets go.
    let frag = run(&["host", "fragment", "--fill", "256M", "--for", "1s"]);
    assert!(frag.contains("every other page freed"), "{frag}");
}

#[test]
fn host_thpmaps_counts_a_known_layout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "host_thpmaps_counts_a_known_layout";
    if !largo_host::skip::host_ready(name) {
        return;
    }
    use largo_physmem::host::Window;
    // 64 MiB of 64K folios at a 2 MiB boundary, then 32 KiB unmapped 16 KiB
    // into the folio at 8 MiB: two VMAs, each with 16 KiB of that folio.
    let size = 64u64 << 20;
    let mut guard = largo_host::knobs::KnobGuard::acquire().unwrap();
    guard.set_all(&largo_host::record::thp_only(64 << 10).unwrap()).unwrap();
    let mut w = Window::reserve(size, 2 << 20, 0).unwrap();
    let base = w.base();
    w.map(base, size, true).unwrap();
    w.touch((0..size / 4096).map(|i| base + i * 4096), true).unwrap();
    guard.restore().unwrap();
    w.unmap(base + (8 << 20) + (16 << 10), 32 << 10).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args([
            "host",
            "thpmaps",
            "--pid",
            &std::process::id().to_string(),
            "--cont",
            "64K",
            "--json",
        ])
        .output()
        .expect("largo runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let vmas: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let vma = |start: u64| {
        vmas.iter()
            .find(|v| v["start"] == start)
            .unwrap_or_else(|| panic!("no VMA at {start:#x}"))
            .clone()
    };
    let (front, back) = (vma(base), vma(base + (8 << 20) + (48 << 10)));
    let kb = |v: &serde_json::Value, k: &str| v["stats"][k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert_eq!(kb(&front, "anon-thp-pte-aligned-64kB"), 8 << 10, "{front}");
    assert_eq!(kb(&front, "anon-thp-pte-partial"), 16, "{front}");
    assert_eq!(kb(&back, "anon-thp-pte-partial"), 16, "{back}");
    assert_eq!(kb(&back, "anon-thp-pte-aligned-64kB"), (56 << 10) - 64, "{back}");
    assert_eq!(kb(&back, "anon-cont-pte-aligned-64kB"), (56 << 10) - 64, "{back}");
    assert_eq!(kb(&back, "anon-thp-pte-unaligned-64kB"), 0, "{back}");
    drop(w);
}
