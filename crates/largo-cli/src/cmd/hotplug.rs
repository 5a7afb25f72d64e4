//! `largo hotplug OP...`: memory blocks taken offline and brought back
//! online on the modelled machine, optionally after a workload left its
//! memory mapped, as `echo offline > /sys/devices/system/memory/memoryN/state`
//! would; each step prints the block's new state or the kernel's failure
//! message, and the migration it caused.

use anyhow::{Context, Result};
use clap::Args;
use largo_mm::stats::VmEvent;
use largo_mm::Machine;

use crate::args::{boot, MachineArgs, PolicyArgs, UsageError};
use crate::output::{Format, Out};

#[derive(Args, Debug)]
pub struct HotplugArgs {
    /// Steps in order: `offline:N`, `online:N`, `online_movable:N`, `add:N[@NODE]` (hot-add block N of
    /// the --maxmem region, on NODE (default 0), offline), `remove:N` (an offline
    /// block), or `list` (every block and its state).
    #[arg(required = true)]
    pub ops: Vec<String>,
    /// A workload to run first, its memory left mapped: a built-in
    /// specification (anon-w-seq:size=1G), a trace file or a shipped
    /// recorded program.
    #[arg(long, value_name = "WORKLOAD")]
    pub workload: Option<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

enum Op {
    Offline(u64),
    Online(u64),
    OnlineMovable(u64),
    /// Block and node.
    Add(u64, usize),
    Remove(u64),
    List,
}

fn parse_op(s: &str) -> Result<Op, UsageError> {
    if s == "list" {
        return Ok(Op::List);
    }
    let bad = || {
        UsageError(format!(
            "'{s}' is not a hotplug step: use offline:N, online:N, online_movable:N, add:N, remove:N or list"
        ))
    };
    let (verb, n) = s.split_once(':').ok_or_else(bad)?;
    let (n, node) = match n.split_once('@') {
        Some((n, node)) if verb == "add" => (n, node.parse::<usize>().map_err(|_| bad())?),
        _ => (n, 0),
    };
    let n: u64 = n.parse().map_err(|_| bad())?;
    match verb {
        "offline" => Ok(Op::Offline(n)),
        "online" => Ok(Op::Online(n)),
        "online_movable" => Ok(Op::OnlineMovable(n)),
        "add" => Ok(Op::Add(n, node)),
        "remove" => Ok(Op::Remove(n)),
        _ => Err(bad()),
    }
}

pub fn run(args: &HotplugArgs) -> Result<()> {
    let ops: Vec<Op> = args.ops.iter().map(|s| parse_op(s)).collect::<Result<_, _>>()?;
    let mut m = boot(args.machine.config(&args.policy)?)?;
    if let Some(w) = &args.workload {
        super::show::run_kept(&mut m, w, 1, 0)?;
    }
    let mut out = Out::to(Box::new(std::io::stdout().lock()), Format::Text, 0);
    let mut failed = false;
    for op in ops {
        let migrated_before = m.page_alloc().events.get(VmEvent::PgmigrateSuccess);
        let (id, result, verb) = match op {
            Op::List => {
                list(&m, &mut out)?;
                continue;
            }
            Op::Offline(id) => (id, m.offline_memory_block(id), "offline"),
            Op::Online(id) => (id, m.online_memory_block(id), "online"),
            Op::OnlineMovable(id) => (id, m.online_memory_block_movable(id), "online_movable"),
            Op::Add(id, nid) => (id, m.add_memory_block(nid, id), "add"),
            Op::Remove(id) => (id, m.remove_memory_block(id), "remove"),
        };
        let migrated = m.page_alloc().events.get(VmEvent::PgmigrateSuccess) - migrated_before;
        match result {
            Ok(()) => out.line(format!("memory{id}: {verb} (pgmigrate_success +{migrated})"))?,
            Err(e) => {
                failed = true;
                out.line(format!("memory{id}: {verb} failed, errno {}: {e}", e.errno()))?;
            }
        }
        m.check().context("invariants after the step")?;
    }
    let meminfo = largo_mm::stats::render::meminfo(&m);
    if let Some(line) = meminfo.lines().find(|l| l.starts_with("MemTotal")) {
        out.line(line)?;
    }
    out.flush()?;
    if failed {
        anyhow::bail!("a hotplug step failed");
    }
    Ok(())
}

/// Every memory block and its state, as sysfs lists them.
fn list(m: &Machine, out: &mut Out) -> std::io::Result<()> {
    let bytes = m.sparse().memory_block_bytes;
    out.line(format!("block_size_bytes {bytes:x}"))?;
    for b in &m.sparse().blocks {
        out.line(format!("memory{}: node{} {}", b.id, b.nid, b.state.name()))?;
    }
    Ok(())
}
