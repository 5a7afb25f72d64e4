//! Traces as a user runs them: `largo replay`, traces in `largo run`, the
//! shipped recorded programs, `largo bench replay`.

mod common;

use common::{assert_usage_error, json_lines, stdout};

/// `largo replay PATH ARGS --json`, its one object.
fn replay_json(path: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["replay", path.to_str().unwrap(), "--json"];
    all.extend_from_slice(args);
    json_lines(&all).remove(0)
}

#[test]
fn a_recorded_program_replays_with_the_hosts_allocation_counts() {
    // `largo validate trace` measured these on the Linux 6.18 host the
    // trace was recorded on: the kernel allocated 5646 64 KiB folios for
    // this build with only 64K enabled, and 1028/1007/5646 16K/32K/64K
    // folios with all three.
    let j = &json_lines(&["replay", "lua-build", "--thp", "64K", "--json"])[0];
    assert_eq!(j["workload"], "lua-build");
    assert_eq!(j["mthp"]["64kB"]["anon_fault_alloc"], 5646);
    let j = &json_lines(&["replay", "lua-build", "--thp", "16K,32K,64K", "--json"])[0];
    assert_eq!(j["mthp"]["16kB"]["anon_fault_alloc"], 1028);
    assert_eq!(j["mthp"]["32kB"]["anon_fault_alloc"], 1007);
    assert_eq!(j["mthp"]["64kB"]["anon_fault_alloc"], 5646);
}

#[test]
fn a_recorded_shared_memory_program_replays_with_the_hosts_shmem_counts() {
    // `largo validate trace` measured these on the host (2026-11-24):
    // 1024 64 KiB and 32 2 MiB shmem folios for the 64 MiB buffer.
    let j = &json_lines(&["replay", "python-shm-workers", "--shmem", "64K", "--json"])[0];
    assert_eq!(j["mthp"]["64kB"]["shmem_alloc"], 1024);
    assert_eq!(j["mthp"]["64kB"]["anon_fault_alloc"], 0);
    let j = &json_lines(&["replay", "python-shm-workers", "--shmem", "2M", "--json"])[0];
    assert_eq!(j["mthp"]["2048kB"]["shmem_alloc"], 32);
    assert_eq!(j["vmstat"]["thp_file_alloc"], 32);
}

#[test]
fn run_without_arguments_includes_the_recorded_programs_at_4k_pages_only() {
    let out = stdout(&["run"]);
    for name in ["lua-build", "sqlite-cc", "python-compileall"] {
        let at = out
            .lines()
            .position(|l| l == name)
            .unwrap_or_else(|| panic!("no table for {name}"));
        let header = out.lines().nth(at + 2).unwrap();
        assert!(
            header.contains("4K+16K+32K+64K") && !header.contains("64K-pages"),
            "{header}"
        );
        let note = out.lines().skip(at).find(|l| l.starts_with("not run under")).unwrap();
        assert!(
            note.contains("16K-pages, 64K-pages") && note.contains("4 KiB"),
            "{note}"
        );
    }
    // A program kept out of the default suite (its time is unchanged).
    assert!(!out.lines().any(|l| l == "python-shm-workers"));
}

#[test]
fn a_hand_written_trace_replays_and_run_accepts_it_too() {
    let path = common::temp_file(
        "two-blocks.trace",
        "largo-trace 1\n# two 64K blocks, one written, one read\n\
         1 mmap 0x7f0000000000 128K rw- private,anonymous\n\
         1 touch 0x7f0000000000 64K w\n\
         1 touch 0x7f0000010000 64K r\n\
         1 exit\n",
    );
    let p = path.to_str().unwrap();
    for cmd in ["replay", "run"] {
        let j = &json_lines(&[cmd, p, "--thp", "64K", "--json"])[0];
        assert_eq!(j["mthp"]["64kB"]["anon_fault_alloc"], 1, "{cmd}");
        // The read faults map the zero page, one fault per 4 KiB page.
        assert_eq!(j["vmstat"]["pgfault"], 1 + 16, "{cmd}");
    }
}

#[test]
fn bad_traces_and_misuse_say_where_and_why() {
    let bad = common::temp_file(
        "bad.trace",
        "largo-trace 1\n1 mmap 0x7f0000000000 64K rw- private,anonymous\n1 tuch 0x7f0000000000 4K w\n",
    );
    let cases: [(&[&str], &str); 4] = [
        (&["replay", bad.to_str().unwrap()], "line 3"),
        (&["replay", "page_fault1"], "built-in"),
        (&["replay", "/no/such.trace"], "no such trace file"),
        (&["replay", "lua-build", "--machine", "arm64-64k"], "4 KiB"),
    ];
    for (args, needle) in cases {
        assert_usage_error(args, needle);
    }
}

#[test]
fn bench_replay_reports_events_per_second_for_each_trace() {
    let lines = json_lines(&["bench", "replay", "python-compileall", "--runs", "1", "--json"]);
    assert_eq!(lines.len(), 1);
    let j = &lines[0];
    assert_eq!(j["bench"], "replay");
    assert!(j["events"].as_u64().unwrap() > 5000);
    assert!(j["page_faults"].as_u64().unwrap() > 5000);
    assert!(j["replay_events_per_s"].as_f64().unwrap() > 0.0);
    assert!(j["decode_events_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_migrate_reports_each_cell_and_the_memcpy_limit() {
    let lines = json_lines(&["bench", "migrate", "--quick", "--runs", "1", "--json"]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // 3 rows x (vanilla + batch + mt_1..mt_cpus + memcpy_1..memcpy_cpus).
    assert_eq!(lines.len(), 3 * (2 + 2 * cpus));
    for j in &lines {
        assert_eq!(j["bench"], "migrate");
        assert!(j["gbps"].as_f64().unwrap() > 0.0, "{j}");
        assert!(j["copy_ns"].as_f64().unwrap() > 0.0, "{j}");
        let memcpy = j["column"].as_str().unwrap().starts_with("memcpy_");
        // The kernel's work around the copy is estimated for every move
        // (never for memcpy), and it is per folio: 4K rows pay it 256
        // times, the 2M row 4 times.
        let kernel = j["kernel_ns"].as_f64().unwrap();
        assert_eq!(kernel == 0.0, memcpy, "{j}");
    }
    let cell = |kib: u64, col: &str| {
        lines
            .iter()
            .find(|j| j["folio_kib"] == kib && j["column"] == col)
            .unwrap_or_else(|| panic!("no {col} cell at {kib} KiB"))
    };
    for col in ["vanilla", "batch", "mt_1", "memcpy_1"] {
        cell(2048, col);
    }
    let per_folio = |kib: u64, nr: f64| cell(kib, "vanilla")["kernel_ns"].as_f64().unwrap() / nr;
    assert!(
        per_folio(4, 256.0) > 300.0,
        "a 4K folio's migration costs the kernel more than its copy setup"
    );
    assert!(
        per_folio(4, 256.0) < per_folio(2048, 4.0),
        "a 2M folio's work (its tails, a PMD flush) is more"
    );
    // --folio keeps the rows of one size; a size with no row is a usage error.
    let only = json_lines(&["bench", "migrate", "--quick", "--runs", "1", "--json", "--folio", "2M"]);
    assert_eq!(only.len(), 2 + 2 * cpus);
    assert!(only.iter().all(|j| j["folio_kib"] == 2048));
    assert_usage_error(
        &["bench", "migrate", "--quick", "--folio", "8K"],
        "no row of that folio size",
    );
}

#[test]
fn a_trace_can_move_pages_between_nodes() {
    let path = common::temp_file(
        "move.trace",
        "largo-trace 1\n\
         1 mmap 0x7f0000000000 2M rw- private,anonymous\n\
         1 touch 0x7f0000000000 2M w\n\
         1 move_pages 0x7f0000000000 1M 1\n\
         1 exit\n",
    );
    let replay = |extra: &[&str]| replay_json(&path, &[&["--nodes", "2", "--mem", "4G"], extra].concat());
    let j = replay(&[]);
    assert_eq!(j["vmstat"]["pgmigrate_success"], 256);
    let j = replay(&["--thp", "2M"]);
    assert_eq!(j["vmstat"]["pgmigrate_success"], 512, "the THP moves whole");
    assert_eq!(j["vmstat"]["thp_migration_success"], 1);
}

#[test]
fn a_trace_can_take_a_memory_block_offline_and_online() {
    let path = common::temp_file(
        "hotplug.trace",
        "largo-trace 1\n\
         1 mmap 0x7f0000000000 900M rw- private,anonymous\n\
         1 touch 0x7f0000000000 900M w\n\
         1 memory_offline 300\n\
         1 memory_offline 0\n\
         1 exit\n",
    );
    let replay = |extra: &[&str]| replay_json(&path, &[&["--mem", "1G"], extra].concat());
    // 2 MiB blocks: block 300 is full of the mapping's pages, which move;
    // block 0 (the BIOS hole) is refused and the replay goes on.
    let j = replay(&["--memory-block-size", "2M"]);
    assert_eq!(j["vmstat"]["pgmigrate_success"], 512);
    let base = replay(&[]);
    let kib = |j: &serde_json::Value| j["meminfo"]["MemTotal"].as_u64().unwrap();
    assert_eq!(kib(&base) - kib(&j), 2048, "one 2 MiB block left MemTotal");
}

#[test]
fn move_pages_is_charged_to_its_own_entry() {
    let lines = json_lines(&["run", "move-pages:size=4M", "--nodes", "2", "--json"]);
    for j in &lines {
        let e = &j["cost"]["by_entry"];
        let migrate = e["migrate"].as_f64().unwrap();
        // 1024 4K pages (or their large folios) copied at least.
        assert!(migrate > 1024.0 * 100.0, "{e}");
        assert_eq!(e["compaction"].as_f64().unwrap(), 0.0, "{e}");
    }
}
