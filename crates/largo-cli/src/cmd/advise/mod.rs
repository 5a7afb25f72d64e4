//! `largo advise (WORKLOAD | -- CMD)`: which anonymous mTHP sizes should
//! this workload use? It replays the workload under candidate size mixes
//! (each size alone, the seed paper's cumulative sets with and without PMD
//! THP, every size; each in `always` and in `madvise` mode), ranks them by
//! estimated kernel time, recommends the fastest within a memory-bloat
//! budget and prints the sysfs writes that apply it on a host.
//!
//! For this host (`-- CMD`, or `--machine host`) the cost profile is first
//! probed against the host and recalibrated when stale ([`host`]), and
//! estimates are stated against the program's whole kernel time; with
//! `--verify` the top candidates run natively and the recommendation is
//! the best measured ([`verify`]).

mod host;
mod verify;

pub use host::{freshness_lines, host_profile};

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use largo_mm::{Machine, MachineConfig};
use largo_workloads::cost::Profile;
use largo_workloads::{RunOptions, Workload};

use super::run::{load_profile, parse_workload, run_all, Record};
use crate::args::{boot, MachineArgs, MachineChoice, PolicyArgs, UsageError};
use crate::config::NamedConfig;
use crate::output::{Cell, FormatArgs, Grid, Out};

/// `--max-bloat`'s default.
pub const DEFAULT_MAX_BLOAT_PCT: f64 = 5.0;

#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// A trace file, a shipped recorded program (`lua-build`) or a built-in
    /// workload specification; or give `-- CMD [ARGS...]` to record a
    /// command on this host first (root).
    #[arg(
        value_name = "WORKLOAD",
        required_unless_present = "command",
        conflicts_with = "command"
    )]
    pub workload: Option<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The largest peak anonymous memory growth over 4K-only folios
    /// a recommendation may cost, in percent.
    #[arg(long, default_value_t = DEFAULT_MAX_BLOAT_PCT, value_name = "PERCENT", value_parser = parse_percent, allow_negative_numbers = true)]
    pub max_bloat: f64,
    /// A cost profile (JSON from `largo calibrate`).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// With `-- CMD`: keep the recorded trace in FILE.
    #[arg(long, value_name = "FILE", requires = "command")]
    pub keep_trace: Option<PathBuf>,
    /// Run the baseline and the top candidates natively on this host
    /// (root), interleaved, and recommend the best measured one.
    #[arg(long, requires = "command")]
    pub verify: bool,
    /// Native runs per configuration: of the baseline, for the program's
    /// whole kernel time, and with --verify of each candidate measured.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=50))]
    pub runs: u64,
    /// With --verify: how many of the model's best candidates to measure.
    #[arg(long, default_value_t = 3, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=28))]
    pub top: u64,
    /// Only say that the cost profile is stale on this host, do not
    /// recalibrate it (about a minute, root).
    #[arg(long)]
    pub no_recalibrate: bool,
    /// `--json`: `{"recommendation", "candidates", "commands"}` as one
    /// object; `--csv`: the ranked candidates.
    #[command(flatten)]
    pub format: FormatArgs,
    /// The command to record and advise on.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}': expected a percentage of 0 or more"));
    }
    Ok(v)
}

/// How a candidate enables its sizes: `enabled` = always, or madvise
/// (only in `MADV_HUGEPAGE` regions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Always,
    Madvise,
}

impl Mode {
    fn sysfs(self) -> &'static str {
        match self {
            Mode::Always => "always",
            Mode::Madvise => "madvise",
        }
    }
}

/// One mix: the anonymous orders it enables; every other order is `never`.
/// With a `policy` (`largo/thp_policy`), the orders a largo order policy
/// chooses from: shown beside the kernel's mixes, never recommended (no
/// kernel has it).
#[derive(Clone, Debug)]
struct Candidate {
    name: String,
    orders: Vec<u32>,
    mode: Mode,
    policy: Option<&'static str>,
}

/// The order policies `advise` ranks beside the static mixes.
const POLICIES: [&str; 2] = ["adaptive", "ingens"];

impl Candidate {
    /// The `enabled` value of every anonymous size of the machine.
    fn settings(&self, anon_orders: &[u32]) -> Vec<(u32, &'static str)> {
        anon_orders
            .iter()
            .map(|&o| {
                (
                    o,
                    if self.orders.contains(&o) {
                        self.mode.sysfs()
                    } else {
                        "never"
                    },
                )
            })
            .collect()
    }
}

/// `16K`, `2M`, `1G`: a folio size as people write it.
fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b => format!("{}K", b >> 10),
    }
}

/// The candidates, baseline (every size `never`) first: each size alone;
/// the seed paper's cumulative sets of the two and three smallest sizes
/// (16K+32K, 16K+32K+64K with 4 KiB pages), without and with the PMD
/// size; every size but PMD; every size; each in always and madvise mode.
fn candidates(anon_orders: &[u32], page_size: u64) -> Vec<Candidate> {
    let pmd = *anon_orders.last().expect("a PMD order");
    let mthp: Vec<u32> = anon_orders.iter().copied().filter(|&o| o != pmd).collect();
    let label = |orders: &[u32]| {
        orders
            .iter()
            .map(|&o| size_label(page_size << o))
            .collect::<Vec<_>>()
            .join("+")
    };
    let mut sets: Vec<Vec<u32>> = anon_orders.iter().map(|&o| vec![o]).collect();
    for n in [2, 3] {
        if mthp.len() >= n {
            sets.push(mthp[..n].to_vec());
            let mut with_pmd = mthp[..n].to_vec();
            with_pmd.push(pmd);
            sets.push(with_pmd);
        }
    }
    if mthp.len() > 3 {
        sets.push(mthp.clone());
    }
    sets.push(anon_orders.to_vec());
    let mut out = vec![Candidate {
        name: format!("{} only", size_label(page_size)),
        orders: Vec::new(),
        mode: Mode::Always,
        policy: None,
    }];
    for mode in [Mode::Always, Mode::Madvise] {
        for set in &sets {
            let suffix = if mode == Mode::Madvise { " (madvise)" } else { "" };
            out.push(Candidate {
                name: format!("{}{suffix}", label(set)),
                orders: set.clone(),
                mode,
                policy: None,
            });
        }
    }
    // Policies choose among the seed's three smallest sizes and PMD (every
    // size on machines with fewer): more sizes only give a policy more
    // ways to overshoot.
    let policy_set = if mthp.len() >= 3 {
        let mut set = mthp[..3].to_vec();
        set.push(pmd);
        set
    } else {
        anon_orders.to_vec()
    };
    for policy in POLICIES {
        out.push(Candidate {
            name: format!("{policy} policy over {}", label(&policy_set)),
            orders: policy_set.clone(),
            mode: Mode::Always,
            policy: Some(policy),
        });
    }
    out
}

/// The candidates no other beats or equals on every one of estimated
/// kernel time (lower), peak anonymous memory (lower) and TLB reach
/// (higher), in rank order: the Pareto front.
fn pareto_front(ranked: &[Scored]) -> Vec<usize> {
    let dominates = |a: &Scored, b: &Scored| {
        let no_worse = a.kernel_ns <= b.kernel_ns && a.peak_anon_kb <= b.peak_anon_kb && a.reach_kb >= b.reach_kb;
        let better = a.kernel_ns < b.kernel_ns || a.peak_anon_kb < b.peak_anon_kb || a.reach_kb > b.reach_kb;
        no_worse && better
    };
    let mut front: Vec<usize> = Vec::new();
    for s in ranked {
        let beaten = ranked.iter().any(|o| dominates(o, s));
        let same_as_kept = front.iter().any(|&i| {
            let k = ranked.iter().find(|r| r.index == i).expect("ranked");
            k.kernel_ns == s.kernel_ns && k.peak_anon_kb == s.peak_anon_kb && k.reach_kb == s.reach_kb
        });
        if !beaten && !same_as_kept {
            front.push(s.index);
        }
    }
    front
}

/// A candidate's figures against the baseline.
struct Scored {
    index: usize,
    /// The program's own estimated kernel time (`cost.task_kernel_ns`):
    /// kernel threads' work (khugepaged's collapses, kcompactd) runs
    /// beside it, is not in a host's system time for the program, and is
    /// shown apart in `kthreads_ns`.
    kernel_ns: f64,
    kthreads_ns: f64,
    kernel_change_pct: f64,
    pgfault: u64,
    faults_change_pct: f64,
    peak_anon_kb: u64,
    peak_change_pct: f64,
    large_share: f64,
    /// TLB reach at the peak (`tlb.reach_kb`).
    reach_kb: u64,
    within_budget: bool,
}

fn change_pct(value: f64, base: f64) -> f64 {
    if base == 0.0 {
        return if value == 0.0 { 0.0 } else { f64::INFINITY };
    }
    (value - base) / base * 100.0
}

fn score(records: &[Record], max_bloat_pct: f64) -> Vec<Scored> {
    let base = &records[0];
    let base_peak = base.outcome.peak.anon_kb as f64;
    let base_faults = base.outcome.counters.vmstat("pgfault") as f64;
    records
        .iter()
        .map(|r| {
            let peak = r.outcome.peak;
            let pgfault = r.outcome.counters.vmstat("pgfault");
            let peak_change_pct = change_pct(peak.anon_kb as f64, base_peak);
            Scored {
                index: r.config,
                kernel_ns: r.task_kernel_ns(),
                kthreads_ns: r.kthreads_ns(),
                kernel_change_pct: change_pct(r.task_kernel_ns(), base.task_kernel_ns()),
                pgfault,
                faults_change_pct: change_pct(pgfault as f64, base_faults),
                peak_anon_kb: peak.anon_kb,
                peak_change_pct,
                large_share: if peak.anon_kb == 0 {
                    0.0
                } else {
                    peak.anon_large_kb as f64 / peak.anon_kb as f64
                },
                reach_kb: r.outcome.tlb.reach_kb,
                within_budget: peak_change_pct <= max_bloat_pct + 1e-9,
            }
        })
        .collect()
}

/// Ranked by estimated kernel time; ties keep candidate order (fewer
/// and smaller sizes, always before madvise).
fn rank(mut scored: Vec<Scored>) -> Vec<Scored> {
    scored.sort_by(|a, b| a.kernel_ns.total_cmp(&b.kernel_ns).then(a.index.cmp(&b.index)));
    scored
}

/// The sysfs writes that apply a candidate on a host.
fn commands(c: &Candidate, anon_orders: &[u32], page_size: u64) -> Vec<String> {
    c.settings(anon_orders)
        .into_iter()
        .map(|(o, mode)| {
            format!(
                "echo {mode} > /sys/kernel/mm/transparent_hugepage/hugepages-{}kB/enabled",
                (page_size << o) >> 10
            )
        })
        .collect()
}

pub fn run(args: &AdviseArgs) -> Result<()> {
    // Ctrl-C or SIGTERM: kill a command being recorded, stop native runs
    // before the next one; the host's knobs are restored on the way out.
    crate::embed::on_interrupt(|| {
        largo_host::interleave::request_stop();
        largo_host::record::interrupt();
    });
    let given = args.profile.as_deref().map(|p| load_profile(Some(p))).transpose()?;
    // A command runs on this host: advise for it, unless told otherwise.
    let mut machine_args = args.machine.clone();
    if !args.command.is_empty() && machine_args.machine.is_none() {
        machine_args.machine = Some(MachineChoice::Host);
    }
    let for_host = matches!(machine_args.machine, Some(MachineChoice::Host));
    let base = machine_args.config(&args.policy)?;
    let (profile, fresh) = if for_host {
        let (p, f) = host::host_profile(given, args.no_recalibrate, base.balloon.is_some())?;
        (p, Some(f))
    } else {
        (given.unwrap_or_else(Profile::default_profile), None)
    };
    let probe = boot(base.clone())?;
    let geo = probe.geometry();
    let page_size = geo.page_size();
    let anon_orders: Vec<u32> = geo.anon_orders().collect();
    let workload = workload(args)?;
    if let Some(reason) = workload.unsupported_on(page_size) {
        return Err(UsageError(format!("{}: {reason}", workload.describe())).into());
    }
    let cands = candidates(&anon_orders, page_size);
    let configs = configs_for(&base, &cands, &anon_orders, page_size);
    let workloads = [workload];
    let ranked = rank_on_model(&configs, &workloads[0], &profile, args.max_bloat, args.format.is_text())?;
    let model_best = ranked
        .iter()
        .find(|s| s.within_budget && cands[s.index].policy.is_none())
        .expect("the baseline is always within budget");
    let est_ns: Vec<f64> = {
        let mut v = vec![0.0; cands.len()];
        for s in &ranked {
            v[s.index] = s.kernel_ns;
        }
        v
    };
    let est_change = |index: usize, whole_ns: f64| (est_ns[index] - est_ns[0]) / whole_ns.max(1.0) * 100.0;
    let (verified, host_clock) = if args.verify {
        let rows: Vec<&Scored> = fold_alike(&ranked, &cands)
            .into_iter()
            .map(|(s, _)| s)
            .filter(|s| cands[s.index].policy.is_none())
            .collect();
        let chosen = verify::chosen(&rows, args.top as usize);
        let (v, clock) = verify::verify(&configs, &chosen, &args.command, args.runs as usize, &est_change)?;
        (Some(v), Some(clock))
    } else {
        (None, None)
    };
    let whole = match (&verified, args.command.is_empty()) {
        (Some(v), _) => Some(host::WholeTime {
            ns: v[0].measured.sys_ns.mean,
            ci95_ns: Some(v[0].measured.sys_ns.ci95),
            source: format!("measured now, {} runs, {}", args.runs, host_clock.unwrap_or("")),
        }),
        (None, false) => {
            let t = super::record::untraced_kernel_time(&args.command, args.runs as usize)?;
            Some(host::WholeTime {
                ns: t.mean_ns,
                ci95_ns: Some(t.ci95_ns),
                source: format!("measured now, {} runs, {}", t.runs, t.clock),
            })
        }
        (None, true) => host::recorded_whole_time(&workloads[0]),
    };
    let best = match &verified {
        Some(v) => {
            let i = verify::best_measured(v).index;
            ranked
                .iter()
                .find(|s| s.index == i)
                .expect("measured candidates are ranked")
        }
        None => model_best,
    };
    let advice = Advice {
        max_bloat_pct: args.max_bloat,
        workload: &workloads[0],
        machine: &probe,
        profile: &profile,
        fresh: fresh.as_ref(),
        whole: whole.as_ref(),
        verified: verified.as_deref(),
        cmds: commands(&cands[best.index], &anon_orders, page_size),
        cands: &cands,
        ranked: &ranked,
        best,
        model_best,
        page_size,
        anon_orders: &anon_orders,
    };
    let mut out = Out::stdout(args.format);
    out.json(&json(&advice))?;
    report(&advice, &mut out)?;
    out.flush()?;
    Ok(())
}

/// One machine configuration per candidate: `base` with every anonymous
/// size set as the candidate says.
fn configs_for(base: &MachineConfig, cands: &[Candidate], anon_orders: &[u32], page_size: u64) -> Vec<NamedConfig> {
    cands
        .iter()
        .map(|c| {
            let mut config = base.clone();
            config
                .knobs
                .extend(c.settings(anon_orders).into_iter().map(|(o, mode)| {
                    (
                        format!("transparent_hugepage/hugepages-{}kB/enabled", (page_size << o) >> 10),
                        mode.to_string(),
                    )
                }));
            if let Some(policy) = c.policy {
                config.knobs.push(("largo/thp_policy".into(), policy.into()));
            }
            NamedConfig {
                name: c.name.clone(),
                config,
            }
        })
        .collect()
}

/// Runs `workload` under every configuration on the model and ranks them.
fn rank_on_model(
    configs: &[NamedConfig],
    workload: &Workload,
    profile: &Profile,
    max_bloat_pct: f64,
    progress: bool,
) -> Result<Vec<Scored>> {
    let jobs: Vec<(usize, usize)> = (0..configs.len()).map(|c| (c, 0)).collect();
    let (records, _) = run_all(
        configs,
        std::slice::from_ref(workload),
        &jobs,
        &RunOptions::default(),
        profile,
        progress,
    )?;
    Ok(rank(score(&records, max_bloat_pct)))
}

/// The mix `advise` recommends for `workload` on `base` (default bloat
/// budget), as a configuration: what `validate --suite programs` checks.
pub fn model_recommendation(base: &MachineConfig, workload: &Workload, profile: &Profile) -> Result<NamedConfig> {
    let machine = boot(base.clone())?;
    let geo = machine.geometry();
    let (page_size, anon_orders) = (geo.page_size(), geo.anon_orders().collect::<Vec<u32>>());
    let cands = candidates(&anon_orders, page_size);
    let mut configs = configs_for(base, &cands, &anon_orders, page_size);
    let ranked = rank_on_model(&configs, workload, profile, DEFAULT_MAX_BLOAT_PCT, false)?;
    let best = ranked
        .iter()
        .find(|s| s.within_budget && cands[s.index].policy.is_none())
        .expect("the baseline is within budget");
    Ok(configs.swap_remove(best.index))
}

/// The workload named, or the command recorded first.
fn workload(args: &AdviseArgs) -> Result<Workload> {
    if let Some(name) = &args.workload {
        return Ok(parse_workload(name)?);
    }
    let (path, temporary) = match &args.keep_trace {
        Some(p) => (p.clone(), false),
        None => (
            std::env::temp_dir().join(format!("largo-advise-{}.ltb.gz", std::process::id())),
            true,
        ),
    };
    let recorded = super::record::run(&super::record::RecordArgs {
        output: path.clone(),
        baseline_runs: 0,
        memcg_max: None,
        swap: None,
        stdout_to_stderr: true,
        command: args.command.clone(),
    });
    let parsed = recorded.and_then(|()| {
        let trace = largo_trace::read_trace(&path).with_context(|| format!("reading {}", path.display()))?;
        let name = args.command.join(" ");
        Ok(Workload::from_trace(&name, trace))
    });
    if temporary {
        let _ = std::fs::remove_file(&path);
    }
    parsed
}

/// The ranked candidates with those of identical results folded into the
/// first of them (the madvise mixes of a program that never madvises);
/// an order policy's row is never folded into a static mix's.
fn fold_alike<'a>(ranked: &'a [Scored], cands: &[Candidate]) -> Vec<(&'a Scored, Vec<usize>)> {
    let mut rows: Vec<(&Scored, Vec<usize>)> = Vec::new();
    for s in ranked {
        let same = |r: &Scored| {
            cands[r.index].policy == cands[s.index].policy
                && r.kernel_ns == s.kernel_ns
                && r.pgfault == s.pgfault
                && r.peak_anon_kb == s.peak_anon_kb
                && r.large_share == s.large_share
                && r.reach_kb == s.reach_kb
        };
        match rows.iter_mut().find(|(r, _)| same(r)) {
            Some((_, alike)) => alike.push(s.index),
            None => rows.push((s, Vec::new())),
        }
    }
    rows
}

fn fmt_change(pct: f64) -> String {
    if pct.is_infinite() {
        "new".to_string()
    } else {
        format!("{pct:+.1}%")
    }
}

/// Everything the outputs show.
struct Advice<'a> {
    max_bloat_pct: f64,
    workload: &'a Workload,
    machine: &'a Machine,
    profile: &'a Profile,
    /// Whether the profile was checked against this host.
    fresh: Option<&'a largo_host::fresh::Freshness>,
    /// The program's whole kernel time, when known.
    whole: Option<&'a host::WholeTime>,
    /// `--verify`: the candidates measured on the host.
    verified: Option<&'a [verify::Verified]>,
    cands: &'a [Candidate],
    /// Best first.
    ranked: &'a [Scored],
    /// The recommendation: the model's, or the best measured.
    best: &'a Scored,
    /// The model's recommendation.
    model_best: &'a Scored,
    /// The sysfs writes of `best`.
    cmds: Vec<String>,
    page_size: u64,
    anon_orders: &'a [u32],
}

/// The ranked table, what it means, the recommendation and its commands.
fn report(a: &Advice, out: &mut Out) -> std::io::Result<()> {
    let (workload, machine, profile, cands, best) = (a.workload, a.machine, a.profile, a.cands, a.best);
    if let Some(f) = a.fresh {
        host::print_lines(out, &host::freshness_lines(profile, f))?;
    }
    let mut header = vec![
        "rank",
        "mix",
        "anon kernel_ms (est.)",
        "change",
        "pgfault",
        "change",
        "peak.anon_kb",
        "change",
        "in large folios",
        "tlb.reach_kb",
        "front",
    ];
    // Kernel threads' work gets a column where it is a noticeable share
    // (1%) of some candidate's own kernel time (JSON: always).
    let show_kthreads = a.ranked.iter().any(|s| s.kthreads_ns >= 0.01 * s.kernel_ns.max(1.0));
    if show_kthreads {
        header.insert(header.len() - 1, "kthread_ms");
    }
    if a.whole.is_some() {
        header.insert(4, "whole kernel (est.)");
    }
    header.push("");
    let mut t = Grid::new(header).right_from(2);
    let base_ns = a.ranked.iter().find(|s| s.index == 0).map_or(0.0, |s| s.kernel_ns);
    let front = pareto_front(a.ranked);
    for (i, (s, alike)) in fold_alike(a.ranked, cands).into_iter().enumerate() {
        let mark = if s.index == best.index {
            "<- recommended"
        } else if s.index == a.model_best.index {
            "<- model's choice"
        } else if !s.within_budget {
            "over bloat budget"
        } else if cands[s.index].policy.is_some() {
            "largo policy, not a kernel setting"
        } else {
            ""
        };
        let mut mix = cands[s.index].name.clone();
        if !alike.is_empty() {
            let all_madvise = alike.iter().all(|&a| cands[a].mode == Mode::Madvise);
            mix.push_str(&format!(
                ", and {} {}mixes alike",
                alike.len(),
                if all_madvise { "madvise " } else { "" }
            ));
        }
        let mut row = vec![
            Cell::int(i as u64 + 1),
            Cell::new(mix, cands[s.index].name.clone()),
            Cell::num(s.kernel_ns / 1e6, 1),
            change_cell(s.kernel_change_pct),
            Cell::int(s.pgfault),
            change_cell(s.faults_change_pct),
            Cell::int(s.peak_anon_kb),
            change_cell(s.peak_change_pct),
            Cell::new(format!("{:.1}%", s.large_share * 100.0), format!("{}", s.large_share)),
            Cell::int(s.reach_kb),
            Cell::text(if front.contains(&s.index) { "*" } else { "" }),
        ];
        if show_kthreads {
            row.insert(row.len() - 1, Cell::num(s.kthreads_ns / 1e6, 1));
        }
        if let Some(w) = a.whole {
            row.insert(4, change_cell((s.kernel_ns - base_ns) / w.ns.max(1.0) * 100.0));
        }
        row.push(Cell::text(mark));
        t.row(row);
    }
    out.line(format!(
        "{}: {} candidate mixes on {}",
        workload.describe(),
        cands.len(),
        machine.describe()
    ))?;
    out.table(&t)?;
    out.line(format!(
        "changes are against {}. anon kernel_ms: largo's estimate of the kernel's anonymous-memory work \
         (faults, zeroing, page tables, allocator, splits, VMA operations{}) done by the program itself, with \
         cost profile {}, {} faults; the program's other kernel work (I/O, exec, ...) is not in it and does \
         not change with the mix; the candidates are ranked by it; work of kernel threads beside the \
         program (khugepaged's collapses, kcompactd, free page reporting: kthread_ms, JSON kthreads_ns) is not. \
         {}peak.anon_kb: NR_ANON_MAPPED at its maximum; in large folios: its share in folios above the \
         base page at that moment; tlb.reach_kb: what the second-level TLB covers of that footprint \
         (PMD mappings, contiguous-PTE ranges, coalesced PTE groups, base pages; TLB of {}); \
         front (*): the Pareto front of kernel time, peak memory and TLB reach; the adaptive and ingens \
         policies are largo's order policies (--thp-policy), not kernel settings, and are never recommended.\n",
        cands[0].name,
        if machine.config().balloon.is_some() {
            ", refaults of memory the host reclaimed after a free page report"
        } else {
            ""
        },
        profile.provenance(),
        match workload.faults() {
            largo_workloads::cost::Faults::Cold => "cold-cache (a recorded program)",
            largo_workloads::cost::Faults::Hot => "hot-cache (a loop)",
        },
        a.whole
            .map(|w| format!(
                "whole kernel: the estimated change as a share of the program's whole kernel time with {}, \
                 {:.1} ms{} ({}). ",
                cands[0].name,
                w.ns / 1e6,
                w.ci95_ns.map(|c| format!(" +- {:.1}", c / 1e6)).unwrap_or_default(),
                w.source
            ))
            .unwrap_or_default(),
        machine.config().preset.tlb().source,
    ))?;
    if let Some(v) = a.verified {
        verified_report(a, v, out)?;
    }
    let c = &cands[best.index];
    out.line(format!(
        "recommendation{}: {}: anon kernel time {}, page faults {}, peak anon memory {} (budget {:+.1}%)",
        if a.verified.is_some() { " (best measured)" } else { "" },
        c.name,
        fmt_change(best.kernel_change_pct),
        fmt_change(best.faults_change_pct),
        fmt_change(best.peak_change_pct),
        a.max_bloat_pct
    ))?;
    if c.mode == Mode::Madvise {
        out.line("(madvise: only memory the program marks with MADV_HUGEPAGE gets these sizes)")?;
    }
    out.line("apply it on a host (root):")?;
    for cmd in &a.cmds {
        out.line(format!("  {cmd}"))?;
    }
    Ok(())
}

/// The measured candidates beside the estimates, and whether the model
/// and the host agree.
fn verified_report(a: &Advice, v: &[verify::Verified], out: &mut Out) -> std::io::Result<()> {
    let mut t = Grid::new([
        "mix",
        "host sys ms",
        "+- 95%",
        "host user ms",
        "host wall ms",
        "host kernel change",
        "+- 95%",
        "largo estimate",
        "",
    ])
    .right_from(1);
    for r in v {
        let m = &r.measured;
        let verdict = if r.index == 0 {
            ""
        } else if r.agrees() {
            "agrees"
        } else {
            "DISAGREES"
        };
        t.row([
            Cell::text(a.cands[r.index].name.clone()),
            Cell::num(m.sys_ns.mean / 1e6, 1),
            Cell::num(m.sys_ns.ci95 / 1e6, 1),
            Cell::num(m.user_ns.mean / 1e6, 1),
            Cell::num(m.wall_ns.mean / 1e6, 1),
            change_cell(m.sys_change_pct.mean),
            Cell::num(m.sys_change_pct.ci95, 1),
            change_cell(r.est_change_pct),
            Cell::text(verdict),
        ]);
    }
    out.line(format!(
        "measured on this host: {} runs per mix, interleaved; kernel-time changes are paired per round, \
         estimates are of the whole program's kernel time",
        v[0].measured.sys_ns.n
    ))?;
    out.table(&t)?;
    let disagreeing: Vec<&str> = v
        .iter()
        .filter(|r| r.index != 0 && !r.agrees())
        .map(|r| a.cands[r.index].name.as_str())
        .collect();
    if !disagreeing.is_empty() {
        out.line(format!(
            "the model and the host disagree on {} (estimate more than 10 points, and outside the 95% interval, \
             from the measured change)",
            disagreeing.join(", ")
        ))?;
    }
    if a.best.index != a.model_best.index {
        out.line(format!(
            "the model's choice {} is not the best measured: recommending {}",
            a.cands[a.model_best.index].name, a.cands[a.best.index].name
        ))?;
    }
    out.line("")
}

fn change_cell(pct: f64) -> Cell {
    Cell::new(
        fmt_change(pct),
        if pct.is_finite() {
            format!("{pct}")
        } else {
            String::new()
        },
    )
}

fn json(a: &Advice) -> serde_json::Value {
    let (cands, ranked, best, page_size) = (a.cands, a.ranked, a.best, a.page_size);
    let obj = |rank: usize, s: &Scored| {
        let c = &cands[s.index];
        let sizes: serde_json::Map<String, serde_json::Value> = c
            .settings(a.anon_orders)
            .into_iter()
            .map(|(o, mode)| (format!("{}kB", (page_size << o) >> 10), mode.into()))
            .collect();
        let finite = |v: f64| {
            if v.is_finite() {
                serde_json::json!(v)
            } else {
                serde_json::Value::Null
            }
        };
        serde_json::json!({
            "rank": rank,
            "mix": c.name,
            "mode": c.mode.sysfs(),
            "enabled": sizes,
            "kernel_ns": s.kernel_ns.round() as u64,
            "kthreads_ns": s.kthreads_ns.round() as u64,
            "kernel_time_change_pct": finite(s.kernel_change_pct),
            "pgfault": s.pgfault,
            "faults_change_pct": finite(s.faults_change_pct),
            "peak_anon_kb": s.peak_anon_kb,
            "peak_memory_change_pct": finite(s.peak_change_pct),
            "large_folio_share": s.large_share,
            "tlb_reach_kb": s.reach_kb,
            "policy": c.policy.unwrap_or("static"),
            "within_budget": s.within_budget,
        })
    };
    let rank_of = |s: &Scored| ranked.iter().position(|r| r.index == s.index).expect("ranked") + 1;
    let mut out = serde_json::json!({
        "workload": a.workload.describe(),
        "machine": a.machine.describe(),
        "profile": a.profile.name,
        "profile_host": a.profile.host,
        "profile_measured_at": a.profile.measured_at,
        "faults": a.workload.faults(),
        "baseline": cands[0].name,
        "max_bloat_pct": a.max_bloat_pct,
        "recommendation": obj(rank_of(best), best),
        "model_recommendation": obj(rank_of(a.model_best), a.model_best),
        "candidates": ranked.iter().enumerate().map(|(i, s)| obj(i + 1, s)).collect::<Vec<_>>(),
        "commands": a.cmds,
        "pareto_front": pareto_front(ranked).into_iter().map(|i| cands[i].name.clone()).collect::<Vec<_>>(),
    });
    if let Some(f) = a.fresh {
        out["probe"] = serde_json::json!({
            "checked": f.probe.is_some(),
            "unchecked_reason": f.unchecked,
            "stale": f.stale(),
            "recalibrated": f.stale_probe.is_some(),
            "points": f.probe.as_ref().map(|p| &p.points),
            "host_refault_ns_per_page": f.probe.as_ref().and_then(|p| p.refault).map(|r| r.per_page_ns()),
        });
    }
    if let Some(w) = a.whole {
        out["whole_kernel_ms"] = serde_json::json!(w.ns / 1e6);
        out["whole_kernel_ci_ms"] = serde_json::json!(w.ci95_ns.map(|c| c / 1e6));
        out["whole_kernel_source"] = serde_json::json!(w.source);
    }
    if let Some(v) = a.verified {
        out["verified"] = v
            .iter()
            .map(|r| {
                let m = &r.measured;
                serde_json::json!({
                    "mix": cands[r.index].name,
                    "host_sys_ms": m.sys_ns.mean / 1e6,
                    "host_sys_ci_ms": m.sys_ns.ci95 / 1e6,
                    "host_user_ms": m.user_ns.mean / 1e6,
                    "host_wall_ms": m.wall_ns.mean / 1e6,
                    "est_kernel_change_pct": r.est_change_pct,
                    "host_kernel_change_pct": m.sys_change_pct.mean,
                    "host_kernel_change_ci_pct": m.sys_change_pct.ci95,
                    "runs": m.sys_ns.n,
                    "agrees": r.agrees(),
                })
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidates_of_a_4k_machine() {
        let names: Vec<String> = candidates(&(2..=9).collect::<Vec<_>>(), 4096)
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names[0], "4K only");
        for want in [
            "16K",
            "2M",
            "16K+32K",
            "16K+32K+64K",
            "16K+32K+64K+2M",
            "16K+32K+64K+128K+256K+512K+1M",
            "16K+32K+64K+128K+256K+512K+1M+2M",
            "64K (madvise)",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
        assert_eq!(names.len(), 1 + 2 * 14 + 2);
        assert!(names.contains(&"adaptive policy over 16K+32K+64K+2M".to_string()));
        assert!(names.contains(&"ingens policy over 16K+32K+64K+2M".to_string()));
    }

    fn scored(index: usize, kernel_ns: f64, peak_anon_kb: u64, reach_kb: u64) -> Scored {
        Scored {
            index,
            kernel_ns,
            kthreads_ns: 0.0,
            kernel_change_pct: 0.0,
            pgfault: 0,
            faults_change_pct: 0.0,
            peak_anon_kb,
            peak_change_pct: 0.0,
            large_share: 0.0,
            reach_kb,
            within_budget: true,
        }
    }

    #[test]
    fn the_pareto_front_keeps_the_undominated() {
        let ranked = vec![
            scored(1, 10.0, 200, 100),
            scored(2, 11.0, 100, 50),
            scored(3, 12.0, 200, 100), // dominated by 1
            scored(4, 13.0, 100, 50),  // dominated by 2
            scored(0, 20.0, 90, 10),
            scored(5, 10.0, 200, 100), // the same as 1: not repeated
        ];
        assert_eq!(pareto_front(&ranked), vec![1, 2, 0]);
    }

    #[test]
    fn commands_set_every_size() {
        let orders: Vec<u32> = (2..=9).collect();
        let c = Candidate {
            name: "64K".into(),
            orders: vec![4],
            mode: Mode::Always,
            policy: None,
        };
        let cmds = commands(&c, &orders, 4096);
        assert_eq!(cmds.len(), 8);
        assert!(cmds.contains(&"echo always > /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled".to_string()));
        assert!(cmds.contains(&"echo never > /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled".to_string()));
    }
}
