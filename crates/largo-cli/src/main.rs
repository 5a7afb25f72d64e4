//! `largo`: run workloads on a modelled machine and print what Linux would.

mod args;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

use args::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return args::report_parse_error(e),
    };
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let usage =
                e.downcast_ref::<args::UsageError>().is_some() || e.downcast_ref::<largo_mm::MachineError>().is_some();
            eprintln!("largo: {e:#}");
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}
