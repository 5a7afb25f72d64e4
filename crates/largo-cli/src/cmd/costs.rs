//! The kernel-time part of `largo validate`: the built-in workloads other
//! than page_fault1 timed natively at 4K and 64K folios, next to the cost
//! model's estimates of the same runs.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use largo_host::costcheck::{measure, CostCase, CostResult};
use largo_host::kernel_time::HostClock;
use largo_host::validate::workload_events;
use largo_workloads::cost::Profile;
use largo_workloads::Workload;

use super::run::resolve_configs;
use super::table::{align_right, new_table};
use super::validate::{ValidateArgs, COST_CONFIGS, COST_WORKLOADS};

pub fn run(args: &ValidateArgs, interrupted: &Arc<AtomicBool>) -> Result<()> {
    let specs: Vec<String> = COST_CONFIGS.iter().map(|(n, s)| format!("{n}:{s}")).collect();
    let configs = resolve_configs(&specs, &args.sel.cfg.machine, &args.sel.cfg.policy)?;
    let mut cases = Vec::new();
    for w in COST_WORKLOADS {
        let Workload::Builtin { def, spec } = Workload::parse(w).map_err(anyhow::Error::msg)? else {
            unreachable!("{w} is built in");
        };
        for c in &configs {
            cases.push(CostCase {
                workload: spec.describe(),
                config: c.name.clone(),
                machine: c.config.clone(),
                events: workload_events(&c.config, def, &spec)?,
            });
        }
    }
    let profile = Profile::default_profile();
    let mut clock = HostClock::best();
    let results = measure(&cases, args.repeats as usize, &profile, &mut clock, &|| {
        interrupted.load(Ordering::SeqCst)
    })
    .map_err(|e| anyhow!("timing the workloads (the host knobs are restored): {e}"))?;
    let mut out = std::io::stdout().lock();
    if args.sel.cfg.json {
        for r in &results {
            let obj = serde_json::json!({
                "cost_check": r.workload,
                "config": r.config,
                "host_kernel_ns": r.host_median_ns(),
                "host_kernel_runs_ns": r.host_ns,
                "host_clock": clock.source(),
                "largo_kernel_ns": r.largo_ns.round(),
                "profile": profile.name,
            });
            let _ = writeln!(out, "{obj}");
        }
        return Ok(());
    }
    let _ = write!(out, "{}", render(&results, args.repeats, clock.source(), &profile.name));
    Ok(())
}

/// The table: one row per workload, host and largo at each configuration
/// and the change from the first to the second.
fn render(results: &[CostResult], repeats: u64, clock: &str, profile: &str) -> String {
    let (base, other) = (COST_CONFIGS[0].0, COST_CONFIGS[1].0);
    let mut t = new_table([
        "workload".to_string(),
        format!("host {base} ms"),
        format!("host {other} ms"),
        "host change".to_string(),
        format!("largo {base} ms"),
        format!("largo {other} ms"),
        "largo change".to_string(),
        "gap (pp)".to_string(),
    ]);
    for pair in results.chunks(2) {
        let [a, b] = pair else { continue };
        let (ha, hb) = (a.host_median_ns(), b.host_median_ns());
        let host_change = (hb - ha) / ha.max(1.0) * 100.0;
        let largo_change = (b.largo_ns - a.largo_ns) / a.largo_ns.max(1.0) * 100.0;
        t.add_row([
            a.workload.clone(),
            format!("{:.1}", ha / 1e6),
            format!("{:.1}", hb / 1e6),
            format!("{host_change:+.1}%"),
            format!("{:.1}", a.largo_ns / 1e6),
            format!("{:.1}", b.largo_ns / 1e6),
            format!("{largo_change:+.1}%"),
            format!("{:+.1}", largo_change - host_change),
        ]);
    }
    align_right(&mut t, 1..=7);
    format!(
        "kernel time, {base} vs {other} folios (host: {clock}, median of {repeats} runs after a warm-up, configurations interleaved; largo: cost profile '{profile}'):\n{t}\n"
    )
}
