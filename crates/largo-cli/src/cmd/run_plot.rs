//! `largo run --plot FILE.svg`: the run table as a grouped bar chart, a
//! group per workload and a bar per configuration, the %change of one
//! metric against the first configuration; and `--plot-reporting
//! FILE.svg`: the free page reporting timeline of each run on a machine
//! with a balloon.

use std::path::Path;

use clap::ValueEnum;

use super::run::Record;
use crate::config::NamedConfig;
use crate::plot::{grouped_bars, line_panels, Panel, Series};
use largo_workloads::Workload;

/// What `--plot` compares.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PlotMetric {
    /// Estimated kernel time of the anonymous-memory work (cost.kernel_ns).
    #[default]
    KernelTime,
    /// Page faults (vmstat pgfault).
    Faults,
    /// Peak anonymous memory (peak.anon_kb).
    Memory,
    /// Estimated kernel time with the lock waits of --cpus tasks at once.
    KernelTimeWithWaits,
}

impl PlotMetric {
    fn label(self) -> &'static str {
        match self {
            PlotMetric::KernelTime => "estimated kernel time",
            PlotMetric::Faults => "page faults (pgfault)",
            PlotMetric::Memory => "peak anonymous memory",
            PlotMetric::KernelTimeWithWaits => "kernel time with lock waits",
        }
    }

    fn of(self, r: &Record) -> f64 {
        match self {
            PlotMetric::KernelTime => r.estimate.kernel_ns,
            PlotMetric::Faults => r.outcome.counters.vmstat.get("pgfault").copied().unwrap_or(0) as f64,
            PlotMetric::Memory => r.outcome.peak.anon_kb as f64,
            PlotMetric::KernelTimeWithWaits => r.contention.kernel_ns_with_waits,
        }
    }
}

/// Refuses figures that cannot be drawn before anything runs: bars need a
/// baseline and another configuration, a reporting timeline a machine
/// with a reporting device.
pub fn check(bars: bool, reporting: bool, configs: &[NamedConfig]) -> Result<(), crate::args::UsageError> {
    if bars && configs.len() < 2 {
        return Err(crate::args::UsageError(
            "--plot: needs two configurations or more (the first is the baseline)".into(),
        ));
    }
    if reporting && configs.iter().all(|c| c.config.balloon.is_none()) {
        return Err(crate::args::UsageError(
            "--plot-reporting: no configuration has a reporting device (add --balloon)".into(),
        ));
    }
    Ok(())
}

/// The %change of `metric` per configuration (after the first) and
/// workload, drawn to `path`.
pub fn bars(
    path: &Path,
    metric: PlotMetric,
    configs: &[NamedConfig],
    workloads: &[Workload],
    records: &[Record],
) -> anyhow::Result<()> {
    check(true, false, configs)?;
    let groups: Vec<String> = workloads.iter().map(|w| short_name(&w.describe())).collect();
    let find = |c: usize, w: usize| records.iter().find(|r| r.config == c && r.workload == w);
    let series: Vec<(String, Vec<f64>)> = (1..configs.len())
        .map(|c| {
            let vals = (0..workloads.len())
                .map(|w| match (find(0, w), find(c, w)) {
                    (Some(b), Some(r)) if metric.of(b) > 0.0 => (metric.of(r) - metric.of(b)) / metric.of(b) * 100.0,
                    _ => f64::NAN,
                })
                .collect();
            (configs[c].name.clone(), vals)
        })
        .collect();
    grouped_bars(
        path,
        &format!("{} against {}", metric.label(), configs[0].name),
        &format!("change in {} (%)", metric.label()),
        &groups,
        &series,
    )?;
    Ok(())
}

/// A workload's name without its parameters (`page_fault1:size=...`).
fn short_name(described: &str) -> String {
    described.split(':').next().unwrap_or(described).to_string()
}

/// Reported memory over time, a line per (configuration, workload) run
/// with a reporting device.
pub fn reporting(
    path: &Path,
    configs: &[NamedConfig],
    workloads: &[Workload],
    records: &[Record],
) -> anyhow::Result<()> {
    let series: Vec<Series> = records
        .iter()
        .filter_map(|r| {
            let rep = r.outcome.reporting.as_ref()?;
            Some(Series {
                name: format!(
                    "{} {}",
                    configs[r.config].name,
                    short_name(&workloads[r.workload].describe())
                ),
                points: rep
                    .timeline
                    .iter()
                    .map(|s| (s.t_ms as f64 / 1000.0, s.reported_kib as f64 / 1024.0))
                    .collect(),
            })
        })
        .collect();
    check(false, true, configs)?;
    if series.iter().all(|s| s.points.is_empty()) {
        return Err(crate::args::UsageError(
            "--plot-reporting: no reporting pass ran (give the workload idle time after its frees, e.g. memhog:idle=30s)"
                .into(),
        )
        .into());
    }
    line_panels(
        path,
        None,
        &[Panel {
            title: "free page reporting: memory reported to the host".into(),
            x_label: "time (s)".into(),
            y_label: "reported (MiB, cumulative)".into(),
            series,
            y_max: None,
            log_x: false,
        }],
    )?;
    Ok(())
}
