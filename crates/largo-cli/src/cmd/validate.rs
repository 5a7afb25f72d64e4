//! `largo validate`: scenarios and workloads on the model and natively on
//! this host under the same THP settings (root); counters and the final
//! folio layout side by side, with a verdict.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use largo_host::scenario::{self, Scenario};
use largo_host::validate::{validate, workload_events, Validation};
use largo_mm::MachineConfig;
use largo_trace::Event;
use largo_workloads::{builtin, Workload};

use super::run::{resolve_workloads, ConfigArgs, Selection};
use crate::args::UsageError;
use crate::config::{self, NamedConfig, Suite};
use crate::output::{Format, FormatArgs, Grid, Out};

/// `largo validate [WORKLOAD...]`, or one of its subcommands.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ValidateCmd {
    #[command(subcommand)]
    pub sub: Option<ValidateSub>,
    #[command(flatten)]
    pub suite: ValidateArgs,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum ValidateSub {
    /// A recorded program: the host runs the program given after `--`
    /// natively under each configuration while largo replays its trace;
    /// per-size anon_fault_alloc and the kernel-time change compared.
    Trace(TraceValidateArgs),
    /// Free page reporting: memory written and freed on this host and on
    /// a model shaped like it; the two timelines pass by pass.
    Reporting(ReportingArgs),
    /// Kernel time by system call: the shipped programs run natively with
    /// their memory system calls traced, beside largo's kernel time by
    /// entry, and the change between folio sizes on both sides.
    Entries(super::entries::EntriesArgs),
    /// A THP burst: SIZE faulted on this host with only --sizes enabled
    /// and defrag=never, right after an exact snapshot of it, against
    /// largo booted from that snapshot (thp_fault_alloc and each size's
    /// anon_fault_alloc/anon_fault_fallback).
    Burst(super::burst::BurstArgs),
}

/// `largo validate [WORKLOAD...]`: scenarios and workloads.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Scenario files (text traces) or workloads; default: the built-in
    /// scenario suite and the workload suite.
    #[command(flatten)]
    pub sel: Selection,
    /// Which built-in suite runs when none is named.
    #[arg(long, value_enum, default_value = "all")]
    pub suite: SuiteArg,
    /// Show every compared counter of every case, also those zero on both sides.
    #[arg(long)]
    pub all: bool,
    /// Native runs per configuration in the kernel-time comparison,
    /// interleaved (the median is used).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub repeats: u64,
    /// Skip the kernel-time comparison of the built-in workloads at 4K and
    /// 64K folios that follows the workload suite.
    #[arg(long)]
    pub no_costs: bool,
    /// With --suite programs: only say that the cost profile is stale on
    /// this host, do not recalibrate it.
    #[arg(long)]
    pub no_recalibrate: bool,
}

/// `largo validate trace FILE [--repeats N] [--config ...] -- CMD`.
#[derive(Args, Debug)]
pub struct TraceValidateArgs {
    /// The recorded trace of the program.
    #[arg(value_name = "FILE")]
    pub trace: std::path::PathBuf,
    #[command(flatten)]
    pub cfg: ConfigArgs,
    /// Native runs of the program per configuration, interleaved (the
    /// median kernel time is used).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub repeats: u64,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `largo validate reporting [--size 4G] [--idle 40s]`.
#[derive(Args, Debug)]
pub struct ReportingArgs {
    /// Memory written and freed on the host and on the host-shaped model.
    #[arg(long, default_value = "4G", value_parser = crate::args::parse_size_arg, value_name = "SIZE")]
    pub size: u64,
    /// How long the timelines are sampled after the free.
    #[arg(long, default_value = "40s", value_parser = parse_duration_arg, value_name = "DURATION")]
    pub idle: u64,
    #[command(flatten)]
    pub format: FormatArgs,
    /// Draw both timelines (memory reported since the free, host and
    /// largo) to FILE.svg.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

fn parse_duration_arg(s: &str) -> Result<u64, String> {
    largo_workloads::spec::parse_duration(s).map_err(|e| e.to_string())
}

/// Configurations a recorded program is validated under.
pub const PROGRAM_CONFIGS: &Suite = &[
    ("4K", ""),
    ("4K+16K+32K+64K", "--thp 16K,32K,64K"),
    ("4K+64K", "--thp 64K"),
    ("all-always", "--thp 16K,32K,64K,128K,256K,512K,1M,2M"),
];

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuiteArg {
    All,
    Scenarios,
    Workloads,
    /// The shipped recorded programs, run natively against their traces
    /// on a model of this host (not part of `all`: minutes per program).
    Programs,
}

/// The workload suite: the 4K-page configurations of `largo run`'s
/// default suite and PMD THP always / madvise (MADV_HUGEPAGE mappings).
pub const SUITE_CONFIGS: &Suite = &[
    ("4K", ""),
    ("4K+16K", "--thp 16K"),
    ("4K+16K+32K", "--thp 16K,32K"),
    ("4K+16K+32K+64K", "--thp 16K,32K,64K"),
    ("2M-always", "--thp 2M=always"),
    ("2M-madvise", "--thp 2M=madvise"),
];

/// Workloads whose host kernel time is compared with the cost model's
/// estimate at 4K and 64K folios (page_fault1 is the calibration loop).
pub const COST_WORKLOADS: [&str; 8] = [
    "malloc1:iterations=16",
    "anon-w-seq:size=256M",
    "anon-w-rand:size=256M",
    "anon-r-seq:size=256M",
    "anon-rw-seq:size=256M",
    "anon-cow-seq:size=128M",
    "sparse:size=1G",
    "munmap-partial:size=256M",
];

pub const COST_CONFIGS: &Suite = &[("4K", ""), ("64K", "--thp 64K")];

pub const SUITE_WORKLOADS: [&str; 6] = [
    "page_fault1:iterations=1",
    "malloc1:iterations=1",
    "anon-r-seq:size=128M",
    "anon-rw-seq:size=64M",
    "anon-cow-seq:size=128M",
    "munmap-partial:size=64M",
];

/// One (scenario or workload, configuration) pair.
struct Case {
    name: String,
    config: String,
    machine: MachineConfig,
    events: Arc<Vec<Event>>,
}

fn scenario_cases(s: &Scenario, configs: Option<&[NamedConfig]>) -> Result<Vec<Case>, UsageError> {
    let events = Arc::new(s.trace.events.clone());
    let list: Vec<(String, MachineConfig)> = match configs {
        // The scenario's own machine (swap, memcg) under the given policies.
        Some(c) => c
            .iter()
            .map(|n| {
                let mut config = n.config.clone();
                if config.swap.is_empty() && config.memcg_max_bytes.is_none() {
                    largo_host::scenario::apply_machine_flags(&s.machine_flags, &mut config).map_err(UsageError)?;
                }
                Ok((n.name.clone(), config))
            })
            .collect::<Result<_, UsageError>>()?,
        None => s
            .configs
            .iter()
            .map(|(n, f)| {
                s.machine_for(f)
                    .map(|m| (n.clone(), m))
                    .map_err(|e| UsageError(e.to_string()))
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(list
        .into_iter()
        .map(|(config, machine)| Case {
            name: s.name.clone(),
            config,
            machine,
            events: events.clone(),
        })
        .collect())
}

fn workload_cases(names: &[String], configs: &[NamedConfig], madvise_suite: bool) -> Result<Vec<Case>> {
    let mut out = Vec::new();
    for w in resolve_workloads(names)? {
        let Workload::Builtin { def, spec } = w else {
            bail!(
                "{}: a trace is validated as a scenario file (a hand-written trace) or with `largo validate trace FILE -- CMD`",
                w.describe()
            );
        };
        for c in configs {
            let mut spec = spec.clone();
            if madvise_suite && c.name.ends_with("madvise") && def.params.iter().any(|p| p.name == "hugepage") {
                let text = spec.describe().replace("hugepage=0", "hugepage=1");
                spec = builtin::parse(&text).map_err(|e| UsageError(e.to_string()))?.1;
            }
            let events = workload_events(&c.config, def, &spec)?;
            out.push(Case {
                name: spec.describe(),
                config: c.name.clone(),
                machine: c.config.clone(),
                events: Arc::new(events),
            });
        }
    }
    Ok(out)
}

fn cases(args: &ValidateArgs) -> Result<Vec<Case>> {
    let cfg = &args.sel.cfg;
    let named = cfg.any_given().then(|| cfg.resolve_or(&[])).transpose()?;
    let suite = || config::resolve(&config::suite(SUITE_CONFIGS), &cfg.machine, &cfg.policy);
    let mut out = Vec::new();
    if args.sel.workloads.is_empty() {
        if matches!(args.suite, SuiteArg::All | SuiteArg::Scenarios) {
            for s in scenario::builtin() {
                out.extend(scenario_cases(&s, named.as_deref())?);
            }
        }
        if matches!(args.suite, SuiteArg::All | SuiteArg::Workloads) {
            let names: Vec<String> = SUITE_WORKLOADS.iter().map(|s| s.to_string()).collect();
            let configs = match &named {
                Some(n) => n.clone(),
                None => suite()?,
            };
            out.extend(workload_cases(&names, &configs, named.is_none())?);
        }
        return Ok(out);
    }
    for w in &args.sel.workloads {
        let path = std::path::Path::new(w);
        if path.is_file() {
            let text = std::fs::read_to_string(path)?;
            let s = Scenario::parse(&text, &path.file_stem().unwrap_or_default().to_string_lossy())
                .map_err(|e| UsageError(e.to_string()))?;
            out.extend(scenario_cases(&s, named.as_deref())?);
        } else {
            let configs = match &named {
                Some(n) => n.clone(),
                None => suite()?,
            };
            out.extend(workload_cases(std::slice::from_ref(w), &configs, named.is_none())?);
        }
    }
    Ok(out)
}

pub fn run(cmd: &ValidateCmd) -> Result<()> {
    if let Some(ValidateSub::Reporting(args)) = &cmd.sub {
        return super::reporting::run(args);
    }
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot validate against this host: {reason}");
    }
    match &cmd.sub {
        Some(ValidateSub::Trace(args)) => super::program::run(args),
        Some(ValidateSub::Reporting(_)) => unreachable!("handled above"),
        Some(ValidateSub::Entries(args)) => super::entries::run(args),
        Some(ValidateSub::Burst(args)) => super::burst::run(args),
        None => run_suite(&cmd.suite),
    }
}

fn run_suite(args: &ValidateArgs) -> Result<()> {
    if args.suite == SuiteArg::Programs {
        return super::program::run_programs(args);
    }
    let cases = cases(args)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // The knobs are restored by the guard after the case in progress.
        crate::embed::on_interrupt(move || flag.store(true, Ordering::SeqCst));
    }
    let mut out = Out::stdout(args.sel.cfg.format);
    let mut disagreements = 0;
    let mut cannot = 0;
    for case in &cases {
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted; the host knobs are restored");
        }
        let v = match validate(&case.machine, &case.events) {
            Ok(v) => v,
            Err(e) => match e.cannot_run_here() {
                Some(why) => {
                    cannot += 1;
                    out.json(&serde_json::json!({
                        "scenario": case.name,
                        "config": case.config,
                        "match": null,
                        "cannot_run": why,
                    }))?;
                    out.line(format!(
                        "SKIP   {} under {}: cannot run on this host: {why}",
                        case.name, case.config
                    ))?;
                    out.flush()?;
                    continue;
                }
                None => bail!("{} under {}: {e}", case.name, case.config),
            },
        };
        if !v.agrees() {
            disagreements += 1;
        }
        out.json(&json(case, &v))?;
        out.line(summary(case, &v))?;
        match out.format {
            Format::Text if !v.agrees() || args.all => {
                out.table(&diff_table(&v, args.all))?;
                out.text(&details(&v))?;
            }
            Format::Csv => out.table(&csv_rows(case, &v))?,
            _ => {}
        }
        out.flush()?;
    }
    let compared = cases.len() - cannot;
    if compared == 0 && cannot > 0 {
        bail!("no case could run on this host ({cannot} set a knob its kernel build lacks)");
    }
    out.line(format!(
        "{} of {compared} cases agree exactly{}",
        compared - disagreements,
        if cannot > 0 {
            format!("; {cannot} cannot run on this host (a knob its kernel build lacks)")
        } else {
            String::new()
        }
    ))?;
    drop(out);
    let default_suite = args.sel.workloads.is_empty() && args.sel.cfg.configs.is_empty();
    if default_suite && args.suite != SuiteArg::Scenarios && !args.no_costs {
        super::costs::run(args, &interrupted)?;
    }
    if disagreements > 0 {
        bail!("{disagreements} case(s) differ from the host kernel");
    }
    Ok(())
}

/// The compared counters of one side in the sections of `largo run --json`.
fn side(v: &Validation, host: bool) -> serde_json::Value {
    let mut vmstat = BTreeMap::new();
    let mut mthp: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for r in &v.rows {
        let value = if host { r.host } else { r.model };
        if let Some(name) = r.counter.strip_prefix("vmstat/") {
            vmstat.insert(name.to_string(), value);
        } else if let Some((size, stat)) = r.counter.strip_prefix("hugepages-").and_then(|c| c.split_once('/')) {
            mthp.entry(size.to_string())
                .or_default()
                .insert(stat.to_string(), value);
        }
    }
    let layout = if host { &v.host_layout } else { &v.model_layout };
    let faults = if host { v.host_faults } else { v.model_pgfault };
    serde_json::json!({ "vmstat": vmstat, "mthp": mthp, "layout": layout, "pgfault": faults })
}

fn json(case: &Case, v: &Validation) -> serde_json::Value {
    serde_json::json!({
        "scenario": case.name,
        "config": case.config,
        "match": v.agrees(),
        "host": side(v, true),
        "largo": side(v, false),
        "host_attempts": v.attempts,
        "host_sys_ns": v.host_stime_ns,
    })
}

/// The verdict line of a case.
fn summary(case: &Case, v: &Validation) -> String {
    let nonzero: Vec<String> = v
        .nonzero()
        .map(|r| {
            let name = r.counter.trim_start_matches("vmstat/").trim_start_matches("hugepages-");
            if r.agrees() {
                format!("{name} {}", r.model)
            } else {
                format!("{name} largo {} host {}", r.model, r.host)
            }
        })
        .collect();
    let verdict = if v.agrees() { "agree" } else { "DIFFER" };
    format!(
        "{verdict:6} {} under {}: {} counters{}, layout {}; {}",
        case.name,
        case.config,
        v.rows.len(),
        if v.attempts > 1 {
            format!(" ({} host attempts)", v.attempts)
        } else {
            String::new()
        },
        if v.layout_agrees() { "equal" } else { "DIFFERS" },
        if nonzero.is_empty() {
            "all zero".to_string()
        } else {
            nonzero.join(", ")
        },
    )
}

/// The compared counters side by side (every one with `all`, else those
/// non-zero somewhere).
fn diff_table(v: &Validation, all: bool) -> Grid {
    let mut g = Grid::new(["counter", "largo", "host", "diff"]).right_from(1);
    let rows: Vec<_> = if all {
        v.rows.iter().collect()
    } else {
        v.nonzero().collect()
    };
    for r in rows {
        let diff = if r.agrees() {
            "=".to_string()
        } else {
            format!("{:+}", r.host - r.model)
        };
        g.row([r.counter.clone(), r.model.to_string(), r.host.to_string(), diff]);
    }
    g
}

/// Layouts and faults of a case that differs.
fn details(v: &Validation) -> String {
    format!(
        "  layout largo {:?}\n  layout host  {:?}\n  faults: largo pgfault {}, host tasks minflt+majflt {}; host kernel time {:.1} ms\n",
        v.model_layout,
        v.host_layout,
        v.model_pgfault,
        v.host_faults,
        v.host_stime_ns as f64 / 1e6
    )
}

/// Every compared counter of a case, for CSV.
fn csv_rows(case: &Case, v: &Validation) -> Grid {
    let mut g = Grid::new(["case", "config", "counter", "largo", "host", "agree"]);
    for r in &v.rows {
        g.row([
            case.name.clone(),
            case.config.clone(),
            r.counter.clone(),
            r.model.to_string(),
            r.host.to_string(),
            r.agrees().to_string(),
        ]);
    }
    g
}
