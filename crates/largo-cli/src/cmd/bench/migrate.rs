//! `largo bench migrate`: the seed series' experiment on this machine.
//! A two-node `ram` machine; a task writes N folios of one size on node 0
//! and `move_pages` moves them to node 1 with each copy policy: mainline
//! (`vanilla`, each folio's data copied inside its move step), the batch
//! copy on the migrating thread (`batch`) and on 1..=CPUs worker threads
//! (`mt_N`). Per cell: the copy, timed (the model's own bookkeeping is not
//! the kernel's), and the kernel's work around it, estimated from what the
//! model counted (folios isolated, unmapped and remapped, TLB flushes,
//! page-table writes, allocations) priced by the cost profile; GB/s =
//! bytes / (copy + kernel), the seed's table shape. The memcpy limit
//! (`memcpy_N`) is measured in every run right after a move, on the same
//! frames (the move's destinations back to its sources), sizes and thread
//! counts. `--busy` keeps every CPU busy with a spinning thread meanwhile,
//! as the seed's second experiment did.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use largo_mm::vm::{MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::copy::{coalesce, BatchCopy, CopyJob, CopyPolicy, MtCopy, Vanilla};
use largo_physmem::{Backing, BackingError, BackingKind};
use largo_types::GeometryOverrides;
use largo_workloads::cost::{Profile, TermInput, TERMS};

use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct MigrateBenchArgs {
    /// Timed runs per cell; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub runs: u32,
    /// Run a spinning thread on every CPU while measuring.
    #[arg(long)]
    pub busy: bool,
    /// Small rows only (a quick look; the tests use it).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub format: FormatArgs,
    /// Only the rows of these folio sizes (4K, 64K, 2M; repeatable).
    #[arg(long = "folio", value_parser = crate::args::parse_size_arg, value_name = "SIZE")]
    pub folios: Vec<u64>,
    /// The cost profile pricing the kernel's work around the copy
    /// (default: the built-in one).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
    /// Draw GB/s against the folios per call to FILE.svg, a panel per
    /// folio size, a line per copy policy and the memcpy limit.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// A row: folios of `folio_kib`, `nr` of them (the seed's rows).
fn rows(quick: bool) -> Vec<(u64, u64)> {
    if quick {
        return vec![(4, 256), (64, 32), (2048, 4)];
    }
    let mut v: Vec<(u64, u64)> = [32, 256, 512, 768, 1024].into_iter().map(|n| (4, n)).collect();
    v.extend([32, 256, 512, 768, 1024].into_iter().map(|n| (64, n)));
    v.extend((0..=10).map(|i| (2048, 1 << i)));
    v
}

fn machine() -> Result<Machine> {
    Ok(Machine::new(MachineConfig {
        mem_bytes: 8 << 30,
        nr_nodes: 2,
        nr_cpus: 2,
        backing: BackingKind::Ram,
        overrides: GeometryOverrides::default(),
        ..MachineConfig::default()
    })?)
}

/// A copy policy that times its copies and keeps their jobs.
struct Timed<'a> {
    inner: &'a dyn CopyPolicy,
    ns: AtomicU64,
    jobs: Mutex<Vec<CopyJob>>,
}

impl<'a> Timed<'a> {
    fn new(inner: &'a dyn CopyPolicy) -> Timed<'a> {
        Timed {
            inner,
            ns: AtomicU64::new(0),
            jobs: Mutex::new(Vec::new()),
        }
    }
}

impl CopyPolicy for Timed<'_> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn batched(&self) -> bool {
        self.inner.batched()
    }

    fn copy(&self, backing: &mut dyn Backing, jobs: &[CopyJob]) -> Result<(), BackingError> {
        let t = Instant::now();
        let r = self.inner.copy(backing, jobs);
        self.ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(jobs);
        r
    }
}

/// One move: its copy measured, the kernel's work around it estimated.
struct Sample {
    copy_ns: f64,
    kernel_ns: f64,
    wall_ns: f64,
    /// `memcpy_N` for N = 1.. on the move's frames, ns (when asked).
    memcpy_ns: Vec<f64>,
}

/// The kernel time of the work counted between `before` and `after`,
/// but the copy (`page_migrate`, measured instead), priced by `profile`.
fn kernel_ns(profile: &Profile, before: &TermInput, after: &TermInput) -> f64 {
    let (b, a) = (before.counts(), after.counts());
    TERMS
        .iter()
        .enumerate()
        .filter(|(_, t)| t.name != "page_migrate")
        .map(|(i, t)| a[i].saturating_sub(b[i]) as f64 * profile.cost(t.name))
        .sum()
}

/// Writes `nr` folios of `folio_kib` on node 0 and moves them all to node
/// 1 with `copy`; then, if `memcpy` is given, times a plain copy of the
/// same frames (destinations back to sources) with each engine.
fn one_move(
    m: &mut Machine,
    folio_kib: u64,
    nr: u64,
    copy: &dyn CopyPolicy,
    profile: &Profile,
    memcpy: Option<&[MtCopy]>,
) -> Result<Sample> {
    let page = m.geometry().page_size();
    let folio = folio_kib << 10;
    let len = folio * nr;
    let (pid, addr) = m.with_vm(0, |vm, ctx| -> Result<(u32, u64)> {
        let pid = vm.spawn(ctx)?;
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let base = vm.mmap(ctx, pid, 0, len + folio, Prot::READ | Prot::WRITE, flags)?;
        let addr = base.next_multiple_of(folio);
        for a in (addr..addr + len).step_by(page as usize) {
            vm.access(ctx, pid, a, true)?;
        }
        Ok((pid, addr))
    })?;
    let pages: Vec<u64> = (0..nr).map(|i| addr + i * folio).collect();
    let nodes = vec![1; pages.len()];
    let timed = Timed::new(copy);
    let before = TermInput::read(m);
    let t = Instant::now();
    let out = m.with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &pages, Some(&nodes), &timed))?;
    let wall_ns = t.elapsed().as_nanos() as f64;
    let after = TermInput::read(m);
    if out.ret != 0 || out.result.nr_succeeded != len / page {
        bail!(
            "move_pages of {nr} x {folio_kib} KiB moved {} of {} pages (ret {})",
            out.result.nr_succeeded,
            len / page,
            out.ret
        );
    }
    let jobs = std::mem::take(&mut *timed.jobs.lock().unwrap_or_else(|e| e.into_inner()));
    let back: Vec<CopyJob> = coalesce(
        &jobs
            .iter()
            .map(|j| CopyJob {
                src: j.dst,
                dst: j.src,
                nr_pages: j.nr_pages,
            })
            .collect::<Vec<_>>(),
    );
    let mut memcpy_ns = Vec::new();
    for engine in memcpy.unwrap_or(&[]) {
        let t = Instant::now();
        engine.copy(m.backing_mut(), &back)?;
        memcpy_ns.push(t.elapsed().as_nanos() as f64);
    }
    m.with_vm(0, |vm, ctx| vm.exit(ctx, pid))?;
    Ok(Sample {
        copy_ns: timed.ns.load(Ordering::Relaxed) as f64,
        kernel_ns: kernel_ns(profile, &before, &after),
        wall_ns,
        memcpy_ns,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Spinning threads on every CPU until dropped.
struct Busy {
    stop: std::sync::Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(n: usize) -> Busy {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Rows done, on stderr when it is a terminal.
fn progress_bar(len: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} row {pos}/{len} [{bar:30}] {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

/// One reported cell: a policy (or `memcpy_N`) on a row, medians.
struct Measured {
    kib: u64,
    nr: u64,
    column: String,
    copy_ns: f64,
    /// 0 for memcpy.
    kernel_ns: f64,
    /// The whole simulated call (model bookkeeping included); 0 for memcpy.
    wall_ns: f64,
}

impl Measured {
    fn bytes(&self) -> f64 {
        ((self.kib << 10) * self.nr) as f64
    }

    /// GB/s of folio data moved per second of copy + kernel time.
    fn gbps(&self) -> f64 {
        self.bytes() / (self.copy_ns + self.kernel_ns)
    }

    /// GB/s of the copy alone.
    fn copy_gbps(&self) -> f64 {
        self.bytes() / self.copy_ns
    }

    fn is_memcpy(&self) -> bool {
        self.column.starts_with("memcpy_")
    }
}

/// Chunks the `mt_N` and `memcpy_N` engines cut folios into, in pages.
const CHUNK_PAGES: u64 = 16;

pub fn run(args: &MigrateBenchArgs) -> Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let profile = crate::cmd::run::load_profile(args.profile.as_deref())?;
    let mut columns: Vec<(String, Box<dyn CopyPolicy>)> = vec![
        ("vanilla".into(), Box::new(Vanilla)),
        ("batch".into(), Box::new(BatchCopy)),
    ];
    for t in 1..=cpus {
        columns.push((format!("mt_{t}"), Box::new(MtCopy::new(t, CHUNK_PAGES))));
    }
    let memcpy: Vec<MtCopy> = (1..=cpus).map(|t| MtCopy::new(t, CHUNK_PAGES)).collect();
    let mut m = machine()?;
    if !args.quick {
        // Back every frame with host memory first: a migration's
        // destination frames would otherwise take host first-touch faults
        // inside the timed copy.
        let nr = m.backing().nr_pages();
        m.backing_mut().zero(largo_types::Pfn(0), nr)?;
    }
    let _busy = args.busy.then(|| Busy::start(cpus));
    let rows: Vec<(u64, u64)> = rows(args.quick)
        .into_iter()
        .filter(|(kib, _)| args.folios.is_empty() || args.folios.contains(&(kib << 10)))
        .collect();
    if rows.is_empty() {
        return Err(
            crate::args::UsageError("--folio: no row of that folio size (the rows are 4K, 64K and 2M)".into()).into(),
        );
    }
    let progress = progress_bar(rows.len() as u64);
    let mut cells: Vec<Measured> = Vec::new();
    for &(folio_kib, nr) in &rows {
        let knob = format!("transparent_hugepage/hugepages-{folio_kib}kB/enabled");
        if folio_kib > 4 {
            m.set_knob(&knob, "always")?;
        }
        let mut samples: Vec<Vec<Sample>> = (0..columns.len()).map(|_| Vec::new()).collect();
        let mut memcpy_runs: Vec<Vec<f64>> = vec![Vec::new(); memcpy.len()];
        for run in 0..args.runs as usize {
            // Columns in a rotated order each run, the memcpy limit right
            // after the run's first move: neighbours in time share the
            // machine's state.
            for k in 0..columns.len() {
                let c = (run + k) % columns.len();
                let engines = (k == 0).then_some(memcpy.as_slice());
                let s = one_move(&mut m, folio_kib, nr, columns[c].1.as_ref(), &profile, engines)?;
                for (i, &ns) in s.memcpy_ns.iter().enumerate() {
                    memcpy_runs[i].push(ns);
                }
                samples[c].push(s);
            }
        }
        for ((name, _), ss) in columns.iter().zip(samples) {
            cells.push(Measured {
                kib: folio_kib,
                nr,
                column: name.clone(),
                copy_ns: median(ss.iter().map(|s| s.copy_ns).collect()),
                kernel_ns: median(ss.iter().map(|s| s.kernel_ns).collect()),
                wall_ns: median(ss.iter().map(|s| s.wall_ns).collect()),
            });
        }
        for (i, runs) in memcpy_runs.into_iter().enumerate() {
            cells.push(Measured {
                kib: folio_kib,
                nr,
                column: format!("memcpy_{}", i + 1),
                copy_ns: median(runs),
                kernel_ns: 0.0,
                wall_ns: 0.0,
            });
        }
        if folio_kib > 4 {
            m.set_knob(&knob, "never")?;
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    print(&cells, &columns, &profile, args)?;
    if let Some(path) = &args.plot {
        plot(path, &cells)?;
    }
    Ok(())
}

/// A panel per folio size: GB/s (copy + kernel) against folios per
/// `move_pages` call (log 2), a line per copy policy, and the best memcpy
/// of each row.
fn plot(path: &std::path::Path, cells: &[Measured]) -> Result<()> {
    let mut sizes: Vec<u64> = cells.iter().map(|c| c.kib).collect();
    sizes.dedup();
    let panels: Vec<crate::plot::Panel> = sizes
        .iter()
        .map(|&kib| {
            let mut policies: Vec<&str> = Vec::new();
            for c in cells.iter().filter(|c| c.kib == kib && !c.is_memcpy()) {
                if !policies.contains(&c.column.as_str()) {
                    policies.push(&c.column);
                }
            }
            let mut series: Vec<crate::plot::Series> = policies
                .iter()
                .map(|p| crate::plot::Series {
                    name: p.to_string(),
                    points: cells
                        .iter()
                        .filter(|c| c.kib == kib && c.column == *p)
                        .map(|c| (c.nr as f64, c.gbps()))
                        .collect(),
                })
                .collect();
            let mut nrs: Vec<u64> = cells.iter().filter(|c| c.kib == kib).map(|c| c.nr).collect();
            nrs.dedup();
            series.push(crate::plot::Series {
                name: "memcpy (best)".into(),
                points: nrs
                    .iter()
                    .map(|&nr| {
                        let best = cells
                            .iter()
                            .filter(|c| c.kib == kib && c.nr == nr && c.is_memcpy())
                            .map(Measured::copy_gbps)
                            .fold(0.0, f64::max);
                        (nr as f64, best)
                    })
                    .collect(),
            });
            crate::plot::Panel {
                title: format!("{} folios", largo_types::format_size(kib << 10)),
                x_label: "folios per move_pages call (log scale)".into(),
                y_label: "GB/s (measured copy + estimated kernel time)".into(),
                series,
                y_max: None,
                log_x: true,
            }
        })
        .collect();
    crate::plot::line_panels(path, Some("move_pages from node 0 to node 1 by copy policy"), &panels)?;
    Ok(())
}

fn size_label(kib: u64) -> String {
    if kib >= 1024 {
        format!("{}MB", kib >> 10)
    } else {
        format!("{kib}KB")
    }
}

fn print(
    cells: &[Measured],
    columns: &[(String, Box<dyn CopyPolicy>)],
    profile: &Profile,
    args: &MigrateBenchArgs,
) -> std::io::Result<()> {
    let mut out = Out::stdout(args.format);
    for c in cells {
        out.json(&serde_json::json!({
            "bench": "migrate", "folio_kib": c.kib, "nr_folios": c.nr, "column": c.column,
            "gbps": c.gbps(), "copy_gbps": c.copy_gbps(), "copy_ns": c.copy_ns,
            "kernel_ns": c.kernel_ns, "wall_ns": c.wall_ns, "busy": args.busy,
        }))?;
    }
    out.line(format!(
        "move_pages of N folios from node 0 to node 1 on a ram machine, median of {} runs{}: GB/s = folio bytes / (copy, measured + kernel work around it, estimated by {}); memcpy_N copies the same frames with N threads in the same runs",
        args.runs,
        if args.busy { ", every CPU busy with a spinning thread" } else { "" },
        profile.provenance(),
    ))?;
    let mut sizes: Vec<u64> = cells.iter().map(|c| c.kib).collect();
    sizes.dedup();
    let policies: Vec<&str> = columns.iter().map(|c| c.0.as_str()).collect();
    let memcpys: Vec<String> = {
        let mut v: Vec<String> = cells
            .iter()
            .filter(|c| c.is_memcpy())
            .map(|c| c.column.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    for kib in sizes {
        let mut nrs: Vec<u64> = cells.iter().filter(|c| c.kib == kib).map(|c| c.nr).collect();
        nrs.dedup();
        let cell = |nr: u64, col: &str| cells.iter().find(|c| c.kib == kib && c.nr == nr && c.column == col);
        // The cells of `cols` in row `nr`, each shown by `show`.
        let shown = |nr: u64, cols: &[&str], show: &dyn Fn(&Measured) -> Cell| -> Vec<Cell> {
            cols.iter().map(|p| cell(nr, p).map_or(Cell::text("-"), show)).collect()
        };
        let best_copy_gbps = |nr: u64, cols: &[&str]| {
            cols.iter()
                .filter_map(|p| cell(nr, p))
                .map(Measured::copy_gbps)
                .fold(0.0, f64::max)
        };
        let memcpy_cols: Vec<&str> = memcpys.iter().map(String::as_str).collect();
        // GB/s, the seed's table.
        let mut header = vec!["folio".to_string(), "folios".to_string()];
        header.extend(policies.iter().map(|p| p.to_string()));
        header.extend(memcpys.iter().cloned());
        header.push("copy / memcpy".into());
        let mut t = Grid::new(header).right_from(1);
        for &nr in &nrs {
            let mut r = vec![Cell::new(size_label(kib), format!("{}", kib << 10)), Cell::int(nr)];
            r.extend(shown(nr, &policies, &|c| Cell::num(c.gbps(), 2)));
            r.extend(shown(nr, &memcpy_cols, &|c| Cell::num(c.copy_gbps(), 2)));
            let ratio = best_copy_gbps(nr, &policies) / best_copy_gbps(nr, &memcpy_cols);
            r.push(Cell::new(format!("{:.0}%", ratio * 100.0), format!("{ratio}")));
            t.row(r);
        }
        out.line(format!("{} (GB/s):", size_label(kib)))?;
        out.table(&t)?;
        // Where the time goes: the copy measured, the kernel estimated.
        let mut header = vec!["folio".to_string(), "folios".to_string()];
        header.extend(policies.iter().map(|p| format!("{p} copy us")));
        header.push("kernel us (est.)".into());
        header.push("kernel / folio ns".into());
        let mut t = Grid::new(header).right_from(1);
        for &nr in &nrs {
            let mut r = vec![Cell::new(size_label(kib), format!("{}", kib << 10)), Cell::int(nr)];
            r.extend(shown(nr, &policies, &|c| Cell::num(c.copy_ns / 1e3, 1)));
            let kernel = cell(nr, policies[0]).map_or(0.0, |c| c.kernel_ns);
            r.push(Cell::num(kernel / 1e3, 1));
            r.push(Cell::num(kernel / nr as f64, 0));
            t.row(r);
        }
        out.line(format!("{} time per call: copy measured, kernel work around it estimated (the same for every policy: mainline already flushes the TLB once per batch):", size_label(kib)))?;
        out.table(&t)?;
    }
    out.flush()
}
