//! `largo bench fault`: the page_fault1 loop simulated by largo (sim
//! backing) against the same loop run natively by this host's kernel, at
//! each folio size, side by side in one run: pages faulted in per second
//! of wall time.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use largo_host::knobs::KnobGuard;
use largo_host::native;
use largo_host::validate::host_knobs;
use largo_mm::{Machine, MachineConfig};
use largo_types::parse_size;
use largo_workloads::{builtin, RunOptions};

use crate::args::UsageError;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct FaultBenchArgs {
    /// Folio sizes to compare; 4K means no mTHP size enabled.
    #[arg(long, default_value = "4K,16K,64K,2M", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// 128 MiB loops per run.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub iterations: u64,
    /// Runs of each side; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    #[command(flatten)]
    pub format: FormatArgs,
}

struct Row {
    size: String,
    pages: u64,
    largo_s: f64,
    host_s: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn config_for(size: &str) -> Result<MachineConfig, UsageError> {
    let bytes = parse_size(size).map_err(|e| UsageError(e.to_string()))?;
    let knobs = if bytes <= 4096 {
        Vec::new()
    } else {
        largo_workloads::policy::thp_knobs(size).map_err(|e| UsageError(e.to_string()))?
    };
    Ok(MachineConfig {
        knobs,
        ..MachineConfig::default()
    })
}

pub fn run(args: &FaultBenchArgs) -> Result<()> {
    let host_reason = largo_host::unavailable_reason();
    let spec_text = format!("page_fault1:iterations={}", args.iterations);
    let (def, spec) = builtin::parse(&spec_text).map_err(|e| UsageError(e.to_string()))?;
    let mut rows = Vec::new();
    for size in &args.sizes {
        let config = config_for(size)?;
        let mut largo = Vec::new();
        let mut resolved = Vec::new();
        let mut knobs = Vec::new();
        let mut pages = 0;
        for _ in 0..args.runs {
            let mut m = Machine::new(config.clone()).map_err(|e| UsageError(format!("{size}: {e}")))?;
            knobs = host_knobs(&m)?;
            let t = Instant::now();
            let out = largo_workloads::run(&mut m, def, &spec, &RunOptions::default(), &mut |_, _| {})?;
            largo.push(t.elapsed().as_secs_f64());
            // Pages written: zeroed pages less the page tables among them.
            pages = out.counters.work.vm.pages_zeroed - out.counters.work.vm.pgtable_alloc;
            resolved = out.resolved;
        }
        let host_s = if host_reason.is_none() {
            Some(host_time(&knobs, &resolved, args.runs).with_context(|| format!("host run at {size}"))?)
        } else {
            None
        };
        rows.push(Row {
            size: size.clone(),
            pages,
            largo_s: median(largo),
            host_s,
        });
    }
    print(&rows, args, host_reason.as_deref())?;
    Ok(())
}

/// Median wall time of the native runs, each after a warm-up run.
fn host_time(knobs: &[(String, String)], resolved: &[Vec<largo_workloads::op::ResolvedOp>], runs: u32) -> Result<f64> {
    let events = largo_workloads::op::resolved_to_events(resolved, 4096);
    let plan = native::plan(&events)?;
    let mut guard = KnobGuard::acquire()?;
    guard.set_all(knobs)?;
    let mut times = Vec::new();
    for _ in 0..runs {
        let mut placement = native::place(&plan, 4096)?;
        native::run(&mut placement, &plan, false)?;
        let t = Instant::now();
        native::run(&mut placement, &plan, false)?;
        times.push(t.elapsed().as_secs_f64());
    }
    guard.restore()?;
    Ok(median(times))
}

fn print(rows: &[Row], args: &FaultBenchArgs, host_reason: Option<&str>) -> std::io::Result<()> {
    let mut out = Out::stdout(args.format);
    let mut t = Grid::new([
        "folio size",
        "largo (sim) pages/s",
        "host kernel pages/s",
        "largo / host",
    ])
    .right_from(1);
    for r in rows {
        let largo = r.pages as f64 / r.largo_s;
        let host = r.host_s.map(|s| r.pages as f64 / s);
        out.json(&serde_json::json!({
            "bench": "fault",
            "size": r.size,
            "pages": r.pages,
            "largo_pages_per_s": largo.round(),
            "host_pages_per_s": host.map(f64::round),
            "ratio": host.map(|h| (largo / h * 100.0).round() / 100.0),
            "runs": args.runs,
        }))?;
        t.row([
            Cell::text(r.size.clone()),
            Cell::new(format!("{:.2}M", largo / 1e6), format!("{}", largo.round())),
            host.map_or(Cell::text(""), |h| {
                Cell::new(format!("{:.2}M", h / 1e6), format!("{}", h.round()))
            }),
            host.map_or(Cell::text(""), |h| {
                Cell::new(format!("{:.1}x", largo / h), format!("{}", largo / h))
            }),
        ]);
    }
    out.table(&t)?;
    out.line(format!(
        "page_fault1: {} x 128 MiB, one write per 4 KiB page, munmap; wall time, median of {} runs (host runs after a warm-up run)",
        args.iterations, args.runs
    ))?;
    if let Some(reason) = host_reason {
        out.line(format!("host side not measured: {reason}"))?;
    }
    out.flush()
}
