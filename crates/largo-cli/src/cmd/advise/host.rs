//! What `advise` knows of the host it estimates for: a cost profile
//! checked against it now ([`largo_host::fresh`]) and the program's whole
//! kernel time, which estimates are stated against.

use anyhow::Result;
use largo_host::fresh::{fresh_profile, Freshness, Origin};
use largo_workloads::cost::Profile;
use largo_workloads::Workload;

use crate::output::Out;

/// The profile for this host, probed (and recalibrated when stale unless
/// `no_recalibrate`); what happened goes to stderr as it happens.
pub fn host_profile(
    given: Option<Profile>,
    no_recalibrate: bool,
    reports_free_pages: bool,
) -> Result<(Profile, Freshness)> {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (profile, fresh) = fresh_profile(given, !no_recalibrate, reports_free_pages, &mut |what| {
        if tty {
            eprint!("\r\x1b[K{what}");
        }
    })
    .map_err(|e| anyhow::anyhow!("checking the cost profile against this host (its knobs are restored): {e}"))?;
    if tty {
        eprint!("\r\x1b[K");
    }
    Ok((profile, fresh))
}

/// The lines that say which profile the estimates use and whether it
/// holds on this host.
pub fn freshness_lines(profile: &Profile, fresh: &Freshness) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = &fresh.stale_probe {
        out.push(format!(
            "the cost profile was stale on this host ({}): recalibrated",
            p.describe()
        ));
    }
    let origin = match &fresh.origin {
        Origin::Given => "given".to_string(),
        Origin::Default => "the checked-in default".to_string(),
        Origin::Cached(p) => format!("cached for this boot in {}", p.display()),
        Origin::Recalibrated(p) => format!("measured now, cached in {}", p.display()),
    };
    out.push(format!("cost profile {} ({origin})", profile.provenance()));
    match (&fresh.probe, &fresh.unchecked) {
        (Some(p), _) if p.stale() => out.push(format!(
            "WARNING: the estimates use a stale profile: the probe found it off by {:.0}% on this host ({}); \
             drop --no-recalibrate or --profile to recalibrate",
            p.worst_error() * 100.0,
            p.describe()
        )),
        (Some(p), _) => out.push(format!("probe: {} (clock: {})", p.describe(), p.clock)),
        (None, Some(why)) => out.push(format!("profile not checked against this host: {why}")),
        (None, None) => {}
    }
    out
}

/// A program's whole kernel time with 4K folios: what estimates of the
/// change are stated against.
#[derive(Clone, Debug)]
pub struct WholeTime {
    pub ns: f64,
    pub ci95_ns: Option<f64>,
    /// Where it comes from, for the report.
    pub source: String,
}

/// The whole kernel time the trace's header holds: measured untraced
/// when it was recorded (`largo record --baseline-runs`), else the
/// recorded run itself (tracing included, so an overestimate).
pub fn recorded_whole_time(workload: &Workload) -> Option<WholeTime> {
    let Workload::Trace { trace, .. } = workload else {
        return None;
    };
    let h = &trace.header;
    let num = |k: &str| h.get(k).and_then(|v| v.parse::<f64>().ok());
    if let Some(ns) = num("untraced_sys_time_ns") {
        return Some(WholeTime {
            ns,
            ci95_ns: num("untraced_sys_time_ci_ns"),
            source: format!(
                "measured untraced when recorded, {} runs",
                h.get("untraced_runs").unwrap_or("?")
            ),
        });
    }
    num("sys_time_ns").map(|ns| WholeTime {
        ns,
        ci95_ns: None,
        source: "the recorded run, tracing included (an overestimate)".into(),
    })
}

/// Prints `lines` as text.
pub fn print_lines(out: &mut Out, lines: &[String]) -> std::io::Result<()> {
    for l in lines {
        out.line(l)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_trace::{Header, Trace};

    fn trace_with(keys: &[(&str, &str)]) -> Workload {
        let mut header = Header::new();
        for (k, v) in keys {
            header.set(k, *v);
        }
        Workload::from_trace(
            "t",
            Trace {
                header,
                events: Vec::new(),
            },
        )
    }

    #[test]
    fn the_untraced_time_is_preferred_to_the_traced_run() {
        let w = trace_with(&[
            ("sys_time_ns", "128000000"),
            ("untraced_sys_time_ns", "75000000"),
            ("untraced_sys_time_ci_ns", "9000000"),
            ("untraced_runs", "5"),
        ]);
        let t = recorded_whole_time(&w).expect("a whole time");
        assert_eq!((t.ns, t.ci95_ns), (75e6, Some(9e6)));
        assert!(t.source.contains("5 runs"), "{}", t.source);
        let old = recorded_whole_time(&trace_with(&[("sys_time_ns", "128000000")])).expect("a whole time");
        assert_eq!(old.ns, 128e6);
        assert!(old.source.contains("tracing included"), "{}", old.source);
        assert!(recorded_whole_time(&trace_with(&[])).is_none());
    }
}
