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
    /// Runs of each side, alternating; the medians are reported, and the
    /// median of the pairs' ratios.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    #[command(flatten)]
    pub format: FormatArgs,
}

struct Row {
    size: String,
    pages: u64,
    /// Median wall time of largo's runs.
    largo_s: f64,
    /// Median wall time of the host kernel's runs.
    host_s: Option<f64>,
    /// Median over the pairs of runs of largo's pages/s over the host's.
    ratio: Option<f64>,
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
        let largo_run = || -> Result<(f64, largo_workloads::RunOutcome, Vec<(String, String)>)> {
            let mut m = Machine::new(config.clone()).map_err(|e| UsageError(format!("{size}: {e}")))?;
            let knobs = host_knobs(&m)?;
            let t = Instant::now();
            let out = largo_workloads::run(&mut m, def, &spec, &RunOptions::default(), &mut |_, _| {})?;
            Ok((t.elapsed().as_secs_f64(), out, knobs))
        };
        // An untimed first run gives what the host replays and the knobs
        // it sets.
        let (_, first, knobs) = largo_run()?;
        // Pages written: zeroed pages less the page tables among them.
        let pages = first.counters.work.vm.pages_zeroed - first.counters.work.vm.pgtable_alloc;
        let mut host = match host_reason {
            None => Some(HostSide::new(&knobs, &first.resolved).with_context(|| format!("host run at {size}"))?),
            Some(_) => None,
        };
        // The two sides alternate, so that each pair of runs shares the
        // machine's minute: the ratio of a pair is what a noisy VM spoils least.
        let (mut largo, mut host_s, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.runs {
            let (l, _, _) = largo_run()?;
            largo.push(l);
            if let Some(h) = host.as_mut() {
                let h = h.time().with_context(|| format!("host run at {size}"))?;
                host_s.push(h);
                ratios.push(h / l);
            }
        }
        if let Some(h) = host {
            h.restore()?;
        }
        rows.push(Row {
            size: size.clone(),
            pages,
            largo_s: median(largo),
            host_s: (!host_s.is_empty()).then(|| median(host_s)),
            ratio: (!ratios.is_empty()).then(|| median(ratios)),
        });
    }
    print(&rows, args, host_reason.as_deref())?;
    Ok(())
}

/// The host kernel's side: the page_fault1 loop run natively with the
/// model's THP settings written to sysfs (restored when it ends or fails).
struct HostSide {
    guard: KnobGuard,
    plan: native::Plan,
}

impl HostSide {
    fn new(knobs: &[(String, String)], resolved: &[Vec<largo_workloads::op::ResolvedOp>]) -> Result<HostSide> {
        let events = largo_workloads::op::resolved_to_events(resolved, 4096);
        let plan = native::plan(&events)?;
        let mut guard = KnobGuard::acquire()?;
        guard.set_all(knobs)?;
        Ok(HostSide { guard, plan })
    }

    /// Wall time of one native run, after an untimed warm-up run.
    fn time(&mut self) -> Result<f64> {
        let mut placement = native::place(&self.plan, 4096)?;
        native::run(&mut placement, &self.plan, false)?;
        let t = Instant::now();
        native::run(&mut placement, &self.plan, false)?;
        Ok(t.elapsed().as_secs_f64())
    }

    fn restore(mut self) -> Result<()> {
        Ok(self.guard.restore()?)
    }
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
            "ratio": r.ratio.map(|x| (x * 100.0).round() / 100.0),
            "runs": args.runs,
        }))?;
        t.row([
            Cell::text(r.size.clone()),
            Cell::new(format!("{:.2}M", largo / 1e6), format!("{}", largo.round())),
            host.map_or(Cell::text(""), |h| {
                Cell::new(format!("{:.2}M", h / 1e6), format!("{}", h.round()))
            }),
            r.ratio
                .map_or(Cell::text(""), |x| Cell::new(format!("{x:.1}x"), format!("{x}"))),
        ]);
    }
    out.table(&t)?;
    out.line(format!(
        "page_fault1: {} x 128 MiB, one write per 4 KiB page, munmap; wall time, median of {} runs, the two sides alternating (each host run after a warm-up run); largo / host is the median of the pairs' ratios",
        args.iterations, args.runs
    ))?;
    if let Some(reason) = host_reason {
        out.line(format!("host side not measured: {reason}"))?;
    }
    out.flush()
}
