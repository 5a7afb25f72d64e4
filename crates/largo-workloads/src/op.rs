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
}

impl AdviceKind {
    pub fn to_vm(self) -> largo_mm::vm::Advice {
        use largo_mm::vm::Advice;
        match self {
            AdviceKind::DontNeed => Advice::DontNeed,
            AdviceKind::Free => Advice::Free,
            AdviceKind::HugePage => Advice::HugePage,
            AdviceKind::NoHugePage => Advice::NoHugePage,
        }
    }
}

/// One step of a task's script.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `mmap(NULL, len, PROT_READ[|PROT_WRITE], MAP_PRIVATE|MAP_ANONYMOUS)`;
    /// the address goes to `slot`.
    Mmap { slot: Slot, len: u64, write: bool },
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
}

/// An executed operation with the addresses the model gave its regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResolvedOp {
    Mmap {
        addr: u64,
        len: u64,
        write: bool,
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
