//! `largo bench tlb`: dependent loads over anonymous memory mapped with one
//! folio size, natively on this host (root) and through largo's TLB model,
//! side by side: wall ns per access, and each size's ratio to 4K.

use anyhow::{Context, Result};
use clap::Args;
use largo_types::{format_size, parse_size};
use largo_workloads::access::Pattern;

use crate::args::UsageError;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct TlbBenchArgs {
    /// Folio sizes (4K: no mTHP size enabled).
    #[arg(long, default_value = "4K,16K,64K,2M", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// Ranges of memory chased through.
    #[arg(long, default_value = "64M,256M,1G,4G", value_delimiter = ',')]
    pub ranges: Vec<String>,
    /// Access patterns: chase (random cyclic order), stride (address order).
    #[arg(long, default_value = "chase,stride", value_delimiter = ',')]
    pub patterns: Vec<String>,
    /// Timed loads per repeat.
    #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1000..))]
    pub steps: u64,
    /// Timed repeats per mapping; their median is the mapping's figure.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub repeats: u32,
    /// Fresh mappings per cell, the sizes of a range measured in turn (in
    /// a rotated order) for each; the median over them is reported. On a
    /// guest, where a mapping lands in the host's memory moves its cost.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub trials: u32,
    /// Changes to the preset's TLB for the model side (as `largo run --tlb`).
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub tlb: Option<String>,
    /// Only the model's side.
    #[arg(long)]
    pub model_only: bool,
    #[command(flatten)]
    pub format: FormatArgs,
    /// Draw ns per access against the range to FILE.svg, a panel per
    /// pattern, a line per folio size and side (host, largo).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// One cell of the table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cell4 {
    pub folio_bytes: u64,
    pub range_bytes: u64,
    pub pattern: Pattern,
    pub host_ns: Option<f64>,
    pub host_folio_share: Option<f64>,
    /// Share of the host mapping in aligned, physically contiguous runs of
    /// 4 pages (`HostTlbPoint::contiguous_share`).
    pub host_contiguous_share: Option<f64>,
    /// Share of the host mapping's frames next to the previous page's
    /// (`HostTlbPoint::adjacent_share`).
    pub host_adjacent_share: Option<f64>,
    /// The host's ns per access in each round (the sizes of a range are
    /// measured back to back in a round, so ratios are paired by round).
    pub host_rounds: Vec<f64>,
    pub largo_ns: Option<f64>,
}

/// A size's ratio to 4K on both sides, and whether they agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioCheck {
    /// Median over the rounds of the round's ratio.
    pub host: f64,
    /// The least and greatest round's ratio.
    pub host_min: f64,
    pub host_max: f64,
    pub largo: f64,
    /// The host's 4K mapping's share in contiguous 4-page runs.
    pub base_contiguous: f64,
}

/// Above this share of the host's 4K mapping in aligned contiguous 4-page
/// runs, the CPU coalesces 4K pages too, which the model's assumption of
/// scattered 4K frames (a host that has run a while) does not cover.
pub const BASE_CONTIGUOUS_LIMIT: f64 = 0.25;

/// How far the model's ratio may be from the host's median one.
pub const RATIO_TOLERANCE: f64 = 0.15;

impl RatioCheck {
    /// `cell` against `base` (the same pattern and range at 4K).
    pub fn of(cell: &Cell4, base: &Cell4) -> Option<RatioCheck> {
        let rounds: Vec<f64> = cell
            .host_rounds
            .iter()
            .zip(&base.host_rounds)
            .filter(|(_, b)| **b > 0.0)
            .map(|(a, b)| a / b)
            .collect();
        let largo = cell.largo_ns? / base.largo_ns?;
        if rounds.is_empty() {
            return None;
        }
        let host_min = rounds.iter().copied().fold(f64::INFINITY, f64::min);
        let host_max = rounds.iter().copied().fold(0.0, f64::max);
        Some(RatioCheck {
            host: median(rounds),
            host_min,
            host_max,
            largo,
            base_contiguous: base.host_contiguous_share.unwrap_or(0.0),
        })
    }

    /// `host 4K contiguous` (the host's 4K frames were consecutive enough
    /// for the CPU to coalesce them: not the state the model assumes),
    /// `agree` (within [`RATIO_TOLERANCE`] of the host's median round),
    /// `in host spread` (outside it but between the host's own least and
    /// greatest round: the host does not settle the question), `differ`.
    pub fn verdict(&self) -> &'static str {
        if self.base_contiguous > BASE_CONTIGUOUS_LIMIT {
            "host 4K contiguous"
        } else if (self.largo / self.host - 1.0).abs() <= RATIO_TOLERANCE {
            "agree"
        } else if self.largo >= self.host_min && self.largo <= self.host_max {
            "in host spread"
        } else {
            "differ"
        }
    }
}

fn sizes(list: &[String]) -> Result<Vec<u64>, UsageError> {
    list.iter()
        .map(|s| parse_size(s).map_err(|e| UsageError(format!("'{s}': {e}"))))
        .collect()
}

fn patterns(list: &[String]) -> Result<Vec<Pattern>, UsageError> {
    list.iter()
        .map(|p| Pattern::from_name(p.trim()).ok_or_else(|| UsageError(format!("'{p}': expected chase or stride"))))
        .collect()
}

pub fn run(args: &TlbBenchArgs) -> Result<()> {
    let folios = sizes(&args.sizes)?;
    if let Some(bad) = folios
        .iter()
        .find(|f| !f.is_power_of_two() || **f < 4096 || **f > (2 << 20))
    {
        return Err(UsageError(format!(
            "folio size {} is not a power of two in 4K..=2M",
            format_size(*bad)
        ))
        .into());
    }
    let ranges = sizes(&args.ranges)?;
    if let Some(bad) = ranges.iter().find(|r| !r.is_power_of_two() || **r < (2 << 20)) {
        return Err(UsageError(format!(
            "range {} is not a power of two of at least 2M",
            format_size(*bad)
        ))
        .into());
    }
    let patterns = patterns(&args.patterns)?;
    let host_reason = if args.model_only {
        Some("--model-only".to_string())
    } else {
        largo_host::unavailable_reason()
    };
    if let Some(p) = patterns.iter().find(|p| **p == Pattern::Seq) {
        return Err(UsageError(format!("pattern {} has no native side: use chase or stride", p.name())).into());
    }
    let tlb = match &args.tlb {
        Some(spec) => largo_types::Preset::X86_64
            .tlb()
            .with_overrides(spec)
            .map_err(UsageError)?,
        None => largo_types::Preset::X86_64.tlb(),
    };
    let mut cells = Vec::new();
    for &pattern in &patterns {
        for &range in &ranges {
            let host = match host_reason {
                None => Some(host_row(&folios, range, pattern, args)?),
                Some(_) => None,
            };
            for (k, &folio) in folios.iter().enumerate() {
                let largo_ns = model_ns(folio, range, pattern, args.tlb.as_deref())?;
                let h = host.as_ref().map(|h| &h[k]);
                if args.format.is_text() {
                    eprintln!(
                        "{} {} {}: host {}, largo {largo_ns:.1} ns",
                        pattern.name(),
                        format_size(range),
                        format_size(folio),
                        h.map_or("-".into(), |h| format!(
                            "{:.1} ns ({:.0}% in {}, {:.0}% in aligned contiguous 4-page runs, {:.0}% of frames next \
                             to the previous page's)",
                            h.ns,
                            h.folio_share * 100.0,
                            format_size(folio),
                            h.contiguous_share * 100.0,
                            h.adjacent_share * 100.0
                        ))
                    );
                }
                cells.push(Cell4 {
                    folio_bytes: folio,
                    range_bytes: range,
                    pattern,
                    host_ns: h.map(|h| h.ns),
                    host_folio_share: h.map(|h| h.folio_share),
                    host_contiguous_share: h.map(|h| h.contiguous_share),
                    host_adjacent_share: h.map(|h| h.adjacent_share),
                    host_rounds: h.map(|h| h.rounds.clone()).unwrap_or_default(),
                    largo_ns: Some(largo_ns),
                });
            }
        }
    }
    print(&cells, args, host_reason.as_deref(), &tlb.source)?;
    if let Some(path) = &args.plot {
        plot(path, &cells)?;
    }
    Ok(())
}

/// The host's side of a cell.
struct HostCell {
    /// Median ns per access over the rounds.
    ns: f64,
    folio_share: f64,
    contiguous_share: f64,
    adjacent_share: f64,
    /// Each round's ns per access.
    rounds: Vec<f64>,
}

/// The host's ns per access and folio share at each size for one range:
/// `trials` rounds, each measuring every size once on a fresh mapping in
/// an order rotated from round to round; medians over the rounds, and
/// each round's ns per access.
fn host_row(folios: &[u64], range: u64, pattern: Pattern, args: &TlbBenchArgs) -> Result<Vec<HostCell>> {
    let mut ns = vec![Vec::new(); folios.len()];
    let mut share = vec![Vec::new(); folios.len()];
    let mut contiguous = vec![Vec::new(); folios.len()];
    let mut adjacent = vec![Vec::new(); folios.len()];
    for trial in 0..args.trials as usize {
        for j in 0..folios.len() {
            let k = (j + trial) % folios.len();
            let p =
                largo_host::tlbbench::measure(folios[k], range, pattern, args.steps, args.repeats, 1 + trial as u64)
                    .with_context(|| {
                        format!(
                            "host {} over {} at {}",
                            pattern.name(),
                            format_size(range),
                            format_size(folios[k])
                        )
                    })?;
            ns[k].push(p.ns_per_access);
            share[k].push(p.folio_share);
            contiguous[k].push(p.contiguous_share);
            adjacent[k].push(p.adjacent_share);
        }
    }
    Ok(ns
        .into_iter()
        .zip(share)
        .zip(contiguous)
        .zip(adjacent)
        .map(|(((n, s), c), a)| HostCell {
            ns: median(n.clone()),
            folio_share: median(s),
            contiguous_share: median(c),
            adjacent_share: median(a),
            rounds: n,
        })
        .collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The model's ns per access once warm, as the host side times it (after
/// an untimed pass): `anon-chase` over `range` with `folio` folios, three
/// passes of `pattern` through the preset's TLB less the first one alone
/// (the model is deterministic, so the first pass is the same in both).
fn model_ns(folio: u64, range: u64, pattern: Pattern, tlb: Option<&str>) -> Result<f64> {
    let (one_ns, one) = model_passes(folio, range, pattern, tlb, 1)?;
    let (three_ns, three) = model_passes(folio, range, pattern, tlb, 3)?;
    Ok((three_ns - one_ns) / (three - one) as f64)
}

/// The user time and accesses of `passes` passes.
fn model_passes(folio: u64, range: u64, pattern: Pattern, tlb: Option<&str>, passes: u32) -> Result<(f64, u64)> {
    let knobs = if folio <= 4096 {
        Vec::new()
    } else {
        largo_workloads::policy::thp_knobs(&format_size(folio)).map_err(|e| UsageError(e.to_string()))?
    };
    let mut m = largo_mm::Machine::new(largo_mm::MachineConfig {
        mem_bytes: (range * 2).max(1 << 30),
        knobs,
        ..largo_mm::MachineConfig::default()
    })?;
    let text = format!(
        "anon-chase:size={},passes={passes},pattern={}",
        format_size(range),
        pattern.name()
    );
    let (def, spec) = largo_workloads::builtin::parse(&text)?;
    let opts = largo_workloads::RunOptions {
        tlb_overrides: tlb.map(str::to_string),
        ..Default::default()
    };
    let out = largo_workloads::run(&mut m, def, &spec, &opts, &mut |_, _| {})?;
    let s = out.tlb.streams.context("anon-chase declares a stream")?;
    Ok((s.user_ns, s.counts.accesses))
}

/// A panel per pattern: ns per access against the range (MiB, log 2), a
/// line per folio size and side.
fn plot(path: &std::path::Path, cells: &[Cell4]) -> Result<()> {
    let mut patterns: Vec<Pattern> = Vec::new();
    let mut folios: Vec<u64> = Vec::new();
    for c in cells {
        if !patterns.contains(&c.pattern) {
            patterns.push(c.pattern);
        }
        if !folios.contains(&c.folio_bytes) {
            folios.push(c.folio_bytes);
        }
    }
    let side = |p: Pattern, f: u64, get: fn(&Cell4) -> Option<f64>| -> Vec<(f64, f64)> {
        cells
            .iter()
            .filter(|c| c.pattern == p && c.folio_bytes == f)
            .filter_map(|c| get(c).map(|ns| ((c.range_bytes >> 20) as f64, ns)))
            .collect()
    };
    let panels: Vec<crate::plot::Panel> = patterns
        .iter()
        .map(|&p| {
            let mut series = Vec::new();
            for &f in &folios {
                for (name, get) in [
                    ("host", (|c: &Cell4| c.host_ns) as fn(&Cell4) -> Option<f64>),
                    ("largo", |c: &Cell4| c.largo_ns),
                ] {
                    let points = side(p, f, get);
                    if !points.is_empty() {
                        series.push(crate::plot::Series {
                            name: format!("{} {name}", format_size(f)),
                            points,
                        });
                    }
                }
            }
            crate::plot::Panel {
                title: format!("{} loads", p.name()),
                x_label: "range (MiB, log scale)".into(),
                y_label: "time per access (ns)".into(),
                series,
                y_max: None,
                log_x: true,
            }
        })
        .collect();
    crate::plot::line_panels(path, Some("dependent loads by folio size"), &panels)?;
    Ok(())
}

/// The 4K cell of `c`'s pattern and range.
fn base_of<'a>(cells: &'a [Cell4], c: &Cell4) -> Option<&'a Cell4> {
    cells
        .iter()
        .find(|b| b.pattern == c.pattern && b.range_bytes == c.range_bytes && b.folio_bytes == 4096)
}

/// The ratio check of every cell but the 4K ones (when both sides ran).
fn checks(cells: &[Cell4]) -> Vec<Option<RatioCheck>> {
    cells
        .iter()
        .map(|c| {
            (c.folio_bytes != 4096)
                .then(|| RatioCheck::of(c, base_of(cells, c)?))
                .flatten()
        })
        .collect()
}

fn print(cells: &[Cell4], args: &TlbBenchArgs, host_reason: Option<&str>, tlb: &str) -> std::io::Result<()> {
    let mut out = Out::stdout(args.format);
    let checks = checks(cells);
    for (c, check) in cells.iter().zip(&checks) {
        let mut j = serde_json::json!({
            "bench": "tlb",
            "folio_kib": c.folio_bytes >> 10,
            "range_mib": c.range_bytes >> 20,
            "pattern": c.pattern.name(),
            "host_ns": c.host_ns,
            "largo_ns": c.largo_ns,
            "host_folio_share": c.host_folio_share,
            "host_contiguous_share": c.host_contiguous_share,
            "host_adjacent_share": c.host_adjacent_share,
        });
        if let Some(k) = check {
            j["host_ratio"] = k.host.into();
            j["host_ratio_min"] = k.host_min.into();
            j["host_ratio_max"] = k.host_max.into();
            j["largo_ratio"] = k.largo.into();
            j["verdict"] = k.verdict().into();
        }
        out.json(&j)?;
    }
    let mut t = Grid::new([
        "pattern",
        "range",
        "folio",
        "host ns/access",
        "host vs 4K (rounds)",
        "largo ns/access",
        "largo vs 4K",
        "verdict",
    ])
    .right_from(3);
    for (c, check) in cells.iter().zip(&checks) {
        let base = base_of(cells, c);
        let (host_ratio, largo_ratio, verdict) = match (check, base) {
            (Some(k), _) => (
                Cell::text(format!("{:.2} ({:.2}-{:.2})", k.host, k.host_min, k.host_max)),
                Cell::num(k.largo, 2),
                Cell::text(k.verdict()),
            ),
            (None, Some(b)) if c.folio_bytes != 4096 => (
                Cell::text(""),
                match (c.largo_ns, b.largo_ns) {
                    (Some(v), Some(b)) if b > 0.0 => Cell::num(v / b, 2),
                    _ => Cell::text(""),
                },
                Cell::text(""),
            ),
            _ => (Cell::text(""), Cell::text(""), Cell::text("")),
        };
        t.row([
            Cell::text(c.pattern.name()),
            Cell::text(format_size(c.range_bytes)),
            Cell::text(format_size(c.folio_bytes)),
            c.host_ns.map_or(Cell::text(""), |v| Cell::num(v, 1)),
            host_ratio,
            c.largo_ns.map_or(Cell::text(""), |v| Cell::num(v, 1)),
            largo_ratio,
            verdict,
        ]);
    }
    out.table(&t)?;
    let judged: Vec<&RatioCheck> = checks.iter().flatten().collect();
    if !judged.is_empty() {
        let count = |v: &str| judged.iter().filter(|k| k.verdict() == v).count();
        out.line(format!(
            "ratios to 4K: {} of {} agree (within {:.0}% of the host's median round), {} more inside the host's own \
             spread over its rounds, {} differ{}",
            count("agree"),
            judged.len(),
            RATIO_TOLERANCE * 100.0,
            count("in host spread"),
            count("differ"),
            match count("host 4K contiguous") {
                0 => String::new(),
                n => format!(
                    "; {n} not compared: the host's 4K frames were consecutive (more than {:.0}% in aligned \
                     4-page runs, which the CPU coalesces; the model assumes a host whose 4K faults get scattered \
                     frames)",
                    BASE_CONTIGUOUS_LIMIT * 100.0
                ),
            }
        ))?;
    }
    out.line(format!(
        "dependent loads, one 64-byte line per 4 KiB of the range; host: wall ns per access, median over {} fresh \
         mappings ({} timed runs of {} loads each); largo: the anon-chase stream through the TLB model of {tlb}",
        args.trials, args.repeats, args.steps
    ))?;
    if let Some(r) = host_reason {
        out.line(format!("host side not measured: {r}"))?;
    }
    out.flush()
}
