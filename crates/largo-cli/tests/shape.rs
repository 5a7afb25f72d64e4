//! The command's shape as a user meets it: every WORKLOAD place takes
//! traces and shipped programs, tables fit the terminal, CSV beside JSON,
//! completions and manual pages, the event list.

mod common;

use std::process::Command;

use common::{largo, stdout};

#[test]
fn show_and_hotplug_take_traces_and_recorded_programs() {
    // A shipped program, replayed without its exits: its processes' memory
    // is still mapped at the end.
    let thp = stdout(&["show", "thpmaps", "lua-build", "--thp", "16K,32K,64K"]);
    let total: u64 = thp
        .lines()
        .find(|l| l.starts_with("anon-thp-pte-aligned-64kB:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("a 64kB line");
    assert!(total > 0, "{thp}");
    let dir = std::env::temp_dir().join(format!("largo-shape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.trace");
    std::fs::write(
        &trace,
        "largo-trace 1\n1 mmap 0x7f0000000000 8M rw- private,anonymous\n1 touch 0x7f0000000000 8M w\n1 exit\n",
    )
    .unwrap();
    let meminfo = stdout(&["show", "meminfo", trace.to_str().unwrap()]);
    assert!(
        meminfo
            .lines()
            .any(|l| l.starts_with("AnonPages:") && l.ends_with(" 8192 kB")),
        "{meminfo}"
    );
    let out = stdout(&[
        "hotplug",
        "--workload",
        trace.to_str().unwrap(),
        "--mem",
        "1G",
        "--memory-block-size",
        "2M",
        "list",
    ]);
    assert!(out.starts_with("block_size_bytes 200000\n"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The widest line of `text`, in characters.
fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn tables_fit_the_width_they_are_given() {
    for (args, width) in [(&["list", "workloads"][..], 80), (&["list", "knobs"][..], 100)] {
        let out = Command::new(env!("CARGO_BIN_EXE_largo"))
            .args(args)
            .env("COLUMNS", width.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let table: String = text
            .lines()
            .filter(|l| l.starts_with(['┌', '│', '╞', '├', '└']))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(widest(&table) <= width, "{args:?} at {width}:\n{text}");
    }
    // Unknown width (not a terminal, no COLUMNS): the default.
    let out = Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(["list", "workloads"])
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(widest(text.lines().next().unwrap()) <= 160, "{text}");
}

#[test]
fn csv_beside_json() {
    let csv = stdout(&["run", "page_fault1:iterations=1,size=8M", "--thp", "64K", "--csv"]);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("workload,config,row,value"));
    let pgfault = lines.find(|l| l.contains(",pgfault,")).expect("a pgfault row");
    assert_eq!(
        pgfault,
        "\"page_fault1:size=8M,iterations=1,hugepage=0\",config,pgfault,128"
    );
    assert!(!csv.contains('┌'), "no drawn table in CSV");
    let list = stdout(&["list", "events", "--csv"]);
    assert!(list.starts_with("event,binary tag,text form\n"), "{list}");
    assert!(list.contains("mmap,4,PID mmap ADDR LEN PROT FLAGS"), "{list}");
    let json = stdout(&["list", "presets", "--json"]);
    let first: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(first["preset"], "x86_64");
    let out = largo(&["list", "presets", "--json", "--csv"]);
    assert_eq!(out.status.code(), Some(2), "--json and --csv exclude each other");
}

#[test]
fn completions_and_manual_pages_come_from_the_command_definitions() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&["completions", shell]);
        for sub in ["run", "replay", "validate", "advise", "completions"] {
            assert!(script.contains(sub), "{shell}: {sub} missing");
        }
    }
    let man = stdout(&["man"]);
    assert!(man.contains(".TH largo 1"), "{man}");
    assert!(man.contains("validate"), "{man}");
    let dir = std::env::temp_dir().join(format!("largo-man-{}", std::process::id()));
    let out = largo(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success());
    let run_page = std::fs::read_to_string(dir.join("largo-run.1")).unwrap();
    assert!(run_page.contains("\\-\\-config"), "{run_page}");
    assert!(
        !dir.join("largo-record-exec.1").exists(),
        "hidden commands have no page"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
