//! Running the `largo` binary from the CLI tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A file written for one test in a directory of its own, both removed
/// when the value is dropped (the test's end, failed or not).
pub struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TempFile {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// `text` written to a file named `name` in a fresh temporary directory.
pub fn temp_file(name: &str, text: &str) -> TempFile {
    let dir = tempfile::Builder::new()
        .prefix("largo-cli-test-")
        .tempdir()
        .expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("the file is written");
    TempFile { _dir: dir, path }
}

pub fn largo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(args)
        .output()
        .expect("largo runs")
}

/// `largo ARGS` with extra environment variables.
pub fn largo_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_largo"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("largo runs")
}

/// The standard output of a command that must succeed.
pub fn stdout(args: &[&str]) -> String {
    let out = largo(args);
    assert!(
        out.status.success(),
        "largo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// One JSON object per output line.
pub fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    stdout(args)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// Bad input: exit status 2 and a message on stderr containing `needle`.
pub fn assert_usage_error(args: &[&str], needle: &str) {
    let out = largo(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "largo {args:?}: {err}");
    assert!(err.contains(needle), "largo {args:?}: {err:?} does not say {needle}");
}
