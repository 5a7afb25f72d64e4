//! Replaying a trace on the model: every event of the stream, in order,
//! applied to the process it names through [`EventHandler`] (the trait
//! the event table generates; the native host runner implements it too).
//! The trace's addresses are kept: each mapping is placed where the
//! recorded kernel placed it.
//!
//! Only private anonymous memory is modelled. File, shared and special
//! mappings are mapped as VMAs without pages: they hold their place in
//! the address space, and accesses to them are counted as skipped. An
//! access outside every mapping, or against its protection, is what the
//! real program would get: SIGSEGV, counted and reported with the event.
//! Advice the model does not implement (willneed, dontdump, ...) is
//! counted and ignored.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use largo_mm::hotplug::HotplugError;
use largo_mm::vm::types::{Pid, ThpDisable};
use largo_mm::vm::{Access, Advice, MapFlags, MremapFlags, Prot, SegvCode, VmError};
use largo_mm::Machine;
use largo_trace::{
    CloneKind, Event, EventHandler, MapFlags as TraceMapFlags, Prot as TraceProt, ThpDisableMode, TracePid, VmaKind,
    MADV_COLD, MADV_COLLAPSE, MADV_DONTNEED, MADV_FREE, MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_PAGEOUT, MADV_REMOVE,
};
use serde::Serialize;

use crate::report::Counters;
use crate::run::{Peak, RunOutcome};
use crate::sched::{Problems, SegvAt};

/// How a replay went, beyond the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayStats {
    pub events: u64,
    /// Accesses applied to anonymous memory (faults and touched pages).
    pub accesses: u64,
    /// Accesses to memory the model does not hold (file, shared, special mappings).
    pub skipped_faults: u64,
    /// File, shared and special mappings (held as address space only).
    pub skipped_mappings: u64,
    /// madvise advice the model does not implement.
    pub ignored_advice: u64,
    /// Simulated time the trace covers.
    pub trace_ns: u64,
    /// Processes and threads seen.
    pub tasks: u64,
}

/// Why an event could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("cannot start the task of pid {pid}: {source}")]
    Spawn { pid: TracePid, source: VmError },
    #[error("exec: {0}")]
    Exec(VmError),
    #[error("vma {start:#x}-{end:#x}: {source}")]
    Vma { start: u64, end: u64, source: VmError },
    #[error("brk_start: {0}")]
    BrkStart(VmError),
    #[error("mmap {addr:#x}+{len:#x}: {source}")]
    Mmap { addr: u64, len: u64, source: VmError },
    #[error("move_pages: {0}")]
    MovePages(VmError),
}

/// A replay that could not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("event {index}: {source}")]
    Event { index: u64, source: EventError },
    #[error("after event {index}: {error}")]
    Invariant { index: u64, error: largo_mm::CheckError },
    #[error("--tlb: {0}")]
    Tlb(String),
}

struct Task {
    pid: Pid,
    cpu: usize,
}

/// The replay's state: trace pids to model tasks, and the task of the
/// event being applied.
struct Replayer<'m> {
    m: &'m mut Machine,
    tasks: HashMap<TracePid, Task>,
    /// The last pid looked up in `tasks`, with its task and CPU.
    last: Option<(TracePid, Pid, usize)>,
    /// The model task and CPU of the event being applied.
    cur: (Pid, usize),
    /// The index of the event being applied.
    index: u64,
    nr_cpus: usize,
    next_cpu: usize,
    /// [`ReplayOptions::cpu`].
    fixed_cpu: Option<usize>,
    /// [`ReplayOptions::roots_join_memcg`].
    roots_join_memcg: bool,
    stats: ReplayStats,
    problems: Problems,
    page_size: u64,
    /// Trace pids whose clone failed here (the memcg OOM-killed the
    /// parent, or memory ran out): the child never ran, so its events and
    /// its own children's are skipped.
    unborn: HashSet<TracePid>,
    /// The addresses of the fault run being made (kept for its capacity).
    run_addrs: Vec<u64>,
    /// [`ReplayOptions::one_by_one`].
    one_by_one: bool,
}

fn prot(p: TraceProt) -> Prot {
    let mut out = Prot::empty();
    if p.readable() {
        out |= Prot::READ;
    }
    if p.writable() {
        out |= Prot::WRITE;
    }
    if p.0 & TraceProt::EXEC != 0 {
        out |= Prot::EXEC;
    }
    out
}

/// The model's mmap flags for a trace's: the placement is always the
/// recorded one (`MAP_FIXED`).
fn map_flags(f: TraceMapFlags) -> MapFlags {
    let mut out = MapFlags::FIXED;
    for (trace, model) in [
        (TraceMapFlags::SHARED, MapFlags::SHARED),
        (TraceMapFlags::PRIVATE, MapFlags::PRIVATE),
        (TraceMapFlags::ANONYMOUS, MapFlags::ANONYMOUS),
        (TraceMapFlags::NORESERVE, MapFlags::NORESERVE),
        (TraceMapFlags::GROWSDOWN, MapFlags::GROWSDOWN),
        (TraceMapFlags::POPULATE, MapFlags::POPULATE),
    ] {
        if f.has(trace) {
            out |= model;
        }
    }
    // MAP_SHARED_VALIDATE (3) and other types: shared.
    if f.has(TraceMapFlags::SHARED) {
        out -= MapFlags::PRIVATE;
    }
    // hugetlbfs memory is not the anonymous fault path's: held, not modelled.
    if f.has(TraceMapFlags::HUGETLB) {
        out -= MapFlags::ANONYMOUS;
    }
    out
}

impl Replayer<'_> {
    fn cpu(&mut self) -> usize {
        if let Some(c) = self.fixed_cpu {
            return c;
        }
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
    fn task(&mut self, tpid: TracePid) -> Result<(Pid, usize), EventError> {
        if let Some(t) = self.known(tpid) {
            return Ok(t);
        }
        let cpu = self.cpu();
        let joined = self.roots_join_memcg;
        let p = self
            .m
            .with_vm(cpu, |vm, ctx| {
                if joined {
                    vm.spawn_empty_joined(ctx)
                } else {
                    vm.spawn_empty(ctx)
                }
            })
            .map_err(|source| EventError::Spawn { pid: tpid, source })?;
        self.tasks.insert(tpid, Task { pid: p, cpu });
        self.stats.tasks += 1;
        Ok((p, cpu))
    }

    /// Applies one event. A process the OOM killer took does nothing more
    /// (until an exec gives it a new image); one whose clone failed never
    /// ran. Their sleeps still let time pass.
    fn apply(&mut self, e: &Event) -> Result<(), EventError> {
        if let Some(tpid) = e.pid() {
            // Time passes while a process sleeps whether or not it lives
            // here: the others' later events came after it.
            let sleep = matches!(e, Event::Sleep { .. });
            // (No unborn pid, the common case: no hash lookup per event.)
            if !self.unborn.is_empty() && self.unborn.contains(&tpid) {
                if let Event::Clone { child, .. } = e {
                    self.unborn.insert(*child);
                }
                return if sleep { e.dispatch(self) } else { Ok(()) };
            }
            self.cur = self.task(tpid)?;
            let alive = self.m.vm().task_alive(self.cur.0);
            if !alive && !sleep && !matches!(e, Event::Exec { .. }) {
                return Ok(());
            }
        }
        e.dispatch(self)
    }

    /// Runs `f` on the current task's VM.
    fn vm<R>(&mut self, f: impl FnOnce(&mut largo_mm::vm::Vm, &mut largo_mm::vm::Ctx, Pid) -> R) -> R {
        let (pid, cpu) = self.cur;
        self.m.with_vm(cpu, |vm, ctx| f(vm, ctx, pid))
    }

    /// The parts of `[addr, addr + len)` inside some VMA of the current task.
    fn mapped_parts(&self, addr: u64, len: u64) -> Vec<(u64, u64)> {
        let end = addr.saturating_add(len);
        self.m
            .vm()
            .maps(self.cur.0)
            .unwrap_or_default()
            .into_iter()
            .filter(|v| v.start < end && v.end > addr)
            .map(|v| (v.start.max(addr), v.end.min(end)))
            .collect()
    }

    /// An access by the program (`kernel`: by a syscall on its behalf).
    /// Returns whether it raised SIGSEGV.
    fn access(&mut self, tpid: TracePid, addr: u64, write: bool, kernel: bool) -> bool {
        let outcome = self.vm(|vm, ctx, pid| vm.access(ctx, pid, addr, write));
        self.access_outcome(tpid, addr, write, kernel, outcome)
    }

    /// The fault events `run` (a run [`fault_run_len`] found, more than
    /// one) as one access run, each access as its event would make it.
    /// Returns how many of the events it made: all, or up to the one
    /// whose access stopped the run (OOM, SIGSEGV, an error) or after which
    /// the machine operation had work to end with (`access_page_run`);
    /// the replay goes on from the next event. 0 when the run's process
    /// is not a live one the replay knows, or the operation before left
    /// work (its first event then goes alone).
    fn fault_run(&mut self, run: &[Event]) -> usize {
        let Event::Fault { pid: tpid, write, .. } = run[0] else {
            unreachable!("a fault run starts with a fault");
        };
        if !self.unborn.is_empty() && self.unborn.contains(&tpid) {
            return 0;
        }
        let Some(cur) = self.known(tpid) else {
            return 0;
        };
        if !self.m.vm().task_alive(cur.0) {
            return 0;
        }
        self.cur = cur;
        let mut addrs = std::mem::take(&mut self.run_addrs);
        addrs.clear();
        addrs.extend(run.iter().map(|e| match *e {
            Event::Fault { addr, .. } => addr,
            _ => unreachable!("a fault run holds faults only"),
        }));
        let count = addrs.len() as u64;
        let made = self.vm(|vm, ctx, p| vm.access_page_run(ctx, p, count, |k| addrs[k as usize], write));
        let stopped = u64::from(made.stop.is_some());
        self.stats.accesses += made.done - stopped - made.not_modelled;
        self.stats.skipped_faults += made.not_modelled;
        if let Some(outcome) = made.stop {
            self.index += made.done - 1;
            let at = addrs[made.done as usize - 1];
            self.access_outcome(tpid, at, write, false, outcome);
        }
        self.run_addrs = addrs;
        made.done as usize
    }

    /// What the access at `addr` came to, for the replay: counted, or a
    /// signal or failure reported. Returns whether it raised SIGSEGV.
    fn access_outcome(
        &mut self,
        tpid: TracePid,
        addr: u64,
        write: bool,
        kernel: bool,
        outcome: Result<Access, VmError>,
    ) -> bool {
        match outcome {
            Ok(Access::Hit | Access::Faulted) => self.stats.accesses += 1,
            Ok(Access::NotModelled) => self.stats.skipped_faults += 1,
            Ok(Access::Segv(_)) if kernel => self.fail("kernel access", format!("EFAULT at {addr:#x} (pid {tpid})")),
            Ok(Access::Segv(code)) => {
                self.segv(tpid, addr, write, code);
                return true;
            }
            Ok(Access::Sigbus) => {
                self.fail(
                    "access",
                    format!("SIGBUS at {addr:#x} (pid {tpid}): beyond the end of a shmem file"),
                );
                return true;
            }
            Ok(Access::Oom) | Err(_) => {}
        }
        false
    }

    /// The program would get SIGSEGV here.
    fn segv(&mut self, pid: TracePid, addr: u64, write: bool, code: SegvCode) {
        self.problems.segv += 1;
        if self.problems.segv_at.len() < Problems::MAX_REPORTED {
            self.problems.segv_at.push(SegvAt {
                event: Some(self.index),
                pid,
                addr,
                write,
                code,
            });
        }
    }

    fn fail(&mut self, what: &str, e: impl std::fmt::Display) {
        self.problems.fail(what, e);
    }

    /// A memory hotplug write: a refused step is the write's
    /// -EBUSY/-EINVAL, not a replay error; the trace goes on.
    fn hotplug(&mut self, what: &str, r: Result<(), HotplugError>) {
        if let Err(e) = r {
            self.fail(what, e);
        }
    }
}

impl EventHandler for Replayer<'_> {
    type Error = EventError;

    fn exec(&mut self, _pid: TracePid) -> Result<(), EventError> {
        self.vm(|vm, ctx, pid| vm.exec(ctx, pid)).map_err(EventError::Exec)
    }

    fn vma(&mut self, _pid: TracePid, start: u64, end: u64, p: TraceProt, kind: VmaKind) -> Result<(), EventError> {
        if end <= start {
            return Ok(());
        }
        let len = end - start;
        let r = match kind {
            VmaKind::Anon | VmaKind::Heap | VmaKind::Stack => {
                let mut flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
                if kind == VmaKind::Stack {
                    flags |= MapFlags::GROWSDOWN;
                }
                self.vm(|vm, ctx, pid| vm.mmap(ctx, pid, start, len, prot(p), flags).map(|_| ()))
            }
            VmaKind::File => {
                self.stats.skipped_mappings += 1;
                let flags = MapFlags::PRIVATE | MapFlags::FIXED;
                self.vm(|vm, ctx, pid| vm.mmap(ctx, pid, start, len, prot(p), flags).map(|_| ()))
            }
            VmaKind::Special => {
                self.stats.skipped_mappings += 1;
                // vsyscall lies above the user address space: nothing to hold.
                let _ = self.vm(|vm, ctx, pid| vm.map_special(ctx, pid, start, end, prot(p)));
                Ok(())
            }
        };
        r.map_err(|source| EventError::Vma { start, end, source })
    }

    fn brk_start(&mut self, _pid: TracePid, addr: u64) -> Result<(), EventError> {
        self.vm(|vm, _, pid| vm.set_brk_start(pid, addr))
            .map_err(EventError::BrkStart)
    }

    /// An anonymous mapping (private, or shared: shmem) the model cannot
    /// make ends the replay (what follows would be meaningless); a file
    /// one only holds address space, so its failure is noted and the
    /// trace goes on.
    fn mmap(
        &mut self,
        _pid: TracePid,
        addr: u64,
        len: u64,
        p: TraceProt,
        flags: TraceMapFlags,
    ) -> Result<(), EventError> {
        let f = map_flags(flags);
        let r = self.vm(|vm, ctx, pid| vm.mmap(ctx, pid, addr, len, prot(p), f));
        if flags.has(TraceMapFlags::ANONYMOUS) && !flags.has(TraceMapFlags::HUGETLB) {
            return r.map(|_| ()).map_err(|source| EventError::Mmap { addr, len, source });
        }
        self.stats.skipped_mappings += 1;
        if let Err(e) = r {
            self.fail("mmap", e);
        }
        Ok(())
    }

    fn memfd_create(&mut self, _pid: TracePid, fd: u32) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, ctx, pid| vm.memfd_create(ctx, pid, fd)) {
            self.fail("memfd_create", e);
        }
        Ok(())
    }

    fn ftruncate(&mut self, _pid: TracePid, fd: u32, len: u64) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, ctx, pid| vm.ftruncate(ctx, pid, fd, len)) {
            self.fail("ftruncate", e);
        }
        Ok(())
    }

    /// A shared mapping of a memfd is modelled (its failure ends the
    /// replay, as an anonymous one's does); a private one holds address
    /// space only.
    #[allow(clippy::too_many_arguments)]
    fn mmap_fd(
        &mut self,
        _pid: TracePid,
        addr: u64,
        len: u64,
        p: TraceProt,
        flags: TraceMapFlags,
        fd: u32,
        offset: u64,
    ) -> Result<(), EventError> {
        let f = map_flags(flags);
        let r = self.vm(|vm, ctx, pid| vm.mmap_fd(ctx, pid, addr, len, prot(p), f, fd, offset));
        if !flags.has(TraceMapFlags::SHARED) {
            self.stats.skipped_mappings += 1;
        }
        r.map(|_| ()).map_err(|source| EventError::Mmap { addr, len, source })
    }

    fn close(&mut self, _pid: TracePid, fd: u32) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, ctx, pid| vm.close(ctx, pid, fd)) {
            self.fail("close", e);
        }
        Ok(())
    }

    fn punch_hole(&mut self, _pid: TracePid, fd: u32, offset: u64, len: u64) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, ctx, pid| vm.punch_hole(ctx, pid, fd, offset, len)) {
            self.fail("fallocate", e);
        }
        Ok(())
    }

    fn shmget(&mut self, _pid: TracePid, shmid: u32, size: u64) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, _, _| vm.shmget(shmid, size)) {
            self.fail("shmget", e);
        }
        Ok(())
    }

    /// An attach is modelled as a shared mapping is: its failure ends the
    /// replay.
    fn shmat(&mut self, _pid: TracePid, shmid: u32, addr: u64, len: u64, p: TraceProt) -> Result<(), EventError> {
        let write = p.writable();
        self.vm(|vm, ctx, pid| vm.shmat(ctx, pid, shmid, addr, write))
            .map(|_| ())
            .map_err(|source| EventError::Mmap { addr, len, source })
    }

    fn shmdt(&mut self, _pid: TracePid, addr: u64) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, ctx, pid| vm.shmdt(ctx, pid, addr)) {
            self.fail("shmdt", e);
        }
        Ok(())
    }

    fn shm_rmid(&mut self, _pid: TracePid, shmid: u32) -> Result<(), EventError> {
        if let Err(e) = self.vm(|vm, ctx, _| vm.shm_rmid(ctx, shmid)) {
            self.fail("shmctl", e);
        }
        Ok(())
    }

    fn munmap(&mut self, _pid: TracePid, addr: u64, len: u64) -> Result<(), EventError> {
        let _ = self.vm(|vm, ctx, pid| vm.munmap(ctx, pid, addr, len));
        Ok(())
    }

    /// mremap moves or resizes whatever is mapped there (anonymous memory
    /// with its pages) to the recorded address.
    fn mremap(&mut self, _pid: TracePid, old: u64, old_len: u64, new: u64, new_len: u64) -> Result<(), EventError> {
        let flags = MremapFlags {
            may_move: true,
            fixed: (new != old).then_some(new),
        };
        if let Err(e) = self.vm(|vm, ctx, pid| vm.mremap(ctx, pid, old, old_len, new_len, flags)) {
            self.fail("mremap", e);
        }
        Ok(())
    }

    fn mprotect(&mut self, _pid: TracePid, addr: u64, len: u64, p: TraceProt) -> Result<(), EventError> {
        for (s, end) in self.mapped_parts(addr, len) {
            let _ = self.vm(|vm, ctx, pid| vm.mprotect(ctx, pid, s, end - s, prot(p)));
        }
        Ok(())
    }

    fn madvise(&mut self, _pid: TracePid, addr: u64, len: u64, advice: u32) -> Result<(), EventError> {
        let advice = match advice {
            MADV_DONTNEED => Advice::DontNeed,
            MADV_FREE => Advice::Free,
            MADV_HUGEPAGE => Advice::HugePage,
            MADV_NOHUGEPAGE => Advice::NoHugePage,
            MADV_COLLAPSE => Advice::Collapse,
            MADV_COLD => Advice::Cold,
            MADV_PAGEOUT => Advice::PageOut,
            MADV_REMOVE => Advice::Remove,
            _ => {
                self.stats.ignored_advice += 1;
                return Ok(());
            }
        };
        // The kernel's answer (ENOMEM for holes, EINVAL for MADV_FREE of
        // a file) is the program's business; the effect is what counts.
        let _ = self.vm(|vm, ctx, pid| vm.madvise(ctx, pid, addr, len, advice));
        Ok(())
    }

    fn brk(&mut self, _pid: TracePid, addr: u64) -> Result<(), EventError> {
        let _ = self.vm(|vm, ctx, pid| vm.brk(ctx, pid, addr));
        Ok(())
    }

    fn fault(&mut self, pid: TracePid, addr: u64, write: bool) -> Result<(), EventError> {
        self.access(pid, addr, write, false);
        Ok(())
    }

    fn kernel_fault(&mut self, pid: TracePid, addr: u64, write: bool) -> Result<(), EventError> {
        self.access(pid, addr, write, true);
        Ok(())
    }

    fn touch(&mut self, pid: TracePid, addr: u64, len: u64, write: bool) -> Result<(), EventError> {
        let page = self.page_size;
        let end = addr.saturating_add(len);
        let mut a = addr & !(page - 1);
        if self.one_by_one {
            while a < end && !self.access(pid, a, write, false) {
                a += page;
            }
            return Ok(());
        }
        while a < end {
            // The page accesses as runs (each access exactly `Vm::access`
            // as an operation of its own), up to the first that is neither
            // a hit nor a handled fault.
            let count = (end - a).div_ceil(page);
            let base = a;
            let run = self.vm(|vm, ctx, p| vm.access_page_run(ctx, p, count, |k| base + k * page, write));
            if run.done == 0 {
                // The operation before left work for its end: this access
                // goes alone, in an operation that ends with that work.
                if self.access(pid, a, write, false) {
                    break;
                }
                a += page;
                continue;
            }
            let stopped = u64::from(run.stop.is_some());
            self.stats.accesses += run.done - stopped - run.not_modelled;
            self.stats.skipped_faults += run.not_modelled;
            a += run.done * page;
            if let Some(outcome) = run.stop {
                if self.access_outcome(pid, a - page, write, false, outcome) {
                    // The program dies (or its handler jumps away): the
                    // rest of the range is not touched.
                    break;
                }
            }
        }
        Ok(())
    }

    fn clone(&mut self, _pid: TracePid, child: TracePid, kind: CloneKind) -> Result<(), EventError> {
        let created = match kind {
            CloneKind::Process => self.vm(|vm, ctx, pid| vm.fork(ctx, pid)),
            CloneKind::Thread => self.vm(|vm, _, pid| vm.spawn_thread(pid)),
            CloneKind::Vfork => self.vm(|vm, _, pid| vm.spawn_vfork(pid)),
        };
        match created {
            Ok(c) => {
                if kind == CloneKind::Process {
                    // The parent gives its cpu to the child: a woken khugepaged runs.
                    self.m.run_woken_khugepaged();
                }
                let cpu = self.cpu();
                self.tasks.insert(child, Task { pid: c, cpu });
                self.last = None;
                self.stats.tasks += 1;
                self.unborn.remove(&child);
            }
            Err(e) => {
                self.unborn.insert(child);
                self.fail("clone", e);
            }
        }
        Ok(())
    }

    fn exit(&mut self, _pid: TracePid) -> Result<(), EventError> {
        let _ = self.vm(|vm, ctx, pid| vm.exit(ctx, pid));
        Ok(())
    }

    fn prctl_thp_disable(&mut self, _pid: TracePid, mode: ThpDisableMode) -> Result<(), EventError> {
        let mode = match mode {
            ThpDisableMode::Off => ThpDisable::Off,
            ThpDisableMode::Completely => ThpDisable::Completely,
            ThpDisableMode::ExceptAdvised => ThpDisable::ExceptAdvised,
        };
        let _ = self.vm(|vm, _, pid| vm.prctl_thp_disable(pid, mode));
        Ok(())
    }

    /// drop_caches is milliseconds of kernel work: a woken khugepaged runs
    /// meanwhile, before the shrinkers reach the THPs.
    fn drop_caches(&mut self, _pid: TracePid, mode: u8) -> Result<(), EventError> {
        self.m.run_woken_khugepaged();
        self.vm(|vm, ctx, _| vm.drop_caches(ctx, mode as u32));
        Ok(())
    }

    fn khugepaged_wake(&mut self, _pid: TracePid) -> Result<(), EventError> {
        self.vm(|vm, _, _| vm.khugepaged_wake());
        Ok(())
    }

    fn sleep(&mut self, _pid: TracePid, ns: u64) -> Result<(), EventError> {
        self.tick(ns)
    }

    fn tick(&mut self, ns: u64) -> Result<(), EventError> {
        self.stats.trace_ns += ns;
        self.m.advance_time(ns);
        Ok(())
    }

    fn exec_page(&mut self, _pid: TracePid, addr: u64) -> Result<(), EventError> {
        if let Ok(Access::Hit | Access::Faulted) = self.vm(|vm, ctx, pid| vm.exec_page(ctx, pid, addr)) {
            self.stats.accesses += 1;
        }
        Ok(())
    }

    /// The data moves through the mainline per-folio copy.
    fn move_pages(&mut self, _pid: TracePid, addr: u64, len: u64, node: u32) -> Result<(), EventError> {
        self.vm(|vm, ctx, pid| vm.move_range(ctx, pid, addr, len, node, &largo_physmem::copy::Vanilla))
            .map(|_| ())
            .map_err(EventError::MovePages)
    }

    fn memory_offline(&mut self, _pid: TracePid, block: u64) -> Result<(), EventError> {
        let r = self.m.offline_memory_block(block);
        self.hotplug("memory_offline", r);
        Ok(())
    }

    fn memory_online(&mut self, _pid: TracePid, block: u64) -> Result<(), EventError> {
        let r = self.m.online_memory_block(block);
        self.hotplug("memory_online", r);
        Ok(())
    }

    /// Hot-added memory goes to node 0.
    fn memory_add(&mut self, _pid: TracePid, block: u64) -> Result<(), EventError> {
        let r = self.m.add_memory_block(0, block);
        self.hotplug("memory_add", r);
        Ok(())
    }

    fn memory_remove(&mut self, _pid: TracePid, block: u64) -> Result<(), EventError> {
        let r = self.m.remove_memory_block(block);
        self.hotplug("memory_remove", r);
        Ok(())
    }

    fn memory_online_movable(&mut self, _pid: TracePid, block: u64) -> Result<(), EventError> {
        let r = self.m.online_memory_block_movable(block);
        self.hotplug("memory_online_movable", r);
        Ok(())
    }
}

/// How to replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Run both invariant checkers every this many events (0: never).
    pub check_every: u64,
    /// Take the folio layout (thpmaps) just before this event.
    pub snapshot_at: Option<usize>,
    /// Replay without the processes' exits: every process keeps its
    /// memory at its last event (`largo show FILE TRACE`).
    pub keep_mapped: bool,
    /// Run every process on this cpu (as a host run pinned to it);
    /// `None`: processes take the cpus in turn.
    pub cpu: Option<usize>,
    /// Root processes are forked outside the workload's memcg and join it
    /// before their first event (as a validation's host tasks do): their
    /// page-table roots are not charged to it. With a fixed `cpu`, the
    /// snapshot is taken as such a task is stopped by its parent: the
    /// signal's sigqueue, charged to the parent's cgroup, is freed on the
    /// task's cpu first and drains the cpu's object stock
    /// ([`largo_mm::vm::Vm::foreign_obj_free`]).
    pub roots_join_memcg: bool,
    /// `KEY=VALUE,...` changes to the preset's TLB geometry for the
    /// coverage and reach report (`--tlb`; see `TlbGeometry::with_overrides`).
    pub tlb_overrides: Option<String>,
    /// Replay every access as a machine operation of its own through
    /// [`Vm::access`]: each fault event alone, instead of a run of them
    /// ([`fault_run_len`]) as one access run, and a touch page by page.
    /// The same machine, more slowly (for a test comparing the two).
    ///
    /// [`Vm::access`]: largo_mm::vm::Vm::access
    pub one_by_one: bool,
}

/// How many faults from `events[i]` on make one run: user faults of one
/// process, all reads or all writes, each in the page after the one
/// before (at any offset in it), as [`Vm::access_page_run`] makes
/// accesses; for writes also each in a later page than the one before, or
/// each in an earlier one, at most [`MAX_RUN_GAP_PAGES`] apart (a heap
/// written top down, an allocator's pages touched every few pages). A run
/// stops short of an event the replay loop acts before: the peak's sample
/// at every 4096th event, the snapshot. 1 when `events[i]` starts no run.
///
/// [`Vm::access_page_run`]: largo_mm::vm::Vm::access_page_run
fn fault_run_len(events: &[Event], i: usize, page_size: u64, snapshot_at: Option<usize>) -> usize {
    let Event::Fault { pid, addr, write } = events[i] else {
        return 1;
    };
    // Page sizes are powers of two: a shift, not a division per event.
    let page_shift = page_size.trailing_zeros();
    let mut page = addr >> page_shift;
    // The run's direction, fixed by its second fault: +1 up, -1 down.
    let mut direction = 0i64;
    let mut n = 1;
    while let Some(&Event::Fault {
        pid: p,
        addr: a,
        write: w,
    }) = events.get(i + n)
    {
        let j = i + n;
        if p != pid || w != write || j.is_multiple_of(4096) || snapshot_at == Some(j) {
            break;
        }
        let next = a >> page_shift;
        let step = next.wrapping_sub(page) as i64;
        let fits = if write {
            step != 0 && step.unsigned_abs() <= MAX_RUN_GAP_PAGES && direction * step >= 0
        } else {
            step == 1
        };
        if !fits {
            break;
        }
        direction = step.signum();
        page = next;
        n += 1;
    }
    n
}

/// The largest distance in pages between two write faults of one run
/// ([`fault_run_len`]). A run's faults are made together only within one
/// page table; the bound keeps runs of scattered faults, which would go
/// one by one anyway, from being tried as runs.
const MAX_RUN_GAP_PAGES: u64 = 64;

/// What a replay produced.
#[derive(Clone, Debug)]
pub struct ReplayOutcome {
    pub run: RunOutcome,
    pub stats: ReplayStats,
    /// The layout and the counters at `snapshot_at`.
    pub snapshot: Option<largo_mm::vm::ThpMaps>,
    pub snapshot_counters: Option<Counters>,
}

/// The task's stop by its parent before a snapshot (see
/// [`ReplayOptions::roots_join_memcg`]).
fn stopped_by_parent(m: &mut Machine, opts: &ReplayOptions) {
    if opts.roots_join_memcg {
        // The task waits (`rcu_settle`) before its parent stops it: the
        // RCU callbacks it queued run meanwhile.
        m.run_rcu_callbacks();
    }
    if let (true, Some(cpu)) = (opts.roots_join_memcg, opts.cpu) {
        let cpu = cpu.min(m.config().nr_cpus.max(1) - 1);
        m.with_vm(cpu, |vm, ctx| vm.foreign_obj_free(ctx));
    }
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
    let tlb = match &opts.tlb_overrides {
        Some(spec) => m.config().preset.tlb().with_overrides(spec).map_err(ReplayError::Tlb)?,
        None => m.config().preset.tlb(),
    };
    let mut snapshot = None;
    let mut snapshot_counters = None;
    let total = events.len() as u64;
    let mut peak = Peak::default();
    let mut first_free = crate::reporting::FirstFree::default();
    let mut ledger = crate::entry::EntryLedger::new(m);
    let m_cpus = m.config().nr_cpus.max(1);
    let mut r = Replayer {
        nr_cpus: m_cpus,
        page_size: m.geometry().page_size(),
        m,
        tasks: HashMap::default(),
        last: None,
        cur: (0, 0),
        index: 0,
        next_cpu: 0,
        fixed_cpu: opts.cpu.map(|c| c.min(m_cpus - 1)),
        roots_join_memcg: opts.roots_join_memcg,
        stats: ReplayStats::default(),
        problems: Problems::default(),
        unborn: HashSet::default(),
        run_addrs: Vec::new(),
        one_by_one: opts.one_by_one,
    };
    // Events a fault run made beyond its first.
    let mut skip = 0;
    for (i, e) in events.iter().enumerate() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if matches!(e, Event::Munmap { .. }) {
            first_free.note(r.m);
        }
        let index = i as u64;
        // Anonymous memory shrinks only at these events (and in reclaim):
        // sampling the peak before each of them, and now and then between
        // faults, finds it.
        if opts.snapshot_at == Some(i) {
            stopped_by_parent(r.m, opts);
            snapshot = Some(r.m.vm().thpmaps(r.m.page_alloc()));
            snapshot_counters = Some(Counters::read(r.m));
        }
        let faulting = matches!(e, Event::Fault { .. } | Event::Touch { .. });
        if !faulting || index.is_multiple_of(4096) {
            crate::run::update_peak(r.m, &mut peak);
        }
        if opts.keep_mapped && matches!(e, Event::Exit { .. }) {
            continue;
        }
        r.index = index;
        ledger.enter(r.m, crate::entry::Entry::of_event(e));
        let faults = if check_every == 0 && !opts.one_by_one {
            fault_run_len(events, i, r.page_size, opts.snapshot_at)
        } else {
            1
        };
        // The faults that follow go as one access run; the loop picks up
        // after the last it made.
        let made = if faults > 1 {
            r.fault_run(&events[i..i + faults])
        } else {
            0
        };
        if made == 0 {
            r.apply(e).map_err(|source| ReplayError::Event { index, source })?;
        }
        skip = made.saturating_sub(1);
        if check_every > 0 && (index + 1).is_multiple_of(check_every) {
            r.m.check().map_err(|error| ReplayError::Invariant { index, error })?;
        }
        if index.is_multiple_of(65536) {
            progress(index, total);
        }
    }
    let m = r.m;
    crate::run::update_peak(m, &mut peak);
    if check_every > 0 {
        m.check()
            .map_err(|error| ReplayError::Invariant { index: total, error })?;
    }
    progress(total, total);
    r.stats.events = total;
    r.problems.oom_killed_tasks = m.vm().oom_kills().len() as u64;
    if opts.snapshot_at.is_some_and(|i| i >= events.len()) {
        stopped_by_parent(m, opts);
        snapshot = Some(m.vm().thpmaps(m.page_alloc()));
        snapshot_counters = Some(Counters::read(m));
    }
    let run = RunOutcome {
        entries: ledger.finish(m),
        counters: Counters::read(m),
        tlb: crate::tlb::TlbReport::at_peak(m, &peak, &tlb),
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
