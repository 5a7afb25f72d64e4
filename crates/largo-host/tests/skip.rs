//! A test that cannot run here says so where it shows: the SKIPPED line
//! of `largo_host::skip` reaches the output of a plain `cargo test` (no
//! `--nocapture`), past the harness's capture of the print macros.

use std::process::Command;

/// Prints a skip line when asked to (by the test below).
#[test]
fn skip_line_demo() {
    if std::env::var_os("LARGO_SKIP_DEMO").is_some() {
        println!("captured: the harness hides this");
        largo_host::skip::skip("skip_line_demo", "asked to by the test that checks it shows");
    }
}

#[test]
fn skip_lines_show_without_nocapture() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "skip_line_demo", "--test-threads=1"])
        .env("LARGO_SKIP_DEMO", "1")
        .output()
        .unwrap();
    let all = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("SKIPPED skip_line_demo: asked to"),
        "the skip line is visible: {all}"
    );
    assert!(!all.contains("captured: the harness hides this"), "{all}");
}
