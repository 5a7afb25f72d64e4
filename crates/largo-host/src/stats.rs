//! Means with 95% confidence intervals, for native runs repeated a few
//! times: Student's t with n - 1 degrees of freedom, and paired changes
//! (each round's candidate run against the same round's baseline run, so
//! a slow drift of the host over the rounds cancels out).

use serde::Serialize;

/// Two-sided 95% quantiles of Student's t for 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// t(0.975, df); the normal quantile beyond the table.
pub fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        _ => 1.96,
    }
}

/// The mean of a sample and the half-width of its 95% confidence
/// interval (infinite for a single value: one run says nothing about
/// the spread).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    pub ci95: f64,
}

impl Summary {
    /// Of `xs`; an empty sample has mean 0 and an infinite interval.
    pub fn of(xs: &[f64]) -> Summary {
        let n = xs.len();
        if n == 0 {
            return Summary {
                n,
                mean: 0.0,
                sd: 0.0,
                ci95: f64::INFINITY,
            };
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let sd = var.sqrt();
        let ci95 = if n > 1 {
            t_975(n - 1) * sd / (n as f64).sqrt()
        } else {
            f64::INFINITY
        };
        Summary { n, mean, sd, ci95 }
    }

    /// Whether `x` lies inside the interval.
    pub fn contains(&self, x: f64) -> bool {
        (x - self.mean).abs() <= self.ci95
    }
}

/// How far an estimated change (percentage points) may be from a measured
/// one and still agree, unless the measurement's interval is wider.
pub const AGREEMENT_POINTS: f64 = 10.0;

/// Whether an estimated change agrees with a measured one: within
/// [`AGREEMENT_POINTS`], or inside the measurement's 95% interval where
/// that is wider.
pub fn estimate_agrees(est_pct: f64, measured_pct: &Summary) -> bool {
    (est_pct - measured_pct.mean).abs() <= measured_pct.ci95.max(AGREEMENT_POINTS)
}

/// The change of `xs` from `base`, in percent of the baseline's mean, with
/// the 95% interval of the mean paired difference (round i of `xs`
/// against round i of `base`) in the same unit.
pub fn paired_change_pct(base: &[f64], xs: &[f64]) -> Summary {
    let base_mean = Summary::of(base).mean;
    let diffs: Vec<f64> = base.iter().zip(xs).map(|(b, x)| x - b).collect();
    let d = Summary::of(&diffs);
    let scale = if base_mean > 0.0 { 100.0 / base_mean } else { 0.0 };
    Summary {
        n: d.n,
        mean: d.mean * scale,
        sd: d.sd * scale,
        ci95: d.ci95 * scale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_sample() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert!((s.sd - 2.138).abs() < 1e-3, "{s:?}");
        assert!((s.ci95 - 2.365 * 2.138 / 8f64.sqrt()).abs() < 1e-3, "{s:?}");
        assert!(s.contains(6.5) && !s.contains(7.0));
    }

    #[test]
    fn one_value_has_no_interval() {
        let s = Summary::of(&[3.0]);
        assert_eq!((s.mean, s.sd), (3.0, 0.0));
        assert!(s.ci95.is_infinite());
    }

    #[test]
    fn pairing_removes_a_common_drift() {
        // The host slows down over the rounds; the candidate is always 10%
        // below the baseline of its round.
        let base = [100.0, 120.0, 140.0, 160.0];
        let cand: Vec<f64> = base.iter().map(|b| b * 0.9).collect();
        let c = paired_change_pct(&base, &cand);
        assert!((c.mean - -10.0).abs() < 1e-9, "{c:?}");
        // Unpaired, the drift would swamp the change: the interval of the
        // candidate's own mean is far wider than the paired one.
        assert!(c.ci95 < Summary::of(&cand).ci95 / 130.0 * 100.0);
    }
}
