//! `largo advise --verify`: the baseline and the model's top candidates
//! run natively on this host, interleaved ([`measure_configs`]); each
//! candidate's measured kernel, user and wall time beside largo's
//! estimate, and the recommendation the best *measured* candidate within
//! the memory budget.

use anyhow::Result;
use largo_host::measured::{measure_configs, Measured};
use largo_host::validate::host_knobs;

use super::Scored;
use crate::args::boot;
use crate::config::NamedConfig;

/// One measured candidate.
pub struct Verified {
    /// Index into the candidates.
    pub index: usize,
    pub measured: Measured,
    /// largo's estimate of the whole-program kernel-time change, percent.
    pub est_change_pct: f64,
}

impl Verified {
    /// Whether the estimate is within 10 points of the host's change, or
    /// inside its 95% interval where that is wider.
    pub fn agrees(&self) -> bool {
        largo_host::stats::estimate_agrees(self.est_change_pct, &self.measured.sys_change_pct)
    }
}

/// The candidates to measure: the baseline and the first `top` rows of
/// the ranking (alike mixes folded) within the budget.
pub fn chosen(ranked_rows: &[&Scored], top: usize) -> Vec<usize> {
    let mut out = vec![0];
    out.extend(
        ranked_rows
            .iter()
            .filter(|s| s.within_budget && s.index != 0)
            .take(top)
            .map(|s| s.index),
    );
    out
}

/// Measures `chosen` configurations' command natively, `runs` rounds.
/// `est_change_pct(index)` is largo's whole-program estimate.
pub fn verify(
    configs: &[NamedConfig],
    chosen: &[usize],
    command: &[String],
    runs: usize,
    est_change_pct: &dyn Fn(usize, f64) -> f64,
) -> Result<(Vec<Verified>, &'static str)> {
    let knob_sets = chosen
        .iter()
        .map(|&i| Ok(host_knobs(&boot(configs[i].config.clone())?)?))
        .collect::<Result<Vec<_>>>()?;
    let launcher = || {
        let mut c = std::process::Command::new(&command[0]);
        c.args(&command[1..]);
        c
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (measured, clock) = measure_configs(&knob_sets, &launcher, runs, &mut |done, total| {
        if tty {
            eprint!("\r\x1b[Kverifying: native run {done} of {total}");
        }
    })
    .map_err(|e| match e {
        largo_host::validate::ValidateError::ExitChanged { config, warm, now } => anyhow::anyhow!(
            "verifying on this host: {} exited with status {now:?} under {} but with {warm:?} in the warm-up run \
             (None: killed by a signal); the knobs are restored",
            command.join(" "),
            configs[chosen[config]].name
        ),
        e => anyhow::anyhow!("verifying on this host (its knobs are restored): {e}"),
    })?;
    if tty {
        eprint!("\r\x1b[K");
    }
    let base_ns = measured[0].sys_ns.mean;
    Ok((
        chosen
            .iter()
            .zip(measured)
            .map(|(&index, measured)| Verified {
                index,
                est_change_pct: est_change_pct(index, base_ns),
                measured,
            })
            .collect(),
        clock,
    ))
}

/// The best measured candidate within the budget: least mean kernel time.
pub fn best_measured(verified: &[Verified]) -> &Verified {
    verified
        .iter()
        .min_by(|a, b| a.measured.sys_ns.mean.total_cmp(&b.measured.sys_ns.mean))
        .expect("the baseline is measured")
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_host::stats::Summary;

    fn verified(index: usize, sys_ms: &[f64], change: Summary, est: f64) -> Verified {
        let s = Summary::of(sys_ms);
        Verified {
            index,
            measured: Measured {
                sys_ns: s,
                user_ns: s,
                wall_ns: s,
                sys_change_pct: change,
                runs: Vec::new(),
            },
            est_change_pct: est,
        }
    }

    fn change(mean: f64, ci95: f64) -> Summary {
        Summary {
            n: 5,
            mean,
            sd: 0.0,
            ci95,
        }
    }

    #[test]
    fn the_recommendation_is_the_fastest_measured() {
        let v = vec![
            verified(0, &[100.0, 102.0], change(0.0, 0.0), 0.0),
            verified(7, &[300.0, 330.0], change(200.0, 20.0), -60.0),
            verified(3, &[90.0, 91.0], change(-10.0, 3.0), -12.0),
        ];
        assert_eq!(best_measured(&v).index, 3);
        // The model's favourite got worse on the host: that is a
        // disagreement, the other candidate agrees.
        assert!(!v[1].agrees());
        assert!(v[2].agrees());
    }

    #[test]
    fn a_wide_interval_tolerates_more_than_ten_points() {
        assert!(verified(1, &[1.0], change(-30.0, 25.0), -50.0).agrees());
        assert!(!verified(1, &[1.0], change(-30.0, 5.0), -50.0).agrees());
    }
}
