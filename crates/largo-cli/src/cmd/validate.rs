//! `largo validate`: workloads on the model and natively on this host
//! under the same THP settings (root), counters side by side.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use largo_host::validate::{validate_workload, Validation};
use largo_workloads::builtin::{self, WorkloadDef};
use largo_workloads::WorkloadSpec;

use super::run::{resolve_configs, resolve_workloads, NamedConfig, Selection};
use crate::args::UsageError;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub sel: Selection,
    /// Show every compared counter, also those zero on both sides.
    #[arg(long)]
    pub all: bool,
}

/// The validation suite: the 4K-page configurations of the default suite
/// and PMD THP always / madvise (with MADV_HUGEPAGE mappings).
pub const SUITE_CONFIGS: [(&str, &str); 6] = [
    ("4K", ""),
    ("4K+16K", "--thp 16K"),
    ("4K+16K+32K", "--thp 16K,32K"),
    ("4K+16K+32K+64K", "--thp 16K,32K,64K"),
    ("2M-always", "--thp 2M=always"),
    ("2M-madvise", "--thp 2M=madvise"),
];

pub const SUITE_WORKLOADS: [&str; 6] = [
    "page_fault1:iterations=1",
    "malloc1:iterations=1",
    "anon-r-seq:size=128M",
    "anon-rw-seq:size=64M",
    "anon-cow-seq:size=128M",
    "munmap-partial:size=64M",
];

/// One (configuration, workload) pair to validate.
struct Case {
    config: usize,
    def: &'static WorkloadDef,
    spec: WorkloadSpec,
}

fn cases(args: &ValidateArgs, configs: &[NamedConfig], default_suite: bool) -> Result<Vec<Case>, UsageError> {
    let names: Vec<String> = if args.sel.workloads.is_empty() {
        SUITE_WORKLOADS.iter().map(|s| s.to_string()).collect()
    } else {
        args.sel.workloads.clone()
    };
    let workloads = resolve_workloads(&names)?;
    let mut out = Vec::new();
    for (w, (def, spec)) in workloads.iter().enumerate() {
        for (c, named) in configs.iter().enumerate() {
            let mut spec = spec.clone();
            // Under the madvise configuration, map with MADV_HUGEPAGE.
            if default_suite && named.name.ends_with("madvise") && def.params.iter().any(|p| p.name == "hugepage") {
                spec = builtin::parse(&format!("{},hugepage=1", names[w]))
                    .or_else(|_| builtin::parse(&format!("{}:hugepage=1", names[w])))
                    .map_err(|e| UsageError(e.to_string()))?
                    .1;
            }
            out.push(Case { config: c, def, spec });
        }
    }
    Ok(out)
}

pub fn run(args: &ValidateArgs) -> Result<()> {
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot validate against this host: {reason}");
    }
    let sel = &args.sel;
    let default_suite = sel.configs.is_empty() && sel.machine.machine.is_none() && !sel.policy.is_set();
    let configs = if default_suite {
        let specs: Vec<String> = SUITE_CONFIGS.iter().map(|(n, s)| format!("{n}:{s}")).collect();
        resolve_configs(&specs, &sel.machine, &sel.policy)?
    } else {
        resolve_configs(&sel.configs, &sel.machine, &sel.policy)?
    };
    let cases = cases(args, &configs, default_suite)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // The knobs are restored by the guard after the case in progress.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let mut out = std::io::stdout().lock();
    let mut disagreements = 0;
    for case in &cases {
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted; the host knobs are restored");
        }
        let named = &configs[case.config];
        let v = validate_workload(&named.config, case.def, &case.spec)?;
        if !v.agrees() {
            disagreements += 1;
        }
        let text = if sel.json {
            let obj = serde_json::json!({
                "config": named.name,
                "workload": case.spec.describe(),
                "agrees": v.agrees(),
                "validation": v,
            });
            format!("{obj}\n")
        } else {
            render(&named.name, &case.spec, &v, args.all)
        };
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
    if !sel.json {
        let _ = writeln!(
            out,
            "{} of {} cases agree exactly",
            cases.len() - disagreements,
            cases.len()
        );
    }
    if disagreements > 0 {
        bail!("{disagreements} case(s) differ from the host kernel");
    }
    Ok(())
}

fn render(config: &str, spec: &WorkloadSpec, v: &Validation, all: bool) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["counter", "largo", "host", "diff"]);
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
        t.add_row([r.counter.clone(), r.model.to_string(), r.host.to_string(), diff]);
    }
    for col in 1..=3 {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!(
        "{spec} under {config}: {} ({} counters compared{})\n{t}\nfaults: largo pgfault {}, host task minflt+majflt {}; host kernel time {:.1} ms\n\n",
        if v.agrees() { "agree" } else { "DIFFER" },
        v.rows.len(),
        if v.attempts > 1 { format!(", {} host attempts", v.attempts) } else { String::new() },
        v.model_pgfault,
        v.host_faults,
        v.host_stime_ns as f64 / 1e6,
    )
}
