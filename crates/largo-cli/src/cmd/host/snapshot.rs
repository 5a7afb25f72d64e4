//! `largo host snapshot -o FILE` (root): this host's memory pfn by pfn
//! (`largo_host::snapshot`), written to FILE, with a summary: pages of
//! each kind, the free blocks per order it found against
//! /proc/buddyinfo's, and how well the pageblock types were inferred.
//! `--machine snapshot:FILE` boots a model from it.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use largo_mm::snapshot::{HostSnapshot, PfnKind};

use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// Where to write the snapshot (gzip; a few MB for 24 GiB).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// `--json`: the summary as one JSON object.
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: &SnapshotArgs) -> Result<()> {
    let tty = std::io::stderr().is_terminal() && args.format.is_text();
    let started = std::time::Instant::now();
    let snap = take(tty)?;
    largo_host::snapshot::file::save(&snap, &args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let file_bytes = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    let mut out = Out::stdout(args.format);
    let summary = summary(&snap);
    out.json(&serde_json::json!({
        "file": args.output.display().to_string(),
        "file_bytes": file_bytes,
        "seconds": started.elapsed().as_secs_f64(),
        "taken_at": snap.header.taken_at,
        "pages": summary.pages,
        "free_blocks": summary.free_blocks,
        "migratetype_misplaced_pages": snap.header.migratetype_misplaced_pages,
    }))?;
    out.line(format!(
        "{}: {} pfns of {}, taken {} in {:.1} s, {:.1} MB",
        args.output.display(),
        snap.header.nr_pfns,
        snap.header.host,
        snap.header.taken_at,
        started.elapsed().as_secs_f64(),
        file_bytes as f64 / 1e6
    ))?;
    out.table(&summary.kinds_table())?;
    out.table(&summary.orders_table())?;
    out.line(format!(
        "pageblock migratetypes: {}; free pages on a list pagetypeinfo does not count them on: {}",
        snap.header.migratetype_method, snap.header.migratetype_misplaced_pages
    ))?;
    out.flush()?;
    Ok(())
}

/// Takes the snapshot, with progress on a terminal.
pub fn take(tty: bool) -> Result<HostSnapshot> {
    let bar = if tty {
        let b = indicatif::ProgressBar::new(100);
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} reading /proc/kpage* [{bar:30}] {percent}%")
                .expect("valid template")
                .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let snap = largo_host::snapshot::take::take(&mut |done, total| {
        bar.set_position(done * 100 / total.max(1));
    })
    .context("taking a snapshot of this host")?;
    bar.finish_and_clear();
    Ok(snap)
}

struct Summary {
    pages: serde_json::Map<String, serde_json::Value>,
    /// Per order: blocks in the snapshot, and /proc/buddyinfo's count now.
    free_blocks: Vec<(u64, u64)>,
}

fn summary(snap: &HostSnapshot) -> Summary {
    let pages = snap
        .pages_by_kind()
        .into_iter()
        .filter(|&(k, n)| k != PfnKind::Hole && n > 0)
        .map(|(k, n)| (k.name().to_string(), serde_json::json!(n)))
        .collect();
    let mut found = vec![0u64; 11];
    for z in &snap.header.zones {
        let end = z.start_pfn + z.spanned_pages;
        for (_, o) in snap.free_blocks(z.start_pfn, end, 10) {
            found[o as usize] += 1;
        }
    }
    let counted: Vec<u64> = (0..11)
        .map(|o| {
            snap.header
                .zones
                .iter()
                .map(|z| z.free.get(o).map_or(0, |f| f.iter().sum::<u64>()))
                .sum()
        })
        .collect();
    Summary {
        pages,
        free_blocks: found.into_iter().zip(counted).collect(),
    }
}

impl Summary {
    fn kinds_table(&self) -> Grid {
        let mut t = Grid::new(["kind", "pages", "MiB"]).right_from(1);
        for (k, v) in &self.pages {
            let n = v.as_u64().unwrap_or(0);
            t.row([
                Cell::text(k.clone()),
                Cell::int(n),
                Cell::num(n as f64 * 4096.0 / (1 << 20) as f64, 1),
            ]);
        }
        t
    }

    fn orders_table(&self) -> Grid {
        let mut t = Grid::new(["order", "free blocks in the snapshot", "pagetypeinfo when taken"]).right_from(0);
        for (o, &(found, counted)) in self.free_blocks.iter().enumerate() {
            t.row([Cell::int(o as u64), Cell::int(found), Cell::int(counted)]);
        }
        t
    }
}
