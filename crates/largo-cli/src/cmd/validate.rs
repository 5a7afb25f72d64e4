//! `largo validate`: scenarios and workloads on the model and natively on
//! this host under the same THP settings (root); counters and the final
//! folio layout side by side, with a verdict.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use largo_host::scenario::{self, Scenario};
use largo_host::validate::{validate, workload_events, Validation};
use largo_mm::MachineConfig;
use largo_trace::Event;
use largo_workloads::{builtin, Workload};

use super::run::{resolve_configs, resolve_workloads, NamedConfig, Selection};
use crate::args::UsageError;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Scenario files (text traces) or workloads; default: the built-in
    /// scenario suite and the workload suite.
    #[command(flatten)]
    pub sel: Selection,
    /// Which built-in suite runs when none is named.
    #[arg(long, value_enum, default_value = "all")]
    pub suite: SuiteArg,
    /// Show every compared counter of every case, also those zero on both sides.
    #[arg(long)]
    pub all: bool,
    /// A recorded trace of the program given after `--`: the host runs the
    /// program natively under each configuration while largo replays the trace.
    #[arg(long, value_name = "FILE", requires = "command")]
    pub trace: Option<std::path::PathBuf>,
    /// Native runs of the program per configuration, interleaved (the
    /// median kernel time is used).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub repeats: u64,
    /// Skip the kernel-time comparison of the built-in workloads at 4K and
    /// 64K folios that follows the workload suite.
    #[arg(long)]
    pub no_costs: bool,
    /// `largo validate reporting`: memory written and freed on the host
    /// and on a host-shaped model.
    #[arg(long, default_value = "4G", value_parser = crate::args::parse_size_value, value_name = "SIZE")]
    pub size: u64,
    /// `largo validate reporting`: how long the timelines are sampled
    /// after the free.
    #[arg(long, default_value = "40s", value_parser = largo_workloads::spec::parse_duration, value_name = "DURATION")]
    pub idle: u64,
    /// The program of `--trace` and its arguments.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Configurations a recorded program is validated under.
pub const PROGRAM_CONFIGS: [(&str, &str); 4] = [
    ("4K", ""),
    ("4K+16K+32K+64K", "--thp 16K,32K,64K"),
    ("4K+64K", "--thp 64K"),
    ("all-always", "--thp 16K,32K,64K,128K,256K,512K,1M,2M"),
];

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuiteArg {
    All,
    Scenarios,
    Workloads,
}

/// The workload suite: the 4K-page configurations of `largo run`'s
/// default suite and PMD THP always / madvise (MADV_HUGEPAGE mappings).
pub const SUITE_CONFIGS: [(&str, &str); 6] = [
    ("4K", ""),
    ("4K+16K", "--thp 16K"),
    ("4K+16K+32K", "--thp 16K,32K"),
    ("4K+16K+32K+64K", "--thp 16K,32K,64K"),
    ("2M-always", "--thp 2M=always"),
    ("2M-madvise", "--thp 2M=madvise"),
];

/// Workloads whose host kernel time is compared with the cost model's
/// estimate at 4K and 64K folios (page_fault1 is the calibration loop).
pub const COST_WORKLOADS: [&str; 8] = [
    "malloc1:iterations=16",
    "anon-w-seq:size=256M",
    "anon-w-rand:size=256M",
    "anon-r-seq:size=256M",
    "anon-rw-seq:size=256M",
    "anon-cow-seq:size=128M",
    "sparse:size=1G",
    "munmap-partial:size=256M",
];

pub const COST_CONFIGS: [(&str, &str); 2] = [("4K", ""), ("64K", "--thp 64K")];

pub const SUITE_WORKLOADS: [&str; 6] = [
    "page_fault1:iterations=1",
    "malloc1:iterations=1",
    "anon-r-seq:size=128M",
    "anon-rw-seq:size=64M",
    "anon-cow-seq:size=128M",
    "munmap-partial:size=64M",
];

/// One (scenario or workload, configuration) pair.
struct Case {
    name: String,
    config: String,
    machine: MachineConfig,
    events: Arc<Vec<Event>>,
}

fn scenario_cases(s: &Scenario, configs: Option<&[NamedConfig]>) -> Result<Vec<Case>, UsageError> {
    let events = Arc::new(s.trace.events.clone());
    let list: Vec<(String, MachineConfig)> = match configs {
        Some(c) => c.iter().map(|n| (n.name.clone(), n.config.clone())).collect(),
        None => s
            .configs
            .iter()
            .map(|(n, f)| Scenario::machine(f).map(|m| (n.clone(), m)).map_err(UsageError))
            .collect::<Result<_, _>>()?,
    };
    Ok(list
        .into_iter()
        .map(|(config, machine)| Case {
            name: s.name.clone(),
            config,
            machine,
            events: events.clone(),
        })
        .collect())
}

fn workload_cases(names: &[String], configs: &[NamedConfig], madvise_suite: bool) -> Result<Vec<Case>> {
    let mut out = Vec::new();
    for w in resolve_workloads(names)? {
        let Workload::Builtin { def, spec } = w else {
            bail!(
                "{}: a trace is validated as a scenario file (a hand-written trace) or with --trace FILE -- CMD",
                w.describe()
            );
        };
        for c in configs {
            let mut spec = spec.clone();
            if madvise_suite && c.name.ends_with("madvise") && def.params.iter().any(|p| p.name == "hugepage") {
                let text = spec.describe().replace("hugepage=0", "hugepage=1");
                spec = builtin::parse(&text).map_err(|e| UsageError(e.to_string()))?.1;
            }
            let events = workload_events(&c.config, def, &spec)?;
            out.push(Case {
                name: spec.describe(),
                config: c.name.clone(),
                machine: c.config.clone(),
                events: Arc::new(events),
            });
        }
    }
    Ok(out)
}

fn cases(args: &ValidateArgs) -> Result<Vec<Case>> {
    let sel = &args.sel;
    let flags_given = !sel.cfg.configs.is_empty() || sel.cfg.machine.machine.is_some() || sel.cfg.policy.is_set();
    let named = flags_given
        .then(|| resolve_configs(&sel.cfg.configs, &sel.cfg.machine, &sel.cfg.policy))
        .transpose()?;
    let mut out = Vec::new();
    if sel.workloads.is_empty() {
        if matches!(args.suite, SuiteArg::All | SuiteArg::Scenarios) {
            for s in scenario::builtin() {
                out.extend(scenario_cases(&s, named.as_deref())?);
            }
        }
        if matches!(args.suite, SuiteArg::All | SuiteArg::Workloads) {
            let specs: Vec<String> = SUITE_CONFIGS.iter().map(|(n, s)| format!("{n}:{s}")).collect();
            let suite = resolve_configs(&specs, &sel.cfg.machine, &sel.cfg.policy)?;
            let names: Vec<String> = SUITE_WORKLOADS.iter().map(|s| s.to_string()).collect();
            out.extend(workload_cases(
                &names,
                named.as_deref().unwrap_or(&suite),
                named.is_none(),
            )?);
        }
        return Ok(out);
    }
    for w in &sel.workloads {
        let path = std::path::Path::new(w);
        if path.is_file() {
            let text = std::fs::read_to_string(path)?;
            let s =
                Scenario::parse(&text, &path.file_stem().unwrap_or_default().to_string_lossy()).map_err(UsageError)?;
            out.extend(scenario_cases(&s, named.as_deref())?);
        } else {
            let specs: Vec<String> = SUITE_CONFIGS.iter().map(|(n, s)| format!("{n}:{s}")).collect();
            let suite = resolve_configs(&specs, &sel.cfg.machine, &sel.cfg.policy)?;
            out.extend(workload_cases(
                std::slice::from_ref(w),
                named.as_deref().unwrap_or(&suite),
                named.is_none(),
            )?);
        }
    }
    Ok(out)
}

pub fn run(args: &ValidateArgs) -> Result<()> {
    if args.sel.workloads == ["reporting"] {
        return super::reporting::run(args);
    }
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot validate against this host: {reason}");
    }
    if let Some(trace) = &args.trace {
        return super::program::run(args, trace);
    }
    let cases = cases(args)?;
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
        let v = validate(&case.machine, &case.events)
            .map_err(|e| anyhow::anyhow!("{} under {}: {e}", case.name, case.config))?;
        if !v.agrees() {
            disagreements += 1;
        }
        let text = if args.sel.cfg.json {
            format!("{}\n", json(case, &v))
        } else {
            render(case, &v, args.all)
        };
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
    if !args.sel.cfg.json {
        let _ = writeln!(
            out,
            "{} of {} cases agree exactly",
            cases.len() - disagreements,
            cases.len()
        );
    }
    let default_suite = args.sel.workloads.is_empty() && args.sel.cfg.configs.is_empty();
    if default_suite && args.suite != SuiteArg::Scenarios && !args.no_costs {
        drop(out);
        super::costs::run(args, &interrupted)?;
    }
    if disagreements > 0 {
        bail!("{disagreements} case(s) differ from the host kernel");
    }
    Ok(())
}

/// The compared counters of one side in the sections of `largo run --json`.
fn side(v: &Validation, host: bool) -> serde_json::Value {
    let mut vmstat = BTreeMap::new();
    let mut mthp: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for r in &v.rows {
        let value = if host { r.host } else { r.model };
        if let Some(name) = r.counter.strip_prefix("vmstat/") {
            vmstat.insert(name.to_string(), value);
        } else if let Some((size, stat)) = r.counter.strip_prefix("hugepages-").and_then(|c| c.split_once('/')) {
            mthp.entry(size.to_string())
                .or_default()
                .insert(stat.to_string(), value);
        }
    }
    let layout = if host { &v.host_layout } else { &v.model_layout };
    let faults = if host { v.host_faults } else { v.model_pgfault };
    serde_json::json!({ "vmstat": vmstat, "mthp": mthp, "layout": layout, "pgfault": faults })
}

fn json(case: &Case, v: &Validation) -> serde_json::Value {
    serde_json::json!({
        "scenario": case.name,
        "config": case.config,
        "match": v.agrees(),
        "host": side(v, true),
        "largo": side(v, false),
        "host_attempts": v.attempts,
        "host_sys_ns": v.host_stime_ns,
    })
}

fn render(case: &Case, v: &Validation, all: bool) -> String {
    let nonzero: Vec<String> = v
        .nonzero()
        .map(|r| {
            let name = r.counter.trim_start_matches("vmstat/").trim_start_matches("hugepages-");
            if r.agrees() {
                format!("{name} {}", r.model)
            } else {
                format!("{name} largo {} host {}", r.model, r.host)
            }
        })
        .collect();
    let verdict = if v.agrees() { "agree" } else { "DIFFER" };
    let mut s = format!(
        "{verdict:6} {} under {}: {} counters{}, layout {}; {}\n",
        case.name,
        case.config,
        v.rows.len(),
        if v.attempts > 1 {
            format!(" ({} host attempts)", v.attempts)
        } else {
            String::new()
        },
        if v.layout_agrees() { "equal" } else { "DIFFERS" },
        if nonzero.is_empty() {
            "all zero".to_string()
        } else {
            nonzero.join(", ")
        },
    );
    if !v.agrees() || all {
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
        s.push_str(&format!("{t}\n"));
        s.push_str(&format!(
            "  layout largo {:?}\n  layout host  {:?}\n",
            v.model_layout, v.host_layout
        ));
        s.push_str(&format!(
            "  faults: largo pgfault {}, host tasks minflt+majflt {}; host kernel time {:.1} ms\n",
            v.model_pgfault,
            v.host_faults,
            v.host_stime_ns as f64 / 1e6
        ));
    }
    s
}
