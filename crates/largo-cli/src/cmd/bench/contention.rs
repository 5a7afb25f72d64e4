//! `largo bench contention`: will-it-scale page_fault1 with 1 and 2 tasks
//! (processes and threads) natively on this host (root), kernel time per
//! page, beside largo's estimate of the same step (its lock-wait model,
//! `largo_workloads::contention`): the 1 -> 2 CPU change of the kernel
//! time per page, side by side.

use anyhow::{Context, Result};
use clap::Args;
use largo_host::knobs::KnobGuard;
use largo_types::{format_size, parse_size};
use largo_workloads::{builtin, RunOptions, TaskMode};

use crate::args::UsageError;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct ContentionBenchArgs {
    /// Folio sizes (4K: no mTHP size enabled).
    #[arg(long, default_value = "4K,64K", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// Bytes each task maps and writes per iteration.
    #[arg(long, default_value = "128M")]
    pub size: String,
    /// Iterations per task.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub iterations: u64,
    /// Rounds; each runs 1 then 2 tasks of each mode; means are reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Run one task's loop and exit (the process of a multi-process run).
    #[arg(long, hide = true)]
    pub child: bool,
    #[command(flatten)]
    pub format: FormatArgs,
}

struct Row {
    folio: u64,
    mode: TaskMode,
    /// Host kernel ns per page at 1 and 2 tasks, one per round.
    host: Option<(Vec<f64>, Vec<f64>)>,
    /// largo's estimate, ns per page, at 1 and 2 CPUs.
    largo: (f64, f64),
}

fn knobs_for(folio: u64) -> Result<Vec<(String, String)>> {
    let mut knobs = vec![("transparent_hugepage/enabled".to_string(), "never".to_string())];
    if folio > 4096 {
        knobs.extend(largo_workloads::policy::thp_knobs(&format!(
            "{}=always",
            format_size(folio)
        ))?);
    }
    Ok(knobs)
}

pub fn run(args: &ContentionBenchArgs) -> Result<()> {
    let size = parse_size(&args.size).map_err(|e| UsageError(e.to_string()))?;
    if args.child {
        largo_host::scaling::page_fault1_task(size, args.iterations)?;
        return Ok(());
    }
    let folios: Vec<u64> = args
        .sizes
        .iter()
        .map(|s| parse_size(s).map_err(|e| UsageError(format!("'{s}': {e}"))))
        .collect::<Result<_, _>>()?;
    let host_reason = largo_host::unavailable_reason();
    // The model's memory bandwidth: measured now on this host (a fill by
    // one thread, then by two at once), else the preset's.
    let memory = match host_reason {
        None => largo_types::MemoryBandwidth {
            one_cpu_gbs: largo_host::scaling::fill_bandwidth(1, 256 << 20, 4)?,
            all_cpus_gbs: largo_host::scaling::fill_bandwidth(2, 256 << 20, 4)?,
            measured_cpus: 2,
        },
        Some(_) => largo_types::Preset::X86_64.memory_bandwidth(),
    };
    let mut rows = Vec::new();
    for &folio in &folios {
        for mode in [TaskMode::Process, TaskMode::Thread] {
            let largo = (
                model_ns(folio, size, args.iterations, mode, 1, memory)?,
                model_ns(folio, size, args.iterations, mode, 2, memory)?,
            );
            let host = match host_reason {
                None => {
                    Some(host_ns(folio, size, mode, args).with_context(|| format!("host at {}", format_size(folio)))?)
                }
                Some(_) => None,
            };
            rows.push(Row {
                folio,
                mode,
                host,
                largo,
            });
        }
    }
    print(&rows, args, size, host_reason.as_deref(), &memory)?;
    Ok(())
}

/// Host kernel ns per page with 1 and 2 tasks: `rounds` rounds of 1 task
/// then 2, one value per round each.
fn host_ns(folio: u64, size: u64, mode: TaskMode, args: &ContentionBenchArgs) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut guard = KnobGuard::acquire()?;
    guard.set_all(&largo_host::record::thp_only(folio)?)?;
    let exe = crate::embed::largo_exe()?;
    let child_args: Vec<String> = [
        "bench",
        "contention",
        "--child",
        "--size",
        &args.size,
        "--iterations",
        &args.iterations.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let pages = (size / 4096 * args.iterations) as f64;
    let one = |n: usize| -> Result<f64> {
        let ns = match mode {
            TaskMode::Process => largo_host::scaling::processes(n, &exe, &child_args)?,
            TaskMode::Thread => largo_host::scaling::threads(n, size, args.iterations)?,
        };
        Ok(ns as f64 / (pages * n as f64))
    };
    one(1)?; // warm-up
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        a.push(one(1)?);
        b.push(one(2)?);
    }
    drop(guard);
    Ok((a, b))
}

/// largo's kernel ns per page (with the estimated lock waits) for
/// page_fault1 with `n` tasks on `n` CPUs.
fn model_ns(
    folio: u64,
    size: u64,
    iterations: u64,
    mode: TaskMode,
    n: usize,
    memory: largo_types::MemoryBandwidth,
) -> Result<f64> {
    let knobs = knobs_for(folio)?;
    let mut m = largo_mm::Machine::new(largo_mm::MachineConfig {
        nr_cpus: n,
        knobs,
        ..largo_mm::MachineConfig::default()
    })?;
    let text = format!("page_fault1:size={},iterations={iterations}", format_size(size));
    let (def, spec) = builtin::parse(&text)?;
    let opts = RunOptions {
        nr_tasks: n,
        mode,
        ..RunOptions::default()
    };
    let out = largo_workloads::run(&mut m, def, &spec, &opts, &mut |_, _| {})?;
    let profile = largo_workloads::cost::Profile::default_profile();
    let est = profile.estimate(&out.counters);
    let c = largo_workloads::contention::estimate(
        &out.counters,
        &profile,
        largo_workloads::cost::Faults::Hot,
        est.kernel_ns,
        0.0,
        largo_workloads::contention::Concurrency {
            tasks: n,
            threads: mode == TaskMode::Thread,
            cpus: n,
            nodes: 1,
            memory,
        },
    );
    let pages = (size / 4096 * iterations) as f64;
    Ok(c.kernel_ns_with_waits / (pages * n as f64))
}

fn print(
    rows: &[Row],
    args: &ContentionBenchArgs,
    size: u64,
    host_reason: Option<&str>,
    memory: &largo_types::MemoryBandwidth,
) -> std::io::Result<()> {
    use largo_host::stats::{estimate_agrees, paired_change_pct, Summary};
    let mut out = Out::stdout(args.format);
    let largo_change = |(a, b): (f64, f64)| (b - a) / a * 100.0;
    let mut t = Grid::new([
        "folio",
        "tasks are",
        "host ns/page 1 task",
        "2 tasks",
        "change",
        "+- 95%",
        "largo ns/page 1 CPU",
        "2 CPUs",
        "change",
        "",
    ])
    .right_from(2);
    for r in rows {
        let host = r
            .host
            .as_ref()
            .map(|(a, b)| (Summary::of(a), Summary::of(b), paired_change_pct(a, b)));
        let est = largo_change(r.largo);
        let verdict = host.as_ref().map_or("", |h| {
            if h.2.n < 2 {
                ""
            } else if estimate_agrees(est, &h.2) {
                "agrees"
            } else {
                "DISAGREES"
            }
        });
        out.json(&serde_json::json!({
            "bench": "contention",
            "folio_kib": r.folio >> 10,
            "mode": r.mode,
            "host_ns_per_page_1": host.as_ref().map(|h| h.0.mean),
            "host_ns_per_page_2": host.as_ref().map(|h| h.1.mean),
            "host_change_pct": host.as_ref().map(|h| h.2.mean),
            "host_change_ci_pct": host.as_ref().map(|h| h.2.ci95),
            "largo_ns_per_page_1": r.largo.0,
            "largo_ns_per_page_2": r.largo.1,
            "largo_change_pct": est,
            "agrees": (!verdict.is_empty()).then_some(verdict == "agrees"),
            "fill_gbs_1": memory.one_cpu_gbs,
            "fill_gbs_2": memory.all_cpus_gbs,
        }))?;
        t.row([
            Cell::text(format_size(r.folio)),
            Cell::text(match r.mode {
                TaskMode::Process => "processes",
                TaskMode::Thread => "threads",
            }),
            host.as_ref().map_or(Cell::text(""), |h| Cell::num(h.0.mean, 0)),
            host.as_ref().map_or(Cell::text(""), |h| Cell::num(h.1.mean, 0)),
            host.as_ref()
                .map_or(Cell::text(""), |h| Cell::text(format!("{:+.1}%", h.2.mean))),
            host.as_ref().map_or(Cell::text(""), |h| Cell::num(h.2.ci95, 1)),
            Cell::num(r.largo.0, 0),
            Cell::num(r.largo.1, 0),
            Cell::text(format!("{est:+.1}%")),
            Cell::text(verdict),
        ]);
    }
    out.table(&t)?;
    out.line(format!(
        "will-it-scale page_fault1, {} per iteration, {} iterations per task; host: kernel time (getrusage stime, \
         tick-sampled) per page and task, mean of {} rounds, the change paired per round with its 95% interval; \
         largo: the estimated kernel time per page with the lock waits of its closed queueing model and the sharing \
         of memory bandwidth ({:.1} GB/s for one CPU, {:.1} for two{}); agrees: within 10 points or the interval",
        format_size(size),
        args.iterations,
        args.rounds,
        memory.one_cpu_gbs,
        memory.all_cpus_gbs,
        if host_reason.is_none() {
            ", measured now"
        } else {
            ", the preset's"
        }
    ))?;
    if let Some(r) = host_reason {
        out.line(format!("host side not measured: {r}"))?;
    }
    out.flush()
}
