//! Running a trace natively on the host: the trace's addresses are
//! translated into a [`Window`] of this process that keeps their alignment
//! up to 1 GiB, and each root process of the trace runs in a forked child
//! (a fresh copy of this process) whose resource usage comes back. A child
//! process of the trace runs, in its own fork, to its exit before its
//! parent goes on, which is how scenarios and built-in workloads are
//! written. At the end of each root process (stopped before it exits) its
//! folio layout is read from /proc/PID/pagemap and /proc/kpageflags. The
//! forking and the children's code are `largo_physmem::native`'s: this
//! module builds the plan (through the trace's `EventHandler`) and reads
//! the results.

use largo_physmem::host::{host_page_size, ChildExit, Forked, HostAdvice, HostError, UserWork, Window};
use largo_physmem::native::{self, FileSnapshot};
use largo_trace::{
    CloneKind, Event, EventHandler, MapFlags, Prot, ThpDisableMode, VmaKind, MADV_COLD, MADV_COLLAPSE, MADV_DONTNEED,
    MADV_FREE, MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_PAGEOUT, MADV_REMOVE,
};

use crate::counters::{HostCounters, KhugepagedEvents, RawCapture};
use std::path::Path;

use crate::layout::{host_layout, FolioLayout, LayoutError};

/// Addresses keep their offset modulo this in the window.
const ALIGN: u64 = 1 << 30;

/// Why a native run could not happen or failed.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    #[error("the host's pages are {host} bytes, the trace's {model}: the runs would not compare")]
    PageSize { host: u64, model: u64 },
    #[error("event {index} cannot run natively: {reason}")]
    Unsupported { index: usize, reason: Unsupported },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("the native task failed at its step {index}; exit {code:?}, signal {signal:?}")]
    Task {
        index: usize,
        code: Option<i32>,
        signal: Option<i32>,
    },
    #[error("reading the folio layout: {0}")]
    Layout(#[from] LayoutError),
    #[error("the task could not write its counters to {0}")]
    Snapshot(String),
    #[error("the task could not bind to its cpu or join its memory cgroup")]
    Setup,
    #[error("reading the task's counters from {path}: {source}")]
    Counters { path: String, source: std::io::Error },
}

pub use largo_physmem::native::Step;

/// A trace made runnable: root processes with their steps, and the range
/// of trace addresses they map.
#[derive(Clone, Debug)]
pub struct Plan {
    pub roots: Vec<Vec<Step>>,
    /// The trace maps shmem (shared anonymous memory or a memfd): its
    /// counters are read with exact gauges.
    pub shmem: bool,
    pub lo: u64,
    pub hi: u64,
}

impl Plan {
    /// Some process forks: the forked copies of the native runner carry
    /// its own address space (page tables, stacks) into a memcg, so the
    /// memcg's charges are not the program's alone.
    pub fn forks(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps.iter().any(|s| matches!(s, Step::Fork(_)))
        }
        self.roots.iter().any(|r| any(r))
    }
}

/// Why an event cannot run natively.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("pid {pid} acts while pid {running} runs (processes must run one at a time)")]
    Interleaved { pid: u32, running: u32 },
    #[error("only anonymous mappings (private or shared) and shared or private mappings of memfds")]
    NotAnonymous,
    #[error("descriptor {0} (a native run holds descriptors below {max})", max = native::MAX_FDS)]
    Fd(u32),
    #[error("madvise advice {0}")]
    Advice(u32),
    #[error("threads and vfork")]
    NotAProcess,
    #[error("program images and brk (record and run the program instead)")]
    ProgramImage,
    #[error("move_pages (this host has one NUMA node; migration is validated on the model)")]
    MovePages,
    #[error("memory hotplug (offlining the host's memory is not a test step; hotplug is validated on the model)")]
    Hotplug,
    #[error("SysV segment {0}: a native run makes at most {max} segments, each before its use", max = largo_physmem::sysv::MAX_SEGMENTS)]
    Segment(u32),
    #[error("shmdt at {0:#x}: no segment attached there")]
    Detach(u64),
}

/// Builds a plan, event by event (the trace's [`EventHandler`]).
struct Planner {
    roots: Vec<Vec<Step>>,
    shmem: bool,
    /// (pid, steps) of the processes running now, innermost last.
    stack: Vec<(u32, Vec<Step>)>,
    lo: u64,
    hi: u64,
    /// The trace's SysV segments in order of creation (a segment's index
    /// natively) and their sizes.
    segments: Vec<(u32, u64)>,
    /// Attached segments: address -> length.
    attached: std::collections::HashMap<u64, u64>,
}

impl Planner {
    /// The native index of trace segment `shmid`.
    fn segment(&self, shmid: u32) -> Result<usize, Unsupported> {
        self.segments
            .iter()
            .position(|&(id, _)| id == shmid)
            .ok_or(Unsupported::Segment(shmid))
    }

    /// The event's process must be the one running (or the first).
    fn enter(&mut self, pid: u32) -> Result<(), Unsupported> {
        if self.stack.is_empty() {
            self.stack.push((pid, Vec::new()));
        }
        let running = self.stack.last().expect("non-empty").0;
        if pid != running {
            return Err(Unsupported::Interleaved { pid, running });
        }
        Ok(())
    }

    fn push(&mut self, step: Step) -> Result<(), Unsupported> {
        self.stack.last_mut().expect("entered").1.push(step);
        Ok(())
    }

    fn cover(&mut self, addr: u64, len: u64) {
        self.lo = self.lo.min(addr);
        self.hi = self.hi.max(addr.saturating_add(len));
    }

    /// The innermost process ends: its steps go to its parent as a fork,
    /// or become a root.
    fn pop(&mut self) {
        let (_, steps) = self.stack.pop().expect("entered");
        match self.stack.last_mut() {
            Some((_, parent)) => parent.push(Step::Fork(steps)),
            None => self.roots.push(steps),
        }
    }
}

impl EventHandler for Planner {
    type Error = Unsupported;

    fn exec(&mut self, _: u32) -> Result<(), Unsupported> {
        Err(Unsupported::ProgramImage)
    }

    fn vma(&mut self, _: u32, _: u64, _: u64, _: Prot, _: VmaKind) -> Result<(), Unsupported> {
        Err(Unsupported::ProgramImage)
    }

    fn brk_start(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::ProgramImage)
    }

    fn mmap(&mut self, _: u32, addr: u64, len: u64, prot: Prot, flags: MapFlags) -> Result<(), Unsupported> {
        if !flags.has(MapFlags::ANONYMOUS) || flags.has(MapFlags::HUGETLB) {
            return Err(Unsupported::NotAnonymous);
        }
        self.cover(addr, len);
        self.shmem |= flags.has(MapFlags::SHARED);
        self.push(Step::Map {
            addr,
            len,
            write: prot.writable(),
            shared: flags.has(MapFlags::SHARED),
        })
    }

    fn memfd_create(&mut self, _: u32, fd: u32) -> Result<(), Unsupported> {
        self.shmem = true;
        self.push(Step::MemfdCreate { fd: checked_fd(fd)? })
    }

    fn ftruncate(&mut self, _: u32, fd: u32, len: u64) -> Result<(), Unsupported> {
        self.push(Step::Ftruncate {
            fd: checked_fd(fd)?,
            len,
        })
    }

    fn mmap_fd(
        &mut self,
        _: u32,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        fd: u32,
        offset: u64,
    ) -> Result<(), Unsupported> {
        self.cover(addr, len);
        self.push(Step::MapFd {
            addr,
            len,
            write: prot.writable(),
            shared: flags.has(MapFlags::SHARED),
            fd: checked_fd(fd)?,
            offset,
        })
    }

    fn close(&mut self, _: u32, fd: u32) -> Result<(), Unsupported> {
        self.push(Step::Close { fd: checked_fd(fd)? })
    }

    fn punch_hole(&mut self, _: u32, fd: u32, offset: u64, len: u64) -> Result<(), Unsupported> {
        self.push(Step::PunchHole {
            fd: checked_fd(fd)?,
            offset,
            len,
        })
    }

    fn shmget(&mut self, _: u32, shmid: u32, size: u64) -> Result<(), Unsupported> {
        if self.segments.len() >= largo_physmem::sysv::MAX_SEGMENTS || self.segment(shmid).is_ok() {
            return Err(Unsupported::Segment(shmid));
        }
        self.shmem = true;
        self.segments.push((shmid, size));
        self.push(Step::ShmGet {
            index: self.segments.len() - 1,
            size,
        })
    }

    fn shmat(&mut self, _: u32, shmid: u32, addr: u64, len: u64, prot: Prot) -> Result<(), Unsupported> {
        let index = self.segment(shmid)?;
        self.cover(addr, len);
        self.attached.insert(addr, len);
        self.push(Step::ShmAt {
            index,
            addr,
            len,
            write: prot.writable(),
        })
    }

    fn shmdt(&mut self, _: u32, addr: u64) -> Result<(), Unsupported> {
        let len = *self.attached.get(&addr).ok_or(Unsupported::Detach(addr))?;
        self.push(Step::ShmDt { addr, len })
    }

    fn shm_rmid(&mut self, _: u32, shmid: u32) -> Result<(), Unsupported> {
        let index = self.segment(shmid)?;
        self.push(Step::ShmRmid { index })
    }

    fn munmap(&mut self, _: u32, addr: u64, len: u64) -> Result<(), Unsupported> {
        self.push(Step::Unmap { addr, len })
    }

    fn mremap(&mut self, _: u32, old: u64, old_len: u64, new: u64, new_len: u64) -> Result<(), Unsupported> {
        self.cover(new, new_len);
        self.push(Step::Remap {
            old,
            old_len,
            new,
            new_len,
        })
    }

    fn mprotect(&mut self, _: u32, addr: u64, len: u64, prot: Prot) -> Result<(), Unsupported> {
        self.push(Step::Protect {
            addr,
            len,
            write: prot.writable(),
        })
    }

    fn madvise(&mut self, _: u32, addr: u64, len: u64, advice: u32) -> Result<(), Unsupported> {
        let advice = match advice {
            MADV_DONTNEED => HostAdvice::DontNeed,
            MADV_FREE => HostAdvice::Free,
            MADV_HUGEPAGE => HostAdvice::HugePage,
            MADV_NOHUGEPAGE => HostAdvice::NoHugePage,
            MADV_COLLAPSE => HostAdvice::Collapse,
            MADV_COLD => HostAdvice::Cold,
            MADV_PAGEOUT => HostAdvice::PageOut,
            MADV_REMOVE => HostAdvice::Remove,
            other => return Err(Unsupported::Advice(other)),
        };
        self.push(Step::Advise { addr, len, advice })
    }

    fn brk(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::ProgramImage)
    }

    fn fault(&mut self, _: u32, addr: u64, write: bool) -> Result<(), Unsupported> {
        self.push(Step::Fault { addr, write })
    }

    /// A kernel-mode fault faults the page as a user access does.
    fn kernel_fault(&mut self, _: u32, addr: u64, write: bool) -> Result<(), Unsupported> {
        self.push(Step::Fault { addr, write })
    }

    fn touch(&mut self, _: u32, addr: u64, len: u64, write: bool) -> Result<(), Unsupported> {
        self.push(Step::Touch { addr, len, write })
    }

    fn clone(&mut self, _: u32, child: u32, kind: CloneKind) -> Result<(), Unsupported> {
        if kind != CloneKind::Process {
            return Err(Unsupported::NotAProcess);
        }
        self.stack.push((child, Vec::new()));
        Ok(())
    }

    fn exit(&mut self, _: u32) -> Result<(), Unsupported> {
        self.pop();
        Ok(())
    }

    fn prctl_thp_disable(&mut self, _: u32, mode: ThpDisableMode) -> Result<(), Unsupported> {
        self.push(Step::ThpDisable(match mode {
            ThpDisableMode::Off => 0,
            ThpDisableMode::Completely => 1,
            ThpDisableMode::ExceptAdvised => 2,
        }))
    }

    fn drop_caches(&mut self, _: u32, mode: u8) -> Result<(), Unsupported> {
        self.push(Step::DropCaches(mode))
    }

    /// Time is not replayed natively.
    fn tick(&mut self, _: u64) -> Result<(), Unsupported> {
        Ok(())
    }

    fn khugepaged_wake(&mut self, _: u32) -> Result<(), Unsupported> {
        self.push(Step::KhugepagedWake)
    }

    /// A sleep is (khugepaged works meanwhile).
    fn sleep(&mut self, _: u32, ns: u64) -> Result<(), Unsupported> {
        self.push(Step::Sleep { ns })
    }

    fn exec_page(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::ProgramImage)
    }

    fn move_pages(&mut self, _: u32, _: u64, _: u64, _: u32) -> Result<(), Unsupported> {
        Err(Unsupported::MovePages)
    }

    fn memory_offline(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::Hotplug)
    }

    fn memory_online(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::Hotplug)
    }

    fn memory_add(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::Hotplug)
    }

    fn memory_remove(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::Hotplug)
    }

    fn memory_online_movable(&mut self, _: u32, _: u64) -> Result<(), Unsupported> {
        Err(Unsupported::Hotplug)
    }
}

/// A program descriptor a native run can hold.
fn checked_fd(fd: u32) -> Result<u32, Unsupported> {
    if (fd as usize) < native::MAX_FDS {
        Ok(fd)
    } else {
        Err(Unsupported::Fd(fd))
    }
}

/// Turns a trace into a plan. Each clone must be followed by its child's
/// events up to its exit, before the parent's next event.
pub fn plan(events: &[Event]) -> Result<Plan, NativeError> {
    let mut p = Planner {
        roots: Vec::new(),
        shmem: false,
        stack: Vec::new(),
        lo: u64::MAX,
        hi: 0,
        segments: Vec::new(),
        attached: Default::default(),
    };
    for (index, e) in events.iter().enumerate() {
        let entered = match e.pid() {
            Some(pid) => p.enter(pid),
            None => Ok(()),
        };
        entered
            .and_then(|()| e.dispatch(&mut p))
            .map_err(|reason| NativeError::Unsupported { index, reason })?;
    }
    // Processes still running at the end stop there.
    while !p.stack.is_empty() {
        p.pop();
    }
    let (lo, hi) = if p.lo > p.hi { (0, 0) } else { (p.lo, p.hi) };
    Ok(Plan {
        roots: p.roots,
        shmem: p.shmem,
        lo,
        hi,
    })
}

/// The window for a plan and the trace-to-host address offset.
pub struct Placement {
    pub window: Window,
    /// host address = trace address + delta (wrapping).
    pub delta: u64,
    /// User work run after every page a touch step accesses (calibrating
    /// the cost of faults taken with cold caches, as programs take them).
    pub user_work: Option<UserWork>,
    /// Every process of the plan runs on this cpu (per-cpu state, the
    /// LRU batches, swap clusters and memcg stocks, is then the model's).
    pub cpu: Option<usize>,
    /// ... and in this memory cgroup (its directory).
    pub memcg: Option<std::path::PathBuf>,
    /// Fold every cpu's pending vmstat deltas before each capture (node
    /// statistics such as `workingset_refault_anon` are then exact).
    pub exact_gauges: bool,
}

/// Reserves a window covering every mapping of the plan.
pub fn place(plan: &Plan, page_size: u64) -> Result<Placement, NativeError> {
    place_with(plan, page_size, false)
}

/// The span of one top-level page-table entry on x86_64 with four
/// levels (a PGD entry: 512 GiB).
const PGD_SPAN: u64 = 1 << 39;

/// [`place`]; with `own_tables`, the window keeps its offsets modulo the
/// span of a top-level entry and reserves the whole spans it touches, so
/// no other mapping shares its page tables below the root.
pub fn place_with(plan: &Plan, page_size: u64, own_tables: bool) -> Result<Placement, NativeError> {
    let host = host_page_size();
    if host != page_size {
        return Err(NativeError::PageSize { host, model: page_size });
    }
    let size = (plan.hi - plan.lo).max(host);
    let window = if own_tables {
        Window::reserve_owning(size, PGD_SPAN, plan.lo % PGD_SPAN)?
    } else {
        Window::reserve(size, ALIGN, plan.lo % ALIGN)?
    };
    let delta = window.base().wrapping_sub(plan.lo);
    Ok(Placement {
        window,
        delta,
        user_work: None,
        cpu: None,
        memcg: None,
        exact_gauges: false,
    })
}

/// The longest a run waits for khugepaged to go to sleep before it forks.
const KHUGEPAGED_ASLEEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What the native run of each root process gave.
#[derive(Clone, Debug)]
pub struct NativeRoot {
    pub exit: ChildExit,
    /// The folio layout of its mappings and the host's counters, read by
    /// the process itself after its last step (when asked for).
    pub layout: Option<FolioLayout>,
    pub counters: Option<HostCounters>,
    /// The host's counters read by this process just before the fork.
    pub before: Option<HostCounters>,
    /// khugepaged's events read by this process right after the layout,
    /// while the child was stopped (when a snapshot was asked for): a pass
    /// that worked between the child's counter snapshot and the layout
    /// read (in either order: in a memcg the child snapshots after the
    /// layout is read) shows as a difference from the snapshot's.
    pub khugepaged_after_layout: Option<KhugepagedEvents>,
}

/// Runs each root process in its own forked child, one after another;
/// with `snapshot`, each captures the host's counters right after its
/// last step and stops, and its folio layout is read from /proc/PID.
pub fn run(placement: &mut Placement, plan: &Plan, snapshot: bool) -> Result<Vec<NativeRoot>, NativeError> {
    let mut out = Vec::new();
    let (lo, hi) = (
        placement.window.base(),
        placement.window.base() + placement.window.size(),
    );
    // Started and stopped by the THP settings, which are set by now. Only
    // runs whose state is compared wait for it: timed runs (bench,
    // calibration) do not.
    let khugepaged = snapshot.then(crate::hostswap::khugepaged_pid).flatten();
    // Opened here, outside any cgroup the children join; without them
    // (unreadable files) a wake still works but is not waited for.
    let khugepaged_files = khugepaged.and_then(|_| native::KhugepagedFiles::open().ok());
    for (r, steps) in plan.roots.iter().enumerate() {
        if let Some(pid) = khugepaged {
            crate::hostswap::wait_khugepaged_asleep(pid, KHUGEPAGED_ASLEEP_TIMEOUT);
        }
        let result_file = std::env::temp_dir().join(format!("largo-counters-{}-{r}", std::process::id()));
        let mut capture = RawCapture::prepare_with(plan.shmem || placement.exact_gauges);
        // The page the child's stop is arranged through is shmem: made
        // before the capture, it is in both readings.
        let handshake = match (snapshot, &placement.memcg) {
            (true, Some(_)) => Some(largo_physmem::handshake::Handshake::new().map_err(NativeError::Host)?),
            _ => None,
        };
        // Read last thing before the fork, so nothing of this process
        // counts after it; the child reads its "after" into the same
        // prepared buffers, allocating nothing.
        capture.capture();
        let before = snapshot.then(|| capture.counters());
        let procs = |d: &Path| std::ffi::CString::new(d.join("cgroup.procs").into_os_string().into_encoded_bytes());
        let cgroup_files = match placement.memcg.as_deref() {
            Some(d) => Some((
                procs(d).expect("no NUL in a path"),
                procs(Path::new(crate::hostswap::MEMCG_ROOT)).expect("no NUL in a path"),
            )),
            None => None,
        };
        // The cgroup's files are read while the child is stopped.
        let mut stopped_memcg = placement.memcg.as_ref().map(|_| Default::default());
        let place = native::Placement {
            delta: placement.delta,
            work: placement.user_work.as_ref(),
            cpu: placement.cpu,
            cgroup: cgroup_files
                .as_ref()
                .map(|(join, leave)| native::CgroupStay { join, leave }),
            khugepaged: khugepaged_files.as_ref(),
        };
        let end = if snapshot {
            native::End::SnapshotAndStop {
                snapshot: &mut capture.snapshot,
                to: &result_file,
            }
        } else {
            native::End::Exit
        };
        let mut khugepaged_after_layout = None;
        let (exit, layout) = match native::run_forked_with(&mut placement.window, steps, place, end, handshake)? {
            Forked::Stopped(child) => {
                let layout = host_layout(child.pid(), lo, hi);
                khugepaged_after_layout = Some(KhugepagedEvents::read());
                let exit = match (placement.memcg.as_deref(), stopped_memcg.as_mut()) {
                    // Stopped before leaving its cgroup: read it, then let
                    // the child capture the rest and stop at its end.
                    (Some(dir), Some(memcg)) => {
                        *memcg = crate::counters::read_memcg(dir);
                        match child.resume_until_stopped()? {
                            Forked::Stopped(end) => end.resume()?,
                            Forked::Exited(exit) => exit,
                        }
                    }
                    _ => child.resume()?,
                };
                (exit, Some(layout?))
            }
            Forked::Exited(exit) => (exit, None),
        };
        if exit.code != Some(0) {
            let _ = std::fs::remove_file(&result_file);
            if exit.code == Some(native::SNAPSHOT_FAILED) {
                return Err(NativeError::Snapshot(result_file.display().to_string()));
            }
            if exit.code == Some(native::SETUP_FAILED) {
                return Err(NativeError::Setup);
            }
            return Err(NativeError::Task {
                index: exit.code.map_or(0, |c| (c - native::STEP_FAILED).max(0) as usize),
                code: exit.code,
                signal: exit.signal,
            });
        }
        let counters = if snapshot {
            let written = FileSnapshot::read_written(&result_file).map_err(|source| NativeError::Counters {
                path: result_file.display().to_string(),
                source,
            });
            let _ = std::fs::remove_file(&result_file);
            let mut c = capture.parse(written?);
            c.memcg = stopped_memcg.unwrap_or_default();
            Some(c)
        } else {
            None
        };
        out.push(NativeRoot {
            exit,
            layout,
            counters,
            before,
            khugepaged_after_layout,
        });
    }
    Ok(out)
}
