//! A workload or scenario replayed on the model and run natively on the
//! host under the same THP settings, side by side: the per-size stats and
//! the `thp_*` events must be equal, and so must the folio layout of the
//! process at its end (which other processes cannot disturb). Both sides
//! are read at the same point: after the first process's last step, before
//! it exits (the host process reads the counters itself, so nothing this
//! process does meanwhile counts).

use largo_mm::{Machine, MachineConfig};
use largo_trace::Event;
use largo_workloads::builtin::WorkloadDef;
use largo_workloads::op::resolved_to_events;
use largo_workloads::replay::{first_root_exit, replay, ReplayOptions};
use largo_workloads::report::Counters;
use largo_workloads::{RunOptions, WorkloadSpec};
use serde::Serialize;

use largo_workloads::report::MemcgCounts;

use crate::counters::KhugepagedEvents;
use crate::hostswap;
use crate::knobs::{knob_file, selected, KnobError, KnobGuard};
use crate::layout::FolioLayout;
use crate::native::{self, NativeError};

/// Per-size stats compared (every anonymous size of the machine).
pub const MTHP_STATS: &[&str] = &[
    "anon_fault_alloc",
    "anon_fault_fallback",
    "anon_fault_fallback_charge",
    "split",
    "split_failed",
    "split_deferred",
    "nr_anon",
    "nr_anon_partially_mapped",
    "shmem_alloc",
    "shmem_fallback",
    "shmem_fallback_charge",
    "swpout",
    "swpout_fallback",
    "swpin",
    "swpin_fallback",
    "swpin_fallback_charge",
    "zswpout",
];

/// vmstat events compared where the machine swaps.
pub const SWAP_EVENTS: &[&str] = &[
    "pswpin",
    "pswpout",
    "pgmajfault",
    "swpin_zero",
    "swpout_zero",
    "thp_swpout",
    "thp_swpout_fallback",
    "swap_ra",
    "swap_ra_hit",
    "zswpin",
    "zswpout",
    "pgscan_anon",
    "pgsteal_anon",
    "workingset_refault_anon",
    "workingset_activate_anon",
    "workingset_restore_anon",
];

/// The workload memcg's counters compared (see [`MemcgCounts`]): in pages
/// for the `_kb` ones.
pub const MEMCG_ROWS: &[&str] = &[
    "failcnt", "peak", "usage", "kmem", "swap", "pgpgin", "pgpgout", "oom_kill",
];

/// Set, validation prints what each host attempt it retries differed in.
pub const SHOW_ATTEMPTS: &str = "LARGO_VALIDATE_SHOW_ATTEMPTS";

/// The zram device a validation swaps to.
pub const ZRAM_DEVICE: &str = "zram0";

/// The environment variable that lets validation enable the host's zswap
/// (which, once enabled, keeps large folios from swapping in whole until
/// the next boot).
pub const ZSWAP_OPT_IN: &str = "LARGO_VALIDATE_ZSWAP";

/// The cpu every task of a swap or memcg validation runs on, on both
/// sides: per-cpu state (LRU batches, swap clusters, memcg stocks) is then
/// the same.
pub const PINNED_CPU: usize = 0;

/// ... and khugepaged runs on this one (its memcg stock and LRU batches
/// are not the tasks').
pub const KHUGEPAGED_CPU: usize = 1;

/// /proc/vmstat items compared: events, and the shmem gauges (their
/// change over the run). `thp_zero_page_alloc` is left out: the huge zero
/// folio is global and the host's may exist already. The
/// direct compaction counts must agree too (none of the scenarios leaves
/// either side short of free 2 MiB blocks, so both must stay at 0).
pub const VMSTAT_EVENTS: &[&str] = &[
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
    "thp_split_page",
    "thp_split_page_failed",
    "thp_deferred_split_page",
    "thp_split_pmd",
    "thp_underused_split_page",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_scan_exceed_none_pte",
    "thp_scan_exceed_share_pte",
    "thp_scan_exceed_swap_pte",
    "thp_file_alloc",
    "thp_file_fallback",
    "thp_file_fallback_charge",
    "thp_file_mapped",
    "nr_shmem",
    "nr_shmem_hugepages",
    "nr_shmem_pmdmapped",
    "compact_stall",
    "compact_success",
    "compact_fail",
];

/// `pages_to_scan` in validation runs, unless a configuration sets it.
pub const VALIDATION_PAGES_TO_SCAN: u64 = 1 << 22;
const PAGES_TO_SCAN: &str = "transparent_hugepage/khugepaged/pages_to_scan";

/// `scan_sleep_millisecs` in validation runs (an hour), unless a
/// configuration sets it to something other than the default ten seconds:
/// khugepaged then scans only when a case wakes it.
/// At the default ten seconds its timer ends at a moment no trace controls
/// (the host's phase is left from earlier work), and a pass landing while
/// a run's child is stopped collapses memory between the counters and the
/// layout.
pub const VALIDATION_SCAN_SLEEP_MS: u64 = 3_600_000;
const SCAN_SLEEP: &str = "transparent_hugepage/khugepaged/scan_sleep_millisecs";
const DEFAULT_SCAN_SLEEP_MS: u64 = 10_000;

/// Tries of the host side before a difference is reported. Another
/// process faulting at the same time can only add to the host's global
/// event counts, and move its gauges (`nr_anon`, `nr_shmem`) either way,
/// so a run showing more events than the model, or another gauge (with
/// the same folio layout), is tried again; fewer events, or a different
/// layout, is reported at once.
pub const MAX_ATTEMPTS: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("model: {0}")]
    Machine(#[from] largo_mm::MachineError),
    #[error("model: {0}")]
    Run(#[from] largo_workloads::RunError),
    #[error("model: {0}")]
    Replay(#[from] largo_workloads::replay::ReplayError),
    #[error("model: {0}")]
    Spec(#[from] largo_workloads::SpecError),
    #[error("reading the kernel-time counters: {0}")]
    Clock(std::io::Error),
    #[error("running the command: {0}")]
    Command(std::io::Error),
    #[error("user work buffer: {0}")]
    UserWork(largo_physmem::host::HostError),
    #[error("this process: {0}")]
    Process(largo_physmem::host::HostError),
    #[error("interrupted")]
    Interrupted,
    #[error("host knobs: {0}")]
    Knob(#[from] KnobError),
    #[error("host run: {0}")]
    Native(#[from] NativeError),
    #[error("fitting the cost model: {0}")]
    Fit(#[from] largo_workloads::cost::FitError),
    #[error("the profile cache: {0}")]
    Cache(std::io::Error),
    #[error("configuration: {0}")]
    Config(String),
    #[error(
        "the command exited with status {now:?} under configuration {config} but with {warm:?} in the warm-up run \
         (None: killed by a signal)"
    )]
    ExitChanged {
        config: usize,
        warm: Option<i32>,
        now: Option<i32>,
    },
}

impl ValidateError {
    /// Why the case cannot run on this host at all (its configuration sets
    /// a knob this kernel build lacks), as opposed to a failure.
    pub fn cannot_run_here(&self) -> Option<String> {
        match self {
            ValidateError::Knob(e @ KnobError::Absent { .. }) => Some(e.to_string()),
            _ => None,
        }
    }
}

/// One counter on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// `vmstat/thp_fault_alloc` or `hugepages-64kB/anon_fault_alloc`.
    pub counter: String,
    pub model: i64,
    pub host: i64,
}

impl Row {
    pub fn agrees(&self) -> bool {
        self.model == self.host
    }

    /// A gauge (`nr_*`: a level, not an event count).
    pub fn is_gauge(&self) -> bool {
        self.counter
            .rsplit('/')
            .next()
            .is_some_and(|name| name.starts_with("nr_"))
    }
}

/// The comparison of one workload under one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    /// Every compared counter, also those zero on both sides.
    pub rows: Vec<Row>,
    /// The first process's folio layout before it exited, both sides.
    pub model_layout: FolioLayout,
    pub host_layout: FolioLayout,
    /// Page faults: the model's `pgfault` and the host tasks' minor and
    /// major faults (which also include a few faults of the forked
    /// processes' own stacks and data; reported, not compared).
    pub model_pgfault: u64,
    pub host_faults: u64,
    /// The host tasks' kernel (system) time, and the model's estimate.
    pub host_stime_ns: u64,
    pub attempts: u32,
    /// A khugepaged pass (its `scan_sleep_millisecs` timer, which the
    /// model does not have) worked on the host between the run's own
    /// counter snapshot and the read of its layout: the two do not
    /// describe one state, so the attempt says nothing about the model.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub khugepaged_interfered: bool,
    /// The model's counters (all sections), for reports.
    #[serde(skip)]
    pub model: Option<Counters>,
}

impl Validation {
    pub fn counters_agree(&self) -> bool {
        self.rows.iter().all(Row::agrees)
    }

    pub fn layout_agrees(&self) -> bool {
        self.model_layout == self.host_layout
    }

    pub fn agrees(&self) -> bool {
        self.counters_agree() && self.layout_agrees()
    }

    /// Rows where either side is non-zero.
    pub fn nonzero(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.model != 0 || r.host != 0)
    }
}

/// Knobs that one host kernel build has and another lacks: a case that
/// sets one cannot run on a host without it (`KnobError::Absent`, a skip);
/// any other missing knob is an error.
pub const BUILD_SPECIFIC_KNOBS: &[&str] = &["transparent_hugepage/anon_beside_full"];

/// The THP knob writes that give the host the model machine's complete
/// THP state (top level, defrag, zero page, underused shrinking,
/// max_ptes_none, every anonymous size), and where it swaps its swap
/// knobs (`vm/swappiness`, `vm/page-cluster`, `swap/vma_ra_enabled`).
/// A build-specific knob the host lacks ([`BUILD_SPECIFIC_KNOBS`]) is
/// skipped when the model has it at its default (off), and makes the case
/// unable to run here otherwise.
pub fn host_knobs(m: &Machine) -> Result<Vec<(String, String)>, KnobError> {
    let mut out = Vec::new();
    let swaps = !m.config().swap.is_empty();
    for k in m.knobs() {
        let swap_knob = matches!(
            k.path.as_str(),
            "vm/swappiness" | "vm/page-cluster" | "swap/vma_ra_enabled"
        );
        if !k.path.starts_with("transparent_hugepage/") && !(swaps && swap_knob) {
            continue;
        }
        let value = selected(&k.value);
        if !knob_file(&k.path).exists() {
            if !BUILD_SPECIFIC_KNOBS.contains(&k.path.as_str()) {
                return Err(KnobError::Unsupported(format!(
                    "the host has no {} (model value {value})",
                    knob_file(&k.path).display()
                )));
            }
            if value == "0" {
                continue;
            }
            return Err(KnobError::Absent {
                path: knob_file(&k.path),
                value: value.to_string(),
            });
        }
        out.push((k.path, value));
    }
    Ok(out)
}

/// `config` with the behaviours of this host's kernel build that the
/// configuration does not set itself (`hostbuild`): on a machine with a
/// memcg, how mTHP faults charge it.
pub fn host_build_config(mut config: MachineConfig, memcg: bool) -> Result<MachineConfig, ValidateError> {
    use crate::hostbuild::{memcg_thp_charge_batch, MEMCG_THP_CHARGE_BATCH};
    if memcg && !config.knobs.iter().any(|(k, _)| k == MEMCG_THP_CHARGE_BATCH) {
        let batch = memcg_thp_charge_batch()?;
        config
            .knobs
            .push((MEMCG_THP_CHARGE_BATCH.into(), u8::from(batch).to_string()));
    }
    Ok(config)
}

/// The events of a built-in workload as the model ran them.
pub fn workload_events(
    config: &MachineConfig,
    def: &WorkloadDef,
    spec: &WorkloadSpec,
) -> Result<Vec<Event>, ValidateError> {
    let mut m = Machine::new(config.clone())?;
    let out = largo_workloads::run(&mut m, def, spec, &RunOptions::default(), &mut |_, _| {})?;
    Ok(resolved_to_events(&out.resolved, m.geometry().page_size()))
}

/// A built-in workload on both sides.
pub fn validate_workload(
    config: &MachineConfig,
    def: &WorkloadDef,
    spec: &WorkloadSpec,
) -> Result<Validation, ValidateError> {
    let events = workload_events(config, def, spec)?;
    validate(config, &events)
}

/// Replays `events` on the model, then runs them on the host (up to
/// [`MAX_ATTEMPTS`] times while the host counts more events or other gauges), holding the knob
/// lock for the host runs.
pub fn validate(config: &MachineConfig, events: &[Event]) -> Result<Validation, ValidateError> {
    let host = HostMachine::of(config)?;
    let mut m = Machine::new(host_build_config(
        host.model_config(config),
        host.memcg_bytes.is_some(),
    )?)?;
    // One khugepaged wake scans every registered mm on both sides: the
    // host's native processes are copies of this one, whose own memory
    // would otherwise use up the default `pages_to_scan` before the
    // trace's ranges (a configuration may still set it).
    let default_budget = (1u64 << m.geometry().pmd_order) * 8;
    if m.thp().khugepaged.pages_to_scan == default_budget {
        m.set_knob(PAGES_TO_SCAN, &VALIDATION_PAGES_TO_SCAN.to_string())
            .unwrap_or_else(|e| unreachable!("pages_to_scan takes {VALIDATION_PAGES_TO_SCAN}: {e}"));
    }
    if m.thp().khugepaged.scan_sleep_ms == DEFAULT_SCAN_SLEEP_MS {
        m.set_knob(SCAN_SLEEP, &VALIDATION_SCAN_SLEEP_MS.to_string())
            .unwrap_or_else(|e| unreachable!("scan_sleep_millisecs takes {VALIDATION_SCAN_SLEEP_MS}: {e}"));
    }
    if host.swap_bytes.is_some() && !config.zswap && hostswap::zswap_ever_enabled() {
        // The host's zswap was on once this boot: large folios no longer
        // swap in whole there, nor then in the model.
        for v in ["Y", "N"] {
            m.set_knob("zswap/enabled", v)
                .unwrap_or_else(|e| unreachable!("zswap/enabled takes {v}: {e}"));
        }
    }
    let knobs = host_knobs(&m)?;
    // The host keeps a sentinel on khugepaged's list (see `sentinel.rs`),
    // and, where tasks are pinned, khugepaged runs on the other cpu.
    m.with_vm(0, |vm, _| {
        vm.khugepaged.external_mm = true;
        if host.pinned() {
            vm.khugepaged.cpu = KHUGEPAGED_CPU;
        }
    });
    let opts = ReplayOptions {
        snapshot_at: Some(first_root_exit(events).unwrap_or(events.len())),
        cpu: host.pinned().then_some(PINNED_CPU),
        roots_join_memcg: true,
        ..ReplayOptions::default()
    };
    let out = replay(&mut m, events, &opts, &mut |_, _| {})?;
    let model_layout = FolioLayout::from_model(out.snapshot.as_ref().expect("a snapshot was asked for"));
    let model_counters = out.snapshot_counters.clone().expect("a snapshot was asked for");
    let page_size = m.geometry().page_size();
    let plan = native::plan(events)?;
    let mut guard = KnobGuard::acquire()?;
    // This process's own memory is no work for khugepaged while it runs.
    let _own_thp = largo_physmem::host::ThpOffGuard::new().map_err(ValidateError::Process)?;
    guard.set_all(&knobs)?;
    if config.zswap {
        guard.set("zswap/enabled", "Y")?;
    }
    // The validator keeps off the tasks' cpu (restored on every exit).
    let _off_their_cpu = host.pinned().then(|| hostswap::CpuPin::to(KHUGEPAGED_CPU));
    if host.pinned() {
        guard.pin_kthread("khugepaged", KHUGEPAGED_CPU)?;
        // kcompactd's proactive compaction (every 500 ms) drains the LRU
        // batches of the cpu it runs on (`compact_zone`): not the tasks'.
        for node in 0..hostswap::nr_online_nodes() {
            guard.pin_kthread(&format!("kcompactd{node}"), KHUGEPAGED_CPU)?;
        }
    }
    let sentinel = crate::sentinel::Sentinel::start(m.geometry().pmd_size_bytes())?;
    if host.pinned() {
        // The knob writes woke khugepaged: its pass (and the LRU drain it
        // starts with) ends before the case runs, not inside it.
        hostswap::settle_khugepaged(std::time::Duration::from_secs(2));
    }
    let mut attempts = 0;
    let validation = loop {
        attempts += 1;
        let v = host.run(&mut guard, attempts, |memcg| {
            // A memcg's charges include the page tables: the window then
            // owns whole top-level regions, so every table below the
            // page-table root is new, as in the model.
            let mut placement = native::place_with(&plan, page_size, memcg.is_some())?;
            placement.cpu = host.pinned().then_some(PINNED_CPU);
            placement.memcg = memcg;
            placement.exact_gauges = host.swap_bytes.is_some();
            host_once(&model_counters, &model_layout, &plan, placement, page_size, attempts)
        })?;
        // Other processes add to the host's events, and move its gauges
        // either way: worth another try (a wrong model differs every time).
        // Where reclaim runs (swap, memcg), the unsynchronised periodic
        // memcg statistics flush may land inside a run and steer it:
        // any difference is worth another try.
        let noise = host.pinned()
            || v.rows
                .iter()
                .any(|r| r.host > r.model || (r.is_gauge() && r.host != r.model));
        let retry = !v.agrees() && (host.pinned() || v.khugepaged_interfered || (noise && v.layout_agrees()));
        if retry && std::env::var_os(SHOW_ATTEMPTS).is_some() {
            let differ: Vec<String> = v
                .rows
                .iter()
                .filter(|r| !r.agrees())
                .map(|r| format!("{} {}/{}", r.counter, r.model, r.host))
                .collect();
            let why = if v.khugepaged_interfered {
                " (khugepaged worked between the snapshot and the layout read)"
            } else {
                ""
            };
            eprintln!("attempt {attempts} differs{why}: {}", differ.join(", "));
        }
        if !retry || attempts >= MAX_ATTEMPTS {
            break v;
        }
    };
    drop(sentinel);
    guard.restore()?;
    Ok(Validation {
        model: Some(out.run.counters),
        ..validation
    })
}

/// The host state a validation sets up beside the knobs: a zram swap
/// device of the model's swap size, a memory cgroup of its limit.
struct HostMachine {
    swap_bytes: Option<u64>,
    memcg_bytes: Option<u64>,
}

impl HostMachine {
    /// What the host needs for `config`; refused where the host cannot
    /// be made the same (disk swap, several devices, zswap without the
    /// opt-in).
    fn of(config: &MachineConfig) -> Result<HostMachine, KnobError> {
        let swap_bytes = match config.swap.as_slice() {
            [] => None,
            [one] if one.kind == largo_mm::swap::SwapKind::Zram => Some(one.size_bytes),
            _ => {
                return Err(KnobError::Unsupported(
                    "validation swaps to one zram device only (--swap SIZE:zram)".into(),
                ))
            }
        };
        if config.zswap && std::env::var_os(ZSWAP_OPT_IN).is_none() {
            return Err(KnobError::Unsupported(format!(
                "enabling the host's zswap keeps large folios from swapping in whole until the next boot; \
                 set {ZSWAP_OPT_IN}=1 to validate with --zswap anyway"
            )));
        }
        // Where it swaps, the workload runs in a memcg of its own even
        // without a limit: refaults are then judged against that memcg's
        // lists (as in the model), not against the page cache of whatever
        // cgroup the validation runs in.
        let memcg_bytes = match (swap_bytes, config.memcg_max_bytes) {
            (Some(_), None) => Some(u64::MAX),
            (_, limit) => limit,
        };
        Ok(HostMachine {
            swap_bytes,
            memcg_bytes,
        })
    }

    /// The model's machine: `config` with the workload memcg the host
    /// uses and, where it swaps, the host's page cache (refaults of
    /// memory MADV_PAGEOUT reclaimed are judged against the root's lists,
    /// which hold it).
    fn model_config(&self, config: &MachineConfig) -> MachineConfig {
        let page_cache_bytes = match self.swap_bytes {
            Some(_) if config.page_cache_bytes == 0 => crate::hostshape::host_page_cache_bytes(),
            _ => config.page_cache_bytes,
        };
        MachineConfig {
            memcg_max_bytes: self.memcg_bytes,
            page_cache_bytes,
            ..config.clone()
        }
    }

    fn pinned(&self) -> bool {
        self.swap_bytes.is_some() || self.memcg_bytes.is_some()
    }

    /// One host run in a fresh swap device and cgroup (so slot positions
    /// and cgroup counters are the run's alone), both journalled by
    /// `guard` and removed after the run.
    fn run<T>(
        &self,
        guard: &mut KnobGuard,
        attempt: u32,
        f: impl FnOnce(Option<std::path::PathBuf>) -> Result<T, ValidateError>,
    ) -> Result<T, ValidateError> {
        if let Some(bytes) = self.swap_bytes {
            if attempt == 1 {
                guard.swapon_zram(ZRAM_DEVICE, bytes)?;
            } else {
                hostswap::zram_off(ZRAM_DEVICE)?;
                hostswap::zram_on(ZRAM_DEVICE, bytes)?;
            }
        }
        let memcg = match self.memcg_bytes {
            Some(bytes) => Some(guard.create_memcg(bytes)?),
            None => None,
        };
        // SysV segments outlive their processes: whatever a run (or a
        // killed one before it) left is removed.
        largo_physmem::sysv::remove_segments();
        let out = f(memcg.clone());
        largo_physmem::sysv::remove_segments();
        if let Some(dir) = memcg {
            hostswap::remove_cgroup(&dir)?;
        }
        out
    }
}

fn host_once(
    c: &Counters,
    model_layout: &FolioLayout,
    plan: &native::Plan,
    mut placement: native::Placement,
    page_size: u64,
    attempts: u32,
) -> Result<Validation, ValidateError> {
    let roots = native::run(&mut placement, plan, true)?;
    // Read just before the first process forked, and by that process
    // itself after its last step.
    let first = roots.first();
    let before = first.and_then(|r| r.before.clone()).unwrap_or_default();
    let after = first.and_then(|r| r.counters.clone()).unwrap_or_default();
    let d = after.minus(&before);
    let mut rows = Vec::new();
    // Gauges are exact only when the capture refreshed them (plans that
    // map shmem); elsewhere they are 0 on the model and left out.
    for e in VMSTAT_EVENTS.iter().filter(|e| plan.shmem || !e.starts_with("nr_")) {
        rows.push(Row {
            counter: format!("vmstat/{e}"),
            model: c.vmstat(e) as i64,
            host: d.vmstat(e),
        });
    }
    if c.swap.total_kb > 0 {
        for e in SWAP_EVENTS {
            rows.push(Row {
                counter: format!("vmstat/{e}"),
                model: c.vmstat(e) as i64,
                host: d.vmstat(e),
            });
        }
    }
    if let Some(g) = c.memcg.as_ref().filter(|_| !plan.forks()) {
        memcg_rows(g, &d.memcg, page_size, &mut rows);
    }
    rows.push(Row {
        counter: "khugepaged/pages_collapsed".into(),
        model: c.khugepaged.pages_collapsed as i64,
        host: d.vmstat("khugepaged/pages_collapsed"),
    });
    for size in c.mthp.keys() {
        for s in MTHP_STATS {
            rows.push(Row {
                counter: format!("hugepages-{size}/{s}"),
                model: c.mthp(size, s),
                host: d.mthp(size, s),
            });
        }
    }
    Ok(Validation {
        rows,
        model_layout: model_layout.clone(),
        host_layout: roots.first().and_then(|r| r.layout.clone()).unwrap_or_default(),
        model_pgfault: c.vmstat("pgfault"),
        host_faults: roots.iter().map(|r| r.exit.rusage.minflt + r.exit.rusage.majflt).sum(),
        host_stime_ns: roots.iter().map(|r| r.exit.rusage.stime_ns).sum(),
        attempts,
        khugepaged_interfered: first.is_some_and(|r| {
            r.khugepaged_after_layout
                .as_ref()
                .is_some_and(|late| *late != KhugepagedEvents::of(&after))
        }),
        model: None,
    })
}

/// The memcg rows: the model's workload memcg against the host's cgroup
/// files (bytes turned into pages).
fn memcg_rows(g: &MemcgCounts, host: &std::collections::BTreeMap<String, i64>, page_size: u64, rows: &mut Vec<Row>) {
    let kb = (page_size >> 10) as i64;
    let pages = |key: &str| host.get(key).map_or(0, |b| b / page_size as i64);
    for &name in MEMCG_ROWS {
        let (model, host) = match name {
            "failcnt" => (g.failcnt as i64, host.get("failcnt").copied().unwrap_or(0)),
            "peak" => (g.peak_kb as i64 / kb, pages("max_usage_in_bytes")),
            "usage" => (g.usage_kb as i64 / kb, pages("usage_in_bytes")),
            "kmem" => (g.kmem_kb as i64 / kb, pages("kmem.usage_in_bytes")),
            "swap" => (g.swap_kb as i64 / kb, pages("stat/swap")),
            "pgpgin" => (g.pgpgin as i64, host.get("stat/pgpgin").copied().unwrap_or(0)),
            "pgpgout" => (g.pgpgout as i64, host.get("stat/pgpgout").copied().unwrap_or(0)),
            _ => (g.oom_kill as i64, host.get("oom_kill").copied().unwrap_or(0)),
        };
        rows.push(Row {
            counter: format!("memcg/{name}"),
            model,
            host,
        });
    }
}
