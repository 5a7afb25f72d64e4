//! `largo bench migrate`: the seed series' experiment on this machine.
//! A two-node `ram` machine; a task writes N folios of one size on node 0
//! and `move_pages` moves them to node 1, with the mainline copy (each
//! folio inside its move step, `vanilla`) and the batch copy on 1..=CPUs
//! worker threads (`mt_N`); throughput in GB/s of folio data moved per
//! second of wall time, next to the host's plain memcpy bandwidth with the
//! same thread counts (`memcpy_N`), measured in the same run. `--busy`
//! keeps every CPU busy with a spinning thread meanwhile, as the seed's
//! second experiment did.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use largo_mm::vm::{MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::copy::{memcpy_gbps, CopyPolicy, MtCopy, Vanilla};
use largo_physmem::BackingKind;
use largo_types::GeometryOverrides;

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
    /// Draw GB/s against the folios per call to FILE.svg, a panel per
    /// folio size, a line per copy policy and the memcpy limit.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// A row: folios of `folio_kib`, `nr` of them.
fn rows(quick: bool) -> Vec<(u64, u64)> {
    if quick {
        return vec![(4, 256), (64, 32), (2048, 4)];
    }
    let mut v: Vec<(u64, u64)> = [32, 256, 1024, 4096].into_iter().map(|n| (4, n)).collect();
    v.extend([32, 128, 512, 1024].into_iter().map(|n| (64, n)));
    v.extend([1, 8, 64, 256, 1024].into_iter().map(|n| (2048, n)));
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

/// Writes `nr` folios of `folio_kib` on node 0 and times moving them all
/// to node 1 with `copy`; returns seconds.
fn one_move(m: &mut Machine, folio_kib: u64, nr: u64, copy: &dyn CopyPolicy) -> Result<f64> {
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
    let t = Instant::now();
    let out = m.with_vm(0, |vm, ctx| vm.move_pages(ctx, pid, &pages, Some(&nodes), copy))?;
    let s = t.elapsed().as_secs_f64();
    if out.ret != 0 || out.result.nr_succeeded != len / page {
        bail!(
            "move_pages of {nr} x {folio_kib} KiB moved {} of {} pages (ret {})",
            out.result.nr_succeeded,
            len / page,
            out.ret
        );
    }
    m.with_vm(0, |vm, ctx| vm.exit(ctx, pid))?;
    Ok(s)
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

pub fn run(args: &MigrateBenchArgs) -> Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut columns: Vec<(String, Box<dyn CopyPolicy>)> = vec![("vanilla".into(), Box::new(Vanilla))];
    for t in 1..=cpus {
        columns.push((format!("mt_{t}"), Box::new(MtCopy::new(t, 16))));
    }
    let mut m = machine()?;
    if !args.quick {
        // Back every frame with host memory first, as memcpy's buffers are:
        // a migration's destination frames would otherwise take host
        // first-touch faults inside the timed copy.
        let nr = m.backing().nr_pages();
        m.backing_mut().zero(largo_types::Pfn(0), nr)?;
    }
    let _busy = args.busy.then(|| Busy::start(cpus));
    let mut cells: Vec<(u64, u64, String, f64)> = Vec::new();
    let rows: Vec<(u64, u64)> = rows(args.quick)
        .into_iter()
        .filter(|(kib, _)| args.folios.is_empty() || args.folios.contains(&(kib << 10)))
        .collect();
    if rows.is_empty() {
        return Err(
            crate::args::UsageError("--folio: no row of that folio size (the rows are 4K, 64K and 2M)".into()).into(),
        );
    }
    for (folio_kib, nr) in rows {
        let knob = format!("transparent_hugepage/hugepages-{folio_kib}kB/enabled");
        if folio_kib > 4 {
            m.set_knob(&knob, "always")?;
        }
        for (name, copy) in &columns {
            let times: Vec<f64> = (0..args.runs)
                .map(|_| one_move(&mut m, folio_kib, nr, copy.as_ref()))
                .collect::<Result<_>>()?;
            let bytes = (folio_kib << 10) * nr;
            cells.push((folio_kib, nr, name.clone(), bytes as f64 / median(times) / 1e9));
        }
        if folio_kib > 4 {
            m.set_knob(&knob, "never")?;
        }
    }
    let memcpy: Vec<(String, f64)> = (1..=cpus)
        .map(|t| (format!("memcpy_{t}"), memcpy_gbps(256 << 20, t, args.runs as usize + 2)))
        .collect();
    print(&cells, &memcpy, &columns, args)?;
    if let Some(path) = &args.plot {
        plot(path, &cells, &memcpy)?;
    }
    Ok(())
}

/// A panel per folio size: GB/s against folios per `move_pages` call
/// (log 2), a line per copy policy, the best memcpy as a flat line.
fn plot(path: &std::path::Path, cells: &[(u64, u64, String, f64)], memcpy: &[(String, f64)]) -> Result<()> {
    let mut sizes: Vec<u64> = cells.iter().map(|c| c.0).collect();
    sizes.dedup();
    let best_memcpy = memcpy.iter().map(|m| m.1).fold(0.0, f64::max);
    let panels: Vec<crate::plot::Panel> = sizes
        .iter()
        .map(|&kib| {
            let mut policies: Vec<&str> = Vec::new();
            for c in cells.iter().filter(|c| c.0 == kib) {
                if !policies.contains(&c.2.as_str()) {
                    policies.push(&c.2);
                }
            }
            let mut series: Vec<crate::plot::Series> = policies
                .iter()
                .map(|p| crate::plot::Series {
                    name: p.to_string(),
                    points: cells
                        .iter()
                        .filter(|c| c.0 == kib && c.2 == *p)
                        .map(|c| (c.1 as f64, c.3))
                        .collect(),
                })
                .collect();
            let xs: Vec<f64> = cells.iter().filter(|c| c.0 == kib).map(|c| c.1 as f64).collect();
            let (lo, hi) = (
                xs.iter().copied().fold(f64::INFINITY, f64::min),
                xs.iter().copied().fold(0.0, f64::max),
            );
            if best_memcpy > 0.0 && lo.is_finite() {
                series.push(crate::plot::Series {
                    name: "memcpy (best)".into(),
                    points: vec![(lo, best_memcpy), (hi, best_memcpy)],
                });
            }
            crate::plot::Panel {
                title: format!("{} folios", largo_types::format_size(kib << 10)),
                x_label: "folios per move_pages call (log scale)".into(),
                y_label: "copy throughput (GB/s)".into(),
                series,
                y_max: None,
                log_x: true,
            }
        })
        .collect();
    crate::plot::line_panels(path, Some("move_pages from node 0 to node 1 by copy policy"), &panels)?;
    Ok(())
}

fn print(
    cells: &[(u64, u64, String, f64)],
    memcpy: &[(String, f64)],
    columns: &[(String, Box<dyn CopyPolicy>)],
    args: &MigrateBenchArgs,
) -> std::io::Result<()> {
    let mut out = Out::stdout(args.format);
    for (kib, nr, col, gbps) in cells {
        out.json(
            &serde_json::json!({"bench": "migrate", "folio_kib": kib, "nr_folios": nr, "column": col, "gbps": gbps, "busy": args.busy}),
        )?;
    }
    for (col, gbps) in memcpy {
        out.json(
            &serde_json::json!({"bench": "migrate", "folio_kib": null, "nr_folios": null, "column": col, "gbps": gbps, "busy": args.busy}),
        )?;
    }
    let mut header = vec!["folio".to_string(), "folios".to_string()];
    header.extend(columns.iter().map(|c| c.0.clone()));
    header.push("best / memcpy".into());
    let mut t = Grid::new(header).right_from(1);
    let best_memcpy = memcpy.iter().map(|m| m.1).fold(0.0, f64::max);
    let mut rows: Vec<(u64, u64)> = cells.iter().map(|c| (c.0, c.1)).collect();
    rows.dedup();
    for (kib, nr) in rows {
        let row: Vec<f64> = cells.iter().filter(|c| c.0 == kib && c.1 == nr).map(|c| c.3).collect();
        let best = row.iter().copied().fold(0.0, f64::max);
        let label = if kib >= 1024 {
            format!("{}M", kib >> 10)
        } else {
            format!("{kib}K")
        };
        let mut r = vec![Cell::new(label, format!("{}", kib << 10)), Cell::int(nr)];
        r.extend(row.iter().map(|&g| Cell::num(g, 2)));
        r.push(Cell::new(
            format!("{:.0}%", best / best_memcpy * 100.0),
            format!("{}", best / best_memcpy),
        ));
        t.row(r);
    }
    out.line(format!(
        "move_pages of N folios from node 0 to node 1 on a ram machine (its frames backed by host memory beforehand), GB/s of folio data per second of wall time, median of {} runs{}",
        args.runs,
        if args.busy { ", every CPU busy with a spinning thread" } else { "" }
    ))?;
    out.table(&t)?;
    let limits: Vec<String> = memcpy.iter().map(|(c, g)| format!("{c} {g:.2}")).collect();
    out.line(format!("host memcpy limit (GB/s, 256 MiB): {}", limits.join(", ")))?;
    out.flush()
}
