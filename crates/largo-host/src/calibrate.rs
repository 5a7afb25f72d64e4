//! Measuring the host kernel for the cost model: the calibration
//! workloads ([`points`]) natively (kernel time from [`HostClock`]) and
//! on the model (counts), then the fit of
//! [`largo_workloads::cost::FIT_GROUPS`].

use std::collections::BTreeMap;

use largo_mm::{Machine, MachineConfig};
use largo_workloads::builtin;
use largo_workloads::cost::{fit, Faults, FitError, FitPoint, Profile, COLD_FIT_GROUPS, FIT_GROUPS, TERMS};
use largo_workloads::report::Counters;
use largo_workloads::RunOptions;

use crate::kernel_time::HostClock;
use crate::knobs::KnobGuard;
use crate::native;
use crate::validate::{host_knobs, ValidateError};

/// Costs (ns) of the terms the calibration workloads cannot tell apart:
/// typical figures for a current x86-64 server core.
pub const PRIORS: &[(&str, f64)] = &[
    ("pmd", 20.0),
    ("rmap_call", 30.0),
    ("pcp_op", 40.0),
    ("zone_lock", 25.0),
    ("pcp_bulk_block", 15.0),
    // One buddy level: a free-list unlink or insert and a struct page
    // write, typically a cache miss on a cold block.
    ("buddy_level", 10.0),
    ("split_page", 50.0),
    ("split_queue_lock", 25.0),
    ("pgtable", 100.0),
    // A host refault of a page the hypervisor discarded after a free page
    // report: 1 GiB of THP faults right after a free took 190M kernel
    // cycles, after 6 s of idle (the memory reported by then) 536M; the
    // difference over 262144 pages is about 1320 cycles, ~400 ns.
    ("host_refault", 400.0),
    ("report_call", 10000.0),
    ("report_walk", 5.0),
    // Migration, split as the kernel's time splits (RFC v3 of the batched
    // copy series, Zen3: move_pages of 512 x 4K at 3.73 GB/s, folio_copy
    // ~35% of it; 512 x 2M at 10.67 GB/s, ~97%): the copy per 4 KiB is a
    // page copy (the fitted page_copy, ~500 ns here); the rest, ~0.7 us
    // per folio (isolate, lock, rmap unmap and remap, metadata, free: an
    // upper bound, since pte_set, the pcp work of the destination and the
    // source's free are priced by their own terms, ~10% of it at 4K);
    // a TLB flush with its IPIs ~1 us on a VM (x86 flushes locally per
    // PTE instead when the mm never ran on another CPU: cheaper).
    ("page_migrate", 500.0),
    ("migrate_folio", 700.0),
    ("migrate_flush", 1000.0),
    // A page looked at by a compaction scanner: a struct page read and a
    // few flag tests, mostly sequential.
    ("compact_scan", 5.0),
    // Reclaim, from `largo calibrate --reclaim --rounds 3` on the 2-vCPU
    // EPYC development VM (2026-11-25): per folio taken off an LRU list,
    // per 4 KiB compressed to zram, per 4 KiB swapped back in. kswapd's
    // work costs the same in its own thread.
    ("reclaim_folio", 1313.0),
    ("swap_out", 1760.0),
    ("swap_in", 2704.0),
    ("kswapd_folio", 1313.0),
    ("kswapd_swap_out", 1760.0),
];

/// One calibration point: a workload under one folio size.
#[derive(Clone, Debug)]
pub struct CalPoint {
    /// `page_fault1:iterations=8 @ 64kB`.
    pub name: String,
    /// Run with user work between faults (a cold point).
    pub cold: bool,
    /// The model's counters for one run.
    pub counters: Counters,
    /// Host kernel ns of one run, one per repeat.
    pub host_ns: Vec<f64>,
}

impl CalPoint {
    pub fn median_ns(&self) -> f64 {
        let mut v = self.host_ns.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
}

/// The calibration workloads: page_fault1 (`iterations` loops of 128
/// MiB) at base pages and every anonymous size of the x86_64 preset, then
/// one workload for each kind of work page_fault1 cannot separate: read
/// faults on the zero page (a fault without a new folio), mmap/munmap
/// without touching (address-space calls), CoW after fork (copies), and
/// partial munmap with drop_caches at 4K (the drop) and 64K (splits).
///
/// The cold points run page_fault1 (64 MiB, once) at a few sizes with
/// the task writing a buffer the size of the L2 cache after each page:
/// faults taken as a program takes them.
pub fn points(iterations: u64) -> Vec<(String, Option<u64>, bool)> {
    let geo = largo_types::Preset::X86_64.geometry();
    let pf1 = format!("page_fault1:iterations={iterations}");
    let mut out: Vec<(String, Option<u64>, bool)> = std::iter::once(None)
        .chain(geo.anon_orders().map(|o| Some((geo.page_size() << o) >> 10)))
        .map(|kb| (pf1.clone(), kb, false))
        .collect();
    for (spec, kb) in [
        ("anon-r-seq:size=512M", None),
        ("mmap1:iterations=20000", None),
        ("anon-cow-seq:size=128M", None),
        ("munmap-partial:size=256M", None),
        ("munmap-partial:size=256M", Some(64)),
    ] {
        out.push((spec.to_string(), kb, false));
    }
    for kb in [None, Some(16), Some(64), Some(256)] {
        out.push(("page_fault1:size=64M,iterations=1".to_string(), kb, true));
    }
    out
}

/// The user work between faults of the cold points: the size of this
/// CPU's L2 cache (sysfs), 1 MiB if unknown.
pub fn l2_bytes() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
        .ok()
        .and_then(|s| largo_types::parse_size(s.trim()).ok())
        .map_or(1 << 20, |b| b as usize)
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

/// A calibration point ready to run natively: the model's counters, the
/// host knobs of its configuration and the native plan of its operations.
pub struct Prepared {
    pub point: CalPoint,
    pub knobs: Vec<(String, String)>,
    pub plan: native::Plan,
    pub page_size: u64,
}

/// Runs `spec_text` on the model under `size_kb` alone (`None`: base
/// pages) and plans it for the host.
pub fn prepare(spec_text: &str, size_kb: Option<u64>, cold: bool) -> Result<Prepared, ValidateError> {
    let (def, spec) = builtin::parse(spec_text)?;
    let mut m = Machine::new(config_for(size_kb))?;
    let knobs = host_knobs(&m)?;
    let run = largo_workloads::run(&mut m, def, &spec, &RunOptions::default(), &mut |_, _| {})?;
    let page_size = m.geometry().page_size();
    let events = largo_workloads::op::resolved_to_events(&run.resolved, page_size);
    Ok(Prepared {
        point: CalPoint {
            name: format!(
                "{} @ {}kB{}",
                spec.describe(),
                size_kb.unwrap_or(page_size >> 10),
                if cold { ", cold" } else { "" }
            ),
            cold,
            counters: run.counters,
            host_ns: Vec::new(),
        },
        knobs,
        plan: native::plan(&events)?,
        page_size,
    })
}

/// Measures every point of `points` (spec, size, cold), `repeats` times
/// each (points interleaved), each host run after a warm-up run of the
/// same point. `should_stop` is polled between runs.
pub fn measure_points(
    clock: &mut HostClock,
    points: &[(String, Option<u64>, bool)],
    repeats: usize,
    progress: &mut dyn FnMut(&str),
    should_stop: &dyn Fn() -> bool,
) -> Result<Vec<CalPoint>, ValidateError> {
    let mut prepared = points
        .iter()
        .map(|(spec, kb, cold)| prepare(spec, *kb, *cold))
        .collect::<Result<Vec<_>, _>>()?;
    let work = largo_physmem::host::UserWork::new(l2_bytes()).map_err(ValidateError::UserWork)?;
    let mut work = Some(work);
    let mut guard = KnobGuard::acquire()?;
    for _ in 0..repeats {
        for p in prepared.iter_mut() {
            if should_stop() {
                return Err(ValidateError::Interrupted);
            }
            progress(&p.point.name);
            guard.set_all(&p.knobs)?;
            let mut placement = native::place(&p.plan, p.page_size)?;
            if p.point.cold {
                placement.user_work = work.take();
            }
            native::run(&mut placement, &p.plan, false)?; // warm-up: memory backed and hot
            let kernel_ns = clock.per_run_ns(|| native::run(&mut placement, &p.plan, false).map(|_| ()));
            if placement.user_work.is_some() {
                work = placement.user_work.take();
            }
            p.point.host_ns.push(kernel_ns?);
        }
    }
    guard.restore()?;
    Ok(prepared.into_iter().map(|p| p.point).collect())
}

/// Measures every calibration point ([`points`]); see [`measure_points`].
pub fn measure(
    clock: &mut HostClock,
    iterations: u64,
    repeats: usize,
    progress: &mut dyn FnMut(&str),
    should_stop: &dyn Fn() -> bool,
) -> Result<Vec<CalPoint>, ValidateError> {
    measure_points(clock, &points(iterations), repeats, progress, should_stop)
}

/// How a profile was measured, for its `method`.
pub fn method(iterations: u64, repeats: u64, clock: &HostClock) -> String {
    format!(
        "largo calibrate --iterations {iterations} --repeats {repeats}: the calibration workloads (page_fault1 at each folio size, anon-r-seq, mmap1, anon-cow-seq, munmap-partial at 4K and 64K) run natively in a forked task, kernel time = {} of the task after a warm-up run, median of the repeats; costs fitted: {}; the rest are priors; cold-fault costs (fault, page_zero) from page_fault1 64M at 4K/16K/64K/256K writing a {} KiB buffer (the L2 cache) after every page",
        clock.source(),
        FIT_GROUPS.iter().map(|(g, _)| *g).collect::<Vec<_>>().join(", "),
        l2_bytes() >> 10
    )
}

/// Fits the costs to the measured points; the profile records the host,
/// the method and every point with the fitted model's estimate.
pub fn fit_profile(points: &[CalPoint], name: &str, host: &str, method: &str) -> Result<Profile, FitError> {
    let priors: BTreeMap<String, f64> = PRIORS.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let samples = |cold: bool| -> Vec<(Counters, f64)> {
        points
            .iter()
            .filter(|p| p.cold == cold)
            .map(|p| (p.counters.clone(), p.median_ns()))
            .collect()
    };
    let mut costs = fit(&samples(false), &priors, FIT_GROUPS)?;
    for t in TERMS {
        costs.entry(t.name.to_string()).or_insert(0.0);
    }
    let cold_all = fit(&samples(true), &costs, COLD_FIT_GROUPS)?;
    let cold_costs = COLD_FIT_GROUPS
        .iter()
        .flat_map(|(_, terms)| terms.iter())
        .map(|t| (t.to_string(), cold_all[*t]))
        .collect();
    let mut profile = Profile {
        name: name.to_string(),
        host: host.to_string(),
        method: method.to_string(),
        costs,
        priors: PRIORS.iter().map(|(k, _)| k.to_string()).collect(),
        fit: Vec::new(),
        cold_costs,
        cold_fit: Vec::new(),
        measured_at: Some(crate::hostid::now_rfc3339()),
        boot_id: crate::hostid::boot_id(),
    };
    let fit_point = |p: &CalPoint, faults: Faults| FitPoint {
        point: p.name.clone(),
        host_ns: p.median_ns(),
        model_ns: profile.estimate_at(&p.counters, faults).kernel_ns,
    };
    let hot = points
        .iter()
        .filter(|p| !p.cold)
        .map(|p| fit_point(p, Faults::Hot))
        .collect();
    let cold = points
        .iter()
        .filter(|p| p.cold)
        .map(|p| fit_point(p, Faults::Cold))
        .collect();
    (profile.fit, profile.cold_fit) = (hot, cold);
    Ok(profile)
}
