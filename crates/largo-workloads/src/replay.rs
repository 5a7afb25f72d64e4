//! Replaying a trace on the model: every event of the stream, in order,
//! applied to the process it names. The trace's addresses are kept: each
//! mapping is placed where the recorded kernel placed it.
//!
//! Only private anonymous memory is modelled. A file or shared mapping
//! replaces whatever anonymous memory was in its range (as the kernel's
//! mapping would) and is otherwise left out; faults on it are counted as
//! skipped. mprotect and madvise apply to the anonymous parts of their
//! range; advice the model does not implement (willneed, dontdump, ...) is
//! counted and ignored.

use std::collections::HashMap;

use largo_mm::vm::types::{Pid, ThpDisable};
use largo_mm::vm::{Access, Advice, MapFlags, MremapFlags, Prot};
use largo_mm::Machine;
use largo_trace::{
    CloneKind, Event, MemoryOp, ThpDisableMode, TracePid, MADV_DONTNEED, MADV_FREE, MADV_HUGEPAGE, MADV_NOHUGEPAGE,
};
use serde::Serialize;

use crate::report::Counters;
use crate::run::{Peak, RunOutcome};
use crate::sched::Problems;

/// How a replay went, beyond the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayStats {
    pub events: u64,
    /// Accesses applied to anonymous memory (faults and touched pages).
    pub accesses: u64,
    /// Faults outside private anonymous memory (file, shared, special mappings).
    pub skipped_faults: u64,
    /// File and shared mappings left out.
    pub skipped_mappings: u64,
    /// madvise advice the model does not implement.
    pub ignored_advice: u64,
    /// Simulated time the trace covers.
    pub trace_ns: u64,
    /// Processes and threads seen.
    pub tasks: u64,
}

/// A replay that could not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("event {index}: {reason}")]
    Event { index: u64, reason: String },
    #[error("after event {index}: {error}")]
    Invariant { index: u64, error: String },
}

struct Task {
    pid: Pid,
    cpu: usize,
}

/// The replay's state: trace pids to model tasks.
struct Replayer {
    tasks: HashMap<TracePid, Task>,
    /// The last pid looked up in `tasks`, with its task and CPU.
    last: Option<(TracePid, Pid, usize)>,
    nr_cpus: usize,
    next_cpu: usize,
    stats: ReplayStats,
    problems: Problems,
    page_size: u64,
}

fn prot(p: largo_trace::Prot) -> Prot {
    let mut out = Prot::empty();
    if p.readable() {
        out |= Prot::READ;
    }
    if p.writable() {
        out |= Prot::WRITE;
    }
    if p.0 & largo_trace::Prot::EXEC != 0 {
        out |= Prot::EXEC;
    }
    out
}

impl Replayer {
    fn cpu(&mut self) -> usize {
        let c = self.next_cpu % self.nr_cpus;
        self.next_cpu += 1;
        c
    }

    /// The task of a trace pid seen before. Consecutive events mostly come
    /// from one process: the last lookup is kept (a pid's task never
    /// changes once made).
    fn known(&mut self, tpid: TracePid) -> Option<(Pid, usize)> {
        if let Some((t, pid, cpu)) = self.last {
            if t == tpid {
                return Some((pid, cpu));
            }
        }
        let t = self.tasks.get(&tpid)?;
        self.last = Some((tpid, t.pid, t.cpu));
        Some((t.pid, t.cpu))
    }

    /// The task of a trace pid; a pid never seen before is a new process
    /// with an empty address space (the root of the trace).
    fn task(&mut self, m: &mut Machine, pid: TracePid) -> Result<(Pid, usize), String> {
        if let Some(t) = self.tasks.get(&pid) {
            return Ok((t.pid, t.cpu));
        }
        let cpu = self.cpu();
        let p = m
            .with_vm(cpu, |vm, ctx| vm.spawn_empty(ctx))
            .map_err(|e| e.to_string())?;
        self.tasks.insert(pid, Task { pid: p, cpu });
        self.stats.tasks += 1;
        Ok((p, cpu))
    }

    /// Runs `f` over the anonymous VMAs' parts of `[addr, addr + len)`.
    fn anon_parts(m: &Machine, pid: Pid, addr: u64, len: u64) -> Vec<(u64, u64)> {
        let end = addr.saturating_add(len);
        m.vm()
            .maps(pid)
            .unwrap_or_default()
            .into_iter()
            .filter(|v| v.start < end && v.end > addr)
            .map(|v| (v.start.max(addr), v.end.min(end)))
            .collect()
    }

    fn access(&mut self, m: &mut Machine, pid: Pid, cpu: usize, addr: u64, write: bool) {
        match m.with_vm(cpu, |vm, ctx| vm.access(ctx, pid, addr, write)) {
            Ok(Access::Hit | Access::Faulted) => self.stats.accesses += 1,
            Ok(Access::Segv) => self.stats.skipped_faults += 1,
            Ok(Access::Oom) | Err(_) => {}
        }
    }

    fn apply(&mut self, m: &mut Machine, e: &Event) -> Result<(), String> {
        if let Event::Tick { ns } = *e {
            self.stats.trace_ns += ns;
            m.advance_time(ns);
            return Ok(());
        }
        let tpid = e.pid().expect("every other event names a process");
        let (pid, cpu) = match self.known(tpid) {
            Some((pid, cpu)) => {
                // A process the OOM killer took does nothing more.
                if !m.vm().task(pid).is_some_and(|t| t.alive) && !matches!(e, Event::Exec { .. }) {
                    return Ok(());
                }
                (pid, cpu)
            }
            None => self.task(m, tpid)?,
        };
        match *e {
            Event::Exec { .. } => m.with_vm(cpu, |vm, ctx| vm.exec(ctx, pid)).map_err(|e| e.to_string())?,
            Event::Vma {
                start,
                end,
                prot: p,
                kind,
                ..
            } => {
                if kind.is_anonymous() && end > start {
                    let mut flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
                    if kind == largo_trace::VmaKind::Stack {
                        flags |= MapFlags::GROWSDOWN;
                    }
                    let r = m.with_vm(cpu, |vm, ctx| vm.mmap(ctx, pid, start, end - start, prot(p), flags));
                    r.map_err(|e| format!("vma {start:#x}-{end:#x}: {e}"))?;
                } else {
                    self.stats.skipped_mappings += 1;
                }
            }
            Event::BrkStart { addr, .. } => m
                .with_vm(cpu, |vm, _| vm.set_brk_start(pid, addr))
                .map_err(|e| e.to_string())?,
            Event::Mmap {
                addr,
                len,
                prot: p,
                flags,
                ..
            } => {
                if flags.private_anonymous() {
                    let mut f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
                    if flags.has(largo_trace::MapFlags::NORESERVE) {
                        f |= MapFlags::NORESERVE;
                    }
                    if flags.has(largo_trace::MapFlags::GROWSDOWN) {
                        f |= MapFlags::GROWSDOWN;
                    }
                    if flags.has(largo_trace::MapFlags::POPULATE) {
                        f |= MapFlags::POPULATE;
                    }
                    m.with_vm(cpu, |vm, ctx| vm.mmap(ctx, pid, addr, len, prot(p), f))
                        .map_err(|e| format!("mmap {addr:#x}+{len:#x}: {e}"))?;
                } else {
                    // A file or shared mapping takes over the range.
                    self.stats.skipped_mappings += 1;
                    let _ = m.with_vm(cpu, |vm, ctx| vm.munmap(ctx, pid, addr, len));
                }
            }
            Event::Munmap { addr, len, .. } => {
                let _ = m.with_vm(cpu, |vm, ctx| vm.munmap(ctx, pid, addr, len));
            }
            Event::Mremap {
                old_addr,
                old_len,
                new_addr,
                new_len,
                ..
            } => self.mremap(m, pid, cpu, old_addr, old_len, new_addr, new_len),
            Event::Mprotect { addr, len, prot: p, .. } => {
                for (s, end) in Self::anon_parts(m, pid, addr, len) {
                    let _ = m.with_vm(cpu, |vm, ctx| vm.mprotect(ctx, pid, s, end - s, prot(p)));
                }
            }
            Event::Madvise { addr, len, advice, .. } => {
                let advice = match advice {
                    MADV_DONTNEED => Advice::DontNeed,
                    MADV_FREE => Advice::Free,
                    MADV_HUGEPAGE => Advice::HugePage,
                    MADV_NOHUGEPAGE => Advice::NoHugePage,
                    _ => {
                        self.stats.ignored_advice += 1;
                        return Ok(());
                    }
                };
                for (s, end) in Self::anon_parts(m, pid, addr, len) {
                    let _ = m.with_vm(cpu, |vm, ctx| vm.madvise(ctx, pid, s, end - s, advice));
                }
            }
            Event::Brk { addr, .. } => {
                let _ = m.with_vm(cpu, |vm, ctx| vm.brk(ctx, pid, addr));
            }
            Event::Fault { addr, write, .. } => self.access(m, pid, cpu, addr, write),
            Event::ExecPage { addr, .. } => {
                if let Ok(Access::Hit | Access::Faulted) = m.with_vm(cpu, |vm, ctx| vm.exec_page(ctx, pid, addr)) {
                    self.stats.accesses += 1;
                }
            }
            Event::Touch { addr, len, write, .. } => {
                let page = self.page_size;
                let mut a = addr & !(page - 1);
                while a < addr.saturating_add(len) {
                    self.access(m, pid, cpu, a, write);
                    a += page;
                }
            }
            Event::Clone { child, kind, .. } => {
                let created = match kind {
                    CloneKind::Process => m.with_vm(cpu, |vm, ctx| vm.fork(ctx, pid)),
                    CloneKind::Thread => m.with_vm(cpu, |vm, _| vm.spawn_thread(pid)),
                    CloneKind::Vfork => m.with_vm(cpu, |vm, _| vm.spawn_vfork(pid)),
                };
                match created {
                    Ok(c) => {
                        let cpu = self.cpu();
                        self.tasks.insert(child, Task { pid: c, cpu });
                        self.stats.tasks += 1;
                    }
                    Err(e) => self.fail("clone", e),
                }
            }
            Event::Exit { .. } => {
                let _ = m.with_vm(cpu, |vm, ctx| vm.exit(ctx, pid));
            }
            Event::PrctlThpDisable { mode, .. } => {
                let mode = match mode {
                    ThpDisableMode::Off => ThpDisable::Off,
                    ThpDisableMode::Completely => ThpDisable::Completely,
                    ThpDisableMode::ExceptAdvised => ThpDisable::ExceptAdvised,
                };
                let _ = m.with_vm(cpu, |vm, _| vm.prctl_thp_disable(pid, mode));
            }
            Event::DropCaches { mode, .. } => m.with_vm(cpu, |vm, ctx| vm.drop_caches(ctx, mode as u32)),
            Event::MovePages { addr, len, node, .. } => {
                // The data moves through the mainline per-folio copy.
                m.with_vm(cpu, |vm, ctx| {
                    vm.move_range(ctx, pid, addr, len, node, &largo_physmem::copy::Vanilla)
                })
                .map_err(|e| format!("move_pages: {e}"))?;
            }
            Event::MemoryBlock { block, op, .. } => {
                // A refused step is the write's -EBUSY/-EINVAL, not a
                // replay error; the trace goes on. Hot-add goes to node 0.
                let _ = match op {
                    MemoryOp::Online => m.online_memory_block(block),
                    MemoryOp::OnlineMovable => m.online_memory_block_movable(block),
                    MemoryOp::Offline => m.offline_memory_block(block),
                    MemoryOp::Add => m.add_memory_block(0, block).map(|_| ()),
                    MemoryOp::Remove => m.remove_memory_block(block),
                };
            }
            Event::Tick { .. } => unreachable!("handled above"),
        }
        Ok(())
    }

    /// mremap of anonymous memory moves it (to the recorded address);
    /// of anything else, makes the target range non-anonymous.
    #[allow(clippy::too_many_arguments)]
    fn mremap(&mut self, m: &mut Machine, pid: Pid, cpu: usize, old: u64, old_len: u64, new: u64, new_len: u64) {
        let anon = !Self::anon_parts(m, pid, old, old_len.max(1)).is_empty();
        if !anon {
            let _ = m.with_vm(cpu, |vm, ctx| vm.munmap(ctx, pid, new, new_len));
            return;
        }
        let flags = MremapFlags {
            may_move: true,
            fixed: (new != old).then_some(new),
        };
        if let Err(e) = m.with_vm(cpu, |vm, ctx| vm.mremap(ctx, pid, old, old_len, new_len, flags)) {
            self.fail("mremap", e);
        }
    }

    fn fail(&mut self, what: &str, e: impl std::fmt::Display) {
        if self.problems.failed_syscalls.len() < 8 {
            self.problems.failed_syscalls.push(format!("{what}: {e}"));
        }
    }
}

/// How to replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Run both invariant checkers every this many events (0: never).
    pub check_every: u64,
    /// Take the folio layout (thpmaps) just before this event.
    pub snapshot_at: Option<usize>,
}

/// What a replay produced.
#[derive(Clone, Debug)]
pub struct ReplayOutcome {
    pub run: RunOutcome,
    pub stats: ReplayStats,
    /// The layout and the counters at `snapshot_at`.
    pub snapshot: Option<largo_mm::vm::ThpMaps>,
    pub snapshot_counters: Option<Counters>,
}

/// The index of the first root process's exit (where a native run reads
/// its layout), if the trace has one.
pub fn first_root_exit(events: &[Event]) -> Option<usize> {
    let root = events.iter().find_map(|e| e.pid())?;
    events
        .iter()
        .position(|e| matches!(e, Event::Exit { pid } if *pid == root))
}

/// Replays `events` on `m`; `progress(done, total)` is called as events
/// are applied.
pub fn replay(
    m: &mut Machine,
    events: &[Event],
    opts: &ReplayOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ReplayOutcome, ReplayError> {
    let check_every = opts.check_every;
    let mut snapshot = None;
    let mut snapshot_counters = None;
    let mut r = Replayer {
        tasks: HashMap::new(),
        last: None,
        nr_cpus: m.config().nr_cpus.max(1),
        next_cpu: 0,
        stats: ReplayStats::default(),
        problems: Problems::default(),
        page_size: m.geometry().page_size(),
    };
    let total = events.len() as u64;
    let mut peak = Peak::default();
    let mut first_free = crate::reporting::FirstFree::default();
    for (i, e) in events.iter().enumerate() {
        if matches!(e, Event::Munmap { .. }) {
            first_free.note(m);
        }
        let index = i as u64;
        // Anonymous memory shrinks only at these events (and in reclaim):
        // sampling the peak before each of them, and now and then between
        // faults, finds it.
        if opts.snapshot_at == Some(i) {
            snapshot = Some(m.vm().thpmaps(m.page_alloc()));
            snapshot_counters = Some(Counters::read(m));
        }
        let faulting = matches!(e, Event::Fault { .. } | Event::Touch { .. });
        if !faulting || index.is_multiple_of(4096) {
            crate::run::update_peak(m, &mut peak);
        }
        r.apply(m, e).map_err(|reason| ReplayError::Event { index, reason })?;
        if check_every > 0 && (index + 1).is_multiple_of(check_every) {
            m.check().map_err(|err| ReplayError::Invariant {
                index,
                error: err.to_string(),
            })?;
        }
        if index.is_multiple_of(65536) {
            progress(index, total);
        }
    }
    crate::run::update_peak(m, &mut peak);
    if check_every > 0 {
        m.check().map_err(|err| ReplayError::Invariant {
            index: total,
            error: err.to_string(),
        })?;
    }
    progress(total, total);
    r.stats.events = total;
    r.problems.oom_killed_tasks = m.vm().oom_kills().len() as u64;
    if opts.snapshot_at.is_some_and(|i| i >= events.len()) {
        snapshot = Some(m.vm().thpmaps(m.page_alloc()));
        snapshot_counters = Some(Counters::read(m));
    }
    let run = RunOutcome {
        counters: Counters::read(m),
        peak,
        reporting: crate::reporting::ReportingReport::read(m, first_free),
        problems: r.problems,
        resolved: Vec::new(),
        rounds: total,
    };
    Ok(ReplayOutcome {
        run,
        stats: r.stats,
        snapshot,
        snapshot_counters,
    })
}
