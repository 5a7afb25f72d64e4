//! `largo run`: workloads under named configurations, compared in mmtests
//! style tables (one column per configuration, the first the baseline,
//! cells `value (+x.x%)`) or as JSON lines.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use clap::{Args, Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use largo_mm::{Machine, MachineConfig};
use largo_workloads::cost::{Estimate, Profile};
use largo_workloads::{RunOptions, RunOutcome, TaskMode, Workload};

use super::table;
use crate::args::{MachineArgs, PolicyArgs, UsageError};

/// What to run, shared by `largo run` and `largo validate`.
#[derive(Args, Debug)]
pub struct Selection {
    /// Workloads, `NAME[:KEY=VALUE,...]` (`largo list workloads`); default:
    /// the command's suite.
    pub workloads: Vec<String>,
    #[command(flatten)]
    pub cfg: ConfigArgs,
}

/// The configurations to run under, and the output format.
#[derive(Args, Debug)]
pub struct ConfigArgs {
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// A named configuration, `NAME:FLAGS` with MACHINE and POLICY flags
    /// separated by spaces, e.g. `--config '64K:--thp 64K'`; the first is
    /// the baseline; repeatable. Flags given outside apply to every one.
    #[arg(long = "config", value_name = "NAME:SPEC")]
    pub configs: Vec<String>,
    /// One JSON object per (configuration, workload) instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub sel: Selection,
    /// Tasks running each workload.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub tasks: u32,
    /// Tasks are processes or threads of one process.
    #[arg(long, value_enum, default_value = "process")]
    pub mode: ModeArg,
    /// Seed of the workloads' random choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run the invariant checkers every N scheduling rounds (0: never).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub check: u64,
    /// A cost profile (JSON from `largo calibrate`); default: the
    /// checked-in profile of this machine kind.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
}

/// `largo replay`: `largo run` restricted to traces.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Trace files (text, binary, .gz) or shipped recorded programs
    /// (`largo list workloads`); at least one.
    #[arg(required = true, value_name = "FILE")]
    pub traces: Vec<String>,
    #[command(flatten)]
    pub cfg: ConfigArgs,
    /// Run the invariant checkers every N events (0: never).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub check: u64,
    /// A cost profile (JSON from `largo calibrate`).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
}

/// `largo replay FILE...`: each trace replayed under the configurations,
/// with `largo run`'s tables and JSON.
pub fn replay(args: ReplayArgs) -> Result<()> {
    for t in &args.traces {
        if let Workload::Builtin { .. } = Workload::parse(t).map_err(UsageError)? {
            return Err(UsageError(format!(
                "{t}: not a trace file or recorded program (built-in workloads run with `largo run`)"
            ))
            .into());
        }
    }
    run(&RunArgs {
        sel: Selection {
            workloads: args.traces,
            cfg: args.cfg,
        },
        tasks: 1,
        mode: ModeArg::Process,
        seed: 0,
        check: args.check,
        profile: args.profile,
    })
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    Process,
    Thread,
}

/// The seed paper's configuration set: 4K base pages as the baseline,
/// 16K and 64K base pages, and 4K pages with 16K, 16K+32K, 16K+32K+64K
/// anonymous folios.
pub const DEFAULT_SUITE: [(&str, &str); 6] = [
    ("4K", "--machine x86_64"),
    ("16K-pages", "--machine arm64-16k"),
    ("64K-pages", "--machine arm64-64k"),
    ("4K+16K", "--machine x86_64 --thp 16K"),
    ("4K+16K+32K", "--machine x86_64 --thp 16K,32K"),
    ("4K+16K+32K+64K", "--machine x86_64 --thp 16K,32K,64K"),
];

/// MACHINE and POLICY flags of one `--config` SPEC.
#[derive(Parser, Debug)]
#[command(name = "--config", no_binary_name = true, args_override_self = true)]
struct ConfigFlags {
    #[command(flatten)]
    machine: MachineArgs,
    #[command(flatten)]
    policy: PolicyArgs,
}

/// A named configuration, resolved.
pub struct NamedConfig {
    pub name: String,
    pub config: MachineConfig,
}

/// The configurations of a run: `--config`s; else one from the flags if a
/// machine or policy flag was given; else the default suite.
pub fn resolve_configs(
    configs: &[String],
    machine: &MachineArgs,
    policy: &PolicyArgs,
) -> Result<Vec<NamedConfig>, UsageError> {
    let specs: Vec<(String, String)> = if !configs.is_empty() {
        configs
            .iter()
            .map(|c| {
                let (name, spec) = c.split_once(':').unwrap_or((c, ""));
                if name.trim().is_empty() {
                    return Err(UsageError(format!(
                        "--config '{c}': expected NAME:FLAGS, e.g. '64K:--thp 64K'"
                    )));
                }
                Ok((name.trim().to_string(), spec.to_string()))
            })
            .collect::<Result<_, _>>()?
    } else if machine.machine.is_some() || policy.is_set() {
        vec![("config".to_string(), String::new())]
    } else {
        DEFAULT_SUITE
            .iter()
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .collect()
    };
    let mut seen = std::collections::HashSet::new();
    specs
        .into_iter()
        .map(|(name, spec)| {
            if !seen.insert(name.clone()) {
                return Err(UsageError(format!("--config: the name '{name}' is used twice")));
            }
            let mut tokens = machine.to_tokens();
            tokens.extend(policy.to_tokens());
            tokens.extend(spec.split_whitespace().map(str::to_string));
            let flags = ConfigFlags::try_parse_from(&tokens).map_err(|e| {
                let msg = e.render().to_string();
                let line = msg
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("invalid flags")
                    .trim_start_matches("error: ");
                UsageError(format!("--config {name}: {line}"))
            })?;
            Ok(NamedConfig {
                config: flags.machine.config(&flags.policy)?,
                name,
            })
        })
        .collect()
}

/// The workloads of a run: built-in specifications and trace files
/// named, or the default suite.
pub fn resolve_workloads(names: &[String]) -> Result<Vec<Workload>, UsageError> {
    if names.is_empty() {
        return Ok(Workload::default_suite());
    }
    names.iter().map(|n| Workload::parse(n).map_err(UsageError)).collect()
}

/// One finished (configuration, workload) run.
pub struct Record {
    pub config: usize,
    pub workload: usize,
    pub machine: String,
    pub outcome: RunOutcome,
    pub estimate: Estimate,
}

pub fn run(args: &RunArgs) -> Result<()> {
    let sel = &args.sel;
    let configs = resolve_configs(&sel.cfg.configs, &sel.cfg.machine, &sel.cfg.policy)?;
    let workloads = resolve_workloads(&sel.workloads)?;
    let profile = match &args.profile {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Profile::from_json(&text).map_err(UsageError)?
        }
        None => Profile::default_profile(),
    };
    // Boot every configuration once up front: bad knobs fail before any work.
    let mut page_sizes = Vec::new();
    let mut machines = Vec::new();
    for c in &configs {
        let m = Machine::new(c.config.clone()).map_err(|e| UsageError(format!("configuration {}: {e}", c.name)))?;
        page_sizes.push(m.geometry().page_size());
        machines.push(m.describe());
    }
    let plan = Plan::new(&configs, &workloads, &page_sizes)?;
    let opts = RunOptions {
        nr_tasks: args.tasks as usize,
        mode: match args.mode {
            ModeArg::Process => TaskMode::Process,
            ModeArg::Thread => TaskMode::Thread,
        },
        seed: args.seed,
        check_every: args.check,
        ..RunOptions::default()
    };
    let records = run_all(&configs, &workloads, &plan.jobs, &opts, &profile, !sel.cfg.json)?;
    let mut out = std::io::stdout().lock();
    let text = if sel.cfg.json {
        json_lines(&configs, &workloads, &records, &plan.skipped, &profile, args)
    } else {
        tables(&configs, &machines, &workloads, &records, &plan.skipped, &profile)
    };
    // A closed pipe is not an error.
    let _ = out.write_all(text.as_bytes());
    Ok(())
}

/// The (configuration, workload) pairs to run, and those that cannot
/// run with the reason (a trace recorded with other base pages).
struct Plan {
    jobs: Vec<(usize, usize)>,
    skipped: Vec<(usize, usize, String)>,
}

impl Plan {
    fn new(configs: &[NamedConfig], workloads: &[Workload], page_sizes: &[u64]) -> Result<Plan, UsageError> {
        let mut plan = Plan {
            jobs: Vec::new(),
            skipped: Vec::new(),
        };
        for (c, &page_size) in page_sizes.iter().enumerate().take(configs.len()) {
            for (w, workload) in workloads.iter().enumerate() {
                match workload.unsupported_on(page_size) {
                    None => plan.jobs.push((c, w)),
                    Some(reason) => plan.skipped.push((c, w, reason)),
                }
            }
        }
        for (w, workload) in workloads.iter().enumerate() {
            if !plan.jobs.iter().any(|j| j.1 == w) {
                let (c, _, reason) = plan.skipped.iter().find(|s| s.1 == w).expect("skipped somewhere");
                return Err(UsageError(format!(
                    "{} cannot run under any configuration given: under {}: {reason}",
                    workload.describe(),
                    configs[*c].name
                )));
            }
        }
        Ok(plan)
    }
}

/// Runs the planned (configuration, workload) pairs, in parallel on the
/// host's CPUs; results come back in (configuration, workload) order.
pub(crate) fn run_all(
    configs: &[NamedConfig],
    workloads: &[Workload],
    jobs: &[(usize, usize)],
    opts: &RunOptions,
    profile: &Profile,
    show_progress: bool,
) -> Result<Vec<Record>> {
    let bar = progress_bar(jobs.len() as u64, show_progress);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Record>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len())
        .max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(c, w)) = jobs.get(i) else { break };
                let r = run_one(&configs[c], &workloads[w], opts, profile).map(|(machine, outcome, estimate)| Record {
                    config: c,
                    workload: w,
                    machine,
                    outcome,
                    estimate,
                });
                results.lock().expect("no worker panics")[i] = Some(r);
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

fn run_one(
    c: &NamedConfig,
    w: &Workload,
    opts: &RunOptions,
    profile: &Profile,
) -> Result<(String, RunOutcome, Estimate)> {
    let mut m = Machine::new(c.config.clone())?;
    let outcome = w
        .run(&mut m, opts, &mut |_, _| {})
        .map_err(|e| anyhow::anyhow!("{} under {}: {e}", w.describe(), c.name))?;
    let estimate = profile.estimate_at(&outcome.counters, w.faults());
    Ok((m.describe(), outcome, estimate))
}

fn progress_bar(len: u64, enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} running {pos}/{len} [{bar:30}] {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

/// One table per workload, a column per configuration it ran under.
fn tables(
    configs: &[NamedConfig],
    machines: &[String],
    workloads: &[Workload],
    records: &[Record],
    skipped: &[(usize, usize, String)],
    profile: &Profile,
) -> String {
    let mut out = String::new();
    for (w, workload) in workloads.iter().enumerate() {
        let row: Vec<&Record> = records.iter().filter(|r| r.workload == w).collect();
        let names: Vec<&str> = row.iter().map(|r| configs[r.config].name.as_str()).collect();
        out.push_str(&format!("{}\n", workload.describe()));
        out.push_str(&table::comparison(&names, &row));
        let not_run: Vec<&(usize, usize, String)> = skipped.iter().filter(|s| s.1 == w).collect();
        if let Some((_, _, reason)) = not_run.first() {
            let names: Vec<&str> = not_run.iter().map(|s| configs[s.0].name.as_str()).collect();
            out.push_str(&format!("not run under {}: {reason}\n", names.join(", ")));
        }
        out.push('\n');
    }
    out.push_str("configurations:\n");
    for (i, c) in configs.iter().enumerate() {
        let machine = &machines[i];
        let knobs: Vec<String> = c.config.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let knobs = if knobs.is_empty() {
            "defaults".to_string()
        } else {
            knobs.join(" ")
        };
        out.push_str(&format!("  {}: {machine}; {knobs}\n", c.name));
    }
    out.push_str(&format!(
        "kernel time: estimated with cost profile '{}' ({}); faults of recorded programs at the cold-cache costs\n",
        profile.name, profile.host
    ));
    out
}

fn json_lines(
    configs: &[NamedConfig],
    workloads: &[Workload],
    records: &[Record],
    skipped: &[(usize, usize, String)],
    profile: &Profile,
    args: &RunArgs,
) -> String {
    let mut out = String::new();
    for (c, w, reason) in skipped {
        let obj = serde_json::json!({
            "config": configs[*c].name,
            "workload": workloads[*w].describe(),
            "skipped": reason,
        });
        out.push_str(&obj.to_string());
        out.push('\n');
    }
    for r in records {
        let c = &r.outcome.counters;
        let obj = serde_json::json!({
            "config": configs[r.config].name,
            "workload": workloads[r.workload].describe(),
            "machine": r.machine,
            "knobs": configs[r.config].config.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "tasks": args.tasks,
            "mode": match args.mode {
                ModeArg::Process => "process",
                ModeArg::Thread => "thread",
            },
            "seed": args.seed,
            "largo_version": env!("CARGO_PKG_VERSION"),
            "vmstat": c.vmstat,
            "mthp": c.mthp,
            "meminfo": c.meminfo,
            "buddyinfo": c.buddyinfo,
            "allocs": c.allocs,
            "locks": c.locks,
            "cost": {
                "kernel_ns": r.estimate.kernel_ns.round() as u64,
                "profile": profile.name,
                "faults": workloads[r.workload].faults(),
                "terms": r.estimate.terms,
            },
            "peak": r.outcome.peak,
            "problems": r.outcome.problems,
        });
        let mut obj = obj;
        if let Some(rep) = &r.outcome.reporting {
            obj["page_reporting"] = serde_json::to_value(rep).expect("serializable");
        }
        out.push_str(&obj.to_string());
        out.push('\n');
    }
    out
}
