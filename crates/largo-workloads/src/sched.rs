//! The deterministic scheduler: tasks run their scripts round-robin, one
//! step each in task order (a touch runs `quantum` pages per step), each
//! on its own simulated CPU (task `i` on CPU `i % nr_cpus`), so each CPU's
//! pcp lists serve its tasks. Nothing depends on the wall clock: a run is
//! a function of (machine, workload, options).

use largo_mm::vm::types::Pid;
use largo_mm::vm::{Access, MapFlags, Prot, SegvCode};
use largo_mm::Machine;

use crate::op::{touch_offsets, Op, ResolvedOp, TouchOrder};

/// Whether the tasks of a run are processes or threads of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    Process,
    Thread,
}

/// What went wrong for the workload (never for the model): the kernel's
/// answers a real program would see.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Problems {
    /// Tasks the OOM killer killed.
    pub oom_killed_tasks: u64,
    /// Accesses that would have raised SIGSEGV (the touch stops there).
    pub segv: u64,
    /// The first few of them.
    pub segv_at: Vec<SegvAt>,
    /// Failed syscalls, `op: error`, the first few.
    pub failed_syscalls: Vec<String>,
}

/// An access that would have raised SIGSEGV: outside every mapping, or
/// against its protection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SegvAt {
    /// The trace event (0-based index), for replays.
    pub event: Option<u64>,
    /// The trace's pid (replays) or the task's (built-in workloads).
    pub pid: u32,
    pub addr: u64,
    pub write: bool,
    pub code: SegvCode,
}

impl std::fmt::Display for SegvAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SIGSEGV at {:#x}: a {} by pid {} ({})",
            self.addr,
            if self.write { "write" } else { "read" },
            self.pid,
            self.code.describe()
        )
    }
}

impl Problems {
    /// How many failures and SIGSEGVs are kept with their details.
    pub const MAX_REPORTED: usize = 8;

    /// Notes a failed syscall (the first few are kept).
    pub fn fail(&mut self, what: &str, e: impl std::fmt::Display) {
        if self.failed_syscalls.len() < Self::MAX_REPORTED {
            self.failed_syscalls.push(format!("{what}: {e}"));
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Runnable,
    Waiting,
    Done,
}

/// A touch in progress.
struct TouchCursor {
    base: u64,
    stride: u64,
    write: bool,
    /// Page offsets in visiting order (random touches only).
    order: Option<Vec<u64>>,
    next: u64,
    count: u64,
}

impl TouchCursor {
    fn offset(&self, i: u64) -> u64 {
        self.order.as_ref().map_or(i * self.stride, |o| o[i as usize])
    }
}

/// An entry of a task's log: an executed op, or the fork of a child whose
/// log is `logs[i]`.
enum LogEntry {
    Op(ResolvedOp),
    Fork(usize),
}

struct Task {
    pid: Pid,
    cpu: usize,
    script: Vec<Op>,
    ip: usize,
    slots: Vec<Option<u64>>,
    touch: Option<TouchCursor>,
    parent: Option<usize>,
    live_children: usize,
    state: State,
    log: usize,
}

/// The tasks of a run and what they did.
pub(crate) struct Scheduler {
    tasks: Vec<Task>,
    logs: Vec<Vec<LogEntry>>,
    nr_cpus: usize,
    next_cpu: usize,
    quantum: u64,
    /// Root tasks stop before their final munmaps and do not exit.
    keep: bool,
    pub problems: Problems,
    /// Pages touched so far (progress).
    pub pages_touched: u64,
    /// The state before the first munmap.
    pub first_free: crate::reporting::FirstFree,
    /// The TLB the access streams run through.
    pub tlb: largo_types::TlbGeometry,
    /// The access streams' TLB and user-time figures, if any ran.
    pub streams: Option<crate::tlb::stream::StreamReport>,
    /// Work by kernel entry.
    pub ledger: crate::entry::EntryLedger,
}

impl Scheduler {
    /// Spawns one task per script: processes, or threads of the first.
    /// With `keep`, root tasks skip their trailing munmaps and stay alive,
    /// so their memory can be inspected.
    pub fn new(
        m: &mut Machine,
        scripts: Vec<Vec<Op>>,
        mode: TaskMode,
        quantum: u64,
        keep: bool,
    ) -> Result<Scheduler, largo_mm::vm::VmError> {
        let nr_cpus = m.config().nr_cpus;
        let mut s = Scheduler {
            tasks: Vec::new(),
            logs: Vec::new(),
            nr_cpus,
            next_cpu: 0,
            quantum: quantum.max(1),
            keep,
            problems: Problems::default(),
            pages_touched: 0,
            first_free: Default::default(),
            tlb: m.config().preset.tlb(),
            streams: None,
            ledger: crate::entry::EntryLedger::new(m),
        };
        let mut first: Option<Pid> = None;
        for mut script in scripts {
            while keep && matches!(script.last(), Some(Op::Munmap { .. })) {
                script.pop();
            }
            let pid = match (mode, first) {
                (TaskMode::Thread, Some(leader)) => m.with_vm(0, |vm, _| vm.spawn_thread(leader)),
                _ => m.with_vm(0, |vm, ctx| vm.spawn(ctx)),
            }?;
            first.get_or_insert(pid);
            s.add_task(pid, script, Vec::new(), None);
        }
        Ok(s)
    }

    fn add_task(&mut self, pid: Pid, script: Vec<Op>, slots: Vec<Option<u64>>, parent: Option<usize>) -> usize {
        self.logs.push(Vec::new());
        let cpu = self.next_cpu % self.nr_cpus;
        self.next_cpu += 1;
        self.tasks.push(Task {
            pid,
            cpu,
            script,
            ip: 0,
            slots,
            touch: None,
            parent,
            live_children: 0,
            state: State::Runnable,
            log: self.logs.len() - 1,
        });
        if let Some(p) = parent {
            self.tasks[p].live_children += 1;
        }
        self.tasks.len() - 1
    }

    /// Runs every runnable task one step. Returns false once all are done.
    pub fn round(&mut self, m: &mut Machine) -> bool {
        let mut any = false;
        let mut i = 0;
        while i < self.tasks.len() {
            if self.tasks[i].state == State::Waiting && self.tasks[i].live_children == 0 {
                self.tasks[i].state = State::Runnable;
                self.tasks[i].ip += 1;
            }
            if self.tasks[i].state == State::Runnable {
                self.step(m, i);
                self.reap_killed(m);
                any = true;
            }
            i += 1;
        }
        any || self.tasks.iter().any(|t| t.state != State::Done)
    }

    /// Tasks the OOM killer took are done.
    fn reap_killed(&mut self, m: &Machine) {
        for i in 0..self.tasks.len() {
            if self.tasks[i].state != State::Done && !m.vm().task_alive(self.tasks[i].pid) {
                self.problems.oom_killed_tasks += 1;
                self.finish(i);
            }
        }
    }

    fn finish(&mut self, i: usize) {
        self.tasks[i].state = State::Done;
        if let Some(p) = self.tasks[i].parent {
            self.tasks[p].live_children -= 1;
        }
    }

    fn fail(&mut self, what: &str, e: impl std::fmt::Display) {
        self.problems.fail(what, e);
    }

    fn log(&mut self, i: usize, op: ResolvedOp) {
        let l = self.tasks[i].log;
        self.logs[l].push(LogEntry::Op(op));
    }

    /// One step of task `i`.
    fn step(&mut self, m: &mut Machine, i: usize) {
        let (pid, cpu) = (self.tasks[i].pid, self.tasks[i].cpu);
        if self.tasks[i].touch.is_some() {
            self.ledger.enter(m, crate::entry::Entry::Fault);
            self.touch_some(m, i);
            return;
        }
        let entry = self.tasks[i]
            .script
            .get(self.tasks[i].ip)
            .map_or(crate::entry::Entry::Exit, crate::entry::Entry::of_op);
        self.ledger.enter(m, entry);
        let Some(op) = self.tasks[i].script.get(self.tasks[i].ip).cloned() else {
            if !(self.keep && self.tasks[i].parent.is_none()) {
                let _ = m.with_vm(cpu, |vm, ctx| vm.exit(ctx, pid));
            }
            self.finish(i);
            return;
        };
        let slot_addr = |t: &Task, slot: usize| t.slots.get(slot).copied().flatten();
        match op {
            Op::Mmap {
                slot,
                len,
                write,
                shared,
            } => {
                let prot = if write { Prot::READ | Prot::WRITE } else { Prot::READ };
                let kind = if shared { MapFlags::SHARED } else { MapFlags::PRIVATE };
                let flags = kind | MapFlags::ANONYMOUS;
                let result = m.with_vm(cpu, |vm, ctx| vm.mmap(ctx, pid, 0, len, prot, flags));
                self.set_slot(i, slot, result.as_ref().ok().copied());
                match result {
                    Ok(addr) => {
                        self.log(
                            i,
                            ResolvedOp::Mmap {
                                addr,
                                len,
                                write,
                                shared,
                            },
                        );
                    }
                    Err(e) => self.fail("mmap", e),
                }
            }
            Op::Munmap { slot, offset, len } => {
                self.first_free.note(m);
                if let Some(base) = slot_addr(&self.tasks[i], slot) {
                    let addr = base + offset;
                    match m.with_vm(cpu, |vm, ctx| vm.munmap(ctx, pid, addr, len)) {
                        Ok(()) => self.log(i, ResolvedOp::Munmap { addr, len }),
                        Err(e) => self.fail("munmap", e),
                    }
                }
            }
            Op::Madvise {
                slot,
                offset,
                len,
                advice,
            } => {
                if let Some(base) = slot_addr(&self.tasks[i], slot) {
                    let addr = base + offset;
                    match m.with_vm(cpu, |vm, ctx| vm.madvise(ctx, pid, addr, len, advice.to_vm())) {
                        Ok(()) => self.log(i, ResolvedOp::Madvise { addr, len, advice }),
                        Err(e) => self.fail("madvise", e),
                    }
                }
            }
            Op::Touch {
                slot,
                offset,
                len,
                stride,
                write,
                order,
            } => {
                if let Some(base) = slot_addr(&self.tasks[i], slot) {
                    self.start_touch(i, base + offset, len, stride, write, order);
                    self.touch_some(m, i);
                    return;
                }
            }
            Op::Fork { child } => match m.with_vm(cpu, |vm, ctx| vm.fork(ctx, pid)) {
                Ok(child_pid) => {
                    m.run_woken_khugepaged();
                    let slots = self.tasks[i].slots.clone();
                    let c = self.add_task(child_pid, child, slots, Some(i));
                    let (l, cl) = (self.tasks[i].log, self.tasks[c].log);
                    self.logs[l].push(LogEntry::Fork(cl));
                }
                Err(e) => self.fail("fork", e),
            },
            Op::Wait => {
                self.log(i, ResolvedOp::Wait);
                if self.tasks[i].live_children > 0 {
                    self.tasks[i].state = State::Waiting;
                    return;
                }
            }
            Op::DropCaches { mode } => {
                m.run_woken_khugepaged();
                m.with_vm(cpu, |vm, ctx| vm.drop_caches(ctx, mode));
                self.log(i, ResolvedOp::DropCaches { mode });
            }
            Op::Idle { ns } => {
                m.advance_time(ns);
                self.log(i, ResolvedOp::Idle { ns });
            }
            Op::MmapMemfd { slot, len, write } => self.mmap_memfd(m, i, slot, len, write),
            Op::Sleep { ns } => {
                m.advance_time(ns);
                self.log(i, ResolvedOp::Sleep { ns });
            }
            Op::KhugepagedWake => {
                m.with_vm(cpu, |vm, _| vm.khugepaged_wake());
                self.log(i, ResolvedOp::KhugepagedWake);
            }
            Op::Stream {
                slot,
                offset,
                len,
                pattern,
                passes,
                seed,
            } => {
                if let Some(base) = slot_addr(&self.tasks[i], slot) {
                    let r =
                        crate::tlb::stream::run_stream(m, &self.tlb, pid, base + offset, len, pattern, passes, seed);
                    self.streams.get_or_insert_with(Default::default).add(&r);
                }
            }
            Op::MovePages {
                slot,
                offset,
                len,
                node,
            } => {
                if let Some(base) = slot_addr(&self.tasks[i], slot) {
                    let addr = base + offset;
                    let copy = largo_physmem::copy::Vanilla;
                    match m.with_vm(cpu, |vm, ctx| vm.move_range(ctx, pid, addr, len, node, &copy)) {
                        Ok(out) if out.ret > 0 => self.fail("move_pages", format!("{} pages not migrated", out.ret)),
                        Ok(out) if out.ret == -19 => {
                            self.fail("move_pages", format!("ENODEV: node {node} has no memory"))
                        }
                        Ok(out) if out.ret < 0 => self.fail("move_pages", format!("error {}", out.ret)),
                        Ok(_) => {}
                        Err(e) => self.fail("move_pages", e),
                    }
                    self.log(i, ResolvedOp::MovePages { addr, len, node });
                }
            }
        }
        self.tasks[i].ip += 1;
    }

    /// Task `i`'s slot `slot` holds `addr` (`None`: nothing).
    fn set_slot(&mut self, i: usize, slot: usize, addr: Option<u64>) {
        let t = &mut self.tasks[i];
        if t.slots.len() <= slot {
            t.slots.resize(slot + 1, None);
        }
        t.slots[slot] = addr;
    }

    /// [`Op::MmapMemfd`]: the descriptor is the task's lowest free one
    /// from 3 (0-2 are the standard streams), closed once mapped.
    fn mmap_memfd(&mut self, m: &mut Machine, i: usize, slot: usize, len: u64, write: bool) {
        const FIRST_FD: u32 = 3;
        let (pid, cpu) = (self.tasks[i].pid, self.tasks[i].cpu);
        let fd = FIRST_FD;
        let prot = if write { Prot::READ | Prot::WRITE } else { Prot::READ };
        let result = m.with_vm(cpu, |vm, ctx| {
            vm.memfd_create(ctx, pid, fd)?;
            vm.ftruncate(ctx, pid, fd, len)?;
            let addr = vm.mmap_fd(ctx, pid, 0, len, prot, MapFlags::SHARED, fd, 0);
            vm.close(ctx, pid, fd)?;
            addr
        });
        self.set_slot(i, slot, result.as_ref().ok().copied());
        match result {
            Ok(addr) => self.log(i, ResolvedOp::MmapMemfd { addr, len, write, fd }),
            Err(e) => self.fail("memfd", e),
        }
    }

    fn start_touch(&mut self, i: usize, addr: u64, len: u64, stride: u64, write: bool, order: TouchOrder) {
        let stride = stride.max(1);
        let count = len.div_ceil(stride);
        let order_vec = matches!(order, TouchOrder::Random { .. }).then(|| touch_offsets(len, stride, order));
        self.tasks[i].touch = Some(TouchCursor {
            base: addr,
            stride,
            write,
            order: order_vec,
            next: 0,
            count,
        });
        self.log(
            i,
            ResolvedOp::Touch {
                addr,
                len,
                stride,
                write,
                order,
            },
        );
    }

    /// Up to `quantum` accesses of the task's touch in progress.
    fn touch_some(&mut self, m: &mut Machine, i: usize) {
        let (pid, cpu) = (self.tasks[i].pid, self.tasks[i].cpu);
        let quantum = self.quantum;
        let cursor = self.tasks[i].touch.as_mut().expect("a touch in progress");
        let end = (cursor.next + quantum).min(cursor.count);
        let mut stop = false;
        let mut segv_addr = None;
        let cursor_write = cursor.write;
        let mut done = 0;
        m.with_vm(cpu, |vm, ctx| {
            while cursor.next < end {
                let (addr, outcome) = if cursor.order.is_none() {
                    // A sequential touch: the accesses up to the next one
                    // that stops it are made as one run.
                    let start = cursor.base.wrapping_add(cursor.next.wrapping_mul(cursor.stride));
                    let run = vm.access_run(ctx, pid, start, cursor.stride, end - cursor.next, cursor.write);
                    cursor.next += run.done;
                    done += run.done;
                    let Some(outcome) = run.stop else {
                        break;
                    };
                    (start.wrapping_add((run.done - 1).wrapping_mul(cursor.stride)), outcome)
                } else {
                    let addr = cursor.base + cursor.offset(cursor.next);
                    cursor.next += 1;
                    done += 1;
                    (addr, vm.access(ctx, pid, addr, cursor.write))
                };
                match outcome {
                    Ok(Access::Hit | Access::Faulted | Access::NotModelled) => {}
                    Ok(Access::Segv(code)) => {
                        segv_addr = Some((addr, code));
                        stop = true;
                        break;
                    }
                    Err(_) | Ok(Access::Sigbus) => {
                        stop = true;
                        break;
                    }
                    Ok(Access::Oom) => {
                        if !vm.task_alive(pid) {
                            stop = true;
                            break;
                        }
                    }
                }
            }
        });
        self.pages_touched += done;
        let alive = m.vm().task_alive(pid);
        if stop && alive {
            self.problems.segv += 1;
            if let Some((addr, code)) = segv_addr.filter(|_| self.problems.segv_at.len() < Problems::MAX_REPORTED) {
                self.problems.segv_at.push(SegvAt {
                    event: None,
                    pid,
                    addr,
                    write: cursor_write,
                    code,
                });
            }
        }
        let cursor = self.tasks[i].touch.as_ref().expect("a touch in progress");
        if stop || cursor.next >= cursor.count {
            self.tasks[i].touch = None;
            self.tasks[i].ip += 1;
        }
    }

    /// The executed operations as a tree per root task: each fork holds
    /// what its child did.
    pub fn resolved(&mut self) -> Vec<Vec<ResolvedOp>> {
        let roots: Vec<usize> = self
            .tasks
            .iter()
            .filter(|t| t.parent.is_none())
            .map(|t| t.log)
            .collect();
        roots.into_iter().map(|l| self.take_log(l)).collect()
    }

    fn take_log(&mut self, l: usize) -> Vec<ResolvedOp> {
        let entries = std::mem::take(&mut self.logs[l]);
        entries
            .into_iter()
            .map(|e| match e {
                LogEntry::Op(op) => op,
                LogEntry::Fork(child) => ResolvedOp::Fork {
                    child: self.take_log(child),
                },
            })
            .collect()
    }
}

/// Pages a script will touch (for progress), children included.
pub fn pages_in(script: &[Op]) -> u64 {
    script
        .iter()
        .map(|op| match op {
            Op::Touch { len, stride, .. } => len.div_ceil((*stride).max(1)),
            Op::Fork { child } => pages_in(child),
            _ => 0,
        })
        .sum()
}
