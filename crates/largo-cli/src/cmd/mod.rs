//! One module per command.

pub mod advise;
pub mod age;
pub mod bench;
pub mod burst;
pub mod calibrate;
mod costs;
mod docs;
mod entries;
pub mod host;
pub mod hotplug;
pub mod list;
mod program;
pub mod record;
mod reporting;
pub mod run;
pub mod run_plot;
pub mod show;
mod table;
pub mod validate;

use anyhow::Result;

use crate::args::{BenchCommand, Cli, Command, HostCommand};

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Replay(args) => run::replay(args),
        Command::Validate(args) => validate::run(&args),
        Command::Advise(args) => advise::run(&args),
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Record(args) => record::run(&args),
        Command::RecordExec(args) => record::exec(&args),
        Command::Show(args) => show::run(&args),
        Command::List(args) => list::run(&args),
        Command::Hotplug(args) => hotplug::run(&args),
        Command::Age(args) => age::run(&args),
        Command::Host { host } => match host {
            HostCommand::Snapshot(args) => host::snapshot::run(&args),
            HostCommand::Fragment(args) => host::fragment::run(&args),
            HostCommand::Thpmaps(args) => host::thpmaps::run(&args),
        },
        Command::Bench { bench } => match bench {
            BenchCommand::Alloc(args) => bench::alloc::run(&args),
            BenchCommand::Fault(args) => bench::fault::run(&args),
            BenchCommand::Tlb(args) => bench::tlb::run(&args),
            BenchCommand::Contention(args) => bench::contention::run(&args),
            BenchCommand::Replay(args) => bench::replay::run(&args),
            BenchCommand::Migrate(args) => bench::migrate::run(&args),
            BenchCommand::Gigantic(args) => bench::gigantic::run(&args),
            BenchCommand::Pageblock(args) => bench::pageblock::run(&args),
        },
        Command::Completions { shell } => docs::completions(shell),
        Command::Man { dir } => docs::man(dir.as_deref()),
    }
}
