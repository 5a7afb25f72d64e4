//! `largo show FILE`: a /proc file of the booted machine.

use std::io::Write;

use anyhow::Result;
use largo_mm::stats::render::ProcFile;
use largo_mm::Machine;

use crate::args::{MachineArgs, PolicyArgs, ShowFile};

pub fn run(file: ShowFile, machine: &MachineArgs, policy: &PolicyArgs) -> Result<()> {
    let m = Machine::new(machine.config(policy)?)?;
    let file = match file {
        ShowFile::Buddyinfo => ProcFile::Buddyinfo,
        ShowFile::Pagetypeinfo => ProcFile::Pagetypeinfo,
        ShowFile::Zoneinfo => ProcFile::Zoneinfo,
        ShowFile::Vmstat => ProcFile::Vmstat,
        ShowFile::Meminfo => ProcFile::Meminfo,
    };
    let text = file.render(&m);
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`largo show vmstat | head`) is not an error.
    let _ = stdout.write_all(text.as_bytes());
    Ok(())
}
