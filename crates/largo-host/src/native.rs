//! Running a workload's operations natively on the host: the addresses the
//! model chose are translated into a [`Window`] of this process that keeps
//! their alignment up to 1 GiB, and each root task runs in a forked child
//! (a fresh copy of this process) whose resource usage comes back.

use std::ffi::CStr;

use largo_physmem::host::{fork_and_wait, host_page_size, prefault_stack, ChildExit, HostAdvice, HostError, Window};
use largo_workloads::op::{touch_offsets, AdviceKind, ResolvedOp, TouchOrder};

/// Addresses keep their offset modulo this in the window.
const ALIGN: u64 = 1 << 30;
/// Stack depth prefaulted before forking, so the child faults no new stack page.
const STACK_PREFAULT_BYTES: usize = 192 << 10;

/// Why a native run could not happen or failed.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    #[error("the host's pages are {host} bytes, the model's {model}: the runs would not compare")]
    PageSize { host: u64, model: u64 },
    #[error("a forked task must run to completion before its parent continues (Fork then Wait): {0}")]
    Interleaving(String),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("the native task failed at operation {index} ({what}); exit {code:?}, signal {signal:?}")]
    Task {
        index: usize,
        what: &'static str,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Every mmap of a tree: (address, length).
fn mappings(ops: &[ResolvedOp], out: &mut Vec<(u64, u64)>) {
    for op in ops {
        match op {
            ResolvedOp::Mmap { addr, len, .. } => out.push((*addr, *len)),
            ResolvedOp::Fork { child } => mappings(child, out),
            _ => {}
        }
    }
}

/// Checks that every fork is followed by a wait before anything else:
/// the host runs a child to completion at the fork.
fn check_forks(ops: &[ResolvedOp]) -> Result<(), NativeError> {
    for (i, op) in ops.iter().enumerate() {
        if let ResolvedOp::Fork { child } = op {
            if !matches!(ops.get(i + 1), Some(ResolvedOp::Wait) | Some(ResolvedOp::Fork { .. })) {
                return Err(NativeError::Interleaving(format!(
                    "operation {} after a fork is {:?}",
                    i + 1,
                    ops.get(i + 1)
                )));
            }
            check_forks(child)?;
        }
    }
    Ok(())
}

/// The host window for a run and the model-to-host address offset.
pub struct Placement {
    pub window: Window,
    /// host address = model address + delta (wrapping).
    pub delta: u64,
}

/// Reserves a window covering every mapping of `roots`.
pub fn place(roots: &[Vec<ResolvedOp>], model_page_size: u64) -> Result<Placement, NativeError> {
    let host = host_page_size();
    if host != model_page_size {
        return Err(NativeError::PageSize {
            host,
            model: model_page_size,
        });
    }
    for r in roots {
        check_forks(r)?;
    }
    let mut maps = Vec::new();
    for r in roots {
        mappings(r, &mut maps);
    }
    let lo = maps.iter().map(|m| m.0).min().unwrap_or(0);
    let hi = maps.iter().map(|m| m.0 + m.1).max().unwrap_or(lo + host);
    let window = Window::reserve(hi - lo, ALIGN, lo % ALIGN)?;
    let delta = window.base().wrapping_sub(lo);
    Ok(Placement { window, delta })
}

/// Runs each root task in its own forked child, one after another.
pub fn run(placement: &mut Placement, roots: &[Vec<ResolvedOp>]) -> Result<Vec<ChildExit>, NativeError> {
    let mut exits = Vec::new();
    for ops in roots {
        prefault_stack(STACK_PREFAULT_BYTES);
        let (window, delta) = (&mut placement.window, placement.delta);
        let exit = fork_and_wait(|| match exec(ops, window, delta) {
            Ok(()) => 0,
            Err(index) => 100 + index.min(100) as i32,
        })?;
        if exit.code != Some(0) {
            let index = exit.code.map_or(0, |c| (c - 100).max(0) as usize);
            return Err(NativeError::Task {
                index,
                what: ops.get(index).map_or("?", op_name),
                code: exit.code,
                signal: exit.signal,
            });
        }
        exits.push(exit);
    }
    Ok(exits)
}

fn op_name(op: &ResolvedOp) -> &'static str {
    match op {
        ResolvedOp::Mmap { .. } => "mmap",
        ResolvedOp::Munmap { .. } => "munmap",
        ResolvedOp::Touch { .. } => "touch",
        ResolvedOp::Madvise { .. } => "madvise",
        ResolvedOp::Fork { .. } => "fork",
        ResolvedOp::Wait => "wait",
        ResolvedOp::DropCaches { .. } => "drop_caches",
    }
}

fn advice(a: AdviceKind) -> HostAdvice {
    match a {
        AdviceKind::DontNeed => HostAdvice::DontNeed,
        AdviceKind::Free => HostAdvice::Free,
        AdviceKind::HugePage => HostAdvice::HugePage,
        AdviceKind::NoHugePage => HostAdvice::NoHugePage,
    }
}

const DROP_CACHES: &CStr = c"/proc/sys/vm/drop_caches";

/// Executes one task's operations (in the forked child). Returns the
/// index of the failing operation.
fn exec(ops: &[ResolvedOp], w: &mut Window, delta: u64) -> Result<(), usize> {
    let at = |a: u64| a.wrapping_add(delta);
    for (i, op) in ops.iter().enumerate() {
        let ok = match op {
            ResolvedOp::Mmap { addr, len, write } => w.map(at(*addr), *len, *write).is_ok(),
            ResolvedOp::Munmap { addr, len } => w.unmap(at(*addr), *len).is_ok(),
            ResolvedOp::Madvise { addr, len, advice: a } => w.madvise(at(*addr), *len, advice(*a)).is_ok(),
            ResolvedOp::Touch {
                addr,
                len,
                stride,
                write,
                order,
            } => {
                let base = at(*addr);
                let stride = (*stride).max(1);
                match order {
                    TouchOrder::Sequential => {
                        let n = len.div_ceil(stride);
                        w.touch((0..n).map(|k| base + k * stride), *write).is_ok()
                    }
                    TouchOrder::Random { .. } => {
                        let offsets = touch_offsets(*len, stride, *order);
                        w.touch(offsets.into_iter().map(|o| base + o), *write).is_ok()
                    }
                }
            }
            ResolvedOp::Fork { child } => {
                prefault_stack(STACK_PREFAULT_BYTES);
                fork_and_wait(|| if exec(child, w, delta).is_ok() { 0 } else { 1 }).is_ok_and(|e| e.code == Some(0))
            }
            ResolvedOp::Wait => true,
            ResolvedOp::DropCaches { mode } => {
                let text = [b'0' + (*mode as u8 % 10)];
                largo_physmem::host::write_file_no_alloc(DROP_CACHES, &text)
            }
        };
        if !ok {
            return Err(i);
        }
    }
    Ok(())
}
