//! `largo record -o FILE -- CMD [ARGS...]` (root): the command runs on
//! this host with every THP size off and ASLR off while tracefs captures
//! what its processes do to memory; the trace goes to FILE (`.ltb` binary,
//! `.gz` compressed, anything else text).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context, Result};
use clap::Args;
use largo_host::record::{interrupt, record_with, RecordLimits};

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Where to write the trace (.trace text, .ltb binary, + .gz).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// After recording, run the command N more times untraced (every THP
    /// size off, ASLR off) and keep their mean kernel time in the trace's
    /// header (`untraced_sys_time_ns`): the program's whole kernel time,
    /// which `largo advise` states its estimates against.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=50))]
    pub baseline_runs: u64,
    /// Run the command in a memory cgroup of its own with this limit
    /// (cgroup v1 `memory.limit_in_bytes`, K/M/G suffixes); the trace's
    /// header keeps it and a replay runs under the same limit unless its
    /// configuration sets one (`--memcg-max`).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub memcg_max: Option<u64>,
    /// A zram swap device of this size swapped on while recording (the
    /// host must have no swap on); the header keeps it for replays
    /// (`--swap SIZE:zram`).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub swap: Option<u64>,
    /// Send the command's standard output to standard error (when another
    /// command records on its behalf and owns standard output).
    #[arg(skip)]
    pub stdout_to_stderr: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    largo_types::parse_size(text).map_err(|e| e.to_string())
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
    crate::embed::on_interrupt(interrupt);
    // This very binary, also if its file was replaced since it started
    // (a rebuild while it runs): /proc/self/exe still opens the image.
    let exe = crate::embed::largo_exe()?;
    let mut launcher = std::process::Command::new(exe);
    launcher.arg("record-exec").arg("--").args(&args.command);
    if args.stdout_to_stderr {
        use std::os::fd::AsFd;
        let err = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating stderr")?;
        launcher.stdout(err);
    }
    let describe = args.command.join(" ");
    let limits = RecordLimits {
        memcg_max_bytes: args.memcg_max,
        zram_bytes: args.swap,
    };
    let (mut trace, stats) = record_with(launcher, &describe, &AtomicBool::new(false), &limits)?;
    if args.baseline_runs > 0 {
        let whole = untraced_kernel_time(&args.command, args.baseline_runs as usize)?;
        whole.write_to(&mut trace.header);
        eprintln!(
            "untraced: kernel time {:.1} ms +- {:.1} (95%, {} runs)",
            whole.mean_ns / 1e6,
            whole.ci95_ns / 1e6,
            whole.runs
        );
    }
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

/// A program's whole kernel time with every THP size off, untraced.
pub struct UntracedTime {
    pub mean_ns: f64,
    pub ci95_ns: f64,
    pub runs: usize,
    pub clock: &'static str,
}

impl UntracedTime {
    /// The trace header keys `advise` reads.
    pub fn write_to(&self, header: &mut largo_trace::Header) {
        header.set("untraced_sys_time_ns", format!("{:.0}", self.mean_ns));
        header.set("untraced_sys_time_ci_ns", format!("{:.0}", self.ci95_ns));
        header.set("untraced_runs", self.runs.to_string());
        header.set("untraced_clock", self.clock);
    }
}

/// Runs `command` natively `runs` times (after a warm-up) with every THP
/// size off and ASLR off: the mean kernel time and its 95% interval.
pub fn untraced_kernel_time(command: &[String], runs: usize) -> Result<UntracedTime> {
    let off = largo_host::record::thp_off()?;
    let launcher = || {
        let mut c = std::process::Command::new(&command[0]);
        c.args(&command[1..]);
        c
    };
    let (measured, clock) = largo_host::measured::measure_configs(&[off], &launcher, runs, &mut |_, _| {})?;
    let sys = measured[0].sys_ns;
    Ok(UntracedTime {
        mean_ns: sys.mean,
        ci95_ns: sys.ci95,
        runs,
        clock,
    })
}

/// The launcher: ASLR off, stop for the recorder, exec the command.
pub fn exec(args: &RecordExecArgs) -> Result<()> {
    let err = largo_host::record::exec_for_record(&args.command, !args.no_stop);
    bail!("cannot run {}: {err}", args.command.first().map_or("", String::as_str))
}
