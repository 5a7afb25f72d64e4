//! `largo`: run workloads on a modelled machine and print what Linux would.

use std::process::ExitCode;

use clap::Parser;
use largo_cli::args::{report_parse_error, Cli};

/// The model's large arrays on host huge pages (`largo_physmem::HugeAlloc`).
#[global_allocator]
static GLOBAL: largo_physmem::HugeAlloc = largo_physmem::HugeAlloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return report_parse_error(e),
    };
    if cli.command.models_only() {
        largo_physmem::enable_huge_alloc();
    }
    largo_cli::exit::status(largo_cli::cmd::run(cli))
}
