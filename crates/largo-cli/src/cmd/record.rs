//! `largo record -o FILE -- CMD [ARGS...]` (root): the command runs on
//! this host with every THP size off and ASLR off while tracefs captures
//! what its processes do to memory; the trace goes to FILE (`.ltb` binary,
//! `.gz` compressed, anything else text).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context, Result};
use clap::Args;
use largo_host::record::{interrupt, record};

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Where to write the trace (.trace text, .ltb binary, + .gz).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RecordExecArgs {
    /// Do not stop for a recorder (a native run with ASLR off).
    #[arg(long)]
    pub no_stop: bool,
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: &RecordArgs) -> Result<()> {
    if let Some(reason) = largo_host::record::unavailable_reason() {
        bail!("cannot record on this host: {reason}");
    }
    // Fail before running the command, not after: the output must be
    // creatable (the file is written whole at the end).
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.output)
        .with_context(|| format!("cannot write the trace to {}", args.output.display()))?;
    // Ctrl-C or SIGTERM: kill the command; the recording ends and every
    // tracefs and sysfs setting is restored as on any other exit.
    let _ = ctrlc::set_handler(interrupt);
    let exe = std::env::current_exe().context("finding the largo binary")?;
    let mut launcher = std::process::Command::new(exe);
    launcher.arg("record-exec").arg("--").args(&args.command);
    let describe = args.command.join(" ");
    let (trace, stats) = record(launcher, &describe, &AtomicBool::new(false))?;
    largo_trace::write_trace(&args.output, &trace).with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!(
        "recorded {}: {} events ({} page faults, {} program images), exit status {}, kernel time {:.1} ms{}",
        args.output.display(),
        stats.events,
        stats.faults,
        stats.processes,
        stats.exit_code.map_or("?".to_string(), |c| c.to_string()),
        stats.sys_time_ns as f64 / 1e6,
        if stats.lost > 0 {
            format!("; WARNING: the kernel dropped {} events (buffer full)", stats.lost)
        } else {
            String::new()
        }
    );
    Ok(())
}

/// The launcher: ASLR off, stop for the recorder, exec the command.
pub fn exec(args: &RecordExecArgs) -> Result<()> {
    let err = largo_host::record::exec_for_record(&args.command, !args.no_stop);
    bail!("cannot run {}: {err}", args.command.first().map_or("", String::as_str))
}
