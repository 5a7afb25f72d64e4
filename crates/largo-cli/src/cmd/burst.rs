//! `largo validate burst` (root): a THP burst on this host as it is now,
//! against largo booted from an exact snapshot taken just before
//! (`largo_host::burst`): which folio sizes the allocator could find.

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::args::parse_size_arg;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct BurstArgs {
    /// Anonymous memory faulted, in address order.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE", default_value = "2G")]
    pub size: u64,
    /// Folio sizes enabled (`always`); every other size is off.
    #[arg(long, value_delimiter = ',', value_parser = parse_size_arg, value_name = "SIZES", default_value = "64K,2M")]
    pub sizes: Vec<u64>,
    /// transparent_hugepage/defrag during the burst.
    #[arg(long, default_value = "never", value_parser = ["always", "defer", "defer+madvise", "madvise", "never"])]
    pub defrag: String,
    /// Relative difference allowed per counter (counters within 2 of the
    /// host's always agree).
    #[arg(long, default_value_t = 0.05)]
    pub tolerance: f64,
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: &BurstArgs) -> Result<()> {
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot run a burst on this host: {reason}");
    }
    let sizes_kb: Vec<u64> = args.sizes.iter().map(|b| b >> 10).collect();
    // Ctrl-C waits for the burst (seconds) to end and its knobs to be
    // restored, instead of killing it with THP settings changed.
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        crate::embed::on_interrupt(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
    }
    let b = largo_host::burst::run(args.size, &sizes_kb, &args.defrag).context("the burst (host knobs restored)")?;
    if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        bail!("interrupted; the host knobs are restored");
    }
    let mut out = Out::stdout(args.format);
    let mut t = Grid::new(["counter", "host", "largo", "difference"]).right_from(1);
    for (name, &(model, host)) in &b.rows {
        let diff = if host == 0 {
            format!("{:+}", model - host)
        } else {
            format!("{:+.1}%", (model - host) as f64 / host as f64 * 100.0)
        };
        t.row([
            Cell::text(name.clone()),
            Cell::int(host as u64),
            Cell::int(model as u64),
            Cell::text(diff),
        ]);
        out.json(&serde_json::json!({"counter": name, "host": host, "largo": model}))?;
    }
    out.line(format!(
        "THP burst: {} MiB faulted with {} enabled, defrag={}, on this host and on largo booted from a snapshot taken just before ({} free pages in it, {} the model could not place)",
        args.size >> 20,
        args.sizes.iter().map(|&s| largo_types::format_size(s)).collect::<Vec<_>>().join("+"),
        args.defrag,
        b.snapshot_free_pages,
        b.free_pages_unplaced
    ))?;
    out.table(&t)?;
    let mut c = Grid::new(["not compared", "host", "largo"]).right_from(1);
    for (name, &(model, host)) in &b.context {
        c.row([
            Cell::text(name.clone()),
            Cell::int(host as u64),
            Cell::int(model as u64),
        ]);
    }
    out.table(&c)?;
    out.line(format!(
        "buddyinfo before, host:\n{}\nlargo (from the snapshot):\n{}",
        b.buddyinfo_before.trim_end(),
        b.model_buddyinfo_before.trim_end()
    ))?;
    out.line(format!(
        "buddyinfo after, host:\n{}\nlargo:\n{}",
        b.buddyinfo_after.trim_end(),
        b.model_buddyinfo_after.trim_end()
    ))?;
    let ok = b.agrees(args.tolerance);
    out.line(if ok {
        format!("AGREE: every counter within {:.0}%", args.tolerance * 100.0)
    } else {
        format!("DIFFER: a counter is more than {:.0}% off", args.tolerance * 100.0)
    })?;
    out.flush()?;
    if !ok {
        bail!("the burst differs");
    }
    Ok(())
}
