//! The repository's promises to a newcomer stay true.

use std::path::PathBuf;

fn repo_file(path: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = repo_file("README.md");
    let ci = repo_file(".ci/run");
    let ci_command = ci
        .lines()
        .find_map(|l| l.strip_prefix("exec "))
        .expect(".ci/run execs one command")
        .trim();
    let section = readme
        .split("Run all tests:")
        .nth(1)
        .expect("README has a test command");
    let readme_command = section.lines().map(str::trim).find(|l| !l.is_empty()).unwrap();
    assert_eq!(readme_command, ci_command);
}

#[test]
fn readme_run_command_names_a_real_subcommand() {
    let readme = repo_file("README.md");
    let section = readme
        .split("built-in default machine")
        .nth(1)
        .expect("README has a run command");
    let command = section
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("cargo run"))
        .unwrap();
    let args: Vec<&str> = command.split(" -- ").nth(1).unwrap().split_whitespace().collect();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
