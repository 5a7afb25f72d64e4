//! `largo validate --trace FILE -- CMD`: a recorded program replayed by
//! largo and run natively by the host under each configuration; per-size
//! `anon_fault_alloc` within the tolerance, and the kernel-time change
//! against the first configuration next to largo's estimate of it.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use largo_host::program::{validate_programs, ProgramValidation, MIN_SLACK, TOLERANCE};
use largo_workloads::cost::{Faults, Profile};

use super::run::resolve_configs;
use super::validate::{ValidateArgs, PROGRAM_CONFIGS};

pub fn run(args: &ValidateArgs, trace_path: &Path) -> Result<()> {
    let trace = largo_trace::read_trace(trace_path).with_context(|| format!("reading {}", trace_path.display()))?;
    let sel = &args.sel;
    let configs = if sel.cfg.configs.is_empty() {
        let specs: Vec<String> = PROGRAM_CONFIGS.iter().map(|(n, s)| format!("{n}:{s}")).collect();
        resolve_configs(&specs, &sel.cfg.machine, &sel.cfg.policy)?
    } else {
        resolve_configs(&sel.cfg.configs, &sel.cfg.machine, &sel.cfg.policy)?
    };
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
    let mut out = std::io::stdout().lock();
    let mut results = Vec::new();
    for (c, v) in configs.iter().zip(validations) {
        if !sel.cfg.json {
            let _ = out.write_all(render(&c.name, &v).as_bytes());
        }
        results.push((c.name.clone(), v));
    }
    let (base_name, base) = &results[0];
    // A recorded program faults with cold caches.
    let base_est = profile.estimate_at(&base.largo, Faults::Cold).kernel_ns;
    let mut all_within = true;
    let mut cost_rows = Vec::new();
    for (name, v) in &results {
        all_within &= v.within();
        let host_change = (v.host_kernel_ns as f64 - base.host_kernel_ns as f64) / base.host_kernel_ns.max(1) as f64;
        // largo estimates the anonymous-memory part of the change; the
        // rest of the program's kernel time is taken as unchanged.
        let largo_change =
            (profile.estimate_at(&v.largo, Faults::Cold).kernel_ns - base_est) / base.host_kernel_ns.max(1) as f64;
        cost_rows.push((name.clone(), v, host_change, largo_change));
        if sel.cfg.json {
            let obj = serde_json::json!({
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
            });
            let _ = writeln!(out, "{obj}");
        }
    }
    if !sel.cfg.json {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header([
            "configuration",
            "host kernel ms",
            "runs (ms)",
            &format!("host change vs {base_name}"),
            "largo estimate of the change",
        ]);
        for (name, v, h, l) in &cost_rows {
            let runs: Vec<String> = v
                .host_kernel_runs_ns
                .iter()
                .map(|ns| format!("{:.0}", *ns as f64 / 1e6))
                .collect();
            t.add_row([
                name.clone(),
                format!("{:.1}", v.host_kernel_ns as f64 / 1e6),
                runs.join(" "),
                format!("{:+.1}%", h * 100.0),
                format!("{:+.1}%", l * 100.0),
            ]);
        }
        for col in 1..=4 {
            if let Some(c) = t.column_mut(col) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        let _ = writeln!(
            out,
            "kernel time (host: {}, median of {} native runs per configuration, interleaved; largo: its estimate of the anonymous-memory work, the rest taken as unchanged):\n{t}",
            results[0].1.host_clock,
            args.repeats
        );
    }
    if !all_within {
        bail!(
            "anon_fault_alloc differs beyond {:.0}% (or {MIN_SLACK} allocations) for some size",
            TOLERANCE * 100.0
        );
    }
    Ok(())
}

fn render(config: &str, v: &ProgramValidation) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["size", "largo anon_fault_alloc", "host", "difference"]);
    for r in v.rows.iter().filter(|r| r.largo != 0 || r.host != 0) {
        t.add_row([
            r.size.clone(),
            r.largo.to_string(),
            r.host.to_string(),
            format!(
                "{:+.1}%{}",
                if r.host == 0 {
                    0.0
                } else {
                    (r.largo - r.host) as f64 / r.host as f64 * 100.0
                },
                if r.within() { "" } else { " !" }
            ),
        ]);
    }
    for col in 1..=3 {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!(
        "{config}: {} (replayed {} events, {} accesses, {} faults outside anonymous memory; host exit {:?})\n{t}\n",
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
