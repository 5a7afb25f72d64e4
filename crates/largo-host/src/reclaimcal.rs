//! Calibrating reclaim's costs (`largo calibrate --reclaim`, root): the
//! `swap-pressure` workload runs on this host and on the model in a
//! memory cgroup whose limit forces memcg reclaim to swap to zram
//! (`validate`'s set-up: a fresh zram device and cgroup per run, the task
//! pinned), and again in an unlimited cgroup with the same swap device.
//! Reclaim runs inside the task's own charges, so its cost is in the
//! task's system time: the limited run's time less the unlimited one's
//! (measured in the same round) is what reclaim, swap-out and swap-in
//! cost. The fit ([`RECLAIM_FIT_GROUPS`]) explains that difference, on
//! top of the profile's estimate of the unlimited run, with the reclaim
//! terms' counts of the limited run.

use largo_mm::MachineConfig;
use largo_workloads::builtin;
use largo_workloads::cost::{fit, unfitted_ns, FitError, Profile, RECLAIM_FIT_GROUPS};
use largo_workloads::report::Counters;

use crate::scenario::Scenario;
use crate::validate::{validate, workload_events, ValidateError};

/// Bytes the workload writes; the limited cgroup holds a quarter.
const SIZE: &str = "256M";
const LIMIT: &str = "64M";
const SWAP: &str = "1G:zram";

/// One reclaim calibration point: a workload and folio size, run limited
/// and unlimited.
#[derive(Clone, Debug)]
pub struct ReclaimPoint {
    /// `swap-pressure:size=256M,passes=1 @ 64K`.
    pub name: String,
    /// The model's counters of the limited run and of the unlimited one.
    pub limited: Counters,
    pub unlimited: Counters,
    /// Host system time (rusage, ns) of each limited and unlimited run.
    pub host_limited_ns: Vec<f64>,
    pub host_unlimited_ns: Vec<f64>,
}

impl ReclaimPoint {
    /// The least limited run less the least unlimited one, ns. Noise on
    /// this host only adds system time (a compaction stall in an
    /// unlimited run measured 418-484 ms against 47 ms in its other
    /// rounds), so each side's minimum is its least disturbed run.
    pub fn host_reclaim_ns(&self) -> f64 {
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        if self.host_limited_ns.is_empty() {
            return 0.0;
        }
        min(&self.host_limited_ns) - min(&self.host_unlimited_ns)
    }

    /// What is left for the reclaim terms to explain, ns: the host's
    /// reclaim time less the limited run's other work beyond the
    /// unlimited run's, as `profile` estimates them (the target
    /// [`fit_reclaim`] gives the fit, less the priors' share). Not
    /// positive when this host's noise hid the reclaim: the fit has
    /// nothing to explain with it, and with no point positive it fails.
    pub fn reclaim_left_ns(&self, profile: &Profile) -> f64 {
        profile.estimate(&self.unlimited).kernel_ns + self.host_reclaim_ns()
            - unfitted_ns(&self.limited, &profile.costs, RECLAIM_FIT_GROUPS)
    }
}

/// The points: writing only (swap-out) and writing then reading back
/// (swap-in, and swap-out again), at 4K and with 64K folios (one folio
/// reclaimed per 16 pages: tells the per-folio cost from the per-page).
fn points() -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for passes in [0, 1] {
        for thp in ["4K", "64K"] {
            out.push((format!("swap-pressure:size={SIZE},passes={passes}"), thp));
        }
    }
    out
}

fn machine(thp: &str, limited: bool) -> Result<MachineConfig, ValidateError> {
    let thp_flag = if thp == "4K" {
        String::new()
    } else {
        format!("--thp {thp}")
    };
    let limit = if limited {
        format!("--memcg-max {LIMIT}")
    } else {
        String::new()
    };
    Scenario::machine(&format!("--swap {SWAP} {limit} {thp_flag}")).map_err(|e| ValidateError::Config(e.to_string()))
}

/// Runs one case on both sides: the model's counters and the host's
/// system time.
fn run_case(spec_text: &str, config: &MachineConfig) -> Result<(Counters, f64), ValidateError> {
    let (def, spec) = builtin::parse(spec_text)?;
    let events = workload_events(config, def, &spec)?;
    let v = validate(config, &events)?;
    let model = v
        .model
        .ok_or_else(|| ValidateError::Config("validation gave no model counters".into()))?;
    Ok((model, v.host_stime_ns as f64))
}

/// Extra rounds a point gets when its reclaim did not show (a noisy
/// host: a stall in an unlimited run can outweigh the reclaim of one
/// round, and system time is tick-sampled).
const RETRIES: usize = 3;

/// Measures every point `rounds` times, limited and unlimited back to
/// back in each round; a point whose reclaim did not show (its least
/// limited run no slower than its least unlimited one, or no slower by
/// more than `profile` estimates the limited run's other extra work:
/// [`ReclaimPoint::reclaim_left_ns`]) is measured again, up to
/// [`RETRIES`] more rounds. `should_stop` is polled between runs.
pub fn measure(
    rounds: usize,
    profile: &Profile,
    progress: &mut dyn FnMut(&str),
    should_stop: &dyn Fn() -> bool,
) -> Result<Vec<ReclaimPoint>, ValidateError> {
    let hidden = |p: &ReclaimPoint| p.host_reclaim_ns() <= 0.0 || p.reclaim_left_ns(profile) <= 0.0;
    let mut out: Vec<ReclaimPoint> = Vec::new();
    for (spec, thp) in points() {
        let mut point: Option<ReclaimPoint> = None;
        let mut round = 0;
        while round < rounds || (round < rounds + RETRIES && point.as_ref().is_some_and(hidden)) {
            let mut ns = [0.0; 2];
            let mut counters = Vec::new();
            for (k, limited) in [true, false].into_iter().enumerate() {
                if should_stop() {
                    return Err(ValidateError::Interrupted);
                }
                progress(&format!(
                    "{spec} @ {thp}{} (round {})",
                    if limited { "" } else { " unlimited" },
                    round + 1
                ));
                let (c, host_ns) = run_case(&spec, &machine(thp, limited)?)?;
                ns[k] = host_ns;
                counters.push(c);
            }
            let p = point.get_or_insert_with(|| {
                let unlimited = counters.pop().expect("two runs");
                let limited = counters.pop().expect("two runs");
                ReclaimPoint {
                    name: format!("{spec} @ {thp}"),
                    limited,
                    unlimited,
                    host_limited_ns: Vec::new(),
                    host_unlimited_ns: Vec::new(),
                }
            });
            p.host_limited_ns.push(ns[0]);
            p.host_unlimited_ns.push(ns[1]);
            round += 1;
        }
        out.extend(point);
    }
    Ok(out)
}

/// Why reclaim costs cannot be fitted.
#[derive(Debug, thiserror::Error)]
pub enum ReclaimFitError {
    #[error(
        "{name}: the limited runs took no more system time than the unlimited ones ({limited_ms} ms vs {unlimited_ms} ms \
         over {rounds} rounds): memcg reclaim did not show in the task's time"
    )]
    NoReclaimTime {
        name: String,
        limited_ms: String,
        unlimited_ms: String,
        rounds: usize,
    },
    #[error(
        "no point's reclaim time exceeded the model's estimate of its limited runs' other extra work ({left}): this \
         host's noise hid reclaim in every round; run again, or with more --rounds"
    )]
    ReclaimHidden { left: String },
    #[error(transparent)]
    Fit(#[from] FitError),
}

/// `profile` with the reclaim costs fitted to `points` (the other costs
/// kept), its method extended with how.
pub fn fit_reclaim(points: &[ReclaimPoint], profile: &Profile, rounds: usize) -> Result<Profile, ReclaimFitError> {
    let ms = |v: &[f64]| {
        v.iter()
            .map(|ns| format!("{:.0}", ns / 1e6))
            .collect::<Vec<_>>()
            .join("/")
    };
    if let Some(p) = points.iter().find(|p| p.host_reclaim_ns() <= 0.0) {
        return Err(ReclaimFitError::NoReclaimTime {
            name: p.name.clone(),
            limited_ms: ms(&p.host_limited_ns),
            unlimited_ms: ms(&p.host_unlimited_ns),
            rounds: p.host_limited_ns.len(),
        });
    }
    // With nothing left to explain at any point, every target is negative
    // and no non-negative costs fit: said here with the figures.
    if !points.is_empty() && points.iter().all(|p| p.reclaim_left_ns(profile) <= 0.0) {
        let left = points
            .iter()
            .map(|p| format!("{} {:.1} ms", p.name, p.reclaim_left_ns(profile) / 1e6))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(ReclaimFitError::ReclaimHidden { left });
    }
    let samples: Vec<(Counters, f64)> = points
        .iter()
        .map(|p| {
            let unlimited_est = profile.estimate(&p.unlimited).kernel_ns;
            (p.limited.clone(), unlimited_est + p.host_reclaim_ns())
        })
        .collect();
    let costs = fit(&samples, &profile.costs, RECLAIM_FIT_GROUPS)?;
    let fitted: Vec<&str> = RECLAIM_FIT_GROUPS
        .iter()
        .flat_map(|(_, terms)| terms.iter().copied())
        .collect();
    let mut out = profile.clone();
    out.costs = costs;
    out.priors.retain(|t| !fitted.contains(&t.as_str()));
    out.method = format!(
        "{}; reclaim costs ({}) from largo calibrate --reclaim --rounds {rounds}: swap-pressure {SIZE} (write; write and \
         read back) at 4K and 64K in a {LIMIT} memcg with {SWAP} swap, less the same in an unlimited memcg, host \
         rusage system time, the least run of each side over the rounds, fitted on the model's counts of the limited runs",
        profile.method,
        RECLAIM_FIT_GROUPS.iter().map(|(g, _)| *g).collect::<Vec<_>>().join(", ")
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{fit_reclaim, machine, ReclaimFitError, ReclaimPoint};
    use largo_workloads::cost::Profile;
    use largo_workloads::report::Counters;
    use largo_workloads::{RunOptions, Workload};

    /// The model's counters of the 4K write-and-read-back point, limited
    /// or not (its limited run faults more: the swap-ins).
    fn counters(limited: bool) -> Counters {
        let w = Workload::parse(&format!("swap-pressure:size={},passes=1", super::SIZE)).unwrap();
        let config = w.machine_config(&machine("4K", limited).unwrap());
        let mut m = largo_mm::Machine::new(config).unwrap();
        w.run(&mut m, &RunOptions::default(), &mut |_, _| {}).unwrap().counters
    }

    #[test]
    fn reclaim_hidden_at_every_point_is_said_with_the_figures() {
        let profile = Profile::default_profile();
        let (limited, unlimited) = (counters(true), counters(false));
        let point = |host_reclaim_ns: f64| ReclaimPoint {
            name: "swap-pressure @ 4K".into(),
            limited: limited.clone(),
            unlimited: unlimited.clone(),
            host_limited_ns: vec![50e6 + host_reclaim_ns],
            host_unlimited_ns: vec![50e6],
        };
        // 1 us more in the limited run: far less than its other extra work.
        let hidden = point(1e3);
        let left = hidden.reclaim_left_ns(&profile);
        assert!(hidden.host_reclaim_ns() > 0.0 && left < 0.0, "{left} ns left");
        match fit_reclaim(std::slice::from_ref(&hidden), &profile, 1) {
            Err(ReclaimFitError::ReclaimHidden { left }) => assert!(left.contains("swap-pressure @ 4K"), "{left}"),
            other => panic!("{other:?}"),
        }
        // The same point with the reclaim the profile prices on top: fitted.
        let reclaim_ns: f64 = ["reclaim_folio", "swap_out", "swap_in"]
            .iter()
            .map(|t| profile.estimate(&hidden.limited).terms[t].ns)
            .sum();
        let shown = point(hidden.host_reclaim_ns() - hidden.reclaim_left_ns(&profile) + reclaim_ns);
        assert!(shown.reclaim_left_ns(&profile) > 0.0);
        // (Three points for three costs; the same point three times still
        // leaves something to fit.)
        let fitted = fit_reclaim(&[shown.clone(), shown.clone(), shown], &profile, 1);
        assert!(fitted.is_ok(), "{fitted:?}");
    }
}
