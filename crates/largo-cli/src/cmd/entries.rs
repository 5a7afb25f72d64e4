//! `largo validate entries [PROGRAM...]`: kernel time by system call on
//! this host against largo's kernel time by entry, for the shipped
//! recorded programs whose inputs are present. Each program runs natively
//! under each folio size with its memory system calls traced
//! (`largo_host::syscalltime`), rounds interleaved; its trace is replayed
//! on the model under the same sizes. Per call: the host's total time in
//! it (mean over the rounds, 95% interval), largo's estimate for the
//! entry, and the change from the first size to each other on both sides
//! (paired per round on the host); they agree within 10 points or the
//! host's interval.

use anyhow::{Context, Result};
use clap::Args;
use largo_host::stats::{estimate_agrees, paired_change_pct, Summary};
use largo_host::syscalltime::CALLS;
use largo_types::{format_size, parse_size};
use largo_workloads::cost::Profile;
use largo_workloads::recorded::{Recorded, RECORDED};
use largo_workloads::{RunOptions, Workload};

use crate::args::UsageError;
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct EntriesArgs {
    /// Shipped recorded programs (default: every one whose inputs exist).
    #[arg(value_name = "PROGRAM")]
    pub programs: Vec<String>,
    /// Folio sizes compared; the first is the baseline (4K: no mTHP size).
    #[arg(long, default_value = "4K,64K", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// Rounds; each runs the program once under every size.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(2..=50))]
    pub runs: u64,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// Calls with less host time than this at the baseline size are shown but
/// not compared: their change is noise (a few calls, tick-sized totals).
const MIN_COMPARED_NS: f64 = 0.5e6;

/// One program's per-call results.
struct CallRow {
    program: &'static str,
    call: &'static str,
    /// Host ns per run, by size, one per round.
    host: Vec<Vec<f64>>,
    /// largo ns by size.
    largo: Vec<f64>,
}

pub fn run(args: &EntriesArgs) -> Result<()> {
    if let Some(reason) = largo_host::record::unavailable_reason() {
        anyhow::bail!("cannot time system calls on this host: {reason}");
    }
    let folios: Vec<u64> = args
        .sizes
        .iter()
        .map(|s| parse_size(s).map_err(|e| UsageError(format!("'{s}': {e}"))))
        .collect::<Result<_, _>>()?;
    if let Some(unknown) = args
        .programs
        .iter()
        .find(|n| largo_workloads::recorded::find(n).is_none())
    {
        let known: Vec<&str> = RECORDED.iter().map(|r| r.name).collect();
        return Err(UsageError(format!(
            "'{unknown}' is not a shipped recorded program: expected one of {}",
            known.join(", ")
        ))
        .into());
    }
    let profile = Profile::default_profile();
    let mut rows = Vec::new();
    for r in RECORDED
        .iter()
        .filter(|r| args.programs.is_empty() || args.programs.iter().any(|n| n == r.name))
    {
        if let Some(missing) = r.inputs.iter().find(|p| !std::path::Path::new(p).exists()) {
            largo_host::skip::skip(
                r.name,
                &format!("{missing} is missing (scripts/recorded-programs.sh inputs prepares it)"),
            );
            continue;
        }
        rows.extend(program_rows(r, &folios, args.runs, &profile)?);
    }
    print(&rows, &folios, args)
}

fn program_rows(r: &'static Recorded, folios: &[u64], runs: u64, profile: &Profile) -> Result<Vec<CallRow>> {
    let exe = crate::embed::largo_exe()?;
    let launcher = || {
        let mut c = std::process::Command::new(&exe);
        c.arg("record-exec").arg("--").args(r.argv).current_dir(r.cwd);
        c.stdout(std::process::Stdio::null());
        c
    };
    let mut host: Vec<Vec<std::collections::BTreeMap<String, (u64, u64)>>> = vec![Vec::new(); folios.len()];
    for round in 0..runs as usize {
        for j in 0..folios.len() {
            let k = (j + round) % folios.len();
            let t = largo_host::syscalltime::measure(launcher(), &largo_host::record::thp_only(folios[k])?)
                .with_context(|| format!("{} at {}", r.name, format_size(folios[k])))?;
            if t.lost > 0 {
                eprintln!("{}: the trace buffer lost {} events: totals are low", r.name, t.lost);
            }
            host[k].push(t.by_call);
        }
    }
    let w = Workload::parse(r.name)?;
    let largo: Vec<std::collections::BTreeMap<&str, f64>> = folios
        .iter()
        .map(|&f| -> Result<_> {
            let config = w.machine_config(&largo_mm::MachineConfig {
                knobs: largo_host::record::thp_only(f)?,
                ..largo_mm::MachineConfig::default()
            });
            let mut m = largo_mm::Machine::new(config)?;
            let out = w.run(&mut m, &RunOptions::default(), &mut |_, _| {})?;
            Ok(profile.by_entry(&out.entries, w.faults()))
        })
        .collect::<Result<_>>()?;
    Ok(CALLS
        .iter()
        .map(|&call| CallRow {
            program: r.name,
            call,
            host: host
                .iter()
                .map(|runs| runs.iter().map(|b| b.get(call).map_or(0.0, |v| v.1 as f64)).collect())
                .collect(),
            largo: largo.iter().map(|b| b.get(call).copied().unwrap_or(0.0)).collect(),
        })
        .collect())
}

fn print(rows: &[CallRow], folios: &[u64], args: &EntriesArgs) -> Result<()> {
    let mut out = Out::stdout(args.format);
    let mut t = Grid::new([
        "program",
        "call",
        "size",
        "host ms",
        "+- 95%",
        "host change",
        "+- 95%",
        "largo ms",
        "largo change",
        "",
    ])
    .right_from(3);
    let (mut agree, mut compared) = (0, 0);
    for r in rows {
        let base_host = &r.host[0];
        for (k, &f) in folios.iter().enumerate() {
            let h = Summary::of(&r.host[k]);
            let change = (k > 0).then(|| paired_change_pct(base_host, &r.host[k]));
            let largo_change = (k > 0 && r.largo[0] > 0.0).then(|| (r.largo[k] - r.largo[0]) / r.largo[0] * 100.0);
            let verdict = match (&change, largo_change) {
                (Some(_), _) if Summary::of(base_host).mean < MIN_COMPARED_NS => "too little time",
                (Some(c), Some(l)) => {
                    compared += 1;
                    if estimate_agrees(l, c) {
                        agree += 1;
                        "agrees"
                    } else {
                        "DISAGREES"
                    }
                }
                _ => "",
            };
            out.json(&serde_json::json!({
                "program": r.program,
                "call": r.call,
                "folio_kib": f >> 10,
                "host_ms": h.mean / 1e6,
                "host_ci_ms": h.ci95 / 1e6,
                "host_change_pct": change.as_ref().map(|c| c.mean),
                "host_change_ci_pct": change.as_ref().map(|c| c.ci95),
                "largo_ms": r.largo[k] / 1e6,
                "largo_change_pct": largo_change,
                "agrees": matches!(verdict, "agrees" | "DISAGREES").then_some(verdict == "agrees"),
            }))?;
            t.row([
                Cell::text(r.program),
                Cell::text(r.call),
                Cell::text(format_size(f)),
                Cell::num(h.mean / 1e6, 2),
                Cell::num(h.ci95 / 1e6, 2),
                change
                    .as_ref()
                    .map_or(Cell::text(""), |c| Cell::text(format!("{:+.1}%", c.mean))),
                change.as_ref().map_or(Cell::text(""), |c| Cell::num(c.ci95, 1)),
                Cell::num(r.largo[k] / 1e6, 2),
                largo_change.map_or(Cell::text(""), |l| Cell::text(format!("{l:+.1}%"))),
                Cell::text(verdict),
            ]);
        }
    }
    out.table(&t)?;
    out.line(format!(
        "host: total wall time inside each system call (tracefs enter to exit, per task), mean of {} interleaved \
         runs with its 95% interval (Student's t); changes paired per round. largo: the kernel time of the entry of \
         the same name (cold-cache costs, the default cost profile). {agree} of {compared} changes agree (within 10 \
         points or the host's interval); calls with under 0.5 ms at the baseline are not compared",
        args.runs
    ))?;
    out.flush()?;
    Ok(())
}
