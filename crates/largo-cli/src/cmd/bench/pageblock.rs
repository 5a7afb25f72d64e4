//! `largo bench pageblock`: the seed thread's argument over a 1 GiB
//! pageblock, measured. For pageblock order 9 (2 MiB) and 18 (1 GiB),
//! both with MAX_PAGE_ORDER 18 and 1 GiB sections and memory blocks, a
//! machine of each size (a quarter of it a virtio-mem device, fully
//! plugged at boot, a virtio-balloon reporting free pages, a 256 MiB CMA
//! request) is aged by the same workload (`largo age`'s generator, same
//! seed) minute by minute; then:
//!
//! - free page reporting: MiB reported per simulated minute while aging
//!   (the reporting order is the pageblock order);
//! - virtio-mem: the share of a request to unplug half the device that
//!   the driver achieved, with 2 MiB and with 128 MiB device blocks (a
//!   second machine aged the same way);
//! - CMA: the smallest area a request can get (what boot makes of a
//!   one-page `cma=`), what the 256 MiB request became, and the share of
//!   32 `cma_alloc`s of 2 MiB that succeeded on the aged area;
//! - the share of 2 MiB THP faults served while aging, and of four 1 GiB
//!   allocations (order 18, with compaction) after it.

use std::io::IsTerminal;

use anyhow::Result;
use clap::Args;
use largo_mm::cma::CmaSpec;
use largo_mm::gfp::{Gfp, GFP_HIGHUSER_MOVABLE};
use largo_mm::machine::Balloon;
use largo_mm::virtio_mem::VirtioMemSpec;
use largo_mm::{Machine, MachineConfig};
use largo_types::{format_size, GeometryOverrides, Preset};
use largo_workloads::aging::{Aging, Generator, Sample};

use crate::output::{Cell, FormatArgs, Grid, Out};

const MIB: u64 = 1 << 20;

#[derive(Args, Debug)]
pub struct PageblockBenchArgs {
    /// Machine sizes (boot RAM plus the virtio-mem device), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4G,16G", value_parser = crate::args::parse_size_arg)]
    pub mem: Vec<u64>,
    /// Simulated minutes of aging.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub minutes: u64,
    /// The aging generator: phone or server.
    #[arg(long, default_value = "phone")]
    pub workload: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// The two sides of the debate.
struct Variant {
    name: &'static str,
    pageblock_order: u32,
}

const VARIANTS: [Variant; 2] = [
    Variant {
        name: "pageblock-2M",
        pageblock_order: 9,
    },
    Variant {
        name: "pageblock-1G",
        pageblock_order: 18,
    },
];

/// cma_alloc probes after aging: (count, pages each as MiB).
const CMA_PROBES: u64 = 32;
const CMA_PROBE_MIB: u64 = 2;
/// 1 GiB allocation attempts after aging.
const GIGA_PROBES: u32 = 4;

fn config(v: &Variant, mem: u64, device_block: u64, cma_bytes: u64) -> MachineConfig {
    let device = mem / 4;
    MachineConfig {
        mem_bytes: mem - device,
        nr_cpus: 2,
        overrides: GeometryOverrides {
            max_page_order: Some(18),
            pageblock_order: Some(v.pageblock_order),
            section_bits: Some(30),
            pageblock_beyond_pmd: v.pageblock_order > 9,
            ..Default::default()
        },
        memory_block_bytes: Some(1 << 30),
        balloon: Some(Balloon::virtio(Preset::X86_64, 0)),
        cma: vec![CmaSpec {
            bytes: cma_bytes,
            nid: None,
        }],
        virtio_mem: Some(VirtioMemSpec {
            region_bytes: device,
            block_bytes: device_block,
            plugged_bytes: device,
            movable: false,
        }),
        knobs: vec![("transparent_hugepage/hugepages-2048kB/enabled".into(), "always".into())],
        ..MachineConfig::default()
    }
}

/// One cell of the table: variant, size, metric, value.
struct Cellv {
    variant: &'static str,
    mem_gib: u64,
    metric: &'static str,
    value: f64,
}

/// Ages `m` for `minutes`; returns its samples.
fn age(m: &mut Machine, generator: Generator, minutes: u64, seed: u64, label: &str) -> Vec<Sample> {
    let mut aging = Aging::new(generator, seed);
    let tty = std::io::stderr().is_terminal();
    (0..minutes)
        .map(|t| {
            if tty {
                eprint!("\r\x1b[K{label}: minute {}/{minutes}", t + 1);
            }
            aging.minute(m)
        })
        .collect()
}

/// Share of 2 MiB THP faults that got a 2 MiB folio.
fn thp_success(samples: &[Sample]) -> f64 {
    let (a, f) = samples.iter().fold((0, 0), |(a, f), s| {
        (
            a + s.alloc.get("2048kB").copied().unwrap_or(0),
            f + s.fallback.get("2048kB").copied().unwrap_or(0),
        )
    });
    if a + f == 0 {
        return 0.0;
    }
    a as f64 / (a + f) as f64
}

/// Unplug half the device: the share of it the driver achieved.
fn unplug_share(m: &mut Machine) -> Result<f64> {
    let shift = m.geometry().page_shift;
    let plugged = m.virtio_mem().map_or(0, |d| d.plugged_pages << shift);
    let ask = plugged / 2;
    let r = m.virtio_mem_resize(plugged - ask)?;
    Ok((r.plugged_before_bytes - r.plugged_after_bytes) as f64 / ask.max(1) as f64)
}

/// `CMA_PROBES` cma_allocs of 2 MiB, held, then released: the share that worked.
fn cma_share(m: &mut Machine) -> Result<f64> {
    let nr = CMA_PROBE_MIB * MIB >> m.geometry().page_shift;
    let mut held = Vec::new();
    for _ in 0..CMA_PROBES {
        if let Some(pfn) = m.cma_alloc(0, nr, 0)?.pfn {
            held.push(pfn);
        }
    }
    let share = held.len() as f64 / CMA_PROBES as f64;
    for pfn in held {
        m.cma_release(0, pfn, nr);
    }
    Ok(share)
}

/// Order-18 allocations with compaction, held, then freed: the share that worked.
fn giga_share(m: &mut Machine) -> Result<f64> {
    let gfp = GFP_HIGHUSER_MOVABLE | Gfp::COMP | Gfp::NOWARN | Gfp::RETRY_MAYFAIL;
    let mut got = Vec::new();
    for _ in 0..GIGA_PROBES {
        match m.alloc_pages_compact(0, gfp, 18)? {
            Some(f) => got.push(f),
            None => break,
        }
    }
    let share = got.len() as f64 / GIGA_PROBES as f64;
    for f in got {
        m.free_folio(0, f)?;
    }
    Ok(share)
}

/// What boot makes of a one-page CMA request: the smallest area, bytes.
fn smallest_cma(v: &Variant, mem: u64) -> Result<u64> {
    let mut c = config(v, mem, 2 * MIB, 4096);
    c.virtio_mem = None;
    c.balloon = None;
    let m = Machine::new(c)?;
    Ok(m.page_alloc().cma_areas()[0].count << m.geometry().page_shift)
}

fn measure(v: &Variant, mem: u64, args: &PageblockBenchArgs, generator: Generator) -> Result<Vec<Cellv>> {
    let mem_gib = mem >> 30;
    let mut cells = Vec::new();
    let mut push = |metric, value| {
        cells.push(Cellv {
            variant: v.name,
            mem_gib,
            metric,
            value,
        })
    };
    let label = format!("{} {}", v.name, format_size(mem));
    let mut m = Machine::new(config(v, mem, 2 * MIB, 256 * MIB))?;
    let samples = age(&mut m, generator, args.minutes, args.seed, &label);
    let reported_kib = m.page_alloc().reporting().stats.reported_kib;
    push(
        "reported_mib_per_min",
        reported_kib as f64 / 1024.0 / args.minutes as f64,
    );
    push("thp_2m_success_pct", 100.0 * thp_success(&samples));
    push("gigantic_1g_success_pct", 100.0 * giga_share(&mut m)?);
    push("cma_min_area_mib", (smallest_cma(v, mem)? / MIB) as f64);
    push(
        "cma_area_mib_for_256m",
        (m.page_alloc().cma_areas()[0].count << m.geometry().page_shift) as f64 / MIB as f64,
    );
    push("cma_alloc_2m_success_pct", 100.0 * cma_share(&mut m)?);
    push("virtio_mem_unplug_2m_pct", 100.0 * unplug_share(&mut m)?);
    m.check()?;
    let mut m = Machine::new(config(v, mem, 128 * MIB, 256 * MIB))?;
    age(&mut m, generator, args.minutes, args.seed, &label);
    push("virtio_mem_unplug_128m_pct", 100.0 * unplug_share(&mut m)?);
    m.check()?;
    Ok(cells)
}

pub fn run(args: &PageblockBenchArgs) -> Result<()> {
    let generator = Generator::from_name(&args.workload)
        .ok_or_else(|| crate::args::UsageError(format!("unknown workload '{}': phone or server", args.workload)))?;
    let mut out = Out::stdout(args.format);
    let mut cells = Vec::new();
    for &mem in &args.mem {
        if mem < 4 << 30 || !mem.is_multiple_of(4 << 30) {
            return Err(crate::args::UsageError(format!(
                "--mem {}: a multiple of 4G (a quarter is the virtio-mem device, in 1 GiB memory blocks)",
                format_size(mem)
            ))
            .into());
        }
        for v in &VARIANTS {
            for c in measure(v, mem, args, generator)? {
                out.json(&serde_json::json!({"experiment": "pageblock", "variant": c.variant,
                    "mem_gib": c.mem_gib, "metric": c.metric, "value": c.value}))?;
                cells.push(c);
            }
        }
    }
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    out.line(format!(
        "pageblock 2M vs 1G (MAX_PAGE_ORDER 18, 1 GiB sections and memory blocks): machines aged {} simulated minutes by '{}' \
         (seed {}); a quarter of each is a virtio-mem device (plugged at boot, ZONE_NORMAL), a balloon reports free pages \
         at the pageblock order, a 256M CMA area is asked for",
        args.minutes, args.workload, args.seed
    ))?;
    out.table(&table(&cells, &args.mem))?;
    out.flush()?;
    Ok(())
}

/// Rows: metrics; columns: each size under each variant.
fn table(cells: &[Cellv], mems: &[u64]) -> Grid {
    let mut header = vec!["metric".to_string()];
    let cols: Vec<(u64, &str)> = mems
        .iter()
        .flat_map(|&m| VARIANTS.iter().map(move |v| (m >> 30, v.name)))
        .collect();
    header.extend(cols.iter().map(|(g, n)| format!("{g}G {n}")));
    let mut t = Grid::new(header).right_from(1);
    let mut metrics: Vec<&str> = Vec::new();
    for c in cells {
        if !metrics.contains(&c.metric) {
            metrics.push(c.metric);
        }
    }
    for metric in metrics {
        let mut row = vec![Cell::text(metric)];
        for (g, n) in &cols {
            let v = cells
                .iter()
                .find(|c| c.metric == metric && c.mem_gib == *g && c.variant == *n)
                .map_or(f64::NAN, |c| c.value);
            row.push(Cell::new(format!("{v:.1}"), format!("{v}")));
        }
        t.row(row);
    }
    t
}
