//! Measuring the host kernel for the cost model: the page_fault1 loop at
//! every anonymous folio size, natively (kernel time from
//! [`HostClock`]) and on the model (counts), then the fit of
//! [`largo_workloads::cost::FIT_GROUPS`].

use std::collections::BTreeMap;

use largo_mm::{Machine, MachineConfig};
use largo_workloads::builtin;
use largo_workloads::cost::{fit, FitPoint, Profile, TERMS};
use largo_workloads::report::Counters;
use largo_workloads::RunOptions;

use crate::kernel_time::HostClock;
use crate::knobs::KnobGuard;
use crate::native;
use crate::validate::{host_knobs, ValidateError};

/// Costs (ns) of the terms page_fault1 cannot tell apart, before fitting:
/// typical figures for a current x86-64 server core. `page_copy` is set
/// to twice the fitted `page_zero` afterwards (a copy reads and writes).
pub const PRIORS: &[(&str, f64)] = &[
    ("page_copy", 0.0),
    ("pmd", 20.0),
    ("rmap_call", 30.0),
    ("pcp_op", 40.0),
    ("zone_lock", 25.0),
    ("pcp_bulk_block", 15.0),
    ("split_page", 50.0),
    ("split_queue_lock", 25.0),
    ("pgtable", 100.0),
];

/// One folio size's measurements.
#[derive(Clone, Debug)]
pub struct SizePoint {
    /// `"4kB"` for base pages only, else the mTHP size enabled.
    pub size: String,
    /// The model's counters for the whole run of `iterations` loops.
    pub counters: Counters,
    pub iterations: u64,
    /// Host kernel ns per loop iteration, one per repeat.
    pub host_ns: Vec<f64>,
}

impl SizePoint {
    pub fn median_ns(&self) -> f64 {
        let mut v = self.host_ns.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
}

/// The configuration with only `size_kb` enabled (`None`: base pages).
fn config_for(size_kb: Option<u64>) -> MachineConfig {
    let knobs = size_kb
        .map(|kb| {
            vec![(
                format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
                "always".to_string(),
            )]
        })
        .unwrap_or_default();
    MachineConfig {
        knobs,
        ..MachineConfig::default()
    }
}

/// Measures page_fault1 (`iterations` loops of 128 MiB) at base pages and
/// every anonymous size of the x86_64 preset, `repeats` times each (sizes
/// interleaved), each host run after a warm-up run. `should_stop` is
/// polled between runs.
pub fn measure(
    clock: &mut HostClock,
    iterations: u64,
    repeats: usize,
    progress: &mut dyn FnMut(&str),
    should_stop: &dyn Fn() -> bool,
) -> Result<Vec<SizePoint>, ValidateError> {
    let geo = largo_types::Preset::X86_64.geometry();
    let sizes: Vec<Option<u64>> = std::iter::once(None)
        .chain(geo.anon_orders().map(|o| Some((geo.page_size() << o) >> 10)))
        .collect();
    let spec_text = format!("page_fault1:iterations={iterations}");
    let (def, spec) = builtin::parse(&spec_text).map_err(|e| ValidateError::Model(e.to_string()))?;
    let mut points = Vec::new();
    let mut plans = Vec::new();
    for &kb in &sizes {
        let mut m = Machine::new(config_for(kb)).map_err(|e| ValidateError::Model(e.to_string()))?;
        let knobs = host_knobs(&m)?;
        let out = largo_workloads::run(&mut m, def, &spec, &RunOptions::default(), &mut |_, _| {})
            .map_err(|e| ValidateError::Model(e.to_string()))?;
        points.push(SizePoint {
            size: format!("{}kB", kb.unwrap_or(geo.page_size() >> 10)),
            counters: out.counters,
            iterations,
            host_ns: Vec::new(),
        });
        let events = largo_workloads::op::resolved_to_events(&out.resolved, geo.page_size());
        plans.push((knobs, native::plan(&events)?));
    }
    let mut guard = KnobGuard::acquire()?;
    for _ in 0..repeats {
        for (i, (knobs, plan)) in plans.iter().enumerate() {
            if should_stop() {
                return Err(ValidateError::Model("interrupted".into()));
            }
            progress(&points[i].size);
            guard.set_all(knobs)?;
            let mut placement = native::place(plan, geo.page_size())?;
            native::run(&mut placement, plan, false)?; // warm-up: memory backed and hot
            let (roots, kernel_ns) = clock
                .measure(|| native::run(&mut placement, plan, false))
                .map_err(|e| ValidateError::Model(format!("reading the kernel-time counters: {e}")))?;
            roots?;
            points[i].host_ns.push(kernel_ns as f64 / iterations as f64);
        }
    }
    guard.restore()?;
    Ok(points)
}

/// Fits the costs to the measured points; the profile records the host,
/// the method and every point with the fitted model's estimate.
pub fn fit_profile(points: &[SizePoint], name: &str, host: &str, method: &str) -> Result<Profile, String> {
    let priors: BTreeMap<String, f64> = PRIORS.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let samples: Vec<(Counters, f64)> = points
        .iter()
        .map(|p| (p.counters.clone(), p.median_ns() * p.iterations as f64))
        .collect();
    let mut costs = fit(&samples, &priors)?;
    let zero = costs.get("page_zero").copied().unwrap_or(0.0);
    costs.insert("page_copy".into(), 2.0 * zero);
    for t in TERMS {
        costs.entry(t.name.to_string()).or_insert(0.0);
    }
    let mut profile = Profile {
        name: name.to_string(),
        host: host.to_string(),
        method: method.to_string(),
        costs,
        priors: PRIORS
            .iter()
            .filter(|(k, _)| *k != "page_copy")
            .map(|(k, _)| k.to_string())
            .collect(),
        fit: Vec::new(),
    };
    profile.fit = points
        .iter()
        .map(|p| {
            let n = p.iterations as f64;
            FitPoint {
                size: p.size.clone(),
                host_ns_per_iteration: p.median_ns(),
                model_ns_per_iteration: profile.estimate(&p.counters).kernel_ns / n,
            }
        })
        .collect();
    Ok(profile)
}
