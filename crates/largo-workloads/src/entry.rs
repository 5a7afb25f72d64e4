//! Kernel time by entry: which way into the kernel each piece of work
//! came through (a page fault, munmap, mmap, ..., a kernel thread), as
//! the seed series' tables break kernel cycles down.
//!
//! A run keeps an [`EntryLedger`]: each operation or trace event names its
//! entry, and when the entry changes the work counted since the last
//! change (the cost model's term counts, [`crate::cost::TermInput`]) is
//! charged to the entry that was running. Compaction's terms (direct
//! compaction inside a fault included) are charged to `compaction`,
//! reclaim's to `reclaim` (the task's own) or `kswapd` (a kernel
//! thread's), and work done by woken kernel threads while time passes to
//! `kthreads`.

use std::collections::BTreeMap;

use largo_mm::Machine;
use largo_trace::Event;
use serde::Serialize;

use crate::cost::{TermInput, TERMS};
use crate::op::Op;

/// A way into the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// Page faults (data aborts): `handle_mm_fault` and what it calls.
    Fault,
    Munmap,
    Mmap,
    Mprotect,
    Mremap,
    Madvise,
    Brk,
    /// fork/clone: `copy_process`, `dup_mmap`.
    Fork,
    /// exit/exit_group: `exit_mmap`.
    Exit,
    /// execve: the old address space torn down.
    Execve,
    /// Compaction (direct, inside an allocation, and kcompactd's).
    Compaction,
    /// The task's own reclaim: direct and memcg reclaim inside an
    /// allocation or charge (MADV_PAGEOUT's stays in `madvise`).
    Reclaim,
    /// kswapd's reclaim (and khugepaged's, for its allocations): a kernel
    /// thread beside the task.
    Kswapd,
    /// Kernel threads woken while time passes (khugepaged, kcompactd, free
    /// page reporting).
    Kthreads,
    /// Page migration a task asked for: move_pages (its copy, the work
    /// around it, the TLB flushes).
    Migrate,
    /// Everything else (drop_caches, memfd and SysV calls, memory
    /// hotplug).
    Other,
}

impl Entry {
    pub const ALL: [Entry; 16] = [
        Entry::Fault,
        Entry::Munmap,
        Entry::Mmap,
        Entry::Mprotect,
        Entry::Mremap,
        Entry::Madvise,
        Entry::Brk,
        Entry::Fork,
        Entry::Exit,
        Entry::Execve,
        Entry::Compaction,
        Entry::Reclaim,
        Entry::Kswapd,
        Entry::Kthreads,
        Entry::Migrate,
        Entry::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Entry::Fault => "fault",
            Entry::Munmap => "munmap",
            Entry::Mmap => "mmap",
            Entry::Mprotect => "mprotect",
            Entry::Mremap => "mremap",
            Entry::Madvise => "madvise",
            Entry::Brk => "brk",
            Entry::Fork => "fork",
            Entry::Exit => "exit",
            Entry::Execve => "execve",
            Entry::Compaction => "compaction",
            Entry::Reclaim => "reclaim",
            Entry::Kswapd => "kswapd",
            Entry::Kthreads => "kthreads",
            Entry::Migrate => "migrate",
            Entry::Other => "other",
        }
    }

    /// The entry of a workload operation.
    pub fn of_op(op: &Op) -> Entry {
        match op {
            Op::Touch { .. } | Op::Stream { .. } => Entry::Fault,
            Op::Mmap { .. } | Op::MmapMemfd { .. } => Entry::Mmap,
            Op::Munmap { .. } => Entry::Munmap,
            Op::Madvise { .. } => Entry::Madvise,
            Op::Fork { .. } => Entry::Fork,
            Op::Idle { .. } | Op::Sleep { .. } | Op::KhugepagedWake => Entry::Kthreads,
            Op::MovePages { .. } => Entry::Migrate,
            Op::Wait | Op::DropCaches { .. } => Entry::Other,
        }
    }

    /// The entry of a trace event.
    pub fn of_event(e: &Event) -> Entry {
        match e {
            Event::Fault { .. } | Event::KernelFault { .. } | Event::Touch { .. } | Event::ExecPage { .. } => {
                Entry::Fault
            }
            Event::Mmap { .. } | Event::MmapFd { .. } => Entry::Mmap,
            Event::Munmap { .. } => Entry::Munmap,
            Event::Mprotect { .. } => Entry::Mprotect,
            Event::Mremap { .. } => Entry::Mremap,
            Event::Madvise { .. } => Entry::Madvise,
            Event::Brk { .. } => Entry::Brk,
            Event::Clone { .. } => Entry::Fork,
            Event::Exit { .. } => Entry::Exit,
            // The new image's initial mappings and brk are made by execve.
            Event::Exec { .. } | Event::Vma { .. } | Event::BrkStart { .. } => Entry::Execve,
            Event::Sleep { .. } | Event::KhugepagedWake { .. } | Event::Tick { .. } => Entry::Kthreads,
            Event::MovePages { .. } => Entry::Migrate,
            _ => Entry::Other,
        }
    }
}

/// Term counts (in [`TERMS`] order).
pub type TermCounts = [u64; crate::cost::N_TERMS];

/// Terms charged to `compaction` whatever the entry.
const COMPACTION_TERMS: [&str; 4] = ["compact_scan", "page_migrate", "migrate_folio", "migrate_flush"];

/// Terms charged to `reclaim` whatever the entry, but `madvise`
/// (MADV_PAGEOUT reclaims inside the system call).
const RECLAIM_TERMS: [&str; 2] = ["reclaim_folio", "swap_out"];

/// Terms charged to `kswapd` whatever the entry.
const KSWAPD_TERMS: [&str; 2] = ["kswapd_folio", "kswapd_swap_out"];

/// Entries whose work a host charges to kernel threads, not to the
/// program's own system time.
pub const KERNEL_THREAD_ENTRIES: [Entry; 2] = [Entry::Kthreads, Entry::Kswapd];

/// Work by entry over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EntryCounts {
    pub by_entry: BTreeMap<Entry, TermCounts>,
}

/// Where a term's work goes, whatever the current entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TermClass {
    Compaction,
    Reclaim,
    Kswapd,
    Entry,
}

impl TermClass {
    fn of(term: &str) -> TermClass {
        if COMPACTION_TERMS.contains(&term) {
            TermClass::Compaction
        } else if RECLAIM_TERMS.contains(&term) {
            TermClass::Reclaim
        } else if KSWAPD_TERMS.contains(&term) {
            TermClass::Kswapd
        } else {
            TermClass::Entry
        }
    }
}

/// The running attribution.
pub struct EntryLedger {
    current: Entry,
    last: TermCounts,
    /// Each term's class, in [`TERMS`] order.
    classes: [TermClass; crate::cost::N_TERMS],
    /// Work charged so far, by `Entry as usize` (`None`: nothing yet).
    charged: [Option<TermCounts>; Entry::ALL.len()],
}

impl EntryLedger {
    pub fn new(m: &Machine) -> EntryLedger {
        EntryLedger {
            current: Entry::Other,
            last: TermInput::read(m).counts(),
            classes: std::array::from_fn(|i| TermClass::of(TERMS[i].name)),
            charged: [None; Entry::ALL.len()],
        }
    }

    /// Work from now on belongs to `entry`.
    pub fn enter(&mut self, m: &Machine, entry: Entry) {
        if entry != self.current {
            self.close(m);
            self.current = entry;
        }
    }

    /// Charges the work since the last change to the current entry (no
    /// allocation: the scheduler closes an entry twice per round).
    pub fn close(&mut self, m: &Machine) {
        let now = TermInput::read(m).counts();
        for i in 0..now.len() {
            let d = now[i].saturating_sub(self.last[i]);
            if d > 0 {
                let entry = self.entry_of_term(self.classes[i]);
                self.charged[entry as usize].get_or_insert([0; crate::cost::N_TERMS])[i] += d;
            }
        }
        self.last = now;
    }

    /// The entry a term's work counted now belongs to.
    fn entry_of_term(&self, class: TermClass) -> Entry {
        // move_pages (`migrate`) and hotplug (`other`) migrate pages too:
        // only migration elsewhere is compaction's.
        match class {
            TermClass::Compaction if !matches!(self.current, Entry::Other | Entry::Migrate) => Entry::Compaction,
            TermClass::Reclaim if self.current != Entry::Madvise => Entry::Reclaim,
            TermClass::Kswapd => Entry::Kswapd,
            _ => self.current,
        }
    }

    /// What has been charged so far, by entry.
    fn counts(&self) -> EntryCounts {
        let by_entry = Entry::ALL
            .iter()
            .filter_map(|&e| self.charged[e as usize].map(|c| (e, c)))
            .collect();
        EntryCounts { by_entry }
    }

    /// Closes the ledger: everything counted is charged.
    pub fn finish(mut self, m: &Machine) -> EntryCounts {
        self.close(m);
        self.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ledger files work under `entry as usize`: `ALL` must list
    /// the entries in declaration order.
    #[test]
    fn all_lists_entries_by_discriminant() {
        for (i, e) in Entry::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i, "{e:?}");
        }
    }

    #[test]
    fn terms_of_other_paths_keep_their_class() {
        assert_eq!(TermClass::of("page_migrate"), TermClass::Compaction);
        assert_eq!(TermClass::of("swap_out"), TermClass::Reclaim);
        assert_eq!(TermClass::of("kswapd_folio"), TermClass::Kswapd);
        assert_eq!(TermClass::of("fault"), TermClass::Entry);
        for t in COMPACTION_TERMS.iter().chain(&RECLAIM_TERMS).chain(&KSWAPD_TERMS) {
            assert!(TERMS.iter().any(|x| x.name == *t), "{t} is not a cost term");
        }
    }
}
