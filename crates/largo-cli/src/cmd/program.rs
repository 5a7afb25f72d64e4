//! `largo validate trace FILE -- CMD`: a recorded program replayed by
//! largo and run natively by the host under each configuration; per-size
//! `anon_fault_alloc` within the tolerance, and the kernel-time change
//! against the first configuration next to largo's estimate of it.
//! `largo validate --suite programs` does the same for every shipped
//! recorded program whose inputs are present, on a model of this host
//! with a cost profile checked against it, adding the mix `advise`
//! recommends to the configurations.

use anyhow::{bail, Context, Result};
use largo_host::program::{validate_programs, ProgramValidation, MIN_SLACK, TOLERANCE};
use largo_host::stats::{estimate_agrees, paired_change_pct, Summary};
use largo_mm::MachineConfig;
use largo_workloads::cost::{Faults, Profile};
use largo_workloads::Workload;

use super::validate::{TraceValidateArgs, ValidateArgs, PROGRAM_CONFIGS};
use crate::args::{MachineArgs, MachineChoice, PolicyArgs};
use crate::config::{resolve, suite};
use crate::output::{Cell, Grid, Out};

pub fn run(args: &TraceValidateArgs) -> Result<()> {
    let trace_path = &args.trace;
    let trace = largo_trace::read_trace(trace_path).with_context(|| format!("reading {}", trace_path.display()))?;
    let configs = args.cfg.resolve_or(PROGRAM_CONFIGS)?;
    let command = args.command.clone();
    let launcher = || {
        let mut c = std::process::Command::new(&command[0]);
        c.args(&command[1..]);
        c
    };
    let machines: Vec<_> = configs.iter().map(|c| c.config.clone()).collect();
    let validations = validate_programs(&machines, &trace, &launcher, args.repeats as usize)
        .map_err(|e| anyhow::anyhow!("{}: {e}", trace_path.display()))?;
    let mut out = Out::stdout(args.cfg.format);
    let results: Vec<(String, ProgramValidation)> = configs.iter().map(|c| c.name.clone()).zip(validations).collect();
    let all_within = report(
        &trace_path.display().to_string(),
        &results,
        &Profile::default_profile(),
        &mut out,
    )?;
    out.flush()?;
    if !all_within {
        bail!(
            "anon_fault_alloc or shmem_alloc differs beyond {:.0}% (or {MIN_SLACK} allocations) for some size",
            TOLERANCE * 100.0
        );
    }
    Ok(())
}

/// `largo validate --suite programs`.
pub fn run_programs(args: &ValidateArgs) -> Result<()> {
    let base = largo_host::hostshape::host_config().map_err(|e| anyhow::anyhow!("this host's shape: {e}"))?;
    let (profile, fresh) = super::advise::host_profile(None, args.no_recalibrate, base.balloon.is_some())?;
    let mut out = Out::stdout(args.sel.cfg.format);
    for line in super::advise::freshness_lines(&profile, &fresh) {
        out.line(line)?;
    }
    let names = &args.sel.workloads;
    if let Some(unknown) = names.iter().find(|n| largo_workloads::recorded::find(n).is_none()) {
        let known: Vec<&str> = largo_workloads::recorded::RECORDED.iter().map(|r| r.name).collect();
        return Err(crate::args::UsageError(format!(
            "'{unknown}' is not a shipped recorded program: expected one of {}",
            known.join(", ")
        ))
        .into());
    }
    let mut outside = Vec::new();
    let mut summary = Vec::new();
    let chosen = largo_workloads::recorded::RECORDED
        .iter()
        .filter(|r| names.is_empty() || names.iter().any(|n| n == r.name));
    for r in chosen {
        if let Some(missing) = r.inputs.iter().find(|p| !std::path::Path::new(p).exists()) {
            largo_host::skip::skip(
                r.name,
                &format!("{missing} is missing (scripts/recorded-programs.sh inputs prepares it)"),
            );
            continue;
        }
        let trace = r.trace();
        let workload = Workload::from_trace(r.name, trace.clone());
        let host = MachineArgs {
            machine: Some(MachineChoice::Host),
            ..MachineArgs::default()
        };
        let mut configs = resolve(&suite(PROGRAM_CONFIGS), &host, &PolicyArgs::default())?;
        let mut rec = super::advise::model_recommendation(&base, &workload, &profile)?;
        rec.name = format!("recommended: {}", rec.name);
        configs.push(rec);
        let machines: Vec<MachineConfig> = configs.iter().map(|c| c.config.clone()).collect();
        let launcher = || {
            let mut c = std::process::Command::new(r.argv[0]);
            c.args(&r.argv[1..]).current_dir(r.cwd);
            c
        };
        out.line(format!(
            "{}: {} ({} runs per configuration)",
            r.name, r.summary, args.repeats
        ))?;
        out.flush()?;
        let validations = validate_programs(&machines, &trace, &launcher, args.repeats as usize)
            .map_err(|e| anyhow::anyhow!("{}: {e}", r.name))?;
        let results: Vec<(String, ProgramValidation)> =
            configs.iter().map(|c| c.name.clone()).zip(validations).collect();
        if !report(r.name, &results, &profile, &mut out)? {
            outside.push(r.name);
        }
        out.flush()?;
        summary.extend(kernel_rows(&results, &profile).into_iter().skip(1).map(|k| (r.name, k)));
    }
    out.line("estimate against host, every program:")?;
    out.table(&summary_table(&summary))?;
    let agree = summary.iter().filter(|(_, k)| k.agrees()).count();
    out.line(format!(
        "{agree} of {} estimates agree with the host (within {} points, or inside the host's 95% interval)",
        summary.len(),
        largo_host::stats::AGREEMENT_POINTS
    ))?;
    out.flush()?;
    if !outside.is_empty() {
        bail!("anon_fault_alloc outside the tolerance for {}", outside.join(", "));
    }
    Ok(())
}

/// One configuration's kernel time: the host's (mean and 95% interval),
/// its change from the first configuration (paired per round) and
/// largo's estimate of that change.
pub struct KernelRow {
    pub config: String,
    pub host_ns: Summary,
    pub change_pct: Summary,
    /// The anonymous-memory part of the change, as a share of the
    /// program's whole kernel time: the rest is taken as unchanged.
    pub est_change_pct: f64,
    /// largo's estimate of the anonymous-memory kernel time itself, ns
    /// (no host measurement in it).
    pub est_anon_ns: f64,
}

impl KernelRow {
    pub fn agrees(&self) -> bool {
        estimate_agrees(self.est_change_pct, &self.change_pct)
    }
}

/// The kernel-time rows of `results` (the first is the baseline).
pub fn kernel_rows(results: &[(String, ProgramValidation)], profile: &Profile) -> Vec<KernelRow> {
    let ns = |v: &ProgramValidation| v.host_kernel_runs_ns.iter().map(|&n| n as f64).collect::<Vec<_>>();
    let base = &results[0].1;
    let base_runs = ns(base);
    let base_mean = Summary::of(&base_runs).mean.max(1.0);
    // A recorded program faults with cold caches.
    let est = |v: &ProgramValidation| profile.estimate_at(&v.largo, Faults::Cold).kernel_ns;
    let base_est = est(base);
    results
        .iter()
        .map(|(name, v)| KernelRow {
            config: name.clone(),
            host_ns: Summary::of(&ns(v)),
            change_pct: paired_change_pct(&base_runs, &ns(v)),
            est_change_pct: (est(v) - base_est) / base_mean * 100.0,
            est_anon_ns: est(v),
        })
        .collect()
}

/// The per-size counts and the kernel-time table of one program; JSON
/// one object per configuration. Whether every size is within tolerance.
fn report(name: &str, results: &[(String, ProgramValidation)], profile: &Profile, out: &mut Out) -> Result<bool> {
    for (config, v) in results {
        out.line(verdict(config, v))?;
        out.table(&rows(config, v))?;
    }
    let kernel = kernel_rows(results, profile);
    let mut t = Grid::new([
        "configuration".to_string(),
        "host kernel ms".to_string(),
        "+- 95%".to_string(),
        format!("host change vs {}", results[0].0),
        "+- 95%".to_string(),
        "largo estimate".to_string(),
        String::new(),
    ])
    .right_from(1);
    for ((config, v), k) in results.iter().zip(&kernel) {
        out.json(&serde_json::json!({
            "program": name,
            "config": config,
            "within_tolerance": v.within(),
            "tolerance": TOLERANCE,
            "per_size": v.rows,
            "host_kernel_ms": k.host_ns.mean / 1e6,
            "host_kernel_ci_ms": finite(k.host_ns.ci95 / 1e6),
            "host_kernel_runs_ns": v.host_kernel_runs_ns,
            "host_clock": v.host_clock,
            "host_kernel_change_pct": k.change_pct.mean,
            "host_kernel_change_ci_pct": finite(k.change_pct.ci95),
            "est_kernel_change_pct": k.est_change_pct,
            "est_anon_kernel_ms": k.est_anon_ns / 1e6,
            "agrees": k.agrees(),
            "profile": profile.name,
            "replay": v.replay,
        }))?;
        t.row([
            Cell::text(config.clone()),
            Cell::num(k.host_ns.mean / 1e6, 1),
            Cell::num(k.host_ns.ci95 / 1e6, 1),
            pct_cell(k.change_pct.mean),
            Cell::num(k.change_pct.ci95, 1),
            pct_cell(k.est_change_pct),
            Cell::text(if std::ptr::eq(k, &kernel[0]) {
                ""
            } else if k.agrees() {
                "agrees"
            } else {
                "DISAGREES"
            }),
        ]);
    }
    out.line(format!(
        "kernel time (host: {}, mean of {} native runs per configuration, interleaved, changes paired per round; \
         largo: its estimate of the anonymous-memory work with profile {}, as a share of the host's whole kernel \
         time, the rest taken as unchanged):",
        results[0].1.host_clock,
        results[0].1.host_kernel_runs_ns.len(),
        profile.provenance()
    ))?;
    out.table(&t)?;
    Ok(results.iter().all(|(_, v)| v.within()))
}

fn finite(v: f64) -> serde_json::Value {
    if v.is_finite() {
        serde_json::json!(v)
    } else {
        serde_json::Value::Null
    }
}

fn pct_cell(pct: f64) -> Cell {
    Cell::new(format!("{pct:+.1}%"), format!("{pct}"))
}

/// Every program's configurations, host against estimate.
fn summary_table(rows: &[(&str, KernelRow)]) -> Grid {
    let mut t = Grid::new([
        "program",
        "configuration",
        "host change",
        "+- 95%",
        "largo estimate",
        "",
    ])
    .right_from(2);
    for (program, k) in rows {
        t.row([
            Cell::text(*program),
            Cell::text(k.config.clone()),
            pct_cell(k.change_pct.mean),
            Cell::num(k.change_pct.ci95, 1),
            pct_cell(k.est_change_pct),
            Cell::text(if k.agrees() { "agrees" } else { "DISAGREES" }),
        ]);
    }
    t
}

fn verdict(config: &str, v: &ProgramValidation) -> String {
    format!(
        "{config}: {} (replayed {} events, {} accesses, {} faults outside modelled memory (file, special); host exit {:?})",
        if v.within() {
            "within tolerance"
        } else {
            "OUTSIDE TOLERANCE"
        },
        v.replay.events,
        v.replay.accesses,
        v.replay.skipped_faults,
        v.host_exit,
    )
}

/// Per-size anon_fault_alloc and shmem_alloc, largo and host.
fn rows(config: &str, v: &ProgramValidation) -> Grid {
    let mut g = Grid::new(["config", "size", "stat", "largo", "host", "difference"]).right_from(3);
    for r in v.rows.iter().filter(|r| r.largo != 0 || r.host != 0) {
        let pct = if r.host == 0 {
            0.0
        } else {
            (r.largo - r.host) as f64 / r.host as f64 * 100.0
        };
        g.row([
            Cell::text(config),
            Cell::text(r.size.clone()),
            Cell::text(r.stat),
            Cell::text(r.largo.to_string()),
            Cell::text(r.host.to_string()),
            Cell::new(
                format!("{pct:+.1}%{}", if r.within() { "" } else { " !" }),
                format!("{pct}"),
            ),
        ]);
    }
    g
}
