//! `largo hotplug OP...`: memory blocks taken offline and brought back
//! online on the modelled machine, optionally after a workload left its
//! memory mapped, as `echo offline > /sys/devices/system/memory/memoryN/state`
//! would; each step prints the block's new state or the kernel's failure
//! message, and the migration it caused.

use anyhow::{Context, Result};
use clap::Args;
use largo_mm::stats::VmEvent;
use largo_mm::Machine;
use largo_types::format_size;

use crate::args::{boot, MachineArgs, PolicyArgs, UsageError};
use crate::output::Out;

#[derive(Args, Debug)]
pub struct HotplugArgs {
    /// Steps in order: `offline:N`, `online:N`, `online_movable:N`, `add:N[@NODE]` (hot-add block N of
    /// the --maxmem region, on NODE (default 0), offline), `remove:N` (an offline
    /// block), `list` (every block and its state); with --virtio-mem, `plug:SIZE` and
    /// `unplug:SIZE` (the host raises or lowers the device's requested size); with --cma,
    /// `cma_alloc:SIZE[@AREA]` (cma_alloc from area AREA, default 0) and `cma_release:K`
    /// (gives back the K-th successful cma_alloc of this run, from 0).
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
    /// Bytes; true to plug.
    Resize(u64, bool),
    /// Bytes and area.
    CmaAlloc(u64, usize),
    CmaRelease(usize),
}

fn parse_op(s: &str) -> Result<Op, UsageError> {
    if s == "list" {
        return Ok(Op::List);
    }
    let bad = || {
        UsageError(format!(
            "'{s}' is not a hotplug step: use offline:N, online:N, online_movable:N, add:N, remove:N, list, \
             plug:SIZE, unplug:SIZE, cma_alloc:SIZE[@AREA] or cma_release:K"
        ))
    };
    let (verb, n) = s.split_once(':').ok_or_else(bad)?;
    let size = |v: &str| crate::args::parse_size_arg(v).map_err(|e| UsageError(format!("'{s}': {e}")));
    match verb {
        "plug" | "unplug" => return Ok(Op::Resize(size(n)?, verb == "plug")),
        "cma_alloc" => {
            let (bytes, area) = match n.split_once('@') {
                Some((b, a)) => (b, a.parse::<usize>().map_err(|_| bad())?),
                None => (n, 0),
            };
            return Ok(Op::CmaAlloc(size(bytes)?, area));
        }
        "cma_release" => return Ok(Op::CmaRelease(n.parse().map_err(|_| bad())?)),
        _ => {}
    }
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
    let mut out = Out::stdout(crate::output::FormatArgs::default());
    let mut failed = false;
    let mut cma_held: Vec<Option<(usize, u64, u64)>> = Vec::new();
    for op in ops {
        let migrated_before = m.page_alloc().events.get(VmEvent::PgmigrateSuccess);
        let (id, result, verb) = match op {
            Op::List => {
                list(&m, &mut out)?;
                continue;
            }
            Op::Resize(bytes, plug) => {
                failed |= !resize(&mut m, bytes, plug, &mut out)?;
                m.check().context("invariants after the step")?;
                continue;
            }
            Op::CmaAlloc(bytes, area) => {
                let got = cma_alloc(&mut m, bytes, area, migrated_before, &mut out)?;
                failed |= got.is_none();
                cma_held.extend(got.map(Some));
                m.check().context("invariants after the step")?;
                continue;
            }
            Op::CmaRelease(k) => {
                let Some((area, pfn, nr)) = cma_held.get_mut(k).and_then(Option::take) else {
                    return Err(UsageError(format!("cma_release:{k}: no such successful cma_alloc held")).into());
                };
                m.cma_release(area, pfn, nr);
                out.line(format!("cma{area}: cma_release of pfn {pfn:#x}-{:#x}", pfn + nr))?;
                m.check().context("invariants after the step")?;
                continue;
            }
            Op::Offline(id) | Op::Online(id) | Op::OnlineMovable(id) | Op::Remove(id) if device_block(&m, id) => {
                return Err(UsageError(format!(
                    "memory{id} belongs to the virtio-mem device: resize it with plug:SIZE / unplug:SIZE"
                ))
                .into());
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

/// Whether memory block `id` lies in the virtio-mem device's region.
fn device_block(m: &Machine, id: u64) -> bool {
    let pages = m.sparse().memory_block_bytes >> m.geometry().page_shift;
    m.virtio_mem_owns(id * pages, pages)
}

/// `plug:SIZE` / `unplug:SIZE`: the device's requested size moves by
/// SIZE; prints what the driver did. False when it fell short.
fn resize(m: &mut Machine, bytes: u64, plug: bool, out: &mut Out) -> Result<bool> {
    let dev = m
        .virtio_mem()
        .ok_or_else(|| UsageError("plug/unplug need a virtio-mem device (--virtio-mem SIZE)".into()))?;
    let requested =
        (dev.requested_pages << m.geometry().page_shift) as i128 + if plug { bytes as i128 } else { -(bytes as i128) };
    if requested < 0 {
        return Err(UsageError(format!(
            "unplug:{}: more than the {} requested",
            format_size(bytes),
            format_size(dev.requested_pages << m.geometry().page_shift)
        ))
        .into());
    }
    let migrated_before = m.page_alloc().events.get(VmEvent::PgmigrateSuccess);
    let r = m.virtio_mem_resize(requested as u64)?;
    let migrated = m.page_alloc().events.get(VmEvent::PgmigrateSuccess) - migrated_before;
    let mut line = format!(
        "virtio-mem: {} {}: requested {}, plugged {} -> {} ({} sub-blocks, {} memory blocks added, {} removed, pgmigrate_success +{migrated})",
        if plug { "plug" } else { "unplug" },
        format_size(bytes),
        format_size(r.requested_bytes),
        format_size(r.plugged_before_bytes),
        format_size(r.plugged_after_bytes),
        r.sub_blocks_moved,
        r.units_added,
        r.units_removed,
    );
    if r.sub_blocks_busy > 0 {
        line += &format!(", {} sub-blocks busy", r.sub_blocks_busy);
    }
    if let Some(errno) = r.errno {
        line += &format!("; {errno}");
        if let Some(why) = &r.first_busy {
            line += &format!(" ({why})");
        }
    }
    out.line(line)?;
    Ok(r.errno.is_none())
}

/// `cma_alloc:SIZE[@AREA]`: the range it got, or why not.
fn cma_alloc(
    m: &mut Machine,
    bytes: u64,
    area: usize,
    migrated_before: u64,
    out: &mut Out,
) -> Result<Option<(usize, u64, u64)>> {
    let nr = bytes >> m.geometry().page_shift;
    let got = m.cma_alloc(area, nr, 0)?;
    let migrated = m.page_alloc().events.get(VmEvent::PgmigrateSuccess) - migrated_before;
    let name = &m.page_alloc().cma_areas()[area].name;
    match got.pfn {
        Some(pfn) => {
            out.line(format!(
                "cma{area} ({name}): cma_alloc {}: pfn {pfn:#x}-{:#x} ({} tries, pgmigrate_success +{migrated})",
                format_size(bytes),
                pfn + nr,
                got.tries
            ))?;
            Ok(Some((area, pfn, nr)))
        }
        None => {
            let why = got
                .error
                .map_or_else(|| "no free range in the area's bitmap".to_string(), |e| e.to_string());
            out.line(format!(
                "cma{area} ({name}): cma_alloc {} failed after {} tries: {why}",
                format_size(bytes),
                got.tries
            ))?;
            Ok(None)
        }
    }
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
