//! `largo show FILE [WORKLOAD]`: a /proc file of the booted machine, or of
//! the machine at the end of a workload, its memory still mapped.

use std::io::Write;

use anyhow::{Context, Result};
use largo_mm::stats::render::ProcFile;
use largo_mm::Machine;
use largo_workloads::{builtin, RunOptions};

use crate::args::{MachineArgs, PolicyArgs, ShowFile, UsageError};

pub fn run(
    file: ShowFile,
    workload: Option<&str>,
    machine: &MachineArgs,
    policy: &PolicyArgs,
    tasks: u32,
    seed: u64,
) -> Result<()> {
    let mut m = Machine::new(machine.config(policy)?)?;
    if let Some(text) = workload {
        let (def, spec) = builtin::parse(text).map_err(|e| UsageError(e.to_string()))?;
        let opts = RunOptions {
            nr_tasks: tasks as usize,
            seed,
            keep_mapped: true,
            ..RunOptions::default()
        };
        largo_workloads::run(&mut m, def, &spec, &opts, &mut |_, _| {}).with_context(|| format!("running {spec}"))?;
    }
    let file = match file {
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
    };
    let text = file.render(&m);
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`largo show vmstat | head`) is not an error.
    let _ = stdout.write_all(text.as_bytes());
    Ok(())
}
