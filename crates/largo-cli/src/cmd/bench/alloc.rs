//! `largo bench alloc`: largo's page allocator against
//! `buddy_system_allocator::FrameAllocator` on the same op stream, plus
//! order-0 alloc+free through the pcp lists.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{bail, Result};
use buddy_system_allocator::FrameAllocator;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use largo_mm::gfp::GFP_HIGHUSER_MOVABLE;
use largo_mm::{Folio, Machine, MachineConfig};

use super::stream::{self, FrameSource};
use crate::args::{boot, MachineArgs, PolicyArgs};
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(clap::Args, Debug)]
pub struct AllocBenchArgs {
    /// Operations in the mixed-order stream.
    #[arg(long, default_value_t = 2_000_000)]
    pub ops: usize,
    /// Runs of each side; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Order-0 alloc+free pairs in the pcp measurement.
    #[arg(long, default_value_t = 10_000_000)]
    pub pcp_iters: u64,
    /// Seed of the op stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub format: FormatArgs,
    #[command(flatten)]
    pub machine: MachineArgs,
}

struct LargoSource<'a> {
    machine: &'a mut Machine,
}

impl FrameSource for LargoSource<'_> {
    type Handle = Folio;

    #[inline(never)]
    fn alloc(&mut self, order: u32) -> Option<Folio> {
        self.machine.alloc_pages(0, GFP_HIGHUSER_MOVABLE, order).ok().flatten()
    }

    #[inline(never)]
    fn free(&mut self, folio: Folio, _order: u32) {
        let _ = self.machine.free_folio(0, folio);
    }
}

struct BsaSource<const ORDER: usize> {
    frames: FrameAllocator<ORDER>,
}

impl<const ORDER: usize> FrameSource for BsaSource<ORDER> {
    type Handle = usize;

    #[inline(never)]
    fn alloc(&mut self, order: u32) -> Option<usize> {
        self.frames.alloc(1 << order)
    }

    #[inline(never)]
    fn free(&mut self, frame: usize, order: u32) {
        self.frames.dealloc(frame, 1 << order);
    }
}

#[derive(Clone, Copy, Default)]
struct Sample {
    ns_per_op: f64,
    failures: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn run_largo(config: &MachineConfig, ops: &[stream::Op]) -> Result<Sample> {
    let mut machine = Machine::new(config.clone())?;
    machine.populate_memmap();
    let start = Instant::now();
    let failures = stream::replay(ops, &mut LargoSource { machine: &mut machine });
    let ns = start.elapsed().as_nanos() as f64;
    Ok(Sample {
        ns_per_op: ns / ops.len() as f64,
        failures,
    })
}

fn run_bsa<const ORDER: usize>(machine: &Machine, ops: &[stream::Op]) -> Sample {
    let mut src = BsaSource::<ORDER> {
        frames: FrameAllocator::new(),
    };
    for r in machine.layout().free_ranges() {
        src.frames.add_frame(r.start as usize, r.end as usize);
    }
    let start = Instant::now();
    let failures = stream::replay(ops, &mut src);
    let ns = start.elapsed().as_nanos() as f64;
    Sample {
        ns_per_op: ns / ops.len() as f64,
        failures,
    }
}

/// ns per order-0 alloc+free pair on one cpu: always a pcp hit after the first.
fn run_pcp(config: &MachineConfig, iters: u64) -> Result<f64> {
    let mut m = Machine::new(config.clone())?;
    let warm = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 0)?;
    if let Some(f) = warm {
        m.free_folio(0, f)?;
    }
    let start = Instant::now();
    for _ in 0..iters {
        let Some(f) = m.alloc_pages(0, black_box(GFP_HIGHUSER_MOVABLE), 0)? else {
            bail!("order-0 allocation failed on an idle machine");
        };
        m.free_folio(0, black_box(f))?;
    }
    Ok(start.elapsed().as_nanos() as f64 / iters as f64)
}

pub fn run(args: &AllocBenchArgs) -> Result<()> {
    let config = args.machine.config(&PolicyArgs::default())?;
    let probe = boot(config.clone())?;
    let max_order = probe.geometry().max_page_order;
    let target = probe.page_alloc().managed_pages() / 2;
    let ops = stream::generate(args.seed, args.ops, target);
    let bar = progress(args, args.runs as u64 * 2 + 1);
    let (mut largo, mut bsa) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        largo.push(run_largo(&config, &ops)?);
        bar.inc(1);
        bsa.push(match max_order {
            10 => run_bsa::<11>(&probe, &ops),
            11 => run_bsa::<12>(&probe, &ops),
            12 => run_bsa::<13>(&probe, &ops),
            13 => run_bsa::<14>(&probe, &ops),
            other => bail!("bench alloc supports MAX_PAGE_ORDER 10..=13, not {other}"),
        });
        bar.inc(1);
    }
    let pcp_ns = run_pcp(&config, args.pcp_iters)?;
    bar.finish_and_clear();
    let largo_ns = median(largo.iter().map(|s| s.ns_per_op).collect());
    let bsa_ns = median(bsa.iter().map(|s| s.ns_per_op).collect());
    let ratio = bsa_ns / largo_ns;
    let mut out = Out::stdout(args.format);
    out.json(&serde_json::json!({
        "bench": "alloc",
        "ops": args.ops,
        "largo_ns_per_op": round2(largo_ns),
        "buddy_system_allocator_ns_per_op": round2(bsa_ns),
        "ratio": round2(ratio),
        "pcp_order0_alloc_free_ns": round2(pcp_ns),
        "runs": args.runs,
        "largo_failures": largo[0].failures,
        "buddy_system_allocator_failures": bsa[0].failures,
        "machine": probe.describe(),
    }))?;
    out.line(format!(
        "bench alloc: {} ops (seed {}), median of {} runs, on {}",
        args.ops,
        args.seed,
        args.runs,
        probe.describe()
    ))?;
    let mut t = Grid::new(["allocator", "ns/op", "failed allocs"]).right_from(1);
    t.row([
        Cell::text("largo"),
        Cell::num(largo_ns, 1),
        Cell::int(largo[0].failures),
    ]);
    t.row([
        Cell::text("buddy_system_allocator::FrameAllocator"),
        Cell::num(bsa_ns, 1),
        Cell::int(bsa[0].failures),
    ]);
    out.table(&t)?;
    out.line(format!("ratio (buddy_system_allocator / largo): {ratio:.2}x"))?;
    out.line(format!(
        "pcp order-0 alloc+free: {pcp_ns:.1} ns per pair ({} pairs)",
        args.pcp_iters
    ))?;
    out.flush()?;
    Ok(())
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn progress(args: &AllocBenchArgs, len: u64) -> ProgressBar {
    if !args.format.is_text() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}").unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message("bench alloc");
    bar
}
