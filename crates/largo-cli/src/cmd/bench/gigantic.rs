//! `largo bench gigantic`: the fragmentation experiment of the seed
//! thread (2021). A `sim` machine is aged by a mixed workload (movable
//! anon memory in 64 KiB folios mapped and unmapped, unmovable kernel
//! allocations with lifetimes, their page tables); after every step the
//! success rate of 2 MiB, 32 MiB and 1 GiB allocations is probed under
//! each way of getting large blocks: MAX_PAGE_ORDER 10 with
//! `alloc_contig_pages` beyond it, MAX_PAGE_ORDER 18 (buddies across
//! sections), MAX_PAGE_ORDER 18 with gigapageblocks, and MAX_PAGE_ORDER 19
//! with 2 GiB sections (mainline-valid). Every variant sees the same
//! workload (same seed). Probes hold what they get until the sample ends,
//! then free it; the compaction and migration they cause stay, as on a
//! real machine. Each step is one second of simulated time (`t_s`), in
//! which kcompactd's timer may compact proactively.

use std::io::IsTerminal;

use anyhow::Result;
use clap::Args;
use largo_mm::gfp::{Gfp, GFP_HIGHUSER_MOVABLE, GFP_KERNEL};
use largo_mm::stats::VmEvent;
use largo_mm::vm::{Advice, MapFlags, Prot};
use largo_mm::{Folio, Machine, MachineConfig};
use largo_physmem::BackingKind;
use largo_types::GeometryOverrides;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cmd::table::cell;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct GiganticBenchArgs {
    /// Machine memory.
    #[arg(long, default_value = "64G", value_parser = crate::args::parse_size_arg)]
    pub mem: u64,
    /// Aging steps (one sample after each; t_s counts them as seconds).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub steps: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub format: FormatArgs,
    /// Draw the success rates over time to FILE.svg, a panel per probe
    /// size (2M, 32M, 1G), a line per variant.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// One way of getting large blocks.
struct Variant {
    name: &'static str,
    max_page_order: u32,
    section_bits: Option<u32>,
    beyond_section: bool,
    gigapageblocks: bool,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        name: "max10+contig",
        max_page_order: 10,
        section_bits: None,
        beyond_section: false,
        gigapageblocks: false,
    },
    Variant {
        name: "max18",
        max_page_order: 18,
        section_bits: None,
        beyond_section: true,
        gigapageblocks: false,
    },
    Variant {
        name: "max18+gigapageblocks",
        max_page_order: 18,
        section_bits: None,
        beyond_section: true,
        gigapageblocks: true,
    },
    Variant {
        name: "max19+2G-sections",
        max_page_order: 19,
        section_bits: Some(31),
        beyond_section: false,
        gigapageblocks: false,
    },
];

/// Probes per sample: (order, attempts).
const PROBES: [(u32, u32); 3] = [(9, 16), (13, 8), (18, 4)];

/// Share of memory the aged machine keeps in anon mappings and in
/// unmovable kernel allocations.
const ANON_SHARE: f64 = 0.90;
const KERNEL_SHARE: f64 = 0.04;
/// Share of a surviving region's 64 KiB chunks dropped (MADV_DONTNEED) per step.
const HOLE_SHARE: f64 = 0.10;

struct Ager {
    rng: ChaCha8Rng,
    pids: Vec<u32>,
    regions: Vec<(u32, u64, u64)>,
    anon_bytes: u64,
    kernel: Vec<Folio>,
    kernel_pages: u64,
}

fn machine(v: &Variant, mem: u64) -> Result<Machine> {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: mem,
        nr_cpus: 2,
        backing: BackingKind::Sim,
        overrides: GeometryOverrides {
            max_page_order: Some(v.max_page_order),
            section_bits: v.section_bits,
            buddy_beyond_section: v.beyond_section,
            ..Default::default()
        },
        knobs: vec![
            ("transparent_hugepage/hugepages-64kB/enabled".into(), "always".into()),
            ("largo/gigapageblocks".into(), (v.gigapageblocks as u8).to_string()),
        ],
        ..MachineConfig::default()
    })?;
    m.populate_memmap();
    Ok(m)
}

impl Ager {
    fn new(m: &mut Machine, seed: u64) -> Result<Ager> {
        let pids = (0..8)
            .map(|_| m.with_vm(0, |vm, ctx| vm.spawn(ctx)))
            .collect::<Result<_, _>>()?;
        Ok(Ager {
            rng: ChaCha8Rng::seed_from_u64(seed),
            pids,
            regions: Vec::new(),
            anon_bytes: 0,
            kernel: Vec::new(),
            kernel_pages: 0,
        })
    }

    /// Drops a share of the regions and kernel allocations, then maps and
    /// touches new regions (with kernel allocations among them) until the
    /// machine is as full as before.
    fn step(&mut self, m: &mut Machine, mem: u64, churn: f64) -> Result<()> {
        let chunk = 64 << 10;
        let mut i = 0;
        while i < self.regions.len() {
            if self.rng.random_bool(churn) {
                let (pid, addr, len) = self.regions.swap_remove(i);
                m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, len))?;
                self.anon_bytes -= len;
                continue;
            }
            // Holes punched in survivors; they count as still mapped.
            let (pid, addr, len) = self.regions[i];
            if churn > 0.0 {
                for off in (0..len).step_by(chunk as usize) {
                    if self.rng.random_bool(HOLE_SHARE) {
                        let at = addr + off;
                        m.with_vm(0, |vm, ctx| {
                            vm.madvise(ctx, pid, at, chunk.min(len - off), Advice::DontNeed)
                        })?;
                    }
                }
            }
            i += 1;
        }
        let mut j = 0;
        while j < self.kernel.len() {
            if self.rng.random_bool(churn) {
                let f = self.kernel.swap_remove(j);
                self.kernel_pages -= f.nr_pages();
                m.free_folio(0, f)?;
            } else {
                j += 1;
            }
        }
        let page = m.geometry().page_size();
        let kernel_target = (mem as f64 * KERNEL_SHARE) as u64 / page;
        // On a small machine the fixed reservations (kernel image, memmap)
        // are a larger share: keep twice min_free_kbytes and 1% in hand.
        let managed = m.page_alloc().managed_pages() * page;
        let reserve = 2 * (m.page_alloc().tunables().min_free_kbytes << 10) + mem / 100;
        let anon_target =
            (mem as f64 * ANON_SHARE).min((managed - kernel_target * page).saturating_sub(reserve) as f64);
        while (self.anon_bytes as f64) < anon_target {
            let pid = self.pids[self.rng.random_range(0..self.pids.len())];
            let len = self.rng.random_range(1..=64u64) << 20;
            let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
            let addr = m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, 0, len, Prot::READ | Prot::WRITE, flags))?;
            for a in (addr..addr + len).step_by(16 * page as usize) {
                m.with_vm(0, |vm, ctx| vm.access(ctx, pid, a, true))?;
            }
            self.regions.push((pid, addr, len));
            self.anon_bytes += len;
            // Kernel allocations land between the anon faults.
            let burst = self.rng.random_range(0..64);
            for _ in 0..burst {
                if self.kernel_pages >= kernel_target {
                    break;
                }
                let order = self.rng.random_range(0..=2);
                match m.alloc_pages(0, GFP_KERNEL, order)? {
                    Some(f) => {
                        self.kernel_pages += f.nr_pages();
                        self.kernel.push(f);
                    }
                    None => break,
                }
            }
        }
        Ok(())
    }
}

/// Success rate of `attempts` allocations of `order`: the buddy allocator
/// (with direct compaction) up to MAX_PAGE_ORDER, `alloc_contig_pages`
/// beyond it.
fn probe(m: &mut Machine, order: u32, attempts: u32) -> Result<f64> {
    let gfp = GFP_HIGHUSER_MOVABLE | Gfp::COMP | Gfp::NOWARN | Gfp::RETRY_MAYFAIL;
    let mut got = Vec::new();
    for _ in 0..attempts {
        let folio = if order <= m.geometry().max_page_order {
            m.alloc_pages_compact(0, gfp, order)?
        } else {
            m.alloc_contig_pages(1 << order, 0)?
        };
        match folio {
            Some(f) => got.push(f),
            None => break,
        }
    }
    let rate = got.len() as f64 / attempts as f64;
    for f in got {
        if f.order > m.geometry().max_page_order {
            m.free_contig_folio(f);
        } else {
            m.free_folio(0, f)?;
        }
    }
    Ok(rate)
}

/// The seed's page-fault comparison: the same workloads on fresh machines
/// at MAX_PAGE_ORDER 10 and 19 (2 GiB sections): estimated kernel time and
/// buddy levels walked (deeper splits and merges with larger blocks).
fn fault_comparison(args: &GiganticBenchArgs, out: &mut Out) -> Result<()> {
    let profile = largo_workloads::cost::Profile::default_profile();
    let variants = [&VARIANTS[0], &VARIANTS[3]];
    let workloads = ["page_fault1:size=1G,iterations=2", "anon-w-seq:size=4G"];
    let mut t = Grid::new(["workload", "variant", "kernel_ms (est.)", "buddy levels walked"]).right_from(2);
    for w in workloads {
        let (def, spec) = largo_workloads::builtin::parse(w)?;
        let mut base = None;
        for v in variants {
            let mut m = machine(v, args.mem)?;
            let run = largo_workloads::run(&mut m, def, &spec, &Default::default(), &mut |_, _| {})?;
            let est = profile.estimate(&run.counters);
            let levels = est.terms["buddy_level"].count;
            let ns = est.kernel_ns;
            let is_base = base.is_none();
            let (b_ns, b_levels) = *base.get_or_insert((ns, levels));
            out.json(
                &serde_json::json!({"experiment": "gigantic-faults", "variant": v.name, "workload": w,
                "kernel_ns": ns, "buddy_levels": levels}),
            )?;
            t.row([
                Cell::text(w),
                Cell::text(v.name),
                Cell::new(cell(ns / 1e6, b_ns / 1e6, 3, is_base), format!("{}", ns / 1e6)),
                Cell::new(cell(levels as f64, b_levels as f64, 0, is_base), levels.to_string()),
            ]);
        }
    }
    out.line(format!(
        "page faults on a fresh {} machine, MAX_PAGE_ORDER 10 vs 19 (cost profile '{}')",
        largo_types::format_size(args.mem),
        profile.name
    ))?;
    out.table(&t)?;
    out.flush()?;
    Ok(())
}

/// One sample: success rates, and the pages migrated and direct
/// compaction stalls of its step (kcompactd and the probes).
struct Sample {
    variant: &'static str,
    t_s: u32,
    rates: [f64; 3],
    migrated: u64,
    stalls: u64,
}

pub fn run(args: &GiganticBenchArgs) -> Result<()> {
    let mut out = Out::stdout(args.format);
    let mut samples: Vec<Sample> = Vec::new();
    for v in &VARIANTS {
        let mut m = machine(v, args.mem)?;
        let mut ager = Ager::new(&mut m, args.seed)?;
        ager.step(&mut m, args.mem, 0.0)?;
        for t in 1..=args.steps {
            ager.step(&mut m, args.mem, 0.2)?;
            let ev = |m: &Machine, e| m.page_alloc().events.get(e);
            let (migrated0, stalls0) = (ev(&m, VmEvent::PgmigrateSuccess), ev(&m, VmEvent::CompactStall));
            // A second of simulated time: kcompactd's timer fires twice
            // (proactive compaction where the fragmentation score is high).
            m.advance_time(1_000_000_000);
            let mut rates = [0.0; 3];
            for (k, &(order, attempts)) in PROBES.iter().enumerate() {
                rates[k] = probe(&mut m, order, attempts)?;
            }
            let migrated = ev(&m, VmEvent::PgmigrateSuccess) - migrated0;
            let stalls = ev(&m, VmEvent::CompactStall) - stalls0;
            out.json(
                &serde_json::json!({"experiment": "gigantic", "variant": v.name, "t_s": t,
                "success_2m": rates[0], "success_32m": rates[1], "success_1g": rates[2],
                "pages_migrated": migrated, "compact_stall": stalls}),
            )?;
            out.flush()?;
            if args.format.is_text() && std::io::stderr().is_terminal() {
                eprint!("\r{} t={t}/{}", v.name, args.steps);
            }
            samples.push(Sample {
                variant: v.name,
                t_s: t,
                rates,
                migrated,
                stalls,
            });
        }
        m.check()?;
    }
    if args.format.is_text() && std::io::stderr().is_terminal() {
        eprintln!();
    }
    out.line(format!(
        "allocation success after aging a {} sim machine (90% anon mapped in 64K folios, 4% unmovable kernel pages; per step 20% of regions and kernel pages replaced and 10% of the rest punched out in 64K holes; seed {}); probes: 2M x{}, 32M x{}, 1G x{}",
        largo_types::format_size(args.mem),
        args.seed,
        PROBES[0].1,
        PROBES[1].1,
        PROBES[2].1
    ))?;
    out.table(&samples_table(&samples))?;
    if let Some(path) = &args.plot {
        plot_samples(path, &samples)?;
    }
    fault_comparison(args, &mut out)
}

/// A panel per probe size: success (%) against aging steps, a line per
/// variant.
fn plot_samples(path: &std::path::Path, samples: &[Sample]) -> Result<()> {
    let mut variants: Vec<&str> = samples.iter().map(|s| s.variant).collect();
    variants.dedup();
    let panels: Vec<crate::plot::Panel> = ["2M", "32M", "1G"]
        .iter()
        .enumerate()
        .map(|(k, size)| crate::plot::Panel {
            title: format!("{size} allocations"),
            x_label: "aging step (s)".into(),
            y_label: "allocations that succeeded (%)".into(),
            series: variants
                .iter()
                .map(|v| crate::plot::Series {
                    name: v.to_string(),
                    points: samples
                        .iter()
                        .filter(|s| s.variant == *v)
                        .map(|s| (s.t_s as f64, s.rates[k] * 100.0))
                        .collect(),
                })
                .collect(),
            y_max: Some(100.0),
            log_x: false,
        })
        .collect();
    crate::plot::line_panels(path, Some("large allocations on an aged machine"), &panels)?;
    Ok(())
}

fn samples_table(samples: &[Sample]) -> Grid {
    let mut t = Grid::new(["variant", "t_s", "2M", "32M", "1G", "pages migrated", "compact_stall"]).right_from(1);
    for s in samples {
        let mut row = vec![Cell::text(s.variant), Cell::int(s.t_s as u64)];
        row.extend(
            s.rates
                .iter()
                .map(|x| Cell::new(format!("{:.0}%", x * 100.0), format!("{x}"))),
        );
        row.extend([Cell::int(s.migrated), Cell::int(s.stalls)]);
        t.row(row);
    }
    t
}
