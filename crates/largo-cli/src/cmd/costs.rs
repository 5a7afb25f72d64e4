//! The kernel-time part of `largo validate`: the built-in workloads other
//! than page_fault1 timed natively at 4K and 64K folios, next to the cost
//! model's estimates of the same runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use largo_host::costcheck::{measure, CostCase, CostResult};
use largo_host::kernel_time::HostClock;
use largo_host::validate::workload_events;
use largo_workloads::cost::Profile;
use largo_workloads::Workload;

use super::validate::{ValidateArgs, COST_CONFIGS, COST_WORKLOADS};
use crate::config;
use crate::output::{Cell, Grid, Out};

pub fn run(args: &ValidateArgs, interrupted: &Arc<AtomicBool>) -> Result<()> {
    let cfg = &args.sel.cfg;
    let configs = config::resolve(&config::suite(COST_CONFIGS), &cfg.machine, &cfg.policy)?;
    let mut cases = Vec::new();
    for w in COST_WORKLOADS {
        let Workload::Builtin { def, spec } = Workload::parse(w)? else {
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
    let mut out = Out::stdout(cfg.format);
    for r in &results {
        out.json(&serde_json::json!({
            "cost_check": r.workload,
            "config": r.config,
            "host_kernel_ns": r.host_median_ns(),
            "host_kernel_runs_ns": r.host_ns,
            "host_clock": clock.source(),
            "largo_kernel_ns": r.largo_ns.round(),
            "profile": profile.name,
        }))?;
    }
    out.line(format!(
        "kernel time, {} vs {} folios (host: {}, median of {} runs after a warm-up, configurations interleaved; largo: cost profile '{}'):",
        COST_CONFIGS[0].0,
        COST_CONFIGS[1].0,
        clock.source(),
        args.repeats,
        profile.name
    ))?;
    out.table(&table(&results))?;
    out.flush()?;
    Ok(())
}

/// The table: one row per workload, host and largo at each configuration
/// and the change from the first to the second.
fn table(results: &[CostResult]) -> Grid {
    let (base, other) = (COST_CONFIGS[0].0, COST_CONFIGS[1].0);
    let mut g = Grid::new([
        "workload".to_string(),
        format!("host {base} ms"),
        format!("host {other} ms"),
        "host change %".to_string(),
        format!("largo {base} ms"),
        format!("largo {other} ms"),
        "largo change %".to_string(),
        "gap (pp)".to_string(),
    ])
    .right_from(1);
    for pair in results.chunks(2) {
        let [a, b] = pair else { continue };
        let (ha, hb) = (a.host_median_ns(), b.host_median_ns());
        let host_change = (hb - ha) / ha.max(1.0) * 100.0;
        let largo_change = (b.largo_ns - a.largo_ns) / a.largo_ns.max(1.0) * 100.0;
        g.row([
            Cell::text(a.workload.clone()),
            Cell::num(ha / 1e6, 1),
            Cell::num(hb / 1e6, 1),
            Cell::new(format!("{host_change:+.1}%"), format!("{host_change}")),
            Cell::num(a.largo_ns / 1e6, 1),
            Cell::num(b.largo_ns / 1e6, 1),
            Cell::new(format!("{largo_change:+.1}%"), format!("{largo_change}")),
            Cell::new(
                format!("{:+.1}", largo_change - host_change),
                format!("{}", largo_change - host_change),
            ),
        ]);
    }
    g
}
