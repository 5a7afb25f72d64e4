//! The quick probe: does a cost profile still describe this host now?
//!
//! A profile is measured once (`largo calibrate`), but a VM's costs move
//! with the machine it lands on, the host's load and the guest's kernel:
//! the development VM's page_fault1 at 4K took 135 ms of kernel time on
//! the day the default profile was measured and 291 ms on another day,
//! on another CPU. The probe runs two of the calibration points natively
//! (page_fault1, one 128 MiB pass, at 4K and at 64K folios: the fault and
//! zeroing costs every estimate leans on) and compares each with the
//! profile's estimate of it; a profile off by more than
//! [`STALE_ERROR`] at either point is stale.
//!
//! On a guest that reports free pages to its hypervisor it also measures
//! what touching reported memory costs ([`RefaultProbe`]): a first touch
//! of a discarded page is a hypervisor fault, paid inside the guest's
//! kernel time. That cost belongs to the host, not to the kernel, so no
//! calibration point measures it: the probe does, and the profile's
//! `host_refault` takes the measured value.

use serde::Serialize;

use largo_workloads::cost::{Faults, Profile};

use crate::calibrate::{measure_points, prepare};
use crate::kernel_time::HostClock;
use crate::knobs::KnobGuard;
use crate::native;
use crate::validate::ValidateError;

/// The largest relative error of the profile's estimate at a probe point
/// before the profile counts as stale.
pub const STALE_ERROR: f64 = 0.25;

/// The probe's page_fault1: one pass over 128 MiB.
const PROBE_SPEC: &str = "page_fault1:size=128M,iterations=1";

/// Memory the refault probe touches in PMD-sized folios.
const REFAULT_SPEC: &str = "page_fault1:size=128M,iterations=1";

/// One probe point on the host and as the profile estimates it.
#[derive(Clone, Debug, Serialize)]
pub struct ProbePoint {
    pub point: String,
    pub host_ns: f64,
    pub estimate_ns: f64,
}

impl ProbePoint {
    /// (estimate - host) / host.
    pub fn error(&self) -> f64 {
        (self.estimate_ns - self.host_ns) / self.host_ns.max(1.0)
    }
}

/// The cost of touching memory the hypervisor discarded after a free
/// page report: the same PMD-folio faults on reported memory and right
/// after on the same memory freed again (not yet reported).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RefaultProbe {
    /// Base pages touched per run.
    pub nr_pages: u64,
    pub reported_ns: f64,
    pub resident_ns: f64,
}

impl RefaultProbe {
    /// The extra kernel time per 4 KiB page of reported memory touched.
    pub fn per_page_ns(&self) -> f64 {
        ((self.reported_ns - self.resident_ns) / self.nr_pages.max(1) as f64).max(0.0)
    }
}

/// What the probe found.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub points: Vec<ProbePoint>,
    /// `None` when the host does not report free pages.
    pub refault: Option<RefaultProbe>,
    pub clock: &'static str,
    pub at: String,
}

impl Probe {
    /// The largest |error| of the profile at a probe point.
    pub fn worst_error(&self) -> f64 {
        self.points.iter().map(|p| p.error().abs()).fold(0.0, f64::max)
    }

    pub fn stale(&self) -> bool {
        self.worst_error() > STALE_ERROR
    }

    /// The profile with what the probe measured of the host's conditions:
    /// the refault cost of reported memory.
    pub fn apply(&self, profile: &mut Profile) {
        if let Some(r) = self.refault {
            profile.costs.insert("host_refault".into(), r.per_page_ns());
            profile.priors.retain(|t| t != "host_refault");
        }
    }

    /// One line: each point's host time against the estimate.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .points
            .iter()
            .map(|p| {
                format!(
                    "{}: host {:.1} ms, profile {:.1} ms ({:+.0}%)",
                    p.point,
                    p.host_ns / 1e6,
                    p.estimate_ns / 1e6,
                    p.error() * 100.0
                )
            })
            .collect();
        if let Some(r) = self.refault {
            parts.push(format!(
                "reported memory costs {:.0} ns per 4 KiB page touched",
                r.per_page_ns()
            ));
        }
        parts.join("; ")
    }
}

/// Runs the probe (root): the refault measurement first, while the
/// host's free memory is as idle as it gets, then the page_fault1 points.
pub fn probe(profile: &Profile, clock: &mut HostClock, reports_free_pages: bool) -> Result<Probe, ValidateError> {
    let refault = if reports_free_pages {
        Some(refault_probe(clock)?)
    } else {
        None
    };
    let specs: Vec<(String, Option<u64>, bool)> = [None, Some(64)]
        .into_iter()
        .map(|kb| (PROBE_SPEC.to_string(), kb, false))
        .collect();
    let measured = measure_points(clock, &specs, 1, &mut |_| {}, &|| false)?;
    let points = measured
        .iter()
        .map(|p| ProbePoint {
            point: p.name.clone(),
            host_ns: p.median_ns(),
            estimate_ns: profile.estimate_at(&p.counters, Faults::Hot).kernel_ns,
        })
        .collect();
    Ok(Probe {
        points,
        refault,
        clock: clock.source(),
        at: crate::hostid::now_rfc3339(),
    })
}

/// PMD-folio faults on memory the hypervisor has (an idle guest's free
/// blocks of the reporting order are reported), then at once on the same
/// memory again, freed a moment ago and not reported yet.
pub fn refault_probe(clock: &mut HostClock) -> Result<RefaultProbe, ValidateError> {
    let p = prepare(REFAULT_SPEC, Some(2048), false)?;
    let mut guard = KnobGuard::acquire()?;
    guard.set_all(&p.knobs)?;
    let mut placement = native::place(&p.plan, p.page_size)?;
    let mut once = || {
        clock
            .measure(|| native::run(&mut placement, &p.plan, false).map(|_| ()))
            .map_err(ValidateError::Clock)
            .and_then(|(r, ns)| r.map(|()| ns as f64).map_err(ValidateError::from))
    };
    let reported_ns = once()?;
    let resident_ns = once()?;
    guard.restore()?;
    Ok(RefaultProbe {
        nr_pages: 128 << 8,
        reported_ns,
        resident_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_off_by_more_than_the_threshold_is_stale() {
        let pt = |host: f64, est: f64| ProbePoint {
            point: "p".into(),
            host_ns: host,
            estimate_ns: est,
        };
        let probe = |points| Probe {
            points,
            refault: None,
            clock: "test",
            at: String::new(),
        };
        assert!(!probe(vec![pt(100.0, 110.0), pt(50.0, 45.0)]).stale());
        assert!(probe(vec![pt(100.0, 110.0), pt(290.0, 135.0)]).stale());
        assert!(probe(vec![pt(100.0, 130.0)]).stale());
    }

    #[test]
    fn the_refault_cost_replaces_the_prior() {
        let mut profile = Profile::default_profile();
        assert!(profile.priors.iter().any(|t| t == "host_refault"));
        let probe = Probe {
            points: Vec::new(),
            refault: Some(RefaultProbe {
                nr_pages: 1000,
                reported_ns: 9_000_000.0,
                resident_ns: 1_000_000.0,
            }),
            clock: "test",
            at: String::new(),
        };
        probe.apply(&mut profile);
        assert_eq!(profile.costs["host_refault"], 8000.0);
        assert!(!profile.priors.iter().any(|t| t == "host_refault"));
    }
}
