//! `largo completions SHELL` and `largo man`: generated from the command
//! definitions (clap_complete, clap_mangen), so they never drift.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::args::Cli;

pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "largo", &mut out);
    crate::output::Out::stdout(Default::default()).raw(&String::from_utf8_lossy(&out))?;
    Ok(())
}

/// The manual page of `largo` on standard output; with `dir`, it and one
/// page per command (`largo-run.1`, ...) written there.
pub fn man(dir: Option<&Path>) -> Result<()> {
    let root = Cli::command();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(root).render(&mut out)?;
        crate::output::Out::stdout(Default::default()).raw(&String::from_utf8_lossy(&out))?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut pages = vec![("largo".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("largo-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, cmd) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
