//! `largo age phone|server`: a machine aged over hours of simulated time
//! by a long-running generator (`largo_workloads::aging`), under each
//! configuration (the remedies compared side by side: proactive
//! compaction, defrag modes, a ZONE_MOVABLE region, ...), sampled every
//! simulated minute: an hourly summary table, or `--json` one object per
//! configuration and minute.

use std::io::IsTerminal;

use anyhow::Result;
use clap::Args;
use largo_workloads::aging::{Aging, Generator, Sample};

use super::run::ConfigArgs;
use crate::args::{boot, UsageError};
use crate::output::{Cell, Grid, Out};

/// The remedies compared when no `--config` is given, a ZONE_MOVABLE of
/// a quarter of `mem_bytes` among them.
fn default_remedies(mem_bytes: u64) -> Vec<crate::config::ConfigSpec> {
    let movable = format!("--thp 64K,2M --movable {}M", (mem_bytes / 4) >> 20);
    // TAO (Yu Zhao, LSF/MM/BPF 2024): a zone only large folios come from.
    let tao = format!("{movable} --set largo/movable_min_kb=64");
    [
        ("baseline", "--thp 64K,2M".to_string()),
        (
            "proactive-60",
            "--thp 64K,2M --set vm/compaction_proactiveness=60".to_string(),
        ),
        (
            "defrag-always",
            "--thp 64K,2M --set transparent_hugepage/defrag=always".to_string(),
        ),
        ("movable-25%", movable),
        ("tao-25%", tao),
    ]
    .into_iter()
    .map(|(name, flags)| crate::config::ConfigSpec::parse(&format!("{name}:{flags}")).expect("valid remedy"))
    .collect()
}

#[derive(Args, Debug)]
pub struct AgeArgs {
    /// The generator: `phone` (app launches and lmkd kills, unmovable
    /// kernel memory outliving apps) or `server` (a long-lived heap with
    /// allocator churn).
    #[arg(value_name = "GENERATOR", value_parser = ["phone", "server"])]
    pub generator: String,
    /// Simulated hours.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=168))]
    pub hours: u64,
    /// Seed of the generator's choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub cfg: ConfigArgs,
    /// Also draw each folio size's fault success (%) per 10 simulated
    /// minutes under every configuration, as an SVG figure.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// One configuration's minutes.
struct Aged {
    name: String,
    samples: Vec<Sample>,
}

fn age_one(c: &crate::config::NamedConfig, generator: Generator, minutes: u64, seed: u64) -> Result<Aged> {
    let mut m = boot(c.config.clone())?;
    let mut aging = Aging::new(generator, seed);
    let samples = (0..minutes).map(|_| aging.minute(&mut m)).collect();
    Ok(Aged {
        name: c.name.clone(),
        samples,
    })
}

fn pct(v: Option<f64>) -> Cell {
    match v {
        Some(x) => Cell::new(format!("{:.1}%", x * 100.0), format!("{x}")),
        None => Cell::text("-"),
    }
}

/// Minutes per plotted point.
const PLOT_WINDOW: usize = 10;

/// Each configuration's success per size, a point per `PLOT_WINDOW`
/// minutes (its end, in hours).
fn plot_success(path: &std::path::Path, aged: &[Aged], generator: &str) -> Result<()> {
    let mut series = Vec::new();
    for a in aged {
        let mut sizes: Vec<&String> = a.samples.iter().flat_map(|s| s.alloc.keys()).collect();
        sizes.sort_by_key(|k| k.trim_end_matches("kB").parse::<u64>().unwrap_or(0));
        sizes.dedup();
        for size in sizes {
            let points = a
                .samples
                .chunks(PLOT_WINDOW)
                .filter_map(|w| {
                    let end = w.last()?.minute as f64 / 60.0;
                    success(w, size).map(|x| (end, x * 100.0))
                })
                .collect();
            series.push(crate::plot::Series {
                name: format!("{} {size}", a.name),
                points,
            });
        }
    }
    crate::plot::line_chart(
        path,
        &format!("{generator}: large folio fault success while aging"),
        "simulated hours",
        "faults that got the size (%)",
        &series,
        Some(100.0),
    )?;
    Ok(())
}

/// Success over a set of minutes: faults that got the size over all
/// faults that tried it.
fn success(samples: &[Sample], size: &str) -> Option<f64> {
    let a: u64 = samples.iter().map(|s| s.alloc.get(size).copied().unwrap_or(0)).sum();
    let f: u64 = samples.iter().map(|s| s.fallback.get(size).copied().unwrap_or(0)).sum();
    (a + f > 0).then(|| a as f64 / (a + f) as f64)
}

pub fn run(args: &AgeArgs) -> Result<()> {
    let generator = Generator::from_name(&args.generator)
        .ok_or_else(|| UsageError(format!("unknown generator '{}': phone or server", args.generator)))?;
    let cfg = &args.cfg;
    // Without --config the remedies are compared on whatever machine the
    // MACHINE and POLICY flags describe.
    let configs = if cfg.configs.is_empty() {
        let mem = cfg.machine.config_with(Vec::new())?.mem_bytes;
        crate::config::resolve(&default_remedies(mem), &cfg.machine, &cfg.policy)?
    } else {
        crate::config::resolve(&cfg.configs, &cfg.machine, &cfg.policy)?
    };
    let minutes = args.hours * 60;
    let tty = std::io::stderr().is_terminal() && cfg.format.is_text();
    let started = std::time::Instant::now();
    let mut aged = Vec::new();
    for c in &configs {
        if tty {
            eprint!("\r\x1b[Kaging under {} ({} simulated minutes)", c.name, minutes);
        }
        aged.push(age_one(c, generator, minutes, args.seed)?);
    }
    if tty {
        eprintln!();
    }
    if let Some(path) = &args.plot {
        plot_success(path, &aged, &args.generator)?;
    }
    let mut out = Out::stdout(cfg.format);
    for a in &aged {
        for s in &a.samples {
            let mut j = serde_json::to_value(s)?;
            j["config"] = serde_json::json!(a.name);
            j["generator"] = serde_json::json!(args.generator);
            out.json(&j)?;
        }
    }
    let sizes: Vec<String> = {
        let mut v: Vec<String> = aged
            .iter()
            .flat_map(|a| a.samples.iter().flat_map(|s| s.alloc.keys().cloned()))
            .collect();
        v.sort_by_key(|k| k.trim_end_matches("kB").parse::<u64>().unwrap_or(0));
        v.dedup();
        v
    };
    let mut header = vec!["hour".to_string(), "config".to_string()];
    header.extend(sizes.iter().map(|s| format!("{s} success")));
    header.extend(
        [
            "free pageblocks (end)",
            "compaction stalls",
            "kcompactd wakes",
            "pages migrated",
            "kernel allocs failed",
        ]
        .map(String::from),
    );
    let mut t = Grid::new(header).right_from(2);
    for hour in 0..args.hours {
        for a in &aged {
            let h = &a.samples[(hour * 60) as usize..((hour + 1) * 60) as usize];
            let mut row = vec![Cell::int(hour + 1), Cell::text(a.name.clone())];
            row.extend(sizes.iter().map(|s| pct(success(h, s))));
            row.push(Cell::int(h.last().map_or(0, |s| s.free_pageblocks)));
            row.push(Cell::int(h.iter().map(|s| s.compact_stall).sum()));
            row.push(Cell::int(h.iter().map(|s| s.compact_daemon_wake).sum()));
            row.push(Cell::int(h.iter().map(|s| s.pgmigrate_success).sum()));
            row.push(Cell::int(h.iter().map(|s| s.kernel_alloc_failed).sum()));
            t.row(row);
        }
    }
    out.line(format!(
        "{} aged {} simulated hours under {} configurations (seed {}); per hour: the share of faults of each size that got it, free memory in pageblock-sized blocks at the hour's end, compaction",
        args.generator,
        args.hours,
        configs.len(),
        args.seed
    ))?;
    if tty {
        eprintln!("({:.1} s of wall time)", started.elapsed().as_secs_f64());
    }
    out.table(&t)?;
    out.flush()?;
    Ok(())
}
