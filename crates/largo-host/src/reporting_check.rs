//! Free page reporting on this host against the model (`largo validate
//! reporting`): this process writes and frees a chosen amount of memory
//! while the host's `passes` and `reported_kib` are sampled every 0.5 s;
//! the model runs the same on a machine laid out as the host was just
//! before (an exact snapshot, `--machine host`). The two timelines are compared pass by pass.

use std::time::{Duration, Instant};

use largo_mm::MachineConfig;
use largo_physmem::host::{host_page_size, Window};
use serde::Serialize;

const PARAMS: &str = "/sys/module/page_reporting/parameters";

/// One sample of the host's reporting counters, since the free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HostSample {
    pub t_ms: u64,
    pub passes: u64,
    pub reported_kib: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportingCheckError {
    #[error("this host does not report free pages ({PARAMS}/passes and reported_kib are missing; mainline exposes only page_reporting_order)")]
    NoCounters,
    #[error("the host's memory: {0}")]
    Host(#[from] largo_physmem::host::HostError),
    #[error("the host's shape: {0}")]
    Shape(#[from] crate::hostshape::ShapeError),
}

fn counter(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("{PARAMS}/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn counters() -> Option<(u64, u64)> {
    Some((counter("passes")?, counter("reported_kib")?))
}

/// Whether the host exposes the counters this check samples.
pub fn available() -> bool {
    counters().is_some()
}

/// Waits (at most `max`) until no pass has run for 2.5 s: the host's
/// reporting has caught up, so its free blocks are reported.
fn wait_idle(max: Duration) {
    let start = Instant::now();
    let mut last = counters();
    let mut quiet = Instant::now();
    while start.elapsed() < max {
        std::thread::sleep(Duration::from_millis(250));
        let now = counters();
        if now != last {
            last = now;
            quiet = Instant::now();
        } else if quiet.elapsed() >= Duration::from_millis(2500) {
            return;
        }
    }
}

/// The host experiment: the machine configuration just before (the
/// host's shape), then the samples after writing and freeing `size_bytes`,
/// over `duration`.
pub fn host_timeline(
    size_bytes: u64,
    duration: Duration,
) -> Result<(MachineConfig, Vec<HostSample>), ReportingCheckError> {
    counters().ok_or(ReportingCheckError::NoCounters)?;
    wait_idle(Duration::from_secs(60));
    let config = crate::snapshot::host_config_now()?;
    let mut w = Window::reserve(size_bytes, 2 << 20, 0)?;
    let base = w.base();
    w.map(base, size_bytes, true)?;
    let page = host_page_size();
    w.touch((0..size_bytes / page).map(|i| base + i * page), true)?;
    let (p0, r0) = counters().ok_or(ReportingCheckError::NoCounters)?;
    w.unmap(base, size_bytes)?;
    let t0 = Instant::now();
    drop(w);
    let mut samples = Vec::new();
    let mut next = Duration::from_millis(500);
    while next <= duration {
        if let Some(d) = next.checked_sub(t0.elapsed()) {
            std::thread::sleep(d);
        }
        let (p, r) = counters().ok_or(ReportingCheckError::NoCounters)?;
        samples.push(HostSample {
            t_ms: t0.elapsed().as_millis() as u64,
            passes: p - p0,
            reported_kib: r.saturating_sub(r0),
        });
        next += Duration::from_millis(500);
    }
    Ok((config, samples))
}

/// KiB reported by each pass, from samples of cumulative counters: pass
/// `k` ends at the first sample showing `k` passes.
pub fn per_pass(samples: &[(u64, u64)]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut prev_kib = 0;
    let mut done = 0;
    for &(passes, kib) in samples {
        if passes > done {
            // Passes that ended between two samples share the difference.
            let n = passes - done;
            let each = (kib - prev_kib) / n;
            out.extend(std::iter::repeat_n(each, n as usize));
            done = passes;
            prev_kib = kib;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::per_pass;

    #[test]
    fn passes_from_cumulative_samples() {
        // A sample caught the first pass half-way (passes still 0).
        let s = [(0, 100), (1, 512), (1, 512), (2, 1024), (4, 1424)];
        assert_eq!(per_pass(&s), vec![512, 512, 200, 200]);
    }
}
