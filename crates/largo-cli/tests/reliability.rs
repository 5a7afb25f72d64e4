//! What a user meets when things go wrong: a closed pipe, a trace that
//! would crash its program, input of attacker-chosen size, bad values.

mod common;

use std::process::{Command, Stdio};

use common::{assert_usage_error, json_lines, largo};

/// Runs largo with its standard output a pipe whose reader is already
/// gone: the first write fails with EPIPE.
fn with_closed_stdout(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("largo runs")
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let cases: [&[&str]; 6] = [
        &["list", "knobs"],
        &["list", "workloads", "--csv"],
        &["hotplug", "list"],
        &["show", "zoneinfo"],
        &["run", "page_fault1:iterations=1,size=8M", "--thp", "64K"],
        &["bench", "gigantic", "--mem", "1G", "--steps", "1"],
    ];
    for args in cases {
        let out = with_closed_stdout(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "largo {args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "largo {args:?}: {err}"
        );
        assert!(err.trim().is_empty(), "largo {args:?} printed {err:?}");
    }
}

#[test]
fn a_trace_that_touches_unmapped_memory_reports_sigsegv_and_fails() {
    let path = common::temp_file(
        "segv.trace",
        "largo-trace 1\n\
         # a mapping, a write into it, then writes where nothing is mapped\n\
         7 mmap 0x7f0000000000 64K rw- private,anonymous\n\
         7 touch 0x7f0000000000 8K w\n\
         7 fault 0x7f0000100000 w\n\
         7 mprotect 0x7f0000000000 64K r--\n\
         7 fault 0x7f0000000000 w\n\
         7 exit\n",
    );
    let p = path.to_str().unwrap();
    let out = largo(&["replay", p, "--thp", "64K"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("2 access(es) would raise SIGSEGV"), "{err}");
    assert!(
        err.contains("line 5 (event 2): SIGSEGV at 0x7f0000100000: a write by pid 7 (SEGV_MAPERR"),
        "{err}"
    );
    assert!(err.contains("line 7 (event 4): SIGSEGV at 0x7f0000000000"), "{err}");
    assert!(err.contains("SEGV_ACCERR"), "{err}");
    // The results are printed either way; --keep-going exits 0.
    assert!(String::from_utf8_lossy(&out.stdout).contains("pgfault"));
    let j = &json_lines(&["replay", p, "--thp", "64K", "--json", "--keep-going"])[0];
    assert_eq!(j["problems"]["segv"], 2);
    assert_eq!(j["problems"]["segv_at"][0]["event"], 2);
    assert_eq!(j["problems"]["segv_at"][0]["code"], "SEGV_MAPERR");
    assert_eq!(j["mthp"]["64kB"]["anon_fault_alloc"], 1);
    // A fault on a file mapping is not modelled, but it is no crash.
    let file = common::temp_file(
        "file.trace",
        "largo-trace 1\n7 mmap 0x7f0000000000 64K r-- private\n7 fault 0x7f0000001000 r\n7 exit\n",
    );
    let j = &json_lines(&["replay", file.to_str().unwrap(), "--json"])[0];
    assert_eq!(j["problems"]["segv"], 0);
}

#[test]
fn the_shipped_programs_replay_without_a_crash() {
    for name in ["lua-build", "sqlite-cc", "python-compileall"] {
        let j = &json_lines(&["replay", name, "--machine", "x86_64", "--json"])[0];
        assert_eq!(j["problems"]["segv"], 0, "{name}: {}", j["problems"]);
    }
}

#[test]
fn input_sizes_are_bounded() {
    // move_pages over 16 TiB of address space: the work follows what is
    // mapped, not the length (no 4-billion-entry arrays).
    let path = common::temp_file(
        "huge-move.trace",
        "largo-trace 1\n\
         1 mmap 0x7f0000000000 1M rw- private,anonymous\n\
         1 touch 0x7f0000000000 1M w\n\
         1 move_pages 0x700000000000 16T 1\n\
         1 exit\n",
    );
    let started = std::time::Instant::now();
    let j = &json_lines(&[
        "replay",
        path.to_str().unwrap(),
        "--nodes",
        "2",
        "--mem",
        "1G",
        "--json",
    ])[0];
    assert_eq!(j["vmstat"]["pgmigrate_success"], 256);
    assert!(started.elapsed().as_secs() < 30, "took {:?}", started.elapsed());
    // Nested gzip is refused, not recursed into.
    let mut bytes = b"largo-trace 1\n1 exit\n".to_vec();
    for _ in 0..200 {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &bytes).unwrap();
        bytes = enc.finish().unwrap();
    }
    let nested = common::temp_file("nested.trace.gz", "");
    std::fs::write(&nested, bytes).unwrap();
    assert_usage_error(&["replay", nested.to_str().unwrap()], "gzip data inside gzip data");
}

#[test]
fn bad_input_names_what_is_accepted() {
    let dir = common::temp_file("plain.trace.gz", "largo-trace 1\n1 exit\n");
    let cases: [(&[&str], &str); 9] = [
        (&["run", "--config", "nocolon"], "expected NAME:FLAGS"),
        (&["run", "--config", ":--thp 64K"], "needs a name"),
        (&["run", "--config", "a:--mode thread"], "configuration a"),
        (
            &["run", "page_fault1", "--profile", "/nonexistent"],
            "--profile /nonexistent",
        ),
        (&["run", "--mode", "fork"], "[possible values: process, thread]"),
        (&["show", "nosuchfile"], "[possible values: buddyinfo"),
        (
            &["list", "stuff"],
            "[possible values: workloads, presets, knobs, events]",
        ),
        (&["replay", "/tmp"], "/tmp is a directory, not a trace file"),
        (&["replay", dir.to_str().unwrap()], "is named .gz but is not gzip data"),
    ];
    for (args, needle) in cases {
        assert_usage_error(args, needle);
    }
}
