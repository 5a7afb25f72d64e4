//! `largo calibrate`: measure this host's kernel running page_fault1 at
//! every anonymous folio size (root; the THP knobs are set and restored)
//! and fit the cost model's coefficients.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use largo_host::calibrate::{fit_profile, measure};
use largo_host::kernel_time::HostClock;
use largo_workloads::cost::Profile;

use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// 128 MiB page_fault1 loops per host run of the page_fault1 points.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub iterations: u64,
    /// Host runs per size (the median is used); sizes are interleaved.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub repeats: u64,
    /// Write the fitted profile (JSON) here, e.g.
    /// crates/largo-workloads/profiles/default.json to make it the default.
    #[arg(long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// The profile's name.
    #[arg(long, default_value = "calibrated")]
    pub name: String,
    /// Fit only reclaim's costs (reclaim_folio, swap_out, swap_in):
    /// swap-pressure under a memory cgroup limit, swapping to a zram
    /// device, less the same unlimited, on this host and on the model;
    /// the other costs are kept from --profile (default: the checked-in
    /// profile). Needs a host without swap, memcg v1 and zram.
    #[arg(long)]
    pub reclaim: bool,
    /// With --reclaim: rounds of the reclaim points (limited and unlimited
    /// back to back in each).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub rounds: u64,
    /// With --reclaim: the profile whose other costs are kept.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
    /// `--json`: the profile as one JSON object; `--csv`: the calibration points.
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: &CalibrateArgs) -> Result<()> {
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot calibrate on this host: {reason}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let flag = stop.clone();
        crate::embed::on_interrupt(move || flag.store(true, Ordering::SeqCst));
    }
    let tty = std::io::stderr().is_terminal() && args.format.is_text();
    if args.reclaim {
        return run_reclaim(args, tty, &|| stop.load(Ordering::SeqCst));
    }
    let mut clock = HostClock::best();
    let points = measure(
        &mut clock,
        args.iterations,
        args.repeats as usize,
        &mut |point| {
            if tty {
                eprint!("\r\x1b[Kmeasuring {point}");
            }
        },
        &|| stop.load(Ordering::SeqCst),
    )
    .context("measuring the host (its knobs are restored)")?;
    if tty {
        eprintln!();
    }
    let method = largo_host::calibrate::method(args.iterations, args.repeats, &clock);
    let profile =
        fit_profile(&points, &args.name, &largo_host::hostid::describe_host(), &method).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.output {
        let text = serde_json::to_string_pretty(&profile)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = Out::stdout(args.format);
    out.json(&serde_json::to_value(&profile)?)?;
    out.table(&points_table(&profile, &points))?;
    out.text(&summary(&profile))?;
    out.flush()?;
    Ok(())
}

/// `--reclaim`: the reclaim points measured, the costs fitted into the
/// base profile.
fn run_reclaim(args: &CalibrateArgs, tty: bool, should_stop: &dyn Fn() -> bool) -> Result<()> {
    use largo_host::reclaimcal;
    let base = super::run::load_profile(args.profile.as_deref())?;
    let points = reclaimcal::measure(
        args.rounds as usize,
        &base,
        &mut |what| {
            if tty {
                eprint!("\r\x1b[Kmeasuring {what}");
            }
        },
        should_stop,
    )
    .context("measuring reclaim on the host (its knobs, swap and cgroups are restored)")?;
    if tty {
        eprintln!();
    }
    let profile = reclaimcal::fit_reclaim(&points, &base, args.rounds as usize).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.output {
        let text = serde_json::to_string_pretty(&profile)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = Out::stdout(args.format);
    out.json(&serde_json::to_value(&profile)?)?;
    let mut t = Grid::new([
        "point",
        "host reclaim ms (least limited - least unlimited)",
        "rounds limited/unlimited (ms)",
        "largo reclaim ms",
        "error",
    ])
    .right_from(1);
    for p in &points {
        let host = p.host_reclaim_ns();
        let model = profile.estimate(&p.limited).kernel_ns - profile.estimate(&p.unlimited).kernel_ns;
        let rounds: Vec<String> = p
            .host_limited_ns
            .iter()
            .zip(&p.host_unlimited_ns)
            .map(|(a, b)| format!("{:.0}/{:.0}", a / 1e6, b / 1e6))
            .collect();
        let err = (model - host) / host.max(1.0) * 100.0;
        t.row([
            Cell::text(p.name.clone()),
            Cell::num(host / 1e6, 1),
            Cell::text(rounds.join(" ")),
            Cell::num(model / 1e6, 1),
            Cell::new(format!("{err:+.1}%"), format!("{err}")),
        ]);
    }
    out.table(&t)?;
    let fitted: Vec<String> = largo_workloads::cost::RECLAIM_FIT_GROUPS
        .iter()
        .map(|(g, _)| format!("{g}={:.1}", profile.cost(g)))
        .collect();
    out.text(&format!(
        "reclaim costs (ns; host system time from rusage, tick-sampled): {}\n",
        fitted.join(" ")
    ))?;
    out.flush()?;
    Ok(())
}

/// Each calibration point: the host's kernel time and the model's.
fn points_table(p: &Profile, points: &[largo_host::calibrate::CalPoint]) -> Grid {
    let mut t = Grid::new(["point", "host kernel ms", "runs (ms)", "largo estimate ms", "error"]).right_from(1);
    // The points come hot first, then cold, as fit and cold_fit.
    for (f, pt) in p.fit.iter().chain(&p.cold_fit).zip(points) {
        let runs: Vec<String> = pt.host_ns.iter().map(|ns| format!("{:.1}", ns / 1e6)).collect();
        let err = (f.model_ns - f.host_ns) / f.host_ns * 100.0;
        t.row([
            Cell::text(f.point.clone()),
            Cell::num(f.host_ns / 1e6, 2),
            Cell::text(runs.join(" ")),
            Cell::num(f.model_ns / 1e6, 2),
            Cell::new(format!("{err:+.1}%"), format!("{err}")),
        ]);
    }
    t
}

/// The 4K/64K ratio and the fitted costs.
fn summary(p: &Profile) -> String {
    let mut s = String::new();
    let pf1 = |size: &str| {
        p.fit
            .iter()
            .find(|f| f.point.starts_with("page_fault1") && f.point.ends_with(&format!("@ {size}")))
    };
    if let (Some(a), Some(b)) = (pf1("4kB"), pf1("64kB")) {
        let host = a.host_ns / b.host_ns;
        let model = a.model_ns / b.model_ns;
        s.push_str(&format!(
            "page_fault1 kernel time ratio 4K/64K: host {host:.2}, largo {model:.2} ({:+.1}%)\n",
            (model - host) / host * 100.0
        ));
    }
    s.push_str("costs (ns):");
    for (k, v) in &p.costs {
        let prior = if p.priors.contains(k) { " (prior)" } else { "" };
        s.push_str(&format!(" {k}={v:.1}{prior}"));
    }
    s.push_str("\ncold-fault costs (ns), for recorded programs:");
    for (k, v) in &p.cold_costs {
        s.push_str(&format!(" {k}={v:.1}"));
    }
    s.push('\n');
    s
}
