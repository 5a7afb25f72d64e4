//! The operations a workload's tasks perform: memory syscalls and page
//! touches, on regions named by slot numbers (a script does not know where
//! mmap will place a region). [`ResolvedOp`] is the same with the
//! addresses the model chose, as a host replay needs them.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Index of a region in a task's slot table.
pub type Slot = usize;

/// In which order a touch visits its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TouchOrder {
    Sequential,
    /// A permutation drawn from a ChaCha8 generator with this seed.
    Random {
        seed: u64,
    },
}

/// madvise advice a script can give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdviceKind {
    DontNeed,
    Free,
    HugePage,
    NoHugePage,
    Cold,
    PageOut,
    Collapse,
}

impl AdviceKind {
    pub fn to_vm(self) -> largo_mm::vm::Advice {
        use largo_mm::vm::Advice;
        match self {
            AdviceKind::DontNeed => Advice::DontNeed,
            AdviceKind::Free => Advice::Free,
            AdviceKind::HugePage => Advice::HugePage,
            AdviceKind::NoHugePage => Advice::NoHugePage,
            AdviceKind::Cold => Advice::Cold,
            AdviceKind::PageOut => Advice::PageOut,
            AdviceKind::Collapse => Advice::Collapse,
        }
    }

    /// The `MADV_*` value.
    pub fn raw(self) -> u32 {
        match self {
            AdviceKind::DontNeed => largo_trace::MADV_DONTNEED,
            AdviceKind::Free => largo_trace::MADV_FREE,
            AdviceKind::HugePage => largo_trace::MADV_HUGEPAGE,
            AdviceKind::NoHugePage => largo_trace::MADV_NOHUGEPAGE,
            AdviceKind::Cold => largo_trace::MADV_COLD,
            AdviceKind::PageOut => largo_trace::MADV_PAGEOUT,
            AdviceKind::Collapse => largo_trace::MADV_COLLAPSE,
        }
    }
}

/// One step of a task's script.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `mmap(NULL, len, PROT_READ[|PROT_WRITE], MAP_PRIVATE|MAP_ANONYMOUS)`
    /// (MAP_SHARED with `shared`: shmem); the address goes to `slot`.
    Mmap {
        slot: Slot,
        len: u64,
        write: bool,
        shared: bool,
    },
    /// `munmap(slot + offset, len)`.
    Munmap { slot: Slot, offset: u64, len: u64 },
    /// One access per `stride` bytes of `[slot + offset, + len)`, in `order`.
    Touch {
        slot: Slot,
        offset: u64,
        len: u64,
        stride: u64,
        write: bool,
        order: TouchOrder,
    },
    /// `madvise(slot + offset, len, advice)`.
    Madvise {
        slot: Slot,
        offset: u64,
        len: u64,
        advice: AdviceKind,
    },
    /// `fork()`: the child runs `child` (with a copy of the slot table)
    /// and exits; the parent goes on.
    Fork { child: Vec<Op> },
    /// Wait until every child of this task has exited.
    Wait,
    /// `echo MODE > /proc/sys/vm/drop_caches`.
    DropCaches { mode: u32 },
    /// Sleep: `ns` of simulated time pass (delayed work such as free page
    /// reporting runs meanwhile).
    Idle { ns: u64 },
    /// `move_pages` of every base page of `[slot + offset, + len)` to `node`.
    MovePages {
        slot: Slot,
        offset: u64,
        len: u64,
        node: u32,
    },
    /// `memfd_create`, `ftruncate(len)`, `mmap(MAP_SHARED)` of it all and
    /// `close`: a memfd mapping (the file lives on in it); the address goes
    /// to `slot`.
    MmapMemfd { slot: Slot, len: u64, write: bool },
    /// `nanosleep(ns)`: time passes for the machine's background work
    /// (khugepaged), and the host runner sleeps it too.
    Sleep { ns: u64 },
    /// Wakes khugepaged (a write of its `scan_sleep_millisecs`).
    KhugepagedWake,
    /// User accesses over `[slot + offset, + len)`, already mapped:
    /// `passes` passes in `pattern`, run through the TLB model (no kernel
    /// work; not replayed on a host).
    Stream {
        slot: Slot,
        offset: u64,
        len: u64,
        pattern: crate::access::Pattern,
        passes: u64,
        seed: u64,
    },
}

/// An executed operation with the addresses the model gave its regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResolvedOp {
    Mmap {
        addr: u64,
        len: u64,
        write: bool,
        shared: bool,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Touch {
        addr: u64,
        len: u64,
        stride: u64,
        write: bool,
        order: TouchOrder,
    },
    Madvise {
        addr: u64,
        len: u64,
        advice: AdviceKind,
    },
    Fork {
        child: Vec<ResolvedOp>,
    },
    Wait,
    DropCaches {
        mode: u32,
    },
    Idle {
        ns: u64,
    },
    MovePages {
        addr: u64,
        len: u64,
        node: u32,
    },
    MmapMemfd {
        addr: u64,
        len: u64,
        write: bool,
        fd: u32,
    },
    Sleep {
        ns: u64,
    },
    KhugepagedWake,
}

/// The offsets (multiples of `stride` below `len`) a touch visits, in order.
pub fn touch_offsets(len: u64, stride: u64, order: TouchOrder) -> Vec<u64> {
    let n = len.div_ceil(stride.max(1));
    let mut idx: Vec<u64> = (0..n).collect();
    if let TouchOrder::Random { seed } = order {
        idx.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    }
    idx.into_iter().map(|i| i * stride).collect()
}

/// The executed operations of a run as a trace (root tasks one after
/// another, each fork followed by everything its child did and its exit),
/// so the host runner and the replay take one input. Random-order and
/// strided touches become one fault event per access.
pub fn resolved_to_events(roots: &[Vec<ResolvedOp>], page_size: u64) -> Vec<largo_trace::Event> {
    let mut out = Vec::new();
    let mut next_pid = roots.len() as u32 + 1;
    for (i, ops) in roots.iter().enumerate() {
        let pid = i as u32 + 1;
        emit(ops, pid, page_size, &mut next_pid, &mut out);
        out.push(largo_trace::Event::Exit { pid });
    }
    out
}

fn emit(ops: &[ResolvedOp], pid: u32, page_size: u64, next_pid: &mut u32, out: &mut Vec<largo_trace::Event>) {
    use largo_trace::{Event, MapFlags as TF, Prot as TP};
    for op in ops {
        match *op {
            ResolvedOp::Mmap {
                addr,
                len,
                write,
                shared,
            } => out.push(Event::Mmap {
                pid,
                addr,
                len,
                prot: TP(TP::READ | if write { TP::WRITE } else { 0 }),
                flags: TF(if shared { TF::SHARED } else { TF::PRIVATE } | TF::ANONYMOUS),
            }),
            ResolvedOp::Munmap { addr, len } => out.push(Event::Munmap { pid, addr, len }),
            ResolvedOp::Madvise { addr, len, advice } => out.push(Event::Madvise {
                pid,
                addr,
                len,
                advice: advice.raw(),
            }),
            ResolvedOp::Touch {
                addr,
                len,
                stride,
                write,
                order,
            } => {
                if order == TouchOrder::Sequential && stride == page_size && addr % page_size == 0 {
                    out.push(Event::Touch { pid, addr, len, write });
                } else {
                    for off in touch_offsets(len, stride, order) {
                        out.push(Event::Fault {
                            pid,
                            addr: addr + off,
                            write,
                        });
                    }
                }
            }
            ResolvedOp::Fork { ref child } => {
                let c = *next_pid;
                *next_pid += 1;
                out.push(Event::Clone {
                    pid,
                    child: c,
                    kind: largo_trace::CloneKind::Process,
                });
                emit(child, c, page_size, next_pid, out);
                out.push(Event::Exit { pid: c });
            }
            ResolvedOp::Wait => {}
            ResolvedOp::DropCaches { mode } => out.push(Event::DropCaches { pid, mode: mode as u8 }),
            ResolvedOp::Idle { ns } => out.push(Event::Tick { ns }),
            ResolvedOp::MovePages { addr, len, node } => out.push(Event::MovePages { pid, addr, len, node }),
            ResolvedOp::MmapMemfd { addr, len, write, fd } => {
                out.push(Event::MemfdCreate { pid, fd });
                out.push(Event::Ftruncate { pid, fd, len });
                out.push(Event::MmapFd {
                    pid,
                    addr,
                    len,
                    prot: TP(TP::READ | if write { TP::WRITE } else { 0 }),
                    flags: TF(TF::SHARED),
                    fd,
                    offset: 0,
                });
                out.push(Event::Close { pid, fd });
            }
            ResolvedOp::Sleep { ns } => out.push(Event::Sleep { pid, ns }),
            ResolvedOp::KhugepagedWake => out.push(Event::KhugepagedWake { pid }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_touches_visit_every_page_once_deterministically() {
        let a = touch_offsets(1 << 20, 4096, TouchOrder::Random { seed: 7 });
        let b = touch_offsets(1 << 20, 4096, TouchOrder::Random { seed: 7 });
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, touch_offsets(1 << 20, 4096, TouchOrder::Sequential));
        assert_ne!(a, sorted, "a permutation, not the identity");
    }
}
