//! `largo show FILE [WORKLOAD]`: a /proc file of the booted machine, or of
//! the machine at the end of a workload, its memory still mapped.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use largo_mm::stats::render::ProcFile;
use largo_mm::Machine;
use largo_workloads::RunOptions;

use super::run::parse_workload;
use crate::args::{boot, MachineArgs, PolicyArgs};
use crate::output::{Format, Out};

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Which file.
    #[arg(value_enum)]
    pub file: ShowFile,
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

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowFile {
    Buddyinfo,
    Pagetypeinfo,
    Zoneinfo,
    Vmstat,
    Meminfo,
    /// Per-size mTHP stats, as `grep . hugepages-*/stats/*` prints them.
    Mthp,
    /// Mapped anonymous memory by folio size (tools/mm/thpmaps --rollup).
    Thpmaps,
    /// Free page reporting: parameters, counters, Reported blocks per order.
    #[value(name = "page_reporting")]
    PageReporting,
    /// debugfs extfrag/extfrag_index: fragmentation index per order.
    #[value(name = "extfrag_index")]
    ExtfragIndex,
    /// debugfs extfrag/unusable_index: free memory unusable per order.
    #[value(name = "unusable_index")]
    UnusableIndex,
}

impl ShowFile {
    fn proc_file(self) -> ProcFile {
        match self {
            ShowFile::Buddyinfo => ProcFile::Buddyinfo,
            ShowFile::Pagetypeinfo => ProcFile::Pagetypeinfo,
            ShowFile::Zoneinfo => ProcFile::Zoneinfo,
            ShowFile::Vmstat => ProcFile::Vmstat,
            ShowFile::Meminfo => ProcFile::Meminfo,
            ShowFile::Mthp => ProcFile::Mthp,
            ShowFile::Thpmaps => ProcFile::Thpmaps,
            ShowFile::PageReporting => ProcFile::PageReporting,
            ShowFile::ExtfragIndex => ProcFile::ExtfragIndex,
            ShowFile::UnusableIndex => ProcFile::UnusableIndex,
        }
    }
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
    let mut out = Out::to(Box::new(std::io::stdout().lock()), Format::Text, 0);
    out.raw(&args.file.proc_file().render(&m))?;
    if args.file == ShowFile::PageReporting && m.config().balloon.is_none() {
        out.raw("(the machine option --balloon adds one)\n")?;
    }
    out.flush()?;
    Ok(())
}
