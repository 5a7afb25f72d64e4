//! One module per command.

pub mod bench;
mod list;
mod show;

use anyhow::Result;

use crate::args::{BenchCommand, Cli, Command};

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Show { file, machine, policy } => show::run(file, &machine, &policy),
        Command::List { what, machine } => list::run(what, &machine),
        Command::Bench { bench } => match bench {
            BenchCommand::Alloc(args) => bench::alloc::run(&args),
        },
    }
}
