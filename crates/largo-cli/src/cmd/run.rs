//! `largo run`: workloads under named configurations, compared in mmtests
//! style tables (one column per configuration, the first the baseline),
//! as JSON lines, or as CSV (one row per workload, configuration and
//! counter).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use largo_mm::Machine;
use largo_workloads::contention::Contention;
use largo_workloads::cost::{Estimate, Profile};
use largo_workloads::{RunOptions, RunOutcome, TaskMode, Workload};

use super::table;
use crate::args::{boot, MachineArgs, PolicyArgs, UsageError};
use crate::config::{self, ConfigSpec, NamedConfig};
use crate::output::{Cell, Grid};
use crate::output::{FormatArgs, Out};

/// What to run, shared by `largo run` and `largo validate`.
#[derive(Args, Debug)]
pub struct Selection {
    /// Workloads: `NAME[:KEY=VALUE,...]` (`largo list workloads`), trace
    /// files or shipped recorded programs; default: the command's suite.
    #[arg(value_name = "WORKLOAD")]
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
    #[arg(long = "config", value_name = "NAME:FLAGS", value_parser = ConfigSpec::parse)]
    pub configs: Vec<ConfigSpec>,
    #[command(flatten)]
    pub format: FormatArgs,
}

impl ConfigArgs {
    /// The `--config`s, or one configuration of the flags, or `default`.
    pub fn resolve_or(&self, default: &config::Suite) -> Result<Vec<NamedConfig>, UsageError> {
        config::resolve_or(&self.configs, &self.machine, &self.policy, default)
    }

    /// Any MACHINE or POLICY flag or `--config` given.
    pub fn any_given(&self) -> bool {
        !self.configs.is_empty() || self.machine.machine.is_some() || self.policy.is_set()
    }
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
    /// Exit 0 even when a workload would have crashed (SIGSEGV): the
    /// results are printed either way.
    #[arg(long)]
    pub keep_going: bool,
    /// Changes to the machine's TLB for the coverage and reach report and
    /// the user-time estimate (traces too): `KEY=VALUE,...` of l1, l2,
    /// ways, coalesce (4K PTEs per entry: x86 coalescing, arm64 HPA),
    /// l2_hit_ns, walk_ns, walk_near_ns, pwc (0/1), walk_ns_per_doubling,
    /// seq_line_ns.
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = parse_tlb)]
    pub tlb: Option<String>,
    /// The seed series' table instead: per configuration real-time,
    /// kern-time, user-time and memory, with their change against the
    /// first configuration; kern-time with the lock waits of `--cpus`
    /// tasks at once.
    #[arg(long)]
    pub seed_table: bool,
    /// Draw the run table as a grouped bar chart to FILE.svg: per
    /// workload, each configuration's %change of --plot-metric against
    /// the first configuration.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// What --plot compares.
    #[arg(long, value_enum, default_value = "kernel-time", requires = "plot")]
    pub plot_metric: super::run_plot::PlotMetric,
    /// Draw each run's free page reporting timeline (machines with
    /// --balloon) to FILE.svg: memory reported over time.
    #[arg(long, value_name = "FILE.svg")]
    pub plot_reporting: Option<std::path::PathBuf>,
}

/// `--tlb`: checked against the x86 preset's TLB here, applied per machine.
fn parse_tlb(s: &str) -> Result<String, String> {
    largo_types::Preset::X86_64.tlb().with_overrides(s)?;
    Ok(s.to_string())
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
    /// Exit 0 even when the replayed program would have crashed (SIGSEGV).
    #[arg(long)]
    pub keep_going: bool,
}

/// `largo replay FILE...`: each trace replayed under the configurations,
/// with `largo run`'s tables and JSON.
pub fn replay(args: ReplayArgs) -> Result<()> {
    // Each trace is read once, here, in the order given.
    let mut workloads = Vec::with_capacity(args.traces.len());
    for t in &args.traces {
        let w = parse_workload(t)?;
        if let Workload::Builtin { .. } = w {
            return Err(UsageError(format!(
                "{t}: not a trace file or recorded program (built-in workloads run with `largo run`)"
            ))
            .into());
        }
        workloads.push(w);
    }
    let run_args = RunArgs {
        sel: Selection {
            workloads: args.traces,
            cfg: args.cfg,
        },
        tasks: 1,
        mode: ModeArg::Process,
        seed: 0,
        check: args.check,
        profile: args.profile,
        keep_going: args.keep_going,
        tlb: None,
        seed_table: false,
        plot: None,
        plot_metric: super::run_plot::PlotMetric::default(),
        plot_reporting: None,
    };
    run_workloads(&run_args, Some(workloads))
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    Process,
    Thread,
}

impl ModeArg {
    pub fn task_mode(self) -> TaskMode {
        match self {
            ModeArg::Process => TaskMode::Process,
            ModeArg::Thread => TaskMode::Thread,
        }
    }
}

/// A workload named on the command line (bad names are usage errors).
pub fn parse_workload(text: &str) -> Result<Workload, UsageError> {
    Workload::parse(text).map_err(|e| UsageError(e.to_string()))
}

/// The workloads of a run: those named, or the default suite.
pub fn resolve_workloads(names: &[String]) -> Result<Vec<Workload>, UsageError> {
    if names.is_empty() {
        return Ok(Workload::default_suite());
    }
    names.iter().map(|n| parse_workload(n)).collect()
}

/// A cost profile: the file given, or the checked-in default.
pub fn load_profile(path: Option<&std::path::Path>) -> Result<Profile, UsageError> {
    let Some(path) = path else {
        return Ok(Profile::default_profile());
    };
    let text = std::fs::read_to_string(path).map_err(|e| UsageError(format!("--profile {}: {e}", path.display())))?;
    Profile::from_json(&text).map_err(|e| UsageError(format!("--profile {}: {e}", path.display())))
}

/// One finished (configuration, workload) run.
pub struct Record {
    pub config: usize,
    pub workload: usize,
    pub machine: String,
    pub outcome: RunOutcome,
    pub estimate: Estimate,
    /// `estimate` by entry (`Profile::by_entry`).
    pub by_entry: std::collections::BTreeMap<&'static str, f64>,
    /// Lock waits were `--cpus` such tasks to run at once.
    pub contention: Contention,
    /// Wall seconds this run took on its thread.
    pub elapsed_s: f64,
}

/// How the runs shared the host's CPUs.
pub(crate) struct Parallelism {
    pub threads: usize,
    pub wall_s: f64,
    /// The runs' own times summed: the wall time one after another.
    pub serial_s: f64,
}

impl Parallelism {
    pub fn line(&self, runs: usize) -> String {
        format!(
            "{runs} runs on {} threads in {:.2} s; one after another they take {:.2} s ({:.1}x)",
            self.threads,
            self.wall_s,
            self.serial_s,
            self.serial_s / self.wall_s.max(1e-9)
        )
    }
}

impl Record {
    /// The part of the estimate done by kernel threads (khugepaged's
    /// collapses, kcompactd, free page reporting, kswapd): not the
    /// program's own system time on a host.
    pub fn kthreads_ns(&self) -> f64 {
        largo_workloads::entry::KERNEL_THREAD_ENTRIES
            .iter()
            .filter_map(|e| self.by_entry.get(e.name()))
            .sum()
    }

    /// The estimate without the kernel threads' work: what a host charges
    /// to the program's own system time.
    pub fn task_kernel_ns(&self) -> f64 {
        (self.estimate.kernel_ns - self.kthreads_ns()).max(0.0)
    }
}

pub fn run(args: &RunArgs) -> Result<()> {
    run_workloads(args, None)
}

/// [`run`] with the workloads already read (`None`: read those `args`
/// names).
fn run_workloads(args: &RunArgs, workloads: Option<Vec<Workload>>) -> Result<()> {
    let sel = &args.sel;
    let configs = sel.cfg.resolve_or(config::DEFAULT_SUITE)?;
    let workloads = match workloads {
        Some(w) => w,
        None => resolve_workloads(&sel.workloads)?,
    };
    let for_host = matches!(sel.cfg.machine.machine, Some(crate::args::MachineChoice::Host));
    let profile = match (&args.profile, for_host) {
        // This host: the profile `advise` measured for this boot, if any.
        (None, true) => largo_host::fresh::cached().map_or_else(Profile::default_profile, |(p, _)| p),
        _ => load_profile(args.profile.as_deref())?,
    };
    // Boot every configuration once up front: bad knobs fail before any work.
    let mut page_sizes = Vec::new();
    let mut machines = Vec::new();
    for c in &configs {
        let m = boot(c.config.clone()).map_err(|e| UsageError(format!("configuration {}: {e}", c.name)))?;
        page_sizes.push(m.geometry().page_size());
        machines.push(m.describe());
    }
    super::run_plot::check(args.plot.is_some(), args.plot_reporting.is_some(), &configs)?;
    let plan = Plan::new(&configs, &workloads, &page_sizes)?;
    let opts = RunOptions {
        nr_tasks: args.tasks as usize,
        mode: args.mode.task_mode(),
        seed: args.seed,
        check_every: args.check,
        tlb_overrides: args.tlb.clone(),
        ..RunOptions::default()
    };
    let (records, parallelism) = run_all(
        &configs,
        &workloads,
        &plan.jobs,
        &opts,
        &profile,
        sel.cfg.format.is_text(),
    )?;
    let mut out = Out::stdout(sel.cfg.format);
    let ctx = Report {
        configs: &configs,
        machines: &machines,
        workloads: &workloads,
        records: &records,
        skipped: &plan.skipped,
        profile: &profile,
        args,
    };
    match out.format {
        crate::output::Format::Text if args.seed_table => ctx.seed_tables(&mut out)?,
        crate::output::Format::Text => {
            ctx.tables(&mut out)?;
            out.line(parallelism.line(records.len()))?;
        }
        crate::output::Format::Json => ctx.json_lines(&mut out)?,
        crate::output::Format::Csv => out.table(&table::long_form(&configs, &workloads, &records))?,
    }
    out.flush()?;
    // Drawn after the tables are out: a figure that cannot be written
    // loses no results.
    if let Some(path) = &args.plot {
        super::run_plot::bars(path, args.plot_metric, &configs, &workloads, &records)?;
    }
    if let Some(path) = &args.plot_reporting {
        super::run_plot::reporting(path, &configs, &workloads, &records)?;
    }
    crashes(&workloads, &configs, &records, args.keep_going)
}

/// Reports what would have crashed the programs (SIGSEGV), once per
/// workload, with where in the trace; fails unless `keep_going`.
fn crashes(workloads: &[Workload], configs: &[NamedConfig], records: &[Record], keep_going: bool) -> Result<()> {
    let mut crashed = 0;
    for (w, workload) in workloads.iter().enumerate() {
        let Some(r) = records.iter().find(|r| r.workload == w && r.outcome.problems.segv > 0) else {
            continue;
        };
        crashed += 1;
        let p = &r.outcome.problems;
        eprintln!(
            "largo: {} under {}: {} access(es) would raise SIGSEGV{}",
            workload.describe(),
            configs[r.config].name,
            p.segv,
            if p.segv_at.len() < p.segv as usize {
                format!(", the first {}:", p.segv_at.len())
            } else {
                ":".into()
            }
        );
        for s in &p.segv_at {
            let at = s
                .event
                .map(|i| match workload.locate(i) {
                    Some(loc) => format!("{loc} (event {i}): "),
                    None => format!("event {i}: "),
                })
                .unwrap_or_default();
            eprintln!("  {at}{s}");
        }
    }
    if crashed > 0 && !keep_going {
        anyhow::bail!("{crashed} workload(s) would have crashed (--keep-going exits 0 anyway)");
    }
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
                    Some(reason) => plan.skipped.push((c, w, reason.to_string())),
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
) -> Result<(Vec<Record>, Parallelism)> {
    let started = Instant::now();
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
                let started = Instant::now();
                let r = run_one(&configs[c], &workloads[w], opts, profile).map(
                    |(machine, outcome, estimate, contention)| Record {
                        config: c,
                        workload: w,
                        machine,
                        by_entry: profile.by_entry(&outcome.entries, workloads[w].faults()),
                        outcome,
                        estimate,
                        contention,
                        elapsed_s: started.elapsed().as_secs_f64(),
                    },
                );
                results.lock().expect("no worker panics")[i] = Some(r);
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    let records = results
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect::<Result<Vec<Record>>>()?;
    let parallelism = Parallelism {
        threads: workers,
        wall_s: started.elapsed().as_secs_f64(),
        serial_s: records.iter().map(|r| r.elapsed_s).sum(),
    };
    Ok((records, parallelism))
}

fn run_one(
    c: &NamedConfig,
    w: &Workload,
    opts: &RunOptions,
    profile: &Profile,
) -> Result<(String, RunOutcome, Estimate, Contention)> {
    let mut m = Machine::new(w.machine_config(&c.config))?;
    let outcome = w
        .run(&mut m, opts, &mut |_, _| {})
        .map_err(|e| anyhow::anyhow!("{} under {}: {e}", w.describe(), c.name))?;
    let estimate = profile.estimate_at(&outcome.counters, w.faults());
    let contention = largo_workloads::contention::estimate(
        &outcome.counters,
        profile,
        w.faults(),
        estimate.kernel_ns,
        outcome.tlb.streams.map_or(0.0, |s| s.user_ns),
        largo_workloads::contention::Concurrency {
            tasks: opts.nr_tasks,
            threads: opts.mode == largo_workloads::TaskMode::Thread,
            cpus: m.config().nr_cpus,
            nodes: m.config().nr_nodes,
            memory: m.config().preset.memory_bandwidth(),
        },
    );
    Ok((m.describe(), outcome, estimate, contention))
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

/// What the outputs of a run show.
struct Report<'a> {
    configs: &'a [NamedConfig],
    machines: &'a [String],
    workloads: &'a [Workload],
    records: &'a [Record],
    skipped: &'a [(usize, usize, String)],
    profile: &'a Profile,
    args: &'a RunArgs,
}

impl Report<'_> {
    /// The seed series' table shape, one per workload.
    fn seed_tables(&self, out: &mut Out) -> std::io::Result<()> {
        for (w, workload) in self.workloads.iter().enumerate() {
            let rows: Vec<&Record> = self.records.iter().filter(|r| r.workload == w).collect();
            let Some(base) = rows.first() else { continue };
            let figures = |r: &Record| {
                let cpus = r.contention.cpus.max(1) as f64;
                let kern = r.contention.kernel_ns_with_waits / cpus;
                let user = r.outcome.tlb.streams.map(|s| s.user_ns / self.args.tasks.max(1) as f64);
                (kern + user.unwrap_or(0.0), kern, user, r.outcome.peak.anon_kb as f64)
            };
            let b = figures(base);
            let pct = |v: f64, base: f64| {
                if base > 0.0 {
                    format!("{:+.1}%", (v - base) / base * 100.0)
                } else {
                    String::new()
                }
            };
            let mut t = Grid::new([
                "config",
                "real-time ms",
                "",
                "kern-time ms",
                "",
                "user-time ms",
                "",
                "memory kB",
                "",
            ])
            .right_from(1);
            for r in &rows {
                let f = figures(r);
                t.row([
                    Cell::text(self.configs[r.config].name.clone()),
                    Cell::num(f.0 / 1e6, 2),
                    Cell::text(pct(f.0, b.0)),
                    Cell::num(f.1 / 1e6, 2),
                    Cell::text(pct(f.1, b.1)),
                    f.2.map_or(Cell::text("n/a"), |u| Cell::num(u / 1e6, 2)),
                    Cell::text(match (f.2, b.2) {
                        (Some(u), Some(bu)) => pct(u, bu),
                        _ => String::new(),
                    }),
                    Cell::int(f.3 as u64),
                    Cell::text(pct(f.3, b.3)),
                ]);
            }
            out.line(format!(
                "{} ({} tasks at once)",
                workload.describe(),
                base.contention.cpus
            ))?;
            out.table(&t)?;
        }
        out.line(
            "per task: kern-time is the estimated kernel time of anonymous-memory work plus the estimated lock waits \
             with --cpus tasks at once; user-time is the TLB model's estimate of the workload's declared access \
             stream (n/a: none declared; traces carry none); real-time is their sum (no I/O, no scheduling); \
             memory is the peak anonymous memory; changes against the first configuration",
        )
    }

    /// One table per workload, a column per configuration it ran under,
    /// then the configurations and what each row counts.
    fn tables(&self, out: &mut Out) -> std::io::Result<()> {
        let mut labels = Vec::new();
        for (w, workload) in self.workloads.iter().enumerate() {
            let row: Vec<&Record> = self.records.iter().filter(|r| r.workload == w).collect();
            let names: Vec<&str> = row.iter().map(|r| self.configs[r.config].name.as_str()).collect();
            out.line(workload.describe())?;
            let (grid, used) = table::comparison(&names, &row);
            labels.extend(used);
            out.table(&grid)?;
            let not_run: Vec<&(usize, usize, String)> = self.skipped.iter().filter(|s| s.1 == w).collect();
            if let Some((_, _, reason)) = not_run.first() {
                let names: Vec<&str> = not_run.iter().map(|s| self.configs[s.0].name.as_str()).collect();
                out.line(format!("not run under {}: {reason}", names.join(", ")))?;
            }
            out.line("")?;
        }
        out.line("configurations:")?;
        for (c, machine) in self.configs.iter().zip(self.machines) {
            let knobs: Vec<String> = c.config.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let knobs = if knobs.is_empty() {
                "defaults".to_string()
            } else {
                knobs.join(" ")
            };
            out.line(format!("  {}: {machine}; {knobs}", c.name))?;
        }
        out.line("rows:")?;
        for (label, meaning) in table::legend(&labels) {
            out.line(format!("  {label}: {meaning}"))?;
        }
        out.line(format!(
            "changes against the first configuration: +x.x%; the difference (+N) where the baseline is below {} \
             (a count) or 0.01 (kernel_ms); a factor from x{} on. kernel_ms: estimated with cost profile {}, \
             faults of recorded programs at the cold-cache costs",
            table::PERCENT_FROM,
            table::FACTOR_FROM,
            self.profile.provenance()
        ))
    }

    fn json_lines(&self, out: &mut Out) -> std::io::Result<()> {
        for (c, w, reason) in self.skipped {
            out.json(&serde_json::json!({
                "config": self.configs[*c].name,
                "workload": self.workloads[*w].describe(),
                "skipped": reason,
            }))?;
        }
        let args = self.args;
        for r in self.records {
            let c = &r.outcome.counters;
            let mut obj = serde_json::json!({
                "config": self.configs[r.config].name,
                "workload": self.workloads[r.workload].describe(),
                "machine": r.machine,
                "knobs": self.configs[r.config].config.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
                "tasks": args.tasks,
                "mode": args.mode.task_mode(),
                "seed": args.seed,
                "largo_version": env!("CARGO_PKG_VERSION"),
                "vmstat": c.vmstat,
                "mthp": c.mthp,
                "meminfo": c.meminfo,
                "buddyinfo": c.buddyinfo,
                "swap": c.swap,
                "memcg": c.memcg,
                "khugepaged": c.khugepaged,
                "allocs": c.allocs,
                "locks": r.contention.locks,
                "contention": {
                    "cpus": r.contention.cpus,
                    "kernel_ns": r.contention.kernel_ns.round() as u64,
                    "kernel_ns_with_waits": r.contention.kernel_ns_with_waits.round() as u64,
                },
                "cost": {
                    "kernel_ns": r.estimate.kernel_ns.round() as u64,
                    // Without the kernel threads' work: what a host charges
                    // to the program's own system time.
                    "task_kernel_ns": r.task_kernel_ns().round() as u64,
                    "by_entry": r.by_entry
                        .iter()
                        .map(|(k, v)| (*k, v.round() as u64))
                        .collect::<std::collections::BTreeMap<_, _>>(),
                    "user_ns": r.outcome.tlb.streams.map(|s| s.user_ns.round() as u64),
                    "profile": self.profile.name,
                    "profile_host": self.profile.host,
                    "profile_measured_at": self.profile.measured_at,
                    "faults": self.workloads[r.workload].faults(),
                    "terms": r.estimate.terms,
                },
                "peak": r.outcome.peak,
                "tlb": r.outcome.tlb,
                "problems": r.outcome.problems,
            });
            if let Some(rep) = &r.outcome.reporting {
                obj["page_reporting"] = serde_json::to_value(rep).expect("serializable");
            }
            out.json(&obj)?;
        }
        Ok(())
    }
}
