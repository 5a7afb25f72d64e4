//! `largo bench replay`: how fast traces replay on a `sim` machine, next
//! to how fast the same trace decodes from its binary encoding, measured
//! side by side in one run.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use largo_workloads::replay::{replay, ReplayOptions};
use largo_workloads::Workload;

use crate::args::{boot, MachineArgs, PolicyArgs, UsageError};
use crate::cmd::run::parse_workload;
use crate::config;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct ReplayBenchArgs {
    /// Trace files or shipped recorded programs; default: every shipped one.
    #[arg(value_name = "FILE")]
    pub traces: Vec<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Replays of each trace; the median is reported.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    #[command(flatten)]
    pub format: FormatArgs,
}

struct Row {
    name: String,
    events: usize,
    faults: u64,
    replay_s: f64,
    decode_s: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: &ReplayBenchArgs) -> Result<()> {
    let names: Vec<String> = if args.traces.is_empty() {
        largo_workloads::recorded::RECORDED
            .iter()
            .map(|r| r.name.to_string())
            .collect()
    } else {
        args.traces.clone()
    };
    let configs = config::resolve_or(&[], &args.machine, &args.policy, config::DEFAULT_SUITE)?;
    // Without flags the default suite's first configuration (4K pages).
    let config = configs[0].config.clone();
    let mut rows = Vec::new();
    for name in &names {
        let Workload::Trace { trace, .. } = parse_workload(name)? else {
            return Err(UsageError(format!("{name}: not a trace file or recorded program")).into());
        };
        let mut binary = Vec::new();
        largo_trace::write_to(&mut binary, &trace, true)?;
        let (mut replays, mut decodes, mut faults) = (Vec::new(), Vec::new(), 0);
        for _ in 0..args.runs {
            let t = Instant::now();
            let decoded = largo_trace::parse_bytes(&binary)?;
            decodes.push(t.elapsed().as_secs_f64());
            drop(decoded);
            let mut m = boot(config.clone())?;
            // As `bench alloc`: the host's first-touch faults on the
            // memmap are boot work, not replay.
            m.populate_memmap();
            let t = Instant::now();
            let out = replay(&mut m, &trace.events, &ReplayOptions::default(), &mut |_, _| {})
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            replays.push(t.elapsed().as_secs_f64());
            faults = out.run.counters.vmstat("pgfault");
        }
        rows.push(Row {
            name: name.clone(),
            events: trace.events.len(),
            faults,
            replay_s: median(replays),
            decode_s: median(decodes),
        });
    }
    print(&rows, args)?;
    Ok(())
}

fn print(rows: &[Row], args: &ReplayBenchArgs) -> std::io::Result<()> {
    let mut out = Out::stdout(args.format);
    let mut t = Grid::new([
        "trace",
        "events",
        "modelled page faults",
        "replay events/s",
        "decode events/s",
        "replay / decode time",
    ])
    .right_from(1);
    for r in rows {
        let (replay, decode) = (r.events as f64 / r.replay_s, r.events as f64 / r.decode_s);
        out.json(&serde_json::json!({
            "bench": "replay",
            "trace": r.name,
            "events": r.events,
            "page_faults": r.faults,
            "replay_events_per_s": replay.round(),
            "decode_events_per_s": decode.round(),
            "runs": args.runs,
        }))?;
        t.row([
            Cell::text(r.name.clone()),
            Cell::int(r.events as u64),
            Cell::int(r.faults),
            Cell::new(format!("{:.1}M", replay / 1e6), format!("{}", replay.round())),
            Cell::new(format!("{:.1}M", decode / 1e6), format!("{}", decode.round())),
            Cell::new(
                format!("{:.2}x", r.replay_s / r.decode_s),
                format!("{}", r.replay_s / r.decode_s),
            ),
        ]);
    }
    let total_events: usize = rows.iter().map(|r| r.events).sum();
    let total_s: f64 = rows.iter().map(|r| r.replay_s).sum();
    out.table(&t)?;
    out.line(format!(
        "all traces: {:.1}M events/s replayed on sim (median of {} runs each; decode = the binary encoding parsed from memory, machine boot and memmap first touch not timed)",
        total_events as f64 / total_s / 1e6,
        args.runs
    ))?;
    out.flush()
}
