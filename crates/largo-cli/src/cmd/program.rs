//! `largo validate trace FILE -- CMD`: a recorded program replayed by
//! largo and run natively by the host under each configuration; per-size
//! `anon_fault_alloc` within the tolerance, and the kernel-time change
//! against the first configuration next to largo's estimate of it.

use anyhow::{bail, Context, Result};
use largo_host::program::{validate_programs, ProgramValidation, MIN_SLACK, TOLERANCE};
use largo_workloads::cost::{Faults, Profile};

use super::validate::{TraceValidateArgs, PROGRAM_CONFIGS};
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
    let profile = Profile::default_profile();
    let machines: Vec<_> = configs.iter().map(|c| c.config.clone()).collect();
    let validations = validate_programs(&machines, &trace, &launcher, args.repeats as usize)
        .map_err(|e| anyhow::anyhow!("{}: {e}", trace_path.display()))?;
    let mut out = Out::stdout(args.cfg.format);
    let results: Vec<(String, ProgramValidation)> = configs.iter().map(|c| c.name.clone()).zip(validations).collect();
    for (name, v) in &results {
        out.line(verdict(name, v))?;
        out.table(&rows(name, v))?;
    }
    let (base_name, base) = &results[0];
    // A recorded program faults with cold caches.
    let base_est = profile.estimate_at(&base.largo, Faults::Cold).kernel_ns;
    let mut all_within = true;
    let mut t = Grid::new([
        "configuration".to_string(),
        "host kernel ms".to_string(),
        "runs (ms)".to_string(),
        format!("host change vs {base_name} %"),
        "largo estimate of the change %".to_string(),
    ])
    .right_from(1);
    for (name, v) in &results {
        all_within &= v.within();
        let host_change = (v.host_kernel_ns as f64 - base.host_kernel_ns as f64) / base.host_kernel_ns.max(1) as f64;
        // largo estimates the anonymous-memory part of the change; the
        // rest of the program's kernel time is taken as unchanged.
        let largo_change =
            (profile.estimate_at(&v.largo, Faults::Cold).kernel_ns - base_est) / base.host_kernel_ns.max(1) as f64;
        out.json(&serde_json::json!({
            "trace": trace_path.display().to_string(),
            "config": name,
            "within_tolerance": v.within(),
            "tolerance": TOLERANCE,
            "anon_fault_alloc": v.rows,
            "host_kernel_ns": v.host_kernel_ns,
            "host_kernel_runs_ns": v.host_kernel_runs_ns,
            "host_clock": v.host_clock,
            "host_sys_change": host_change,
            "largo_kernel_change": largo_change,
            "replay": v.replay,
        }))?;
        let runs: Vec<String> = v
            .host_kernel_runs_ns
            .iter()
            .map(|ns| format!("{:.0}", *ns as f64 / 1e6))
            .collect();
        t.row([
            Cell::text(name.clone()),
            Cell::num(v.host_kernel_ns as f64 / 1e6, 1),
            Cell::text(runs.join(" ")),
            Cell::new(
                format!("{:+.1}%", host_change * 100.0),
                format!("{}", host_change * 100.0),
            ),
            Cell::new(
                format!("{:+.1}%", largo_change * 100.0),
                format!("{}", largo_change * 100.0),
            ),
        ]);
    }
    out.line(format!(
        "kernel time (host: {}, median of {} native runs per configuration, interleaved; largo: its estimate of the anonymous-memory work, the rest taken as unchanged):",
        results[0].1.host_clock,
        args.repeats
    ))?;
    out.table(&t)?;
    out.flush()?;
    if !all_within {
        bail!(
            "anon_fault_alloc differs beyond {:.0}% (or {MIN_SLACK} allocations) for some size",
            TOLERANCE * 100.0
        );
    }
    Ok(())
}

fn verdict(config: &str, v: &ProgramValidation) -> String {
    format!(
        "{config}: {} (replayed {} events, {} accesses, {} faults outside anonymous memory; host exit {:?})",
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

/// Per-size anon_fault_alloc, largo and host.
fn rows(config: &str, v: &ProgramValidation) -> Grid {
    let mut g = Grid::new(["config", "size", "largo anon_fault_alloc", "host", "difference"]).right_from(2);
    for r in v.rows.iter().filter(|r| r.largo != 0 || r.host != 0) {
        let pct = if r.host == 0 {
            0.0
        } else {
            (r.largo - r.host) as f64 / r.host as f64 * 100.0
        };
        g.row([
            Cell::text(config),
            Cell::text(r.size.clone()),
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
