//! `largo validate reporting`: free page reporting on this host and on a
//! model shaped like it, the two timelines side by side, pass by pass.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use largo_host::reporting_check::{self, per_pass, HostSample};
use largo_mm::Machine;
use largo_workloads::{builtin, RunOptions};

use super::validate::ReportingArgs;
use crate::output::{Grid, Out};

/// A pass is compared on its own when both sides reported at least this
/// share of their largest pass: both bound by the per-list budget. The
/// passes where the freed memory runs out of a list (which blocks remain
/// at which order depends on where the allocation came from, block by
/// block) and the tail (stray frees of other processes on the host) are
/// judged by the cumulative amount instead: after every pass from the one
/// where the host has reported half its total on, the amount reported so
/// far must agree.
const JUDGED_SHARE: f64 = 0.9;
/// Largest difference of a judged pass.
const TOLERANCE: f64 = 0.15;

pub fn run(args: &ReportingArgs) -> Result<()> {
    // The experiment writes and frees memory on the host: only where it
    // may change the host's state (root) and can read it back.
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot validate reporting against this host: {reason}");
    }
    if !reporting_check::available() {
        bail!("cannot compare free page reporting here: the host exposes no reporting counters (/sys/module/page_reporting/parameters/passes, reported_kib)");
    }
    let size = args.size;
    let idle = Duration::from_nanos(args.idle);
    eprintln!(
        "writing and freeing {} MiB on the host, then sampling for {} s ...",
        size >> 20,
        idle.as_secs()
    );
    let (config, host) = reporting_check::host_timeline(size, idle).context("the host experiment")?;
    let mut m = Machine::new(config).context("the host-shaped machine")?;
    let shaped = m.shaped().to_vec();
    let exact = m.exact_layout().cloned();
    // The model writes and frees the same amount ...
    let spec = format!("memhog:size={size}");
    let (def, spec) = builtin::parse(&spec).map_err(|e| anyhow::anyhow!("{e}"))?;
    let out = largo_workloads::run(&mut m, def, &spec, &RunOptions::default(), &mut |_, _| {})?;
    let first = out
        .reporting
        .context("the host-shaped machine has no reporting device")?;
    // ... A host pass that ended less than 2 s after the free was requested
    // before it (another process freed memory meanwhile): the model's pass
    // is scheduled at the same time, mid-way between the host's samples.
    let early = host
        .iter()
        .find(|s| s.passes > 0)
        .filter(|s| s.t_ms < 2000)
        .map(|s| s.t_ms.saturating_sub(250));
    if let Some(ms) = early {
        let r = m.page_alloc_mut().reporting_mut();
        r.state = largo_mm::reporting::PrState::Requested;
        r.due_ns = Some(first.first_free_t_ms * 1_000_000 + ms * 1_000_000);
    }
    // ... and idles as long as the host was sampled.
    m.advance_time(args.idle);
    let first_free = largo_workloads::reporting::FirstFree {
        resident_bytes: None,
        reported_kib: Some(first.reported_kib_before_free),
        t_ms: first.first_free_t_ms,
    };
    let rep = largo_workloads::reporting::ReportingReport::read(&m, first_free).expect("a reporting device");
    // The model's samples since the free, counted from it as the host's are.
    let free_ms = rep.first_free_t_ms;
    let passes_before = rep.timeline.iter().filter(|s| s.t_ms < free_ms).count() as u64;
    let largo: Vec<HostSample> = rep
        .timeline
        .iter()
        .filter(|s| s.t_ms >= free_ms)
        .map(|s| HostSample {
            t_ms: s.t_ms - free_ms,
            passes: s.passes - passes_before,
            reported_kib: s.reported_kib - rep.reported_kib_before_free,
        })
        .collect();
    let passes_and_kib = |v: &[HostSample]| v.iter().map(|s| (s.passes, s.reported_kib)).collect::<Vec<_>>();
    let host_pass = per_pass(&passes_and_kib(&host));
    let largo_pass = per_pass(&passes_and_kib(&largo));
    let verdict = judge(&host_pass, &largo_pass);
    let mut out = Out::stdout(args.format);
    out.json(&serde_json::json!({
        "validate": "reporting",
        "size_bytes": size,
        "host": host,
        "largo": largo,
        "host_per_pass_kib": host_pass,
        "largo_per_pass_kib": largo_pass,
        "shaped_zones": shaped.iter().map(|z| serde_json::json!({
            "zone": z.name, "managed_pages": z.managed_pages, "target_managed_pages": z.target_managed_pages,
            "free_pages": z.free_pages, "target_free_pages": z.target_free_pages})).collect::<Vec<_>>(),
        "exact_layout": exact.as_ref().map(|e| serde_json::json!({
            "snapshot_free_pages": e.snapshot_free_pages, "free_pages": e.free_pages,
            "free_pages_unplaced": e.free_pages_unplaced})),
        "match": verdict.is_ok(),
        "host_pass_requested_before_free": early.is_some(),
    }))?;
    out.line(format!(
        "free page reporting after freeing {} MiB: this host vs largo on a machine laid out as it was just before (--machine host), since the free",
        size >> 20
    ))?;
    out.table(&timelines(&host, &largo))?;
    out.line("reported per pass:")?;
    out.table(&passes(&host_pass, &largo_pass))?;
    out.line(conclusion(&host_pass, &largo_pass, &verdict))?;
    if let Some(ms) = early {
        out.line(format!(
            "note: the host's first pass ended {:.1} s after the free, so it was requested before it; largo's first pass ran {:.2} s after its free",
            (ms + 250) as f64 / 1000.0,
            ms as f64 / 1000.0
        ))?;
    }
    out.flush()?;
    if let Some(path) = &args.plot {
        plot_timelines(path, &host, &largo)?;
    }
    if let Err(why) = verdict {
        bail!("reporting differs: {why}");
    }
    Ok(())
}

/// Where the two sides' reporting parted (amounts in KiB).
#[derive(Debug, thiserror::Error)]
enum Disagreement {
    #[error("pass {pass}: host {} MiB, largo {} MiB ({:+.0}%)", host_kib >> 10, largo_kib >> 10, change_pct(*host_kib, *largo_kib))]
    Pass { pass: usize, host_kib: u64, largo_kib: u64 },
    #[error("after pass {pass}: host {} MiB reported in all, largo {} MiB ({:+.0}%)", host_kib >> 10, largo_kib >> 10, change_pct(*host_kib, *largo_kib))]
    SoFar { pass: usize, host_kib: u64, largo_kib: u64 },
    #[error("no pass to compare: the host reported {} MiB in {host_passes} passes, largo {} MiB in {largo_passes}", host_kib >> 10, largo_kib >> 10)]
    NothingReported {
        host_passes: usize,
        host_kib: u64,
        largo_passes: usize,
        largo_kib: u64,
    },
}

fn change_pct(host: u64, largo: u64) -> f64 {
    (largo as f64 - host as f64) / host.max(1) as f64 * 100.0
}

/// Every budget-bound pass, and the amount reported so far after every
/// pass, within the tolerance; the number of passes judged.
fn judge(host: &[u64], largo: &[u64]) -> Result<usize, Disagreement> {
    let largest = |v: &[u64]| v.iter().copied().max().unwrap_or(0) as f64;
    let (host_max, largo_max) = (largest(host), largest(largo));
    let mut judged = 0;
    for (i, (&h, &l)) in host.iter().zip(largo).enumerate() {
        if h == 0 || (h as f64) < JUDGED_SHARE * host_max || (l as f64) < JUDGED_SHARE * largo_max {
            continue;
        }
        let diff = (l as f64 - h as f64) / h as f64;
        if diff.abs() > TOLERANCE {
            return Err(Disagreement::Pass {
                pass: i + 1,
                host_kib: h,
                largo_kib: l,
            });
        }
        judged += 1;
    }
    if judged == 0 {
        return Err(Disagreement::NothingReported {
            host_passes: host.len(),
            host_kib: host.iter().sum(),
            largo_passes: largo.len(),
            largo_kib: largo.iter().sum(),
        });
    }
    let (mut h_sum, mut l_sum) = (0u64, 0u64);
    let host_total: u64 = host.iter().sum();
    for i in 0..host.len().max(largo.len()) {
        h_sum += host.get(i).copied().unwrap_or(0);
        l_sum += largo.get(i).copied().unwrap_or(0);
        // Early on one pass that ended a list differently weighs too much;
        // from half the host's total on, the running totals must agree.
        if h_sum * 2 < host_total {
            continue;
        }
        let diff = (l_sum as f64 - h_sum as f64) / h_sum.max(1) as f64;
        if diff.abs() > TOLERANCE {
            return Err(Disagreement::SoFar {
                pass: i + 1,
                host_kib: h_sum,
                largo_kib: l_sum,
            });
        }
    }
    Ok(judged)
}

/// Both timelines as lines: reported MiB against seconds since the free.
fn plot_timelines(path: &std::path::Path, host: &[HostSample], largo: &[HostSample]) -> Result<()> {
    let line = |name: &str, samples: &[HostSample]| crate::plot::Series {
        name: name.to_string(),
        points: samples
            .iter()
            .map(|s| (s.t_ms as f64 / 1000.0, s.reported_kib as f64 / 1024.0))
            .collect(),
    };
    crate::plot::line_panels(
        path,
        None,
        &[crate::plot::Panel {
            title: "free page reporting after the free: this host and largo".into(),
            x_label: "time since the free (s)".into(),
            y_label: "reported (MiB, cumulative)".into(),
            series: vec![line("host", host), line("largo", largo)],
            y_max: None,
            log_x: false,
        }],
    )?;
    Ok(())
}

/// Both timelines, a row per second.
fn timelines(host: &[HostSample], largo: &[HostSample]) -> Grid {
    let mut t = Grid::new([
        "t (s)",
        "host passes",
        "host reported (MiB)",
        "largo passes",
        "largo reported (MiB)",
    ])
    .right_from(0);
    for h in host.iter().filter(|h| h.t_ms % 1000 < 500) {
        let l = largo.iter().take_while(|l| l.t_ms <= h.t_ms).last();
        t.row([
            format!("{:.1}", h.t_ms as f64 / 1000.0),
            h.passes.to_string(),
            (h.reported_kib >> 10).to_string(),
            l.map_or("0".into(), |l| l.passes.to_string()),
            l.map_or("0".into(), |l| (l.reported_kib >> 10).to_string()),
        ]);
    }
    t
}

/// What each pass reported, side by side.
fn passes(host_pass: &[u64], largo_pass: &[u64]) -> Grid {
    let mut p = Grid::new(["pass", "host (MiB)", "largo (MiB)", "difference"]).right_from(0);
    for i in 0..host_pass.len().max(largo_pass.len()) {
        let (h, l) = (host_pass.get(i), largo_pass.get(i));
        let diff = match (h, l) {
            (Some(&h), Some(&l)) if h > 0 => format!("{:+.1}%", (l as f64 - h as f64) / h as f64 * 100.0),
            _ => "-".into(),
        };
        p.row([
            (i + 1).to_string(),
            h.map_or("-".into(), |h| (h >> 10).to_string()),
            l.map_or("-".into(), |l| (l >> 10).to_string()),
            diff,
        ]);
    }
    p
}

fn conclusion(host_pass: &[u64], largo_pass: &[u64], verdict: &Result<usize, Disagreement>) -> String {
    match verdict {
        Ok(n) => format!(
            "agree: {n} budget-bound passes (both sides at {:.0}% or more of their largest pass) each within {tol:.0}%, \
             and the amount reported so far within {tol:.0}% after every pass past half the host's total (in all: host {} MiB, largo {} MiB)",
            JUDGED_SHARE * 100.0,
            host_pass.iter().sum::<u64>() >> 10,
            largo_pass.iter().sum::<u64>() >> 10,
            tol = TOLERANCE * 100.0
        ),
        Err(why) => format!("DIFFER: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024;

    #[test]
    fn passes_within_the_tolerance_agree() {
        let host = [600 * MIB, 580 * MIB, 100 * MIB];
        let largo = [620 * MIB, 570 * MIB, 20 * MIB];
        assert_eq!(
            judge(&host, &largo).unwrap(),
            2,
            "the small third pass is not judged alone"
        );
    }

    #[test]
    fn a_budget_bound_pass_off_by_more_than_the_tolerance_differs() {
        let host = [600 * MIB, 600 * MIB];
        let largo = [600 * MIB, 580 * MIB];
        assert!(judge(&host, &largo).is_ok());
        let largo = [600 * MIB, 700 * MIB];
        let why = judge(&host, &largo).unwrap_err();
        assert!(matches!(why, Disagreement::Pass { pass: 2, .. }), "{why}");
        assert_eq!(why.to_string(), "pass 2: host 600 MiB, largo 700 MiB (+17%)");
    }

    #[test]
    fn running_totals_must_agree_past_half_the_host_total() {
        // The middle pass is too small to be judged alone; the totals are.
        let host = [600 * MIB, 100 * MIB, 600 * MIB];
        let largo = [600 * MIB, 0, 600 * MIB];
        assert!(judge(&host, &largo).is_ok(), "within 15% after pass 2: 700 vs 600");
        let host = [600 * MIB, 400 * MIB, 600 * MIB];
        let why = judge(&host, &largo).unwrap_err();
        assert!(matches!(why, Disagreement::SoFar { pass: 2, .. }), "{why}");
    }

    #[test]
    fn nothing_reported_is_no_agreement() {
        assert!(matches!(
            judge(&[0, 0], &[0, 0]),
            Err(Disagreement::NothingReported { .. })
        ));
        assert!(matches!(judge(&[], &[]), Err(Disagreement::NothingReported { .. })));
    }
}
