//! The entry points: each builds a command's typed arguments, runs the
//! command itself with the GIL released and its standard output captured
//! (`largo_cli::output::capture`), and hands Python what `--json` prints.

use std::path::PathBuf;

use largo_cli::args::Cli;
use largo_cli::cmd;
use largo_cli::cmd::advise::AdviseArgs;
use largo_cli::cmd::run::{ConfigArgs, ModeArg, ReplayArgs, RunArgs, Selection};
use largo_cli::cmd::show::ShowArgs;
use largo_cli::cmd::validate::{SuiteArg, ValidateArgs, ValidateCmd};
use largo_cli::config::ConfigSpec;
use largo_cli::output::{capture, FormatArgs};
use pyo3::prelude::*;

use crate::config::{machine_args, policy_args};
use crate::errors::{from_command, usage};

const JSON: FormatArgs = FormatArgs { json: true, csv: false };

/// Runs a command with the GIL released and returns what it printed.
fn captured(py: Python<'_>, f: impl FnOnce() -> anyhow::Result<()> + Send) -> PyResult<String> {
    let (result, bytes) = py.detach(|| capture(f));
    result.map_err(from_command)?;
    String::from_utf8(bytes).map_err(|e| usage(format!("output is not UTF-8: {e}")))
}

/// `(name, machine, policy)` triples: `largo.Config`s as the engine gets them.
type Configs<'py> = Vec<(String, Option<Bound<'py, PyAny>>, Option<Bound<'py, PyAny>>)>;

/// `(name, machine, policy)` triples as `--config` specs.
fn specs(configs: Configs<'_>) -> PyResult<Vec<ConfigSpec>> {
    configs
        .into_iter()
        .map(|(name, machine, policy)| {
            if name.trim().is_empty() {
                return Err(usage("Config.name: a configuration needs a name"));
            }
            Ok(ConfigSpec {
                name,
                machine: machine_args(machine.as_ref())?,
                policy: policy_args(policy.as_ref())?,
            })
        })
        .collect()
}

fn config_args(
    configs: Configs<'_>,
    machine: Option<&Bound<'_, PyAny>>,
    policy: Option<&Bound<'_, PyAny>>,
) -> PyResult<ConfigArgs> {
    Ok(ConfigArgs {
        machine: machine_args(machine)?,
        policy: policy_args(policy)?,
        configs: specs(configs)?,
        format: JSON,
    })
}

fn mode_of(mode: &str) -> PyResult<ModeArg> {
    match mode {
        "process" => Ok(ModeArg::Process),
        "thread" => Ok(ModeArg::Thread),
        other => Err(usage(format!("mode: '{other}' is not process or thread"))),
    }
}

/// `largo run ... --json`.
#[pyfunction]
#[pyo3(signature = (workloads, configs, machine=None, policy=None, seed=0, tasks=1, mode="process", check=0, profile=None, keep_going=false, tlb=None))]
#[allow(clippy::too_many_arguments)]
pub fn run(
    py: Python<'_>,
    workloads: Vec<String>,
    configs: Configs<'_>,
    machine: Option<Bound<'_, PyAny>>,
    policy: Option<Bound<'_, PyAny>>,
    seed: u64,
    tasks: u32,
    mode: &str,
    check: u64,
    profile: Option<PathBuf>,
    keep_going: bool,
    tlb: Option<String>,
) -> PyResult<String> {
    if !(1..=4096).contains(&tasks) {
        return Err(usage(format!("tasks: {tasks} is not in 1..=4096")));
    }
    let args = RunArgs {
        sel: Selection {
            workloads,
            cfg: config_args(configs, machine.as_ref(), policy.as_ref())?,
        },
        tasks,
        mode: mode_of(mode)?,
        seed,
        check,
        profile,
        keep_going,
        tlb,
        seed_table: false,
        plot: None,
        plot_metric: Default::default(),
        plot_reporting: None,
    };
    captured(py, move || cmd::run::run(&args))
}

/// `largo replay ... --json`.
#[pyfunction]
#[pyo3(signature = (traces, configs, machine=None, policy=None, check=0, profile=None, keep_going=false))]
#[allow(clippy::too_many_arguments)]
pub fn replay(
    py: Python<'_>,
    traces: Vec<String>,
    configs: Configs<'_>,
    machine: Option<Bound<'_, PyAny>>,
    policy: Option<Bound<'_, PyAny>>,
    check: u64,
    profile: Option<PathBuf>,
    keep_going: bool,
) -> PyResult<String> {
    if traces.is_empty() {
        return Err(usage("replay: at least one trace file or recorded program"));
    }
    let args = ReplayArgs {
        traces,
        cfg: config_args(configs, machine.as_ref(), policy.as_ref())?,
        check,
        profile,
        keep_going,
    };
    captured(py, move || cmd::run::replay(args))
}

/// `largo advise ... --json`.
#[pyfunction]
#[pyo3(signature = (workload=None, command=None, machine=None, policy=None, max_bloat=None, profile=None, verify=false, runs=5, top=3, no_recalibrate=false))]
#[allow(clippy::too_many_arguments)]
pub fn advise(
    py: Python<'_>,
    workload: Option<String>,
    command: Option<Vec<String>>,
    machine: Option<Bound<'_, PyAny>>,
    policy: Option<Bound<'_, PyAny>>,
    max_bloat: Option<f64>,
    profile: Option<PathBuf>,
    verify: bool,
    runs: u64,
    top: u64,
    no_recalibrate: bool,
) -> PyResult<String> {
    let command = command.unwrap_or_default();
    if workload.is_some() != command.is_empty() {
        return Err(usage("advise: give a workload or a command, not both or neither"));
    }
    if verify && command.is_empty() {
        return Err(usage("advise: verify needs a command"));
    }
    if !(2..=50).contains(&runs) || !(1..=28).contains(&top) {
        return Err(usage("advise: runs must be in 2..=50 and top in 1..=28"));
    }
    let max_bloat = max_bloat.unwrap_or(cmd::advise::DEFAULT_MAX_BLOAT_PCT);
    if !max_bloat.is_finite() || max_bloat < 0.0 {
        return Err(usage(format!(
            "max_bloat: {max_bloat}: expected a percentage of 0 or more"
        )));
    }
    let args = AdviseArgs {
        workload,
        machine: machine_args(machine.as_ref())?,
        policy: policy_args(policy.as_ref())?,
        max_bloat,
        profile,
        keep_trace: None,
        verify,
        runs,
        top,
        no_recalibrate,
        format: JSON,
        command,
    };
    captured(py, move || cmd::advise::run(&args))
}

/// `largo show FILE [WORKLOAD]`: the file's text.
#[pyfunction]
#[pyo3(signature = (file, workload=None, machine=None, policy=None, tasks=1, seed=0))]
pub fn show(
    py: Python<'_>,
    file: &str,
    workload: Option<String>,
    machine: Option<Bound<'_, PyAny>>,
    policy: Option<Bound<'_, PyAny>>,
    tasks: u32,
    seed: u64,
) -> PyResult<String> {
    if !(1..=4096).contains(&tasks) {
        return Err(usage(format!("tasks: {tasks} is not in 1..=4096")));
    }
    let file = largo_mm::stats::render::ProcFile::ALL
        .into_iter()
        .find(|f| f.name() == file)
        .ok_or_else(|| {
            let names: Vec<&str> = largo_mm::stats::render::ProcFile::ALL
                .iter()
                .map(|f| f.name())
                .collect();
            usage(format!("show: '{file}' is not one of {}", names.join(", ")))
        })?;
    let args = ShowArgs {
        file,
        workload,
        machine: machine_args(machine.as_ref())?,
        policy: policy_args(policy.as_ref())?,
        tasks,
        seed,
    };
    captured(py, move || cmd::show::run(&args))
}

/// `largo validate [WORKLOAD...] --json` (root): what it printed, and
/// its failure (counters that differ) if any; bad input raises.
#[pyfunction]
#[pyo3(signature = (workloads, configs, suite="all", repeats=5, no_costs=false))]
pub fn validate(
    py: Python<'_>,
    workloads: Vec<String>,
    configs: Configs<'_>,
    suite: &str,
    repeats: u64,
    no_costs: bool,
) -> PyResult<(String, Option<String>)> {
    let suite = match suite {
        "all" => SuiteArg::All,
        "scenarios" => SuiteArg::Scenarios,
        "workloads" => SuiteArg::Workloads,
        "programs" => SuiteArg::Programs,
        other => {
            return Err(usage(format!(
                "suite: '{other}' is not all, scenarios, workloads or programs"
            )))
        }
    };
    if !(1..=50).contains(&repeats) {
        return Err(usage(format!("repeats: {repeats} is not in 1..=50")));
    }
    let args = ValidateCmd {
        sub: None,
        suite: ValidateArgs {
            sel: Selection {
                workloads,
                cfg: config_args(configs, None, None)?,
            },
            suite,
            all: false,
            repeats,
            no_costs,
            no_recalibrate: true,
        },
    };
    let (result, bytes) = py.detach(|| capture(move || cmd::validate::run(&args)));
    let text = String::from_utf8(bytes).map_err(|e| usage(format!("output is not UTF-8: {e}")))?;
    match result {
        Ok(()) => Ok((text, None)),
        // Bad input, or nothing compared (no host to compare with): raise.
        Err(e) if largo_cli::exit::is_usage(&e) || text.trim().is_empty() => Err(from_command(e)),
        Err(e) => Ok((text, Some(format!("{e:#}")))),
    }
}

/// Any command line, `largo ARGS...`, its output captured: the way to the
/// commands without a typed entry point (`age`, `bench ...`, `hotplug`);
/// pass `--json` for JSON lines.
#[pyfunction]
pub fn command(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    use clap::error::ErrorKind;
    use clap::Parser;
    let cli = match Cli::try_parse_from(std::iter::once("largo".to_string()).chain(argv)) {
        Ok(cli) => cli,
        // --help and --version are output, not errors.
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            return Ok(e.render().to_string())
        }
        Err(e) => return Err(usage(largo_cli::args::first_error_line(&e))),
    };
    match &cli.command {
        largo_cli::args::Command::Host {
            host: largo_cli::args::HostCommand::Fragment(_),
        } => {
            return Err(usage(
                "host fragment holds memory until killed: run the largo binary for it",
            ))
        }
        largo_cli::args::Command::RecordExec(_) => return Err(usage("record-exec is internal to largo record")),
        _ => {}
    }
    captured(py, move || cmd::run(cli))
}

/// A byte size with a K/M/G/T suffix, as the command line reads it.
#[pyfunction]
pub fn parse_size(text: &str) -> PyResult<u64> {
    largo_types::parse_size(text).map_err(|e| usage(format!("'{text}': {e}")))
}
