//! Property tests of the VM: random sequences of mmap (private anonymous,
//! and file and shared mappings that hold address space), munmap, mprotect,
//! mremap, brk, madvise, prctl, fork, exit, threads, page accesses,
//! drop_caches and knob writes, on tiny machines of every preset, under
//! random THP settings, with both invariant checkers (allocator, and page
//! tables / rmap / mapcounts / VM counters) after every step.
//!
//! A second property runs each sequence on two machines, touches made
//! access by access on one and as runs of accesses on the other, and
//! compares everything the machines show after every step.
//!
//! `PROPTEST_CASES=N` changes the number of sequences (default 400; the
//! comparison runs a quarter as many, plus one).

use largo_mm::swap::SwapSpec;
use largo_mm::vm::{Access, Advice, MapFlags, MremapFlags, Prot, ThpDisable};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::copy::{BatchCopy, CopyPolicy, MtCopy, Vanilla};
use largo_types::Preset;
use proptest::prelude::*;

/// A syscall or event; indices pick a live task, one of its VMAs and a
/// page range in it at run time (modulo what exists then).
#[derive(Clone, Debug)]
enum Op {
    Spawn,
    Thread {
        task: usize,
    },
    Fork {
        task: usize,
    },
    Exit {
        task: usize,
    },
    Mmap {
        task: usize,
        pages: u64,
        write: bool,
        populate: bool,
        noreserve: bool,
        /// 0: private anonymous; 1: a private file mapping (address
        /// space only); 2: shared anonymous (shmem).
        backing: u8,
    },
    /// Time passes (khugepaged, kcompactd, reporting run when due);
    /// `wake` first wakes khugepaged as a scan_sleep_millisecs write does.
    Sleep {
        ms: u64,
        wake: bool,
    },
    /// A memfd of `pages` mapped shared; its descriptor stays open or
    /// not, and a hole may be punched at `punch` (pages from, count).
    Memfd {
        task: usize,
        pages: u64,
        keep_fd: bool,
        punch: Option<(u64, u64)>,
        shrink_to: Option<u64>,
    },
    /// SysV segment `id` (made with `pages` if it does not exist) attached
    /// where the kernel finds room, every third page touched; then
    /// detached or not, removed or not.
    Sysv {
        task: usize,
        id: u32,
        pages: u64,
        detach: bool,
        rmid: bool,
    },
    Munmap {
        task: usize,
        range: Range,
    },
    Mprotect {
        task: usize,
        range: Range,
        write: bool,
    },
    Mremap {
        task: usize,
        range: Range,
        new_pages: u64,
        may_move: bool,
    },
    Madvise {
        task: usize,
        range: Range,
        advice: usize,
    },
    Touch {
        task: usize,
        range: Range,
        write: bool,
        stride: Stride,
    },
    /// Map and write a large share of memory (pressure, reclaim, OOM).
    Hog {
        task: usize,
        percent: u64,
    },
    Brk {
        task: usize,
        delta_pages: i64,
    },
    Prctl {
        task: usize,
        mode: usize,
    },
    DropCaches,
    Knob {
        path: usize,
        value: usize,
    },
    /// move_pages of every page of a range to a node, with a copy policy.
    MovePages {
        task: usize,
        range: Range,
        node: usize,
        policy: usize,
        fail_every: u32,
    },
    /// `echo 1 > /proc/sys/vm/compact_memory`.
    CompactMemory,
    /// `alloc_contig_range` of a naturally aligned range of 2^order pages
    /// chosen by index, freed again at once when it succeeds.
    AllocContig {
        at: u64,
        order: u32,
    },
    /// A memory block offline then (if that worked and `back`) online.
    Hotplug {
        block: usize,
        back: bool,
    },
    /// A block of the hot-add region added and onlined (movable or not),
    /// or, if present, offlined and removed.
    HotAdd {
        block: u64,
        movable: bool,
    },
}

/// The distance between a touch's accesses.
#[derive(Clone, Copy, Debug)]
enum Stride {
    /// Whole pages.
    Pages(u64),
    /// Bytes, less than a page: several accesses per page.
    Bytes(u64),
    /// `1 << shift` bytes: across PMD ranges, tables and the end of the
    /// address space.
    Shift(u32),
}

impl Stride {
    fn bytes(self, page: u64) -> u64 {
        match self {
            Stride::Pages(n) => n * page,
            Stride::Bytes(b) => b.min(page - 1),
            Stride::Shift(s) => 1 << s,
        }
    }
}

/// A page range inside one VMA of a task, chosen by indices.
#[derive(Clone, Copy, Debug)]
struct Range {
    vma: usize,
    first: u64,
    pages: u64,
}

const ADVICE: [Advice; 8] = [
    Advice::DontNeed,
    Advice::Free,
    Advice::HugePage,
    Advice::NoHugePage,
    Advice::Collapse,
    Advice::Cold,
    Advice::PageOut,
    Advice::Remove,
];
const PRCTL: [ThpDisable; 3] = [ThpDisable::Off, ThpDisable::Completely, ThpDisable::ExceptAdvised];
const MODES: [&str; 4] = ["always", "inherit", "madvise", "never"];

fn range() -> impl Strategy<Value = Range> {
    (
        any::<usize>(),
        any::<u64>(),
        prop_oneof![3 => 1u64..8, 2 => 8u64..600, 1 => Just(512u64), 1 => 512u64..2000],
    )
        .prop_map(|(vma, first, pages)| Range { vma, first, pages })
}

fn op() -> impl Strategy<Value = Op> {
    let task = any::<usize>();
    let pages = prop_oneof![3 => 1u64..64, 2 => 64u64..1100, 2 => Just(512u64), 1 => Just(1024u64), 1 => Just(16u64)];
    prop_oneof![
        2 => Just(Op::Spawn),
        1 => task.prop_map(|task| Op::Thread { task }),
        3 => task.prop_map(|task| Op::Fork { task }),
        2 => task.prop_map(|task| Op::Exit { task }),
        12 => (task, pages, any::<bool>(), prop::bool::weighted(0.05), prop::bool::weighted(0.1), prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)])
            .prop_map(|(task, pages, write, populate, noreserve, backing)| Op::Mmap { task, pages, write, populate, noreserve, backing }),
        5 => (task, range()).prop_map(|(task, range)| Op::Munmap { task, range }),
        3 => (task, range(), any::<bool>()).prop_map(|(task, range, write)| Op::Mprotect { task, range, write }),
        3 => (0u64..30_000, any::<bool>()).prop_map(|(ms, wake)| Op::Sleep { ms, wake }),
        3 => (task, 1u64..1200, any::<bool>(), proptest::option::of((0u64..1200, 1u64..600)), proptest::option::of(0u64..1200))
            .prop_map(|(task, pages, keep_fd, punch, shrink_to)| Op::Memfd { task, pages, keep_fd, punch, shrink_to }),
        2 => (task, 0u32..3, 1u64..600, any::<bool>(), any::<bool>())
            .prop_map(|(task, id, pages, detach, rmid)| Op::Sysv { task, id, pages, detach, rmid }),
        3 => (task, range(), 1u64..1100, any::<bool>())
            .prop_map(|(task, range, new_pages, may_move)| Op::Mremap { task, range, new_pages, may_move }),
        6 => (task, range(), 0..ADVICE.len()).prop_map(|(task, range, advice)| Op::Madvise { task, range, advice }),
        30 => (task, range(), prop::bool::weighted(0.8), prop_oneof![
            16 => Just(Stride::Pages(1)),
            4 => (2u64..20).prop_map(Stride::Pages),
            1 => (512u64..4096).prop_map(Stride::Bytes),
            1 => (21u32..48).prop_map(Stride::Shift),
        ])
            .prop_map(|(task, range, write, stride)| Op::Touch { task, range, write, stride }),
        2 => (task, 10u64..90).prop_map(|(task, percent)| Op::Hog { task, percent }),
        2 => (task, -300i64..600).prop_map(|(task, delta_pages)| Op::Brk { task, delta_pages }),
        1 => (task, 0..PRCTL.len()).prop_map(|(task, mode)| Op::Prctl { task, mode }),
        2 => Just(Op::DropCaches),
        4 => (task, range(), 0usize..2, 0usize..3, prop_oneof![2 => Just(0u32), 1 => 1u32..4])
            .prop_map(|(task, range, node, policy, fail_every)| Op::MovePages { task, range, node, policy, fail_every }),
        4 => (any::<usize>(), any::<usize>()).prop_map(|(path, value)| Op::Knob { path, value }),
        1 => Just(Op::CompactMemory),
        2 => (any::<u64>(), 0u32..=10).prop_map(|(at, order)| Op::AllocContig { at, order }),
        2 => (any::<usize>(), prop::bool::weighted(0.8)).prop_map(|(block, back)| Op::Hotplug { block, back }),
        2 => (any::<u64>(), any::<bool>()).prop_map(|(block, movable)| Op::HotAdd { block, movable }),
    ]
}

/// Knob writes the sequence may make: (path template, accepted values).
/// `{size}` is replaced by one of the machine's anon mTHP size directories.
fn knob_write(m: &Machine, path: usize, value: usize) -> (String, String) {
    let sizes: Vec<String> = m
        .geometry()
        .anon_orders()
        .map(|o| largo_mm::knobs::size_dir(m.geometry().page_shift, o))
        .collect();
    let max_none = (1u64 << m.geometry().pmd_order) - 1;
    match path % 8 {
        7 => (
            "largo/thp_policy".into(),
            [
                "static",
                "adaptive",
                "adaptive:grow=1,small=64",
                "ingens",
                "ingens:util=25",
            ][value % 5]
                .into(),
        ),
        0..=2 => (
            format!("transparent_hugepage/{}/enabled", sizes[value % sizes.len()]),
            MODES[(value / sizes.len()) % MODES.len()].to_string(),
        ),
        3 => (
            "transparent_hugepage/enabled".into(),
            ["always", "madvise", "never"][value % 3].into(),
        ),
        4 => (
            "transparent_hugepage/defrag".into(),
            ["always", "defer", "defer+madvise", "madvise", "never"][value % 5].into(),
        ),
        5 => (
            "transparent_hugepage/khugepaged/max_ptes_none".into(),
            [0, 64, max_none][value % 3].to_string(),
        ),
        _ => (
            [
                "transparent_hugepage/use_zero_page",
                "transparent_hugepage/shrink_underused",
                "transparent_hugepage/anon_beside_full",
                "largo/gigapageblocks",
            ][value % 4]
                .into(),
            ((value / 4) % 2).to_string(),
        ),
    }
}

fn machine() -> impl Strategy<Value = MachineConfig> {
    // Half the x86 machines swap (zram, a disk, or both), some with zswap,
    // and some run their tasks in a memcg of half their memory.
    let x86 = (
        prop_oneof![Just(32u64), Just(64), Just(96)],
        1usize..=3,
        0usize..6,
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(mem_mb, cpus, swap, zswap, memcg)| MachineConfig {
            memory_block_bytes: Some(2 << 20),
            maxmem_bytes: Some((mem_mb + 16) << 20),
            mem_bytes: mem_mb << 20,
            nr_cpus: cpus,
            kernel_reserved_bytes: 1 << 20,
            swap: match swap {
                0 => vec![SwapSpec::parse("8M").unwrap()],
                1 => vec![SwapSpec::parse("8M:disk").unwrap()],
                2 => vec![SwapSpec::parse("6M").unwrap(), SwapSpec::parse("4M:disk").unwrap()],
                _ => Vec::new(),
            },
            zswap: zswap && swap < 3,
            memcg_max_bytes: memcg.then_some((mem_mb / 2) << 20),
            ..MachineConfig::default()
        });
    let arm = (
        prop_oneof![Just(Preset::Arm64_4k), Just(Preset::Arm64_16k), Just(Preset::Arm64_64k)],
        1usize..=2,
    )
        .prop_map(|(preset, cpus)| MachineConfig {
            preset,
            mem_bytes: 128 << 20,
            nr_cpus: cpus,
            kernel_reserved_bytes: 1 << 20,
            ..MachineConfig::default()
        });
    let numa = (1usize..=2).prop_map(|cpus| MachineConfig {
        memory_block_bytes: Some(2 << 20),
        mem_bytes: 128 << 20,
        nr_nodes: 2,
        nr_cpus: cpus * 2,
        overrides: largo_types::GeometryOverrides {
            section_bits: Some(24),
            ..Default::default()
        },
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    });
    prop_oneof![3 => x86, 1 => arm, 2 => numa]
}

/// Initial THP settings: every size gets a random mode.
fn initial_knobs() -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((any::<usize>(), any::<usize>()), 0..12)
}

struct Runner {
    m: Machine,
    pids: Vec<u32>,
    step: usize,
    touches: TouchMode,
}

/// How `Op::Touch` makes its accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TouchMode {
    /// One `Vm::access` per page, each a machine operation of its own.
    PerAccess,
    /// One `Vm::access` per page, all in one machine operation (as the
    /// workload scheduler makes a quantum of accesses).
    OneOperation,
    /// `Vm::access_run` calls in one machine operation.
    Runs,
}

impl Runner {
    /// A live task chosen by index, spawning one if none is alive.
    fn task(&mut self, idx: usize) -> Option<u32> {
        let live: Vec<u32> = self.m.vm().tasks().filter(|t| t.alive).map(|t| t.pid).collect();
        if live.is_empty() {
            let pid = self.m.with_vm(0, |vm, ctx| vm.spawn(ctx)).ok()?;
            self.pids.push(pid);
            return Some(pid);
        }
        Some(live[idx % live.len()])
    }

    /// The address range a `Range` picks in `pid`'s VMAs.
    fn resolve(&self, pid: u32, r: Range) -> Option<(u64, u64)> {
        let maps = self.m.vm().maps(pid).ok()?;
        if maps.is_empty() {
            return None;
        }
        let v = maps[r.vma % maps.len()];
        let page = self.m.geometry().page_size();
        let nr = v.len() / page;
        let first = r.first % nr;
        Some((v.start + first * page, r.pages * page))
    }

    fn cpu(&self, pid: u32) -> usize {
        pid as usize % self.m.config().nr_cpus
    }

    /// A touch in one machine operation: page by page, or as runs of
    /// accesses. Both go on past SIGSEGV and SIGBUS and stop at OOM or an
    /// error, as the page-by-page loop of `apply` does.
    fn touch_in_one_operation(&mut self, cpu: usize, pid: u32, addr: u64, len: u64, stride: u64, write: bool) {
        let runs = self.touches == TouchMode::Runs;
        let debug = std::env::var("VM_PROPS_DEBUG").is_ok();
        self.m.with_vm(cpu, |vm, ctx| {
            let mut left = len.div_ceil(stride);
            let mut a = addr;
            while left > 0 {
                let (done, stop) = if runs {
                    let run = vm.access_run(ctx, pid, a, stride, left, write);
                    (run.done, run.stop)
                } else {
                    match vm.access(ctx, pid, a, write) {
                        Ok(Access::Hit | Access::Faulted | Access::NotModelled) => (1, None),
                        outcome => (1, Some(outcome)),
                    }
                };
                if debug {
                    eprintln!(
                        "touch at {a:#x} ({}): {done} accesses, stopped by {stop:?}",
                        if runs { "run" } else { "single" }
                    );
                }
                left -= done;
                a += done * stride;
                if matches!(stop, Some(Ok(Access::Oom) | Err(_))) {
                    break;
                }
            }
        });
    }

    /// Everything a test can see of the machine: every /proc and sysfs
    /// file largo renders, and each live task's VMAs, RSS and the pfn
    /// behind every page.
    fn fingerprint(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for f in largo_mm::stats::render::ProcFile::ALL {
            out.push_str(&f.render(&self.m));
        }
        let page = self.m.geometry().page_size();
        let vm = self.m.vm();
        let memmap = self.m.page_alloc().memmap();
        for t in vm.tasks().filter(|t| t.alive) {
            let _ = write!(out, "pid {} rss {:?}:", t.pid, vm.rss_anon(t.pid));
            for v in vm.maps(t.pid).unwrap_or_default() {
                let _ = write!(out, " [{:#x}-{:#x} {}]", v.start, v.end, v.perms());
                for a in (v.start..v.end).step_by(page as usize) {
                    if let Some(pfn) = vm.translate(t.pid, a) {
                        let _ = write!(out, " {a:#x}={pfn:#x}/{:?}", memmap.page(pfn).flags());
                    }
                }
            }
            out.push('\n');
        }
        // Every LRU list in order: reclaim reads them from the tail.
        let _ = writeln!(out, "lru {:?}", vm.lru_order());
        // Every table's entries, with their accessed, dirty and write bits,
        // and the page-table work counted.
        let pt = vm.page_tables();
        let _ = writeln!(out, "page-table work {:?}", pt.work);
        for (key, table) in pt.pages.iter() {
            let _ = write!(
                out,
                "table {key} level {} pfn {:#x} used {}:",
                table.level, table.pfn, table.nr_used
            );
            for (i, e) in table.entries.iter().enumerate().filter(|(_, e)| !e.is_none()) {
                let _ = write!(out, " {i}={:#x}", e.0);
            }
            out.push('\n');
        }
        out
    }

    fn apply(&mut self, op: &Op) {
        let page = self.m.geometry().page_size();
        match *op {
            Op::Spawn => {
                if let Ok(pid) = self.m.with_vm(0, |vm, ctx| vm.spawn(ctx)) {
                    self.pids.push(pid);
                }
            }
            Op::Thread { task } => {
                let Some(pid) = self.task(task) else { return };
                if let Ok(tid) = self.m.with_vm(0, |vm, _| vm.spawn_thread(pid)) {
                    self.pids.push(tid);
                }
            }
            Op::Fork { task } => {
                let Some(pid) = self.task(task) else { return };
                let cpu = self.cpu(pid);
                if let Ok(child) = self.m.with_vm(cpu, |vm, ctx| vm.fork(ctx, pid)) {
                    self.pids.push(child);
                }
            }
            Op::Exit { task } => {
                let Some(pid) = self.task(task) else { return };
                let cpu = self.cpu(pid);
                self.m.with_vm(cpu, |vm, ctx| vm.exit(ctx, pid)).unwrap();
            }
            Op::Mmap {
                task,
                pages,
                write,
                populate,
                noreserve,
                backing,
            } => {
                let Some(pid) = self.task(task) else { return };
                let prot = if write { Prot::READ | Prot::WRITE } else { Prot::READ };
                let mut flags = match backing {
                    0 => MapFlags::PRIVATE | MapFlags::ANONYMOUS,
                    1 => MapFlags::PRIVATE,
                    _ => MapFlags::SHARED | MapFlags::ANONYMOUS,
                };
                if populate {
                    flags |= MapFlags::POPULATE;
                }
                if noreserve {
                    flags |= MapFlags::NORESERVE;
                }
                let cpu = self.cpu(pid);
                let _ = self
                    .m
                    .with_vm(cpu, |vm, ctx| vm.mmap(ctx, pid, 0, pages * page, prot, flags));
            }
            Op::Sleep { ms, wake } => {
                if wake {
                    self.m.with_vm(0, |vm, _| vm.khugepaged_wake());
                }
                self.m.advance_time(ms * 1_000_000);
            }
            Op::Sysv {
                task,
                id,
                pages,
                detach,
                rmid,
            } => {
                let Some(pid) = self.task(task) else { return };
                let cpu = self.cpu(pid);
                let _ = self.m.with_vm(cpu, |vm, ctx| -> Result<(), largo_mm::vm::VmError> {
                    if !vm.sysv_segments().contains(&id) {
                        vm.shmget(id, pages * page)?;
                    }
                    let addr = vm.shmat(ctx, pid, id, 0, true)?;
                    for i in (0..pages).step_by(3) {
                        if vm.access(ctx, pid, addr + i * page, i % 2 == 0).is_err() {
                            break;
                        }
                    }
                    if detach {
                        vm.shmdt(ctx, pid, addr)?;
                    }
                    if rmid {
                        vm.shm_rmid(ctx, id)?;
                    }
                    Ok(())
                });
            }
            Op::Memfd {
                task,
                pages,
                keep_fd,
                punch,
                shrink_to,
            } => {
                let Some(pid) = self.task(task) else { return };
                let cpu = self.cpu(pid);
                let fd = 3 + (self.pids.len() as u32 % 8);
                let flags = MapFlags::SHARED;
                let _ = self.m.with_vm(cpu, |vm, ctx| -> Result<(), largo_mm::vm::VmError> {
                    vm.memfd_create(ctx, pid, fd)?;
                    vm.ftruncate(ctx, pid, fd, pages * page)?;
                    let addr = vm.mmap_fd(ctx, pid, 0, pages * page, Prot::READ | Prot::WRITE, flags, fd, 0)?;
                    for i in (0..pages).step_by(3) {
                        vm.access(ctx, pid, addr + i * page, i % 2 == 0)?;
                    }
                    if let Some((first, n)) = punch {
                        vm.punch_hole(ctx, pid, fd, first * page, n * page)?;
                    }
                    if let Some(to) = shrink_to {
                        vm.ftruncate(ctx, pid, fd, to * page)?;
                    }
                    if !keep_fd {
                        vm.close(ctx, pid, fd)?;
                    }
                    Ok(())
                });
            }
            Op::Munmap { task, range } => {
                let Some(pid) = self.task(task) else { return };
                let Some((addr, len)) = self.resolve(pid, range) else {
                    return;
                };
                let cpu = self.cpu(pid);
                let _ = self.m.with_vm(cpu, |vm, ctx| vm.munmap(ctx, pid, addr, len));
            }
            Op::Mprotect { task, range, write } => {
                let Some(pid) = self.task(task) else { return };
                let Some((addr, len)) = self.resolve(pid, range) else {
                    return;
                };
                let prot = if write { Prot::READ | Prot::WRITE } else { Prot::READ };
                let cpu = self.cpu(pid);
                let _ = self.m.with_vm(cpu, |vm, ctx| vm.mprotect(ctx, pid, addr, len, prot));
            }
            Op::Mremap {
                task,
                range,
                new_pages,
                may_move,
            } => {
                let Some(pid) = self.task(task) else { return };
                let Some((addr, len)) = self.resolve(pid, range) else {
                    return;
                };
                let flags = MremapFlags { may_move, fixed: None };
                let cpu = self.cpu(pid);
                let _ = self
                    .m
                    .with_vm(cpu, |vm, ctx| vm.mremap(ctx, pid, addr, len, new_pages * page, flags));
            }
            Op::Madvise { task, range, advice } => {
                let Some(pid) = self.task(task) else { return };
                let Some((addr, len)) = self.resolve(pid, range) else {
                    return;
                };
                let cpu = self.cpu(pid);
                let _ = self
                    .m
                    .with_vm(cpu, |vm, ctx| vm.madvise(ctx, pid, addr, len, ADVICE[advice]));
            }
            Op::Touch {
                task,
                range,
                write,
                stride,
            } => {
                let Some(pid) = self.task(task) else { return };
                let Some((addr, len)) = self.resolve(pid, range) else {
                    return;
                };
                let cpu = self.cpu(pid);
                if self.touches != TouchMode::PerAccess {
                    self.touch_in_one_operation(cpu, pid, addr, len, stride.bytes(page), write);
                    self.step += 1;
                    return;
                }
                // VM_PROPS_CHECK_EACH: check the invariants after every
                // access (to find the one that breaks them).
                let dbg = std::env::var("VM_PROPS_CHECK_EACH").is_ok();
                let mut a = addr;
                while a < addr + len {
                    let r = self.m.with_vm(cpu, |vm, ctx| vm.access(ctx, pid, a, write));
                    if dbg {
                        if let Err(e) = self.m.check() {
                            panic!("access {a:#x} ({r:?}): {e}");
                        }
                    }
                    match r {
                        Ok(Access::Oom) | Err(_) => break,
                        _ => {}
                    }
                    a += stride.bytes(page);
                }
            }
            Op::Hog { task, percent } => {
                let Some(pid) = self.task(task) else { return };
                let len = (self.m.config().mem_bytes * percent / 100).next_multiple_of(page);
                let cpu = self.cpu(pid);
                let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
                self.m.with_vm(cpu, |vm, ctx| {
                    let Ok(addr) = vm.mmap(ctx, pid, 0, len, Prot::READ | Prot::WRITE, flags) else {
                        return;
                    };
                    let mut a = addr;
                    while a < addr + len {
                        if !matches!(vm.access(ctx, pid, a, true), Ok(Access::Faulted | Access::Hit)) {
                            break;
                        }
                        a += page;
                    }
                });
            }
            Op::Brk { task, delta_pages } => {
                let Some(pid) = self.task(task) else { return };
                let Ok(cur) = self.m.vm().brk_of(pid) else { return };
                let new = cur.saturating_add_signed(delta_pages * page as i64);
                let cpu = self.cpu(pid);
                let _ = self.m.with_vm(cpu, |vm, ctx| vm.brk(ctx, pid, new));
            }
            Op::Prctl { task, mode } => {
                let Some(pid) = self.task(task) else { return };
                self.m
                    .with_vm(0, |vm, _| vm.prctl_thp_disable(pid, PRCTL[mode]))
                    .unwrap();
            }
            Op::DropCaches => self.m.with_vm(0, |vm, ctx| vm.drop_caches(ctx, 3)),
            Op::CompactMemory => {
                self.m.compact_memory();
            }
            Op::AllocContig { at, order } => {
                let nr = 1u64 << order.min(self.m.geometry().max_page_order);
                let max_pfn = self.m.layout().max_pfn;
                let start = (at % max_pfn) & !(nr - 1);
                let free = |m: &Machine| m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages();
                let free_before = free(&self.m);
                if let Ok(Some(folio)) = self.m.alloc_contig_range(start, start + nr) {
                    assert_eq!(folio.nr_pages(), nr);
                    assert!(
                        free(&self.m) + nr >= free_before,
                        "the range came out of the free pages"
                    );
                    self.m
                        .check()
                        .unwrap_or_else(|e| panic!("after alloc_contig_range: {e}"));
                    self.m.free_contig_folio(folio);
                }
                // Whatever migrated took one page for each it freed (a large
                // folio split for want of a destination frees its unmapped
                // pages: never fewer free pages).
                assert!(free(&self.m) >= free_before, "alloc_contig_range lost pages");
            }
            Op::HotAdd { block, movable } => {
                let Some(region) = self.m.layout().hotplug_region else {
                    return;
                };
                let pages = self.m.sparse().memory_block_bytes / page;
                let id = region.start / pages + block % (region.len() / pages);
                let managed = self.m.page_alloc().managed_pages();
                match self.m.sparse().block(id).map(|b| b.state) {
                    None => {
                        self.m.add_memory_block(0, id).unwrap();
                        let on = if movable {
                            self.m.online_memory_block_movable(id)
                        } else {
                            self.m.online_memory_block(id)
                        };
                        if on.is_ok() {
                            assert_eq!(self.m.page_alloc().managed_pages(), managed + pages);
                        }
                    }
                    Some(_) => {
                        if self.m.offline_memory_block(id).is_ok() {
                            self.m.remove_memory_block(id).unwrap();
                            assert!(self.m.sparse().block(id).is_none());
                        }
                    }
                }
            }
            Op::Hotplug { block, back } => {
                let ids: Vec<u64> = self.m.sparse().blocks.iter().map(|b| b.id).collect();
                let id = ids[block % ids.len()];
                let was_online = self.m.sparse().block(id).unwrap().state == largo_mm::sparse::MemoryBlockState::Online;
                let managed = self.m.page_alloc().managed_pages();
                if self.m.offline_memory_block(id).is_ok() {
                    self.m.check().unwrap_or_else(|e| panic!("after offlining {id}: {e}"));
                    if back && was_online {
                        self.m.online_memory_block(id).unwrap();
                        assert_eq!(
                            self.m.page_alloc().managed_pages(),
                            managed,
                            "online restores managed pages"
                        );
                    }
                } else {
                    assert_eq!(
                        self.m.page_alloc().managed_pages(),
                        managed,
                        "a refused offline changes nothing"
                    );
                }
            }
            Op::MovePages {
                task,
                range,
                node,
                policy,
                fail_every,
            } => {
                let Some(pid) = self.task(task) else { return };
                let Some((addr, len)) = self.resolve(pid, range) else {
                    return;
                };
                let nr_nodes = self.m.config().nr_nodes;
                let pages: Vec<u64> = (0..(len / page).min(64)).map(|i| addr + i * page).collect();
                let nodes = vec![(node % nr_nodes) as i32; pages.len()];
                let copy: Box<dyn CopyPolicy> = match policy {
                    0 => Box::new(Vanilla),
                    1 => Box::new(BatchCopy),
                    _ => Box::new(MtCopy::new(2, 16)),
                };
                let cpu = self.cpu(pid);
                // Failures injected in the middle of batches: every
                // fail_every-th folio is refused as busy.
                self.m.with_vm(cpu, |vm, _| vm.inject_migrate_failures(fail_every));
                let out = self
                    .m
                    .with_vm(cpu, |vm, ctx| {
                        vm.move_pages(ctx, pid, &pages, Some(&nodes), copy.as_ref())
                    })
                    .expect("valid move_pages");
                self.m.with_vm(cpu, |vm, _| vm.inject_migrate_failures(0));
                assert!(out.ret >= 0);
                // Every page that moved is now on the target node.
                let status = self
                    .m
                    .with_vm(cpu, |vm, ctx| vm.move_pages(ctx, pid, &pages, None, copy.as_ref()))
                    .unwrap()
                    .status;
                if out.ret == 0 {
                    for (i, s) in out.status.iter().enumerate() {
                        if *s == Some(nodes[i]) {
                            assert!(
                                status[i] == Some(nodes[i]) || status[i] == Some(-2),
                                "page {i}: moved to {} but now {:?}",
                                nodes[i],
                                status[i]
                            );
                        }
                    }
                }
            }
            Op::Knob { path, value } => {
                let (p, v) = knob_write(&self.m, path, value);
                self.m.set_knob(&p, &v).unwrap();
            }
        }
        self.step += 1;
    }
}

/// Free pages, on the buddy lists and the pcp lists.
fn free_pages(m: &Machine) -> u64 {
    m.page_alloc().nr_free_pages() + m.page_alloc().nr_pcp_pages()
}

fn run(config: MachineConfig, knobs: Vec<(usize, usize)>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut m = Machine::new(config).unwrap();
    for (path, value) in knobs {
        let (p, v) = knob_write(&m, path, value);
        if std::env::var("VM_PROPS_DEBUG").is_ok() {
            eprintln!("knob {p} = {v}");
        }
        m.set_knob(&p, &v).unwrap();
    }
    let free_at_boot = free_pages(&m);
    let mut r = Runner {
        m,
        pids: Vec::new(),
        step: 0,
        touches: TouchMode::PerAccess,
    };
    for op in &ops {
        r.apply(op);
        if let Err(e) = r.m.check() {
            return Err(TestCaseError::fail(format!("after step {} ({op:?}): {e}", r.step)));
        }
    }
    if std::env::var("VM_PROPS_DEBUG").is_ok() {
        let v = |n| largo_mm::stats::render::vmstat_value(&r.m, n);
        eprintln!(
            "{} steps {} pgfault {} thp_fault_alloc {} thp_split_page {} pgreuse {} oom {} anon_mapped {} dsplit {}",
            r.m.config().preset.name(),
            r.step,
            v("pgfault"),
            v("thp_fault_alloc"),
            v("thp_split_page"),
            v("pgreuse"),
            v("oom_kill"),
            r.m.vm().node_stats()[0].anon_mapped,
            r.m.vm().deferred_split_len()
        );
    }
    // Everything exits: all anonymous memory and page tables come back.
    let live: Vec<u32> = r.m.vm().tasks().filter(|t| t.alive).map(|t| t.pid).collect();
    for pid in live {
        r.m.with_vm(0, |vm, ctx| vm.exit(ctx, pid)).unwrap();
    }
    // SysV segments outlive their processes until removed.
    for id in r.m.vm().sysv_segments() {
        r.m.with_vm(0, |vm, ctx| vm.shm_rmid(ctx, id)).unwrap();
    }
    r.m.with_vm(0, |vm, ctx| vm.drop_caches(ctx, 2));
    // Exit drains no LRU batch (6.18): the folios only a batch still
    // holds go when the batches drain.
    r.m.lru_add_drain_all();
    // Blocks left offline come back online.
    let offline: Vec<u64> =
        r.m.sparse()
            .blocks
            .iter()
            .filter(|b| b.state == largo_mm::sparse::MemoryBlockState::Offline)
            .filter(|b| r.m.layout().hotplug_region.is_none_or(|h| b.start_pfn < h.start))
            .map(|b| b.id)
            .collect();
    for id in offline {
        r.m.online_memory_block(id)
            .map_err(|e| TestCaseError::fail(format!("onlining {id}: {e}")))?;
    }
    // Hot-added blocks leave again (nothing is left to hold them).
    if let Some(region) = r.m.layout().hotplug_region {
        let added: Vec<u64> =
            r.m.sparse()
                .blocks
                .iter()
                .filter(|b| b.start_pfn >= region.start)
                .map(|b| b.id)
                .collect();
        for id in added {
            r.m.offline_memory_block(id)
                .map_err(|e| TestCaseError::fail(format!("offlining hot-added {id}: {e}")))?;
            r.m.remove_memory_block(id)
                .map_err(|e| TestCaseError::fail(format!("removing {id}: {e}")))?;
        }
    }
    r.m.check()
        .map_err(|e| TestCaseError::fail(format!("after exit: {e}")))?;
    let stats = r.m.vm().node_stats();
    prop_assert!(stats
        .iter()
        .all(|s| s.anon_mapped == 0 && s.pagetable == 0 && s.anon_thps == 0));
    prop_assert_eq!(r.m.vm().total_lru(), Default::default());
    prop_assert_eq!(r.m.vm().deferred_split_len(), 0);
    let swap = &r.m.vm().swap;
    prop_assert_eq!(swap.free_pages(), swap.total_pages(), "every swap slot comes back");
    prop_assert_eq!(swap.zswap.stored_pages(), 0);
    let page = r.m.geometry().page_size();
    for (id, g) in r.m.vm().memcg.children() {
        prop_assert_eq!(
            g.memory.usage,
            r.m.vm().memcg.stocked(id) + g.kmem_pages,
            "memcg {} holds only its cpu stocks and the pages of its object stocks once every task exits",
            id
        );
        prop_assert_eq!(
            g.kmem_pages * page,
            r.m.vm().memcg.obj.held_bytes(id),
            "memcg {}'s kernel memory is the bytes its object stocks hold",
            id
        );
        prop_assert_eq!(swap.cgroup_pages(id as u16), 0);
    }
    prop_assert_eq!(
        free_pages(&r.m),
        free_at_boot,
        "every page comes back once all tasks exit"
    );
    Ok(())
}

/// The same sequence on two machines, each touch one machine operation
/// made page by page (`Vm::access`) on one and as runs (`Vm::access_run`)
/// on the other: after every step both machines look the same.
fn runs_match_single_accesses(
    config: MachineConfig,
    knobs: Vec<(usize, usize)>,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let boot = |touches: TouchMode| {
        let mut m = Machine::new(config.clone()).unwrap();
        // The machine of single accesses takes no other fast path either:
        // zaps page by page, lru_add batches moved folio by folio.
        let fast = touches == TouchMode::Runs;
        m.with_vm(0, |vm, _| {
            vm.set_zap_runs(fast);
            vm.set_lru_chains(fast);
        });
        for &(path, value) in &knobs {
            let (p, v) = knob_write(&m, path, value);
            m.set_knob(&p, &v).unwrap();
        }
        Runner {
            m,
            pids: Vec::new(),
            step: 0,
            touches,
        }
    };
    let (mut single, mut runs) = (boot(TouchMode::OneOperation), boot(TouchMode::Runs));
    for op in &ops {
        single.apply(op);
        runs.apply(op);
        let (a, b) = (single.fingerprint(), runs.fingerprint());
        if a != b {
            let line = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
            let (x, y) = (a.lines().nth(line).unwrap_or(""), b.lines().nth(line).unwrap_or(""));
            // Around the first difference: table lines are long.
            let at = x.bytes().zip(y.bytes()).position(|(p, q)| p != q).unwrap_or(0);
            let window = |l: &str| {
                l.get(at.saturating_sub(120)..(at + 120).min(l.len()))
                    .unwrap_or(l)
                    .to_string()
            };
            return Err(TestCaseError::fail(format!(
                "after step {} ({op:?}) the machines differ at line {line}, byte {at}:\n  single: ...{}...\n  runs:   ...{}...",
                single.step,
                window(x),
                window(y)
            )));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(400) / 4 + 1,
        max_shrink_iters: 1000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn access_runs_leave_the_machine_as_single_accesses_do(
        config in machine(),
        knobs in initial_knobs(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        runs_match_single_accesses(config, knobs, ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(400),
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_vm_sequences_keep_every_invariant(
        config in machine(),
        knobs in initial_knobs(),
        ops in prop::collection::vec(op(), 1..100),
    ) {
        run(config, knobs, ops)?;
    }
}

/// A swap-cache folio of a disk device paged out, then a MADV_HUGEPAGE
/// and drop_caches: everything must still come back at exit (a case the
/// random sequences found).
#[test]
fn pageout_to_disk_then_exit_leaves_nothing_on_the_lru() {
    let config = MachineConfig {
        mem_bytes: 64 << 20,
        nr_cpus: 1,
        kernel_reserved_bytes: 1 << 20,
        memory_block_bytes: Some(2 << 20),
        maxmem_bytes: Some(80 << 20),
        swap: vec![largo_mm::swap::SwapSpec::parse("8M:disk").unwrap()],
        ..MachineConfig::default()
    };
    let map = |write| Op::Mmap {
        task: 0,
        pages: 1,
        write,
        populate: false,
        noreserve: false,
        backing: 0,
    };
    let ops = vec![
        map(false),
        Op::Hog { task: 0, percent: 14 },
        Op::Madvise {
            task: 0,
            range: Range {
                vma: 1351990187104369302,
                first: 661584613099187101,
                pages: 2,
            },
            advice: 6,
        },
        map(false),
        Op::Madvise {
            task: 0,
            range: Range {
                vma: 2235347235320545908,
                first: 0,
                pages: 761,
            },
            advice: 2,
        },
        Op::DropCaches,
        Op::Sleep { ms: 0, wake: false },
    ];
    run(config, Vec::new(), ops).unwrap();
}

/// Memory charged over a memcg limit with zram, MADV_FREE, a fork and
/// writes: RSS counts stay right (a case the random sequences found).
#[test]
fn lazyfree_after_memcg_reclaim_then_fork_and_write_keeps_rss() {
    let config = MachineConfig {
        mem_bytes: 32 << 20,
        nr_cpus: 1,
        kernel_reserved_bytes: 1 << 20,
        memory_block_bytes: Some(2 << 20),
        maxmem_bytes: Some(48 << 20),
        swap: vec![largo_mm::swap::SwapSpec::parse("8M:zram").unwrap()],
        memcg_max_bytes: Some(16 << 20),
        ..MachineConfig::default()
    };
    let ops = vec![
        Op::Hog { task: 0, percent: 50 },
        Op::Spawn,
        Op::Exit {
            task: 4592357365273706917,
        },
        Op::Mmap {
            task: 0,
            pages: 1,
            write: false,
            populate: false,
            noreserve: false,
            backing: 0,
        },
        Op::Madvise {
            task: 0,
            range: Range {
                vma: 1666705305191508324,
                first: 6376515191107150836,
                pages: 1416,
            },
            advice: 1,
        },
        Op::Fork { task: 0 },
        Op::Touch {
            task: 0,
            range: Range {
                vma: 3739748372628291375,
                first: 14593741142220382655,
                pages: 1318,
            },
            write: true,
            stride: Stride::Pages(1),
        },
    ];
    run(config, vec![(269873824828063708, 7821640815807979904)], ops).unwrap();
}

/// A step on one sparse memfd: a write at a page index (spread over 2^24
/// pages, so the page cache's xarray is up to four levels tall), a hole
/// punched, or the file cut shorter (its xarray may lose levels).
#[derive(Clone, Debug)]
enum SparseOp {
    Write { index: u64 },
    Punch { first: u64, nr_pages: u64 },
    Truncate { nr_pages: u64 },
}

/// A page index with every magnitude equally likely: below 64, 4096,
/// 2^18 and 2^24 (one, two, three and four xarray levels).
fn sparse_index() -> impl Strategy<Value = u64> {
    (0u32..4, any::<u64>()).prop_map(|(levels, r)| r % (1u64 << (6 * (levels + 1))))
}

fn sparse_op() -> impl Strategy<Value = SparseOp> {
    prop_oneof![
        6 => sparse_index().prop_map(|index| SparseOp::Write { index }),
        2 => (sparse_index(), sparse_index()).prop_map(|(first, nr_pages)| SparseOp::Punch { first, nr_pages: nr_pages + 1 }),
        1 => sparse_index().prop_map(|nr_pages| SparseOp::Truncate { nr_pages }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(400) / 4 + 1,
        ..ProptestConfig::default()
    })]

    /// The xarray nodes a shmem file is charged for, kept change by
    /// change, are after every step the nodes its entries need, worked
    /// out from all of them (the checker), for small and large folios, as
    /// the tree grows and shrinks.
    #[test]
    fn sparse_shmem_files_keep_their_xarray_nodes(
        shmem_kb in prop_oneof![Just(None), Just(Some(16u64)), Just(Some(64)), Just(Some(2048))],
        ops in prop::collection::vec(sparse_op(), 1..60),
    ) {
        // At most 60 writes of up to 2 MiB each: 1 GiB is room enough.
        let mut m = Machine::new(MachineConfig {
            mem_bytes: 1 << 30,
            ..MachineConfig::default()
        })
        .unwrap();
        if let Some(kb) = shmem_kb {
            m.set_knob(&format!("transparent_hugepage/hugepages-{kb}kB/shmem_enabled"), "always").unwrap();
        }
        let page = m.geometry().page_size();
        let size_bytes = (1u64 << 24) * page;
        let (fd, rw) = (3, Prot::READ | Prot::WRITE);
        let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
        let addr = m
            .with_vm(0, |vm, ctx| -> Result<u64, largo_mm::vm::VmError> {
                vm.memfd_create(ctx, pid, fd)?;
                vm.ftruncate(ctx, pid, fd, size_bytes)?;
                vm.mmap_fd(ctx, pid, 0, size_bytes, rw, MapFlags::SHARED, fd, 0)
            })
            .unwrap();
        for (step, op) in ops.iter().enumerate() {
            match *op {
                SparseOp::Write { index } => {
                    // Past a truncation the write is SIGBUS: nothing changes.
                    m.with_vm(0, |vm, ctx| vm.access(ctx, pid, addr + index * page, true)).unwrap();
                }
                SparseOp::Punch { first, nr_pages } => {
                    m.with_vm(0, |vm, ctx| vm.punch_hole(ctx, pid, fd, first * page, nr_pages * page)).unwrap();
                }
                SparseOp::Truncate { nr_pages } => {
                    m.with_vm(0, |vm, ctx| vm.ftruncate(ctx, pid, fd, nr_pages * page)).unwrap();
                }
            }
            if let Err(e) = m.check() {
                return Err(TestCaseError::fail(format!("after step {step} ({op:?}): {e}")));
            }
        }
        m.with_vm(0, |vm, ctx| vm.exit(ctx, pid)).unwrap();
        m.check().map_err(|e| TestCaseError::fail(format!("after exit: {e}")))?;
        prop_assert_eq!(m.vm().node_stats()[0].shmem, 0, "the file goes with its last descriptor and mapping");
    }
}
