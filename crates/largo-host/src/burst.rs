//! The THP burst check (`largo validate burst`, root): with only the
//! chosen folio sizes enabled and `defrag` as given (default `never`: no
//! reclaim, no compaction), this process faults SIZE of anonymous memory
//! in address order on the host, right after an exact snapshot of it;
//! largo boots from that snapshot and runs `anon-w-seq` of the same size.
//! Proactive compaction and watermark boosting are off during the burst
//! (kcompactd would build free blocks on its own clock, concurrently on
//! the host, at once in the model); the snapshot holds whatever it had
//! built before. The counters that say which folios the allocator could find
//! (thp_fault_alloc, thp_fault_fallback, each size's anon_fault_alloc and
//! anon_fault_fallback) are compared.

use std::collections::BTreeMap;
use std::sync::Arc;

use largo_mm::Machine;
use largo_physmem::host::{host_page_size, Window};
use largo_workloads::{RunOptions, Workload};

use crate::knobs::{KnobError, KnobGuard};

#[derive(Debug, thiserror::Error)]
pub enum BurstError {
    #[error(transparent)]
    Knob(#[from] KnobError),
    #[error("the snapshot: {0}")]
    Snapshot(#[from] crate::snapshot::take::TakeError),
    #[error("the host's shape: {0}")]
    Shape(#[from] crate::hostshape::ShapeError),
    #[error("the host's memory: {0}")]
    Host(#[from] largo_physmem::host::HostError),
    #[error("model: {0}")]
    Machine(#[from] largo_mm::MachineError),
    #[error("model: {0}")]
    Workload(#[from] largo_workloads::WorkloadError),
    #[error("listing THP sizes: {0}")]
    Sysfs(#[from] crate::record::RecordError),
}

/// The counters compared, host and model side by side.
#[derive(Clone, Debug, Default)]
pub struct Burst {
    /// counter -> (model, host).
    pub rows: BTreeMap<String, (i64, i64)>,
    /// What else happened, not compared: kswapd runs, kcompactd wakes,
    /// pages migrated (model, host).
    pub context: BTreeMap<String, (i64, i64)>,
    pub buddyinfo_before: String,
    pub buddyinfo_after: String,
    /// The model's, before and after.
    pub model_buddyinfo_before: String,
    pub model_buddyinfo_after: String,
    /// Free pages the snapshot had, and those the model could not place.
    pub snapshot_free_pages: u64,
    pub free_pages_unplaced: u64,
}

impl Burst {
    /// Every counter within `tolerance` (0.05: 5%) of the host's, or off by
    /// at most 2 when small.
    pub fn agrees(&self, tolerance: f64) -> bool {
        self.rows.values().all(|&(m, h)| within(m, h, tolerance))
    }
}

/// `m` within `tolerance` of `h` (relative), or at most 2 apart.
pub fn within(m: i64, h: i64, tolerance: f64) -> bool {
    (m - h).abs() <= 2 || (m - h).abs() as f64 <= tolerance * h.abs() as f64
}

/// Counters shown beside the comparison: background reclaim and
/// compaction a burst can wake (watermark boosting after a fallback
/// steals a pageblock wakes kswapd, which wakes kcompactd).
const CONTEXT: [&str; 4] = [
    "vmstat/pageoutrun",
    "vmstat/compact_daemon_wake",
    "vmstat/pgmigrate_success",
    "vmstat/compact_stall",
];

fn counter_names(sizes_kb: &[u64]) -> Vec<String> {
    let mut out = vec![
        "vmstat/thp_fault_alloc".to_string(),
        "vmstat/thp_fault_fallback".to_string(),
    ];
    for kb in sizes_kb {
        for s in ["anon_fault_alloc", "anon_fault_fallback"] {
            out.push(format!("hugepages-{kb}kB/{s}"));
        }
    }
    out
}

/// A counter of the comparison (`vmstat/ITEM` or `hugepages-SIZE/STAT`)
/// from a side's vmstat and per-size stats.
fn value(name: &str, vmstat: impl Fn(&str) -> i64, mthp: impl Fn(&str, &str) -> i64) -> i64 {
    match name.strip_prefix("vmstat/") {
        Some(item) => vmstat(item),
        None => {
            let (size, stat) = name.split_once('/').unwrap_or((name, ""));
            mthp(size.trim_start_matches("hugepages-"), stat)
        }
    }
}

/// Every counter of `names` on the host now.
fn read_host(names: &[String]) -> Vec<i64> {
    let c = crate::counters::HostCounters::read();
    names
        .iter()
        .map(|n| value(n, |i| c.vmstat(i), |z, s| c.mthp(z, s)))
        .collect()
}

/// Every counter of `names` on the model now.
fn read_model(m: &Machine, names: &[String]) -> Vec<i64> {
    let c = largo_workloads::report::Counters::read(m);
    names
        .iter()
        .map(|n| value(n, |i| c.vmstat(i) as i64, |z, s| c.mthp(z, s)))
        .collect()
}

/// Runs the burst: `size_bytes` faulted with folios of `sizes_kb` (plus
/// base pages) enabled, `defrag` as given.
pub fn run(size_bytes: u64, sizes_kb: &[u64], defrag: &str) -> Result<Burst, BurstError> {
    let mut knobs = crate::record::thp_off()?;
    for kb in sizes_kb {
        knobs.push((
            format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
            "always".into(),
        ));
    }
    knobs.push(("transparent_hugepage/defrag".into(), defrag.into()));
    // kcompactd would build free blocks during the burst on its own
    // clock, concurrently on the host and at once in the model: its
    // proactive compaction (every 500 ms) and the kswapd -> kcompactd
    // wake of watermark boosting (after a fallback claims a pageblock)
    // are off on both sides, so the burst measures where the allocator
    // finds free blocks.
    knobs.push(("vm/compaction_proactiveness".into(), "0".into()));
    knobs.push(("vm/watermark_boost_factor".into(), "0".into()));
    let mut names = counter_names(sizes_kb);
    let nr_compared = names.len();
    names.extend(CONTEXT.iter().map(|s| s.to_string()));
    let mut guard = KnobGuard::acquire()?;
    guard.set_all(&knobs)?;
    let buddyinfo_before = std::fs::read_to_string("/proc/buddyinfo").unwrap_or_default();
    let snap = Arc::new(crate::snapshot::take::take(&mut |_, _| {})?);
    let before = read_host(&names);
    let mut w = Window::reserve(size_bytes, 2 << 20, 0)?;
    let base = w.base();
    w.map(base, size_bytes, true)?;
    let page = host_page_size();
    w.touch((0..size_bytes / page).map(|i| base + i * page), true)?;
    let after = read_host(&names);
    let buddyinfo_after = std::fs::read_to_string("/proc/buddyinfo").unwrap_or_default();
    drop(w);
    guard.restore()?;
    let mut config = crate::snapshot::snapshot_config(snap)?;
    config.knobs.extend(knobs);
    let w = Workload::parse(&format!("anon-w-seq:size={size_bytes}"))?;
    let mut m = Machine::new(w.machine_config(&config))?;
    let exact = m.exact_layout().cloned().unwrap_or_default();
    let model_before = read_model(&m, &names);
    let model_buddyinfo_before = largo_mm::stats::render::buddyinfo(&m);
    let opts = RunOptions {
        keep_mapped: true,
        ..RunOptions::default()
    };
    w.run(&mut m, &opts, &mut |_, _| {})?;
    let model_buddyinfo_after = largo_mm::stats::render::buddyinfo(&m);
    let model_after = read_model(&m, &names);
    let mut rows: BTreeMap<String, (i64, i64)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), (model_after[i] - model_before[i], after[i] - before[i])))
        .collect();
    let context = names[nr_compared..]
        .iter()
        .filter_map(|n| rows.remove_entry(n))
        .collect();
    Ok(Burst {
        rows,
        context,
        buddyinfo_before,
        buddyinfo_after,
        model_buddyinfo_before,
        model_buddyinfo_after,
        snapshot_free_pages: exact.snapshot_free_pages,
        free_pages_unplaced: exact.free_pages_unplaced,
    })
}
