//! `largo advise (WORKLOAD | -- CMD)`: which anonymous mTHP sizes should
//! this workload use? It replays the workload under candidate size mixes
//! (each size alone, the seed paper's cumulative sets with and without PMD
//! THP, every size; each in `always` and in `madvise` mode), ranks them by
//! estimated kernel time, recommends the fastest within a memory-bloat
//! budget and prints the sysfs writes that apply it on a host.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use largo_mm::Machine;
use largo_workloads::cost::Profile;
use largo_workloads::{RunOptions, Workload};

use super::run::{load_profile, parse_workload, run_all, Record};
use crate::args::{boot, MachineArgs, PolicyArgs, UsageError};
use crate::config::NamedConfig;
use crate::output::{Cell, FormatArgs, Grid, Out};

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
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT", value_parser = parse_percent, allow_negative_numbers = true)]
    pub max_bloat: f64,
    /// A cost profile (JSON from `largo calibrate`).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// With `-- CMD`: keep the recorded trace in FILE.
    #[arg(long, value_name = "FILE", requires = "command")]
    pub keep_trace: Option<PathBuf>,
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
#[derive(Clone, Debug)]
struct Candidate {
    name: String,
    orders: Vec<u32>,
    mode: Mode,
}

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
    }];
    for mode in [Mode::Always, Mode::Madvise] {
        for set in &sets {
            let suffix = if mode == Mode::Madvise { " (madvise)" } else { "" };
            out.push(Candidate {
                name: format!("{}{suffix}", label(set)),
                orders: set.clone(),
                mode,
            });
        }
    }
    out
}

/// A candidate's figures against the baseline.
struct Scored {
    index: usize,
    kernel_ns: f64,
    kernel_change_pct: f64,
    pgfault: u64,
    faults_change_pct: f64,
    peak_anon_kb: u64,
    peak_change_pct: f64,
    large_share: f64,
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
                kernel_ns: r.estimate.kernel_ns,
                kernel_change_pct: change_pct(r.estimate.kernel_ns, base.estimate.kernel_ns),
                pgfault,
                faults_change_pct: change_pct(pgfault as f64, base_faults),
                peak_anon_kb: peak.anon_kb,
                peak_change_pct,
                large_share: if peak.anon_kb == 0 {
                    0.0
                } else {
                    peak.anon_large_kb as f64 / peak.anon_kb as f64
                },
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
    let profile = load_profile(args.profile.as_deref())?;
    let base = args.machine.config(&args.policy)?;
    let probe = boot(base.clone())?;
    let geo = probe.geometry();
    let page_size = geo.page_size();
    let anon_orders: Vec<u32> = geo.anon_orders().collect();
    let workload = workload(args)?;
    if let Some(reason) = workload.unsupported_on(page_size) {
        return Err(UsageError(format!("{}: {reason}", workload.describe())).into());
    }
    let cands = candidates(&anon_orders, page_size);
    let configs: Vec<NamedConfig> = cands
        .iter()
        .map(|c| {
            let mut config = base.clone();
            config
                .knobs
                .extend(c.settings(&anon_orders).into_iter().map(|(o, mode)| {
                    (
                        format!("transparent_hugepage/hugepages-{}kB/enabled", (page_size << o) >> 10),
                        mode.to_string(),
                    )
                }));
            NamedConfig {
                name: c.name.clone(),
                config,
            }
        })
        .collect();
    let jobs: Vec<(usize, usize)> = (0..configs.len()).map(|c| (c, 0)).collect();
    let workloads = [workload];
    let records = run_all(
        &configs,
        &workloads,
        &jobs,
        &RunOptions::default(),
        &profile,
        args.format.is_text(),
    )?;
    let ranked = rank(score(&records, args.max_bloat));
    let best = ranked
        .iter()
        .find(|s| s.within_budget)
        .expect("the baseline is always within budget");
    let advice = Advice {
        max_bloat_pct: args.max_bloat,
        workload: &workloads[0],
        machine: &probe,
        profile: &profile,
        cmds: commands(&cands[best.index], &anon_orders, page_size),
        cands: &cands,
        ranked: &ranked,
        best,
        page_size,
        anon_orders: &anon_orders,
    };
    let mut out = Out::stdout(args.format);
    out.json(&json(&advice))?;
    report(&advice, &mut out)?;
    out.flush()?;
    Ok(())
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

/// The whole kernel time the recording of a program measured, in ms.
fn recorded_kernel_time(workload: &Workload) -> Option<f64> {
    let Workload::Trace { trace, .. } = workload else {
        return None;
    };
    let ns: f64 = trace.header.get("sys_time_ns")?.parse().ok()?;
    Some(ns / 1e6)
}

/// The ranked candidates with those of identical results folded into the
/// first of them (the madvise mixes of a program that never madvises).
fn fold_alike(ranked: &[Scored]) -> Vec<(&Scored, Vec<usize>)> {
    let mut rows: Vec<(&Scored, Vec<usize>)> = Vec::new();
    for s in ranked {
        let same = |r: &Scored| {
            r.kernel_ns == s.kernel_ns
                && r.pgfault == s.pgfault
                && r.peak_anon_kb == s.peak_anon_kb
                && r.large_share == s.large_share
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
    cands: &'a [Candidate],
    /// Best first.
    ranked: &'a [Scored],
    best: &'a Scored,
    /// The sysfs writes of `best`.
    cmds: Vec<String>,
    page_size: u64,
    anon_orders: &'a [u32],
}

/// The ranked table, what it means, the recommendation and its commands.
fn report(a: &Advice, out: &mut Out) -> std::io::Result<()> {
    let (workload, machine, profile, cands, best) = (a.workload, a.machine, a.profile, a.cands, a.best);
    let mut t = Grid::new([
        "rank",
        "mix",
        "anon kernel_ms (est.)",
        "change",
        "pgfault",
        "change",
        "peak.anon_kb",
        "change",
        "in large folios",
        "",
    ])
    .right_from(2);
    for (i, (s, alike)) in fold_alike(a.ranked).into_iter().enumerate() {
        let mark = if s.index == best.index {
            "<- recommended"
        } else if !s.within_budget {
            "over bloat budget"
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
        t.row([
            Cell::int(i as u64 + 1),
            Cell::new(mix, cands[s.index].name.clone()),
            Cell::num(s.kernel_ns / 1e6, 1),
            change_cell(s.kernel_change_pct),
            Cell::int(s.pgfault),
            change_cell(s.faults_change_pct),
            Cell::int(s.peak_anon_kb),
            change_cell(s.peak_change_pct),
            Cell::new(format!("{:.1}%", s.large_share * 100.0), format!("{}", s.large_share)),
            Cell::text(mark),
        ]);
    }
    let c = &cands[best.index];
    out.line(format!(
        "{}: {} candidate mixes on {}",
        workload.describe(),
        cands.len(),
        machine.describe()
    ))?;
    out.table(&t)?;
    out.line(format!(
        "changes are against {}. anon kernel_ms: largo's estimate of the kernel's anonymous-memory work \
         (faults, zeroing, page tables, allocator, splits, VMA operations) with cost profile '{}' ({}), \
         {} faults; the program's other kernel work (I/O, exec, ...) is not in it and does not change with \
         the mix{}. peak.anon_kb: NR_ANON_MAPPED at its maximum; in large folios: its share in folios above the \
         base page at that moment.\n",
        cands[0].name,
        profile.name,
        profile.host,
        match workload.faults() {
            largo_workloads::cost::Faults::Cold => "cold-cache (a recorded program)",
            largo_workloads::cost::Faults::Hot => "hot-cache (a loop)",
        },
        recorded_kernel_time(workload)
            .map(|ms| format!(" (the recording measured {ms:.1} ms of kernel time in all, tracing included)"))
            .unwrap_or_default()
    ))?;
    out.line(format!(
        "recommendation: {}: anon kernel time {}, page faults {}, peak anon memory {} (budget {:+.1}%)",
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
            "kernel_time_change_pct": finite(s.kernel_change_pct),
            "pgfault": s.pgfault,
            "faults_change_pct": finite(s.faults_change_pct),
            "peak_anon_kb": s.peak_anon_kb,
            "peak_memory_change_pct": finite(s.peak_change_pct),
            "large_folio_share": s.large_share,
            "within_budget": s.within_budget,
        })
    };
    let best_rank = ranked.iter().position(|s| s.index == best.index).expect("ranked") + 1;
    let out = serde_json::json!({
        "workload": a.workload.describe(),
        "machine": a.machine.describe(),
        "profile": a.profile.name,
        "faults": a.workload.faults(),
        "baseline": cands[0].name,
        "max_bloat_pct": a.max_bloat_pct,
        "recommendation": obj(best_rank, best),
        "candidates": ranked.iter().enumerate().map(|(i, s)| obj(i + 1, s)).collect::<Vec<_>>(),
        "commands": a.cmds,
    });
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
        assert_eq!(names.len(), 1 + 2 * 14);
    }

    #[test]
    fn commands_set_every_size() {
        let orders: Vec<u32> = (2..=9).collect();
        let c = Candidate {
            name: "64K".into(),
            orders: vec![4],
            mode: Mode::Always,
        };
        let cmds = commands(&c, &orders, 4096);
        assert_eq!(cmds.len(), 8);
        assert!(cmds.contains(&"echo always > /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled".to_string()));
        assert!(cmds.contains(&"echo never > /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled".to_string()));
    }
}
