//! `largo show FILE [WORKLOAD]`: a /proc file of the booted machine, or of
//! the machine at the end of a workload, its memory still mapped.

use anyhow::{Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use largo_mm::stats::render::ProcFile;
use largo_mm::Machine;
use largo_workloads::RunOptions;

use super::run::parse_workload;
use crate::args::{boot, MachineArgs, PolicyArgs};
use crate::output::{FormatArgs, Out};

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Which file.
    #[arg(value_parser = proc_file_parser())]
    pub file: ProcFile,
    /// A workload to run first, its memory left mapped: a built-in
    /// specification (anon-w-seq:size=256M), a trace file or a shipped
    /// recorded program (replayed without its exits).
    #[arg(value_name = "WORKLOAD")]
    pub workload: Option<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Tasks running the workload.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub tasks: u32,
    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// The files of `largo show`, named as the kernel's are.
fn proc_file_parser() -> impl clap::builder::TypedValueParser<Value = ProcFile> {
    let values = ProcFile::ALL.map(|f| PossibleValue::new(f.name()).help(f.help()));
    PossibleValuesParser::new(values).map(|name| {
        ProcFile::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .expect("one of the possible values")
    })
}

/// Runs `workload` on `m` with its memory left mapped (`show`, `hotplug`).
pub fn run_kept(m: &mut Machine, workload: &str, tasks: u32, seed: u64) -> Result<()> {
    let w = parse_workload(workload)?;
    let opts = RunOptions {
        nr_tasks: tasks as usize,
        seed,
        keep_mapped: true,
        ..RunOptions::default()
    };
    w.run(m, &opts, &mut |_, _| {})
        .with_context(|| format!("running {}", w.describe()))?;
    Ok(())
}

pub fn run(args: &ShowArgs) -> Result<()> {
    let mut m = boot(args.machine.config(&args.policy)?)?;
    if let Some(w) = &args.workload {
        run_kept(&mut m, w, args.tasks, args.seed)?;
    }
    let mut out = Out::stdout(FormatArgs::default());
    out.raw(&args.file.render(&m))?;
    if args.file == ProcFile::PageReporting && m.config().balloon.is_none() {
        out.raw("(the machine option --balloon adds one)\n")?;
    }
    out.flush()?;
    Ok(())
}
