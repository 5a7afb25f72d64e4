//! `largo calibrate`: measure this host's kernel running page_fault1 at
//! every anonymous folio size (root; the THP knobs are set and restored)
//! and fit the cost model's coefficients.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use largo_host::calibrate::{fit_profile, measure};
use largo_host::kernel_time::HostClock;
use largo_workloads::cost::Profile;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// 128 MiB page_fault1 loops per host run.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub iterations: u64,
    /// Host runs per size (the median is used); sizes are interleaved.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub repeats: u64,
    /// Write the fitted profile (JSON) here, e.g.
    /// crates/largo-workloads/profiles/default.json to make it the default.
    #[arg(long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// The profile's name.
    #[arg(long, default_value = "calibrated")]
    pub name: String,
    /// Print the profile as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// "AMD EPYC ... (2 CPUs), Linux 6.18.44".
fn describe_host() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{model} ({cpus} CPUs), Linux {}", release.trim())
}

pub fn run(args: &CalibrateArgs) -> Result<()> {
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot calibrate on this host: {reason}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let flag = stop.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let tty = std::io::stderr().is_terminal() && !args.json;
    let mut clock = HostClock::best();
    let points = measure(
        &mut clock,
        args.iterations,
        args.repeats as usize,
        &mut |size| {
            if tty {
                eprint!("\rmeasuring page_fault1 at {size:>7} ");
            }
        },
        &|| stop.load(Ordering::SeqCst),
    )
    .context("measuring the host (its knobs are restored)")?;
    if tty {
        eprintln!();
    }
    let method = format!(
        "largo calibrate --iterations {} --repeats {}: page_fault1 (128 MiB, one write per 4 KiB page, munmap) run natively in a forked task at each folio size, kernel time = {} of the task after a warm-up run, median of the repeats; costs fitted: fault, page_zero, pte (pte_set = pte_clear = rmap_page), buddy_op; page_copy = 2 x page_zero; the rest are priors",
        args.iterations,
        args.repeats,
        clock.source()
    );
    let profile = fit_profile(&points, &args.name, &describe_host(), &method).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.output {
        let text = serde_json::to_string_pretty(&profile)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    let text = if args.json {
        serde_json::to_string_pretty(&profile)? + "\n"
    } else {
        render(&profile, &points)
    };
    let _ = out.write_all(text.as_bytes());
    Ok(())
}

fn render(p: &Profile, points: &[largo_host::calibrate::SizePoint]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "folio size",
        "host kernel ms/iteration",
        "runs (ms)",
        "largo estimate ms",
        "error",
    ]);
    for (f, pt) in p.fit.iter().zip(points) {
        let runs: Vec<String> = pt.host_ns.iter().map(|ns| format!("{:.1}", ns / 1e6)).collect();
        let err = (f.model_ns_per_iteration - f.host_ns_per_iteration) / f.host_ns_per_iteration * 100.0;
        t.add_row([
            f.size.clone(),
            format!("{:.2}", f.host_ns_per_iteration / 1e6),
            runs.join(" "),
            format!("{:.2}", f.model_ns_per_iteration / 1e6),
            format!("{err:+.1}%"),
        ]);
    }
    for col in 1..=4 {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut s = format!("{t}\n");
    let get = |size: &str| p.fit.iter().find(|f| f.size == size);
    if let (Some(a), Some(b)) = (get("4kB"), get("64kB")) {
        let host = a.host_ns_per_iteration / b.host_ns_per_iteration;
        let model = a.model_ns_per_iteration / b.model_ns_per_iteration;
        s.push_str(&format!(
            "kernel time ratio 4K/64K: host {host:.2}, largo {model:.2} ({:+.1}%)\n",
            (model - host) / host * 100.0
        ));
    }
    s.push_str("costs (ns):");
    for (k, v) in &p.costs {
        let prior = if p.priors.contains(k) { " (prior)" } else { "" };
        s.push_str(&format!(" {k}={v:.1}{prior}"));
    }
    s.push('\n');
    s
}
