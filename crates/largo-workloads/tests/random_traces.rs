//! Random traces replayed under both invariant checkers: processes that
//! fork, exit, unmap parts of folios, mprotect, mremap, brk, grow their
//! stack, madvise (including pageout and collapse), punch holes in and
//! unmap a shared memfd, and drop caches, on machines whose memory cgroup
//! is small enough that every run swaps (zram or disk, with and without
//! zswap) under several anonymous and shmem mTHP configurations.
//!
//! The checkers run every few events, so a broken invariant is reported
//! near the event that broke it, and proptest shrinks the trace to a few
//! events. A failure prints the trace: save it to a file and replay it with
//! `largo replay FILE --check 1` plus the configuration printed with it.
//!
//! `PROPTEST_CASES=N` runs N cases instead of the default 40.

use largo_mm::swap::SwapSpec;
use largo_mm::{Machine, MachineConfig};
use largo_types::Preset;
use largo_workloads::policy::{shmem_knobs, thp_knobs};
use largo_workloads::replay::{replay, ReplayOptions};
use proptest::prelude::*;

const K: u64 = 1024;
const M: u64 = K * K;
/// The unit of generated offsets; each is rounded down to the base page.
const SLOT: u64 = 4096;
/// The private anonymous region every trace starts with.
const REGION: u64 = 0x7f00_0000_0000;
const REGION_BYTES: u64 = 12 * M;
/// The shared memfd mapping.
const SHM: u64 = 0x7d00_0000_0000;
const SHM_BYTES: u64 = 4 * M;
const STACK: u64 = 0x7ff0_0000_0000;
const BRK: u64 = 0x5555_0000_0000;
/// Where mremap moves ranges to, 4 MiB apart.
const MOVED: u64 = 0x7e00_0000_0000;

/// One generated step; `who` picks among the live processes.
#[derive(Clone, Debug)]
enum Op {
    Munmap {
        who: usize,
        page: u64,
        nr: u64,
    },
    Touch {
        who: usize,
        page: u64,
        nr: u64,
        write: bool,
    },
    Mprotect {
        who: usize,
        page: u64,
        nr: u64,
        restore: bool,
    },
    MremapMove {
        who: usize,
        page: u64,
        nr: u64,
        extra: u64,
    },
    MremapGrow {
        who: usize,
        page: u64,
        nr: u64,
        extra: u64,
    },
    Madvise {
        who: usize,
        page: u64,
        nr: u64,
        advice: usize,
    },
    Fork {
        who: usize,
        thread: bool,
    },
    Exit {
        who: usize,
    },
    Brk {
        who: usize,
        step: i64,
    },
    StackGrow {
        who: usize,
        pages: u64,
    },
    DropCaches {
        who: usize,
    },
    Punch {
        who: usize,
        page: u64,
        nr: u64,
    },
    ShmUnmap {
        who: usize,
        page: u64,
        nr: u64,
    },
    ShmTouch {
        who: usize,
        page: u64,
        nr: u64,
    },
    TouchMoved {
        who: usize,
        which: usize,
    },
    ShmMadvise {
        who: usize,
        page: u64,
        nr: u64,
        advice: usize,
    },
    ShmMprotect {
        who: usize,
        page: u64,
        nr: u64,
    },
    /// A touch of the shared anonymous mapping, which the first one maps.
    SharedAnonTouch {
        who: usize,
        page: u64,
        nr: u64,
        write: bool,
    },
    Tick {
        ms: u64,
    },
}

const ADVICE: [&str; 13] = [
    "dontneed",
    "free",
    "pageout",
    "cold",
    "hugepage",
    "nohugepage",
    "collapse",
    "willneed",
    "populate_write",
    "wipeonfork",
    "dontfork",
    "remove",
    "guard_install",
];

/// Advice given to the shared memfd mapping.
const SHM_ADVICE: [&str; 8] = [
    "dontneed",
    "remove",
    "pageout",
    "cold",
    "willneed",
    "populate_write",
    "hugepage",
    "collapse",
];

/// The shared anonymous mapping (MAP_SHARED | MAP_ANONYMOUS).
const SHARED_ANON: u64 = 0x7c00_0000_0000;
const SHARED_ANON_BYTES: u64 = 2 * M;

fn range(max_pages: u64) -> impl Strategy<Value = (u64, u64)> {
    (0..REGION_BYTES / SLOT, 1..=max_pages)
}

fn shm_range() -> impl Strategy<Value = (u64, u64)> {
    (0..SHM_BYTES / SLOT, 1..64u64)
}

fn op() -> impl Strategy<Value = Op> {
    let who = any::<usize>;
    prop_oneof![
        3 => (who(), range(16)).prop_map(|(who, (page, nr))| Op::Munmap { who, page, nr }),
        3 => (who(), range(512), any::<bool>()).prop_map(|(who, (page, nr), w)| Op::Touch { who, page, nr, write: w }),
        2 => (who(), range(64), any::<bool>()).prop_map(|(who, (page, nr), restore)| Op::Mprotect { who, page, nr, restore }),
        1 => (who(), range(128), 0..4u64).prop_map(|(who, (page, nr), extra)| Op::MremapMove { who, page, nr, extra }),
        1 => (who(), range(128), 1..16u64).prop_map(|(who, (page, nr), extra)| Op::MremapGrow { who, page, nr, extra }),
        2 => (who(), range(256), 0..ADVICE.len()).prop_map(|(who, (page, nr), advice)| Op::Madvise { who, page, nr, advice }),
        1 => (who(), any::<bool>()).prop_map(|(who, thread)| Op::Fork { who, thread }),
        1 => who().prop_map(|who| Op::Exit { who }),
        1 => (who(), prop::sample::select(vec![-2i64, -1, 1, 2, 4, 8])).prop_map(|(who, step)| Op::Brk { who, step }),
        1 => (who(), 1..16u64).prop_map(|(who, pages)| Op::StackGrow { who, pages }),
        1 => who().prop_map(|who| Op::DropCaches { who }),
        1 => (who(), shm_range()).prop_map(|(who, (page, nr))| Op::Punch { who, page, nr }),
        1 => (who(), shm_range()).prop_map(|(who, (page, nr))| Op::ShmUnmap { who, page, nr }),
        2 => (who(), shm_range()).prop_map(|(who, (page, nr))| Op::ShmTouch { who, page, nr }),
        1 => (who(), any::<usize>()).prop_map(|(who, which)| Op::TouchMoved { who, which }),
        1 => (who(), shm_range(), 0..SHM_ADVICE.len()).prop_map(|(who, (page, nr), advice)| Op::ShmMadvise { who, page, nr, advice }),
        1 => (who(), shm_range()).prop_map(|(who, (page, nr))| Op::ShmMprotect { who, page, nr }),
        1 => (who(), (0..SHARED_ANON_BYTES / SLOT, 1..128u64), any::<bool>()).prop_map(|(who, (page, nr), write)| Op::SharedAnonTouch { who, page, nr, write }),
        1 => (1..50u64).prop_map(|ms| Op::Tick { ms }),
    ]
}

/// The trace text of `ops` (the `largo-trace 1` text format) for base
/// pages of `page` bytes: offsets are rounded down to a page, lengths
/// count pages.
fn render(ops: &[Op], madvise_hugepage: bool, page: u64) -> String {
    let mut out = vec![
        "largo-trace 1".to_string(),
        format!("@page_size {page}"),
        format!("1 brk_start {BRK:#x}"),
        format!("1 mmap {REGION:#x} {REGION_BYTES} rw- private,anonymous"),
    ];
    if madvise_hugepage {
        out.push(format!("1 madvise {REGION:#x} {REGION_BYTES} hugepage"));
    }
    out.push(format!("1 touch {REGION:#x} {REGION_BYTES} w"));
    out.push(format!("1 mmap {STACK:#x} 64K rw- private,anonymous,growsdown"));
    out.push(format!("1 touch {STACK:#x} 64K w"));
    out.push("1 memfd_create 3".into());
    out.push(format!("1 ftruncate 3 {SHM_BYTES}"));
    out.push(format!("1 mmap_fd {SHM:#x} {SHM_BYTES} rw- shared 3 0"));
    out.push(format!("1 touch {SHM:#x} {SHM_BYTES} w"));
    let mut pids = vec![1u32];
    let mut next_pid = 2;
    let mut moved = MOVED;
    let mut brk = BRK;
    let mut stack_low = STACK;
    let mut shared_anon_mapped = false;
    let clip = |slot: u64, nr: u64, limit: u64| {
        let off = slot * SLOT / page * page;
        (off, (nr * page).min(limit - off))
    };
    for op in ops {
        let pick = |who: &usize| pids[who % pids.len()];
        let line = match op {
            Op::Munmap { who, page, nr } => {
                let (off, len) = clip(*page, *nr, REGION_BYTES);
                format!("{} munmap {:#x} {len}", pick(who), REGION + off)
            }
            Op::Touch { who, page, nr, write } => {
                let (off, len) = clip(*page, *nr, REGION_BYTES);
                let rw = if *write { "w" } else { "r" };
                format!("{} touch {:#x} {len} {rw}", pick(who), REGION + off)
            }
            Op::Mprotect { who, page, nr, restore } => {
                let (off, len) = clip(*page, *nr, REGION_BYTES);
                let pid = pick(who);
                let mut s = format!("{pid} mprotect {:#x} {len} r--", REGION + off);
                if *restore {
                    s += &format!("\n{pid} mprotect {:#x} {len} rw-", REGION + off);
                }
                s
            }
            Op::MremapMove { who, page, nr, extra } => {
                let (off, len) = clip(*page, *nr, REGION_BYTES);
                let s = format!(
                    "{} mremap {:#x} {len} {moved:#x} {}",
                    pick(who),
                    REGION + off,
                    len + extra * page
                );
                moved += 4 * M;
                s
            }
            Op::MremapGrow { who, page, nr, extra } => {
                let (off, len) = clip(*page, *nr, REGION_BYTES);
                let a = REGION + off;
                format!("{} mremap {a:#x} {len} {a:#x} {}", pick(who), len + extra * page)
            }
            Op::Madvise { who, page, nr, advice } => {
                let (off, len) = clip(*page, *nr, REGION_BYTES);
                format!("{} madvise {:#x} {len} {}", pick(who), REGION + off, ADVICE[*advice])
            }
            Op::Fork { who, thread } if pids.len() < 5 => {
                let kind = if *thread { "thread" } else { "process" };
                let s = format!("{} clone {next_pid} {kind}", pick(who));
                pids.push(next_pid);
                next_pid += 1;
                s
            }
            Op::Exit { who } if pids.len() > 1 => {
                let child = pids.remove(1 + who % (pids.len() - 1));
                format!("{child} exit")
            }
            Op::Brk { who, step } => {
                let new = brk.saturating_add_signed(step * 64 * K as i64).max(BRK);
                brk = new;
                let pid = pick(who);
                if new > BRK {
                    format!("{pid} brk {new:#x}\n{pid} touch {BRK:#x} {} w", new - BRK)
                } else {
                    format!("{pid} brk {new:#x}")
                }
            }
            Op::StackGrow { who, pages } if STACK - (stack_low - pages * page) < 7 * M => {
                stack_low -= pages * page;
                format!("{} fault {stack_low:#x} w", pick(who))
            }
            Op::DropCaches { who } => format!("{} drop_caches 2", pick(who)),
            Op::Punch { who, page, nr } => {
                let (off, len) = clip(*page, *nr, SHM_BYTES);
                format!("{} punch_hole 3 {off} {len}", pick(who))
            }
            Op::ShmUnmap { who, page, nr } => {
                let (off, len) = clip(*page, *nr, SHM_BYTES);
                format!("{} munmap {:#x} {len}", pick(who), SHM + off)
            }
            Op::ShmTouch { who, page, nr } => {
                let (off, len) = clip(*page, *nr, SHM_BYTES);
                format!("{} touch {:#x} {len} w", pick(who), SHM + off)
            }
            Op::TouchMoved { who, which } if moved > MOVED => {
                let n = (moved - MOVED) / (4 * M);
                format!("{} touch {:#x} 64K w", pick(who), MOVED + (*which as u64 % n) * 4 * M)
            }
            Op::ShmMadvise { who, page, nr, advice } => {
                let (off, len) = clip(*page, *nr, SHM_BYTES);
                format!("{} madvise {:#x} {len} {}", pick(who), SHM + off, SHM_ADVICE[*advice])
            }
            Op::ShmMprotect { who, page, nr } => {
                let (off, len) = clip(*page, *nr, SHM_BYTES);
                let pid = pick(who);
                format!(
                    "{pid} mprotect {:#x} {len} r--\n{pid} mprotect {:#x} {len} rw-",
                    SHM + off,
                    SHM + off
                )
            }
            Op::SharedAnonTouch { who, page, nr, write } => {
                let (off, len) = clip(*page, *nr, SHARED_ANON_BYTES);
                let rw = if *write { "w" } else { "r" };
                let touch = format!("{} touch {:#x} {len} {rw}", pick(who), SHARED_ANON + off);
                if shared_anon_mapped {
                    touch
                } else {
                    shared_anon_mapped = true;
                    format!("1 mmap {SHARED_ANON:#x} {SHARED_ANON_BYTES} rw- shared,anonymous\n{touch}")
                }
            }
            Op::Tick { ms } => format!("tick {}", ms * 1_000_000),
            _ => continue,
        };
        out.push(line);
    }
    for pid in pids.iter().rev() {
        out.push(format!("{pid} exit"));
    }
    out.join("\n") + "\n"
}

/// A machine configuration the traces run under.
struct Setup {
    name: &'static str,
    preset: Preset,
    thp: &'static str,
    shmem: &'static str,
    /// The workload's memcg limit; `None`: none, the machine itself is
    /// small (global reclaim, kswapd, compaction).
    memcg_max_bytes: Option<u64>,
    swap: &'static str,
    zswap: bool,
}

const SETUPS: [Setup; 10] = [
    Setup {
        preset: Preset::X86_64,
        name: "mthp+shmem, zram",
        thp: "16K,64K,2M",
        shmem: "64K,2M",
        memcg_max_bytes: Some(10 * M),
        swap: "256M:zram",
        zswap: false,
    },
    Setup {
        preset: Preset::X86_64,
        name: "mthp+shmem, disk",
        thp: "16K,64K,2M",
        shmem: "64K,2M",
        memcg_max_bytes: Some(10 * M),
        swap: "256M:disk",
        zswap: false,
    },
    Setup {
        preset: Preset::X86_64,
        name: "mthp, zram + zswap",
        thp: "16K,64K",
        shmem: "16K",
        memcg_max_bytes: Some(12 * M),
        swap: "256M:zram",
        zswap: true,
    },
    Setup {
        preset: Preset::X86_64,
        name: "2M only, disk",
        thp: "2M",
        shmem: "2M",
        memcg_max_bytes: Some(16 * M),
        swap: "256M:disk",
        zswap: false,
    },
    Setup {
        preset: Preset::X86_64,
        name: "base pages, zram",
        thp: "",
        shmem: "",
        memcg_max_bytes: Some(8 * M),
        swap: "256M:zram",
        zswap: false,
    },
    Setup {
        preset: Preset::X86_64,
        name: "mthp+shmem, global reclaim, zram",
        thp: "16K,64K,2M",
        shmem: "64K,2M",
        memcg_max_bytes: None,
        swap: "256M:zram",
        zswap: false,
    },
    Setup {
        preset: Preset::X86_64,
        name: "2M, global reclaim, disk",
        thp: "2M",
        shmem: "2M",
        memcg_max_bytes: None,
        swap: "256M:disk",
        zswap: false,
    },
    Setup {
        preset: Preset::Arm64_16k,
        name: "arm64 16K pages, mthp+shmem, disk",
        thp: "64K,128K",
        shmem: "64K",
        memcg_max_bytes: Some(10 * M),
        swap: "256M:disk",
        zswap: false,
    },
    Setup {
        preset: Preset::Arm64_64k,
        name: "arm64 64K pages, mthp+shmem, zram",
        thp: "256K,2M",
        shmem: "128K",
        memcg_max_bytes: Some(12 * M),
        swap: "256M:zram",
        zswap: false,
    },
    // The setup whose touches take their faults as runs (root memcg, no
    // mTHP size): see `fault_runs_change_nothing`.
    Setup {
        preset: Preset::X86_64,
        name: "base pages, global reclaim, zram",
        thp: "",
        shmem: "",
        memcg_max_bytes: None,
        swap: "256M:zram",
        zswap: false,
    },
];

/// The index in [`SETUPS`] of the setup whose faults go as runs.
const FAULT_RUN_SETUP: usize = SETUPS.len() - 1;

/// The machine of the setups without a memcg.
const GLOBAL_MEM_BYTES: u64 = 64 * M;

fn machine(s: &Setup) -> Machine {
    machine_with_mem(s, setup_mem_bytes(s))
}

/// The memory of a setup's machine: room for the memcg's limit to be
/// what reclaims, or little enough for global reclaim.
fn setup_mem_bytes(s: &Setup) -> u64 {
    if s.memcg_max_bytes.is_some() {
        256 * M
    } else {
        GLOBAL_MEM_BYTES
    }
}

fn machine_with_mem(s: &Setup, mem_bytes: u64) -> Machine {
    let mut knobs = Vec::new();
    if !s.thp.is_empty() {
        knobs.extend(thp_knobs(s.thp).unwrap());
    }
    if !s.shmem.is_empty() {
        knobs.extend(shmem_knobs(s.shmem).unwrap());
    }
    Machine::new(MachineConfig {
        preset: s.preset,
        mem_bytes,
        knobs,
        memcg_max_bytes: s.memcg_max_bytes,
        swap: vec![SwapSpec::parse(s.swap).unwrap()],
        zswap: s.zswap,
        ..MachineConfig::default()
    })
    .unwrap()
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_traces_keep_every_invariant_under_memcg_and_swap(
        setup in 0..SETUPS.len(),
        hugepage in any::<bool>(),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let s = &SETUPS[setup];
        let text = render(&ops, hugepage, s.preset.geometry().page_size());
        let trace = largo_trace::parse_bytes(text.as_bytes()).unwrap();
        let config = format!(
            "--thp '{}' --shmem '{}' {} --swap {}{}",
            s.thp,
            s.shmem,
            match s.memcg_max_bytes {
                Some(b) => format!("--memcg-max {b}"),
                None => format!("--mem {}", GLOBAL_MEM_BYTES),
            },
            s.swap,
            if s.zswap { " --zswap" } else { "" }
        );
        let mut m = machine(s);
        let opts = ReplayOptions { check_every: 5, ..ReplayOptions::default() };
        // A debug assertion in the model is a failure like a broken
        // invariant: caught, so that the trace is shrunk and printed.
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The setups leave swap enough, yet a memcg OOM kill (never a
            // global one) is the kernel's answer now and then: a memcg
            // whose active anon list took every page before its
            // statistics were ever flushed is never aged (see
            // `a_fork_the_memcg_cannot_charge_kills_the_parent`). A task
            // the OOM killer took replays nothing more.
            replay(&mut m, &trace.events, &opts, &mut |_, _| {}).map(|o| {
                let c = &o.run.counters;
                (c.vmstat("oom_kill"), c.memcg.as_ref().map_or(0, |g| g.oom_kill))
            })
        }));
        let got = got.map_err(|p| {
            p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
        });
        // Every kill is the memcg's: global reclaim has swap to spare.
        prop_assert!(matches!(got, Ok(Ok((all, memcg))) if all == memcg), "{}: {:?}\nconfiguration: {config}\ntrace:\n{text}", s.name, got);
        m.check().map_err(|e| TestCaseError::fail(format!("{}: at the end: {e}\nconfiguration: {config}\ntrace:\n{text}", s.name)))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 2, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    /// Zaps free runs of sole order-0 folios together (`zap_run.rs`):
    /// the machine must end exactly as with each entry zapped by the
    /// general loop, under every setup (mTHP and shmem, memcg limits,
    /// swap to zram, zswap or disk), through munmap, MADV_DONTNEED,
    /// mremap, fork and exit.
    #[test]
    fn zap_runs_change_nothing(
        setup in 0..SETUPS.len(),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        same_machine_either_way(&SETUPS[setup], &ops, "zap runs", |zap_runs| (false, zap_runs, true))?;
    }

    /// Refills the pcp lists a free block at a time
    /// (`rmqueue_bulk_split`): the machine must end exactly as with each
    /// page taken by `__rmqueue`, under every setup.
    #[test]
    fn bulk_split_changes_nothing(
        setup in 0..SETUPS.len(),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        same_machine_either_way(&SETUPS[setup], &ops, "bulk splits", |bulk_split| (false, true, bulk_split))?;
    }

    /// A touch takes its order-0 anonymous faults as runs (`fault_run.rs`:
    /// the walk, the VMA and a batch of pcp allocations shared): the
    /// machine must end exactly as with each fault taken alone, under
    /// global reclaim to zram (kswapd woken mid-run, pcp lists refilled
    /// and drained, OOM kills).
    #[test]
    fn fault_runs_change_nothing(
        mem_mib in prop::sample::select(vec![56u64, 58, 60, 64]),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let s = &SETUPS[FAULT_RUN_SETUP];
        let text = render(&ops, false, s.preset.geometry().page_size());
        // Small machines: kswapd wakes and reclaim runs inside runs.
        let alone = fingerprinted_replay(s, mem_mib * M, &text, true, false, false);
        let runs = fingerprinted_replay(s, mem_mib * M, &text, false, true, true);
        prop_assert!(alone == runs, "runs changed the machine:\n{}\ntrace:\n{text}", first_difference(&alone, &runs));
    }
}

/// `ops` under `setup` replayed with one fast path off and on (`ways`
/// gives `fingerprinted_replay`'s one_by_one, zap_runs and bulk_split for
/// each): everything a test can see must be the same.
fn same_machine_either_way(
    s: &Setup,
    ops: &[Op],
    what: &str,
    ways: impl Fn(bool) -> (bool, bool, bool),
) -> Result<(), TestCaseError> {
    let text = render(ops, false, s.preset.geometry().page_size());
    let mem_bytes = setup_mem_bytes(s);
    let [off, on] = [false, true].map(|fast| {
        let (one_by_one, zap_runs, bulk_split) = ways(fast);
        fingerprinted_replay(s, mem_bytes, &text, one_by_one, zap_runs, bulk_split)
    });
    let diff = first_difference(&off, &on);
    prop_assert!(
        off == on,
        "{}: {what} changed the machine:\n{diff}\ntrace:\n{text}",
        s.name
    );
    Ok(())
}

/// Replays `text` under `setup` in a machine of `mem_bytes` (checked at
/// the end), each access an operation of its own through `Vm::access`
/// when `one_by_one`, else with fault runs; zaps free runs of order-0
/// folios together when `zap_runs`; refills pcp lists a free block at a
/// time when `bulk_split`; returns everything a test can see: the
/// counters, the replay's statistics and problems, every /proc file, and
/// each live task's mappings with the pfn and flags behind each page.
fn fingerprinted_replay(
    setup: &Setup,
    mem_bytes: u64,
    text: &str,
    one_by_one: bool,
    zap_runs: bool,
    bulk_split: bool,
) -> String {
    use std::fmt::Write;
    let trace = largo_trace::parse_bytes(text.as_bytes()).unwrap();
    let mut m = machine_with_mem(setup, mem_bytes);
    m.page_alloc_mut().set_bulk_split(bulk_split);
    m.with_vm(0, |vm, _| {
        vm.set_fault_runs(!one_by_one);
        vm.set_zap_runs(zap_runs);
        vm.set_lru_chains(!one_by_one);
    });
    let opts = ReplayOptions {
        one_by_one,
        ..ReplayOptions::default()
    };
    let out = replay(&mut m, &trace.events, &opts, &mut |_, _| {});
    let out = out.unwrap_or_else(|e| panic!("one by one {one_by_one}, zap runs {zap_runs}: {e}\ntrace:\n{text}"));
    m.check()
        .unwrap_or_else(|e| panic!("one by one {one_by_one}, zap runs {zap_runs}: {e}\ntrace:\n{text}"));
    let mut f = format!("{:?}\n{:?}\n{:?}\n", out.run.counters, out.run.problems, out.stats);
    for file in largo_mm::stats::render::ProcFile::ALL {
        f.push_str(&file.render(&m));
    }
    // Every LRU list in order: reclaim reads them from the tail.
    let _ = writeln!(f, "lru {:?}", m.vm().lru_order());
    let page = m.geometry().page_size();
    let (vm, memmap) = (m.vm(), m.page_alloc().memmap());
    for t in vm.tasks().filter(|t| t.alive) {
        let _ = write!(f, "pid {}:", t.pid);
        for v in vm.maps(t.pid).unwrap_or_default() {
            let _ = write!(f, " [{:#x}-{:#x} {}]", v.start, v.end, v.perms());
            for a in (v.start..v.end).step_by(page as usize) {
                if let Some(pfn) = vm.translate(t.pid, a) {
                    let _ = write!(f, " {a:#x}={pfn:#x}/{:?}", memmap.page(pfn).flags());
                }
            }
        }
        f.push('\n');
    }
    f
}

/// The first line where two fingerprints differ, for a failure message.
fn first_difference(a: &str, b: &str) -> String {
    let lines = a.lines().zip(b.lines()).enumerate();
    match lines.clone().find(|(_, (x, y))| x != y) {
        Some((i, (x, y))) => format!("line {i}:\n one by one: {x}\n runs:       {y}"),
        None => format!("one is longer ({} vs {} lines)", a.lines().count(), b.lines().count()),
    }
}

/// A run of fault events for [`replayed_fault_runs_change_nothing`]: from
/// page `page` of the 16 MiB region (whose first 12 MiB are mapped, 2 MiB
/// of those read-only from 5 pages below 10 MiB: two VMAs end and one
/// starts inside a page table), `nr` pages `pages_apart` apart (down the
/// region when negative; no further than its ends), the `k`th at byte
/// `offset + k * step` of its page (modulo the page).
#[derive(Clone, Debug)]
struct FaultRun {
    pid: usize,
    page: u64,
    nr: u64,
    pages_apart: i64,
    offset: u64,
    step: u64,
    write: bool,
    /// Its pages are zapped first (`madvise dontneed`): folios still in a
    /// cpu's LRU batch are released there and freed when it moves.
    dontneed: bool,
}

fn fault_runs() -> impl Strategy<Value = Vec<FaultRun>> {
    let offsets = (
        prop::sample::select(vec![0u64, 8, 4095]),
        prop::sample::select(vec![0u64, 0, 1237]),
    );
    // Mostly the page after; also top down, and every few pages (up to
    // the replay's largest gap, 64, and past it).
    let apart = prop::sample::select(vec![1i64, 1, 1, -1, -1, 2, -3, 5, 64, -65]);
    let run = (
        0..3usize,
        0..4096u64,
        1..700u64,
        apart,
        offsets,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(pid, page, nr, pages_apart, (offset, step), write, dontneed)| FaultRun {
                pid,
                page,
                nr,
                pages_apart,
                offset,
                step,
                write,
                dontneed,
            },
        );
    prop::collection::vec(run, 1..40)
}

/// The trace of `runs`: two processes share the region by fork, a third
/// is a thread; every fault event stands alone in the text.
fn render_fault_runs(runs: &[FaultRun]) -> String {
    let mut out = vec![
        "largo-trace 1".to_string(),
        "@page_size 4096".to_string(),
        format!("1 mmap {REGION:#x} {} rw- private,anonymous", 12 * M),
        format!("1 mprotect {:#x} {} r--", REGION + 10 * M - 5 * 4096, 2 * M),
        "1 clone 2 process".to_string(),
        "1 clone 3 thread".to_string(),
    ];
    for r in runs {
        let apart = r.pages_apart.unsigned_abs();
        let room = if r.pages_apart > 0 { 4095 - r.page } else { r.page };
        let nr = r.nr.min(room / apart + 1);
        let page_of = |k: u64| {
            if r.pages_apart > 0 {
                r.page + k * apart
            } else {
                r.page - k * apart
            }
        };
        if r.dontneed {
            let low = page_of(0).min(page_of(nr - 1));
            let start = REGION + low * 4096;
            out.push(format!(
                "{} madvise {start:#x} {} dontneed",
                r.pid + 1,
                ((nr - 1) * apart + 1) * 4096
            ));
        }
        for k in 0..nr {
            let addr = REGION + page_of(k) * 4096 + (r.offset + k * r.step) % 4096;
            let rw = if r.write { "w" } else { "r" };
            out.push(format!("{} fault {addr:#x} {rw}", r.pid + 1));
        }
    }
    out.join("\n") + "\n"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 2, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    /// The replay takes fault events one page apart, and write faults
    /// going one way a few pages apart, as one access run
    /// (`fault_run_len`): it must replay them exactly as one by one, the
    /// problems it reports (SIGSEGV past the mapping and on the
    /// read-only part, OOM kills in a small machine) included.
    #[test]
    fn replayed_fault_runs_change_nothing(mem_mib in prop::sample::select(vec![56u64, 60, 256]), runs in fault_runs()) {
        let s = &SETUPS[FAULT_RUN_SETUP];
        let text = render_fault_runs(&runs);
        let alone = fingerprinted_replay(s, mem_mib * M, &text, true, false, false);
        let runs = fingerprinted_replay(s, mem_mib * M, &text, false, true, true);
        prop_assert!(alone == runs, "runs changed the replay:\n{}\ntrace:\n{text}", first_difference(&alone, &runs));
    }
}

#[test]
fn the_shipped_trace_replays_the_same_with_fault_and_zap_runs() {
    shipped_trace_replays_the_same_with_runs("lua-build", 30_000);
}

#[test]
fn a_trace_faulting_top_down_replays_the_same_with_runs() {
    // sort writes its buffers from the top: most of its faults are each
    // in the page below the one before.
    shipped_trace_replays_the_same_with_runs("sort-words", 25_000);
}

/// The shipped trace `name` replays the same with fault runs, zap runs
/// and pcp refills a free block at a time as one by one, and more than
/// `min_pages` of its faults and of its pages unmapped go in runs.
fn shipped_trace_replays_the_same_with_runs(name: &str, min_pages: u64) {
    let trace = largo_workloads::recorded::find(name).unwrap().trace();
    let replayed = |one_by_one: bool| {
        let mut m = Machine::new(MachineConfig::default()).unwrap();
        m.with_vm(0, |vm, _| {
            vm.set_fault_runs(!one_by_one);
            vm.set_zap_runs(!one_by_one);
            vm.set_lru_chains(!one_by_one);
        });
        m.page_alloc_mut().set_bulk_split(!one_by_one);
        let opts = ReplayOptions {
            one_by_one,
            ..ReplayOptions::default()
        };
        let out = replay(&mut m, &trace.events, &opts, &mut |_, _| {}).unwrap();
        let mut f = format!("{:?}\n{:?}\n{:?}\n", out.run.counters, out.run.problems, out.stats);
        for file in largo_mm::stats::render::ProcFile::ALL {
            f.push_str(&file.render(&m));
        }
        f.push_str(&format!("lru {:?}\n", m.vm().lru_order()));
        (f, m.vm().fault_run_stats(), m.vm().zap_run_pages())
    };
    let (alone, runs) = (replayed(true), replayed(false));
    assert_eq!((alone.1.faults, alone.2), (0, 0));
    // Tens of thousands of its faults go in runs, and of its pages
    // unmapped at exit.
    assert!(runs.1.faults > min_pages, "{name}: {:?}", runs.1);
    assert!(runs.2 > min_pages, "{name}: {} pages zapped in runs", runs.2);
    assert!(alone.0 == runs.0, "{}", first_difference(&alone.0, &runs.0));
}

#[test]
fn the_fault_run_setup_takes_faults_as_runs() {
    // The property above is empty unless faults do go as runs there: the
    // first touch of the region maps 12 MiB of order-0 folios.
    let s = &SETUPS[FAULT_RUN_SETUP];
    let text = render(&[], false, s.preset.geometry().page_size());
    let trace = largo_trace::parse_bytes(text.as_bytes()).unwrap();
    let mut m = machine(s);
    replay(&mut m, &trace.events, &ReplayOptions::default(), &mut |_, _| {}).unwrap();
    let stats = m.vm().fault_run_stats();
    assert!(
        stats.faults >= REGION_BYTES / 4096 && stats.batched > stats.faults / 2,
        "{stats:?}"
    );
}

/// Replays `text` under `setup`, checking after every event.
fn replay_checked(setup: &Setup, text: &str) -> largo_workloads::report::Counters {
    replay_checked_outcome(setup, text).run.counters
}

/// [`replay_checked`], with the whole outcome (problems included).
fn replay_checked_outcome(setup: &Setup, text: &str) -> largo_workloads::replay::ReplayOutcome {
    let trace = largo_trace::parse_bytes(text.as_bytes()).unwrap();
    let mut m = machine(setup);
    let opts = ReplayOptions {
        check_every: 1,
        ..ReplayOptions::default()
    };
    let out = replay(&mut m, &trace.events, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", setup.name));
    m.check().unwrap();
    out
}

/// The common start of the regression traces below (as [`render`] made
/// it when they were found, without `madvise hugepage`), spelled out so
/// that a change to the generator leaves them as they are.
const PREAMBLE: &str = "largo-trace 1
@page_size 4096
1 brk_start 0x555500000000
1 mmap 0x7f0000000000 12582912 rw- private,anonymous
1 touch 0x7f0000000000 12582912 w
1 mmap 0x7ff000000000 64K rw- private,anonymous,growsdown
1 touch 0x7ff000000000 64K w
1 memfd_create 3
1 ftruncate 3 4194304
1 mmap_fd 0x7d0000000000 4194304 rw- shared 3 0
1 touch 0x7d0000000000 4194304 w
";

/// Found by `fault_runs_change_nothing`: two tasks on other cpus read
/// shmem pages a second time, so those cpus' `activate` batches held the
/// folios, and then MADV_PAGEOUT (which drains only its own cpu's
/// batches) wrote them to swap and freed them under the batches. The
/// kernel's `is_page_cache_freeable` counts the batch's reference and
/// keeps such a folio.
#[test]
fn pageout_keeps_a_shmem_folio_another_cpus_batch_holds() {
    let text = PREAMBLE.to_string()
        + "1 clone 2 process
1 clone 3 process
2 clone 4 process
2 exit
3 touch 0x7d000020e000 126976 w
1 clone 5 process
5 exit
3 exit
4 touch 0x7d000020f000 122880 w
4 exit
1 madvise 0x7d00001fb000 86016 pageout
1 exit
";
    let s = &SETUPS[FAULT_RUN_SETUP];
    let alone = fingerprinted_replay(s, 56 * M, &text, true, false, false);
    let runs = fingerprinted_replay(s, 56 * M, &text, false, true, true);
    assert!(
        alone == runs,
        "runs changed the replay:\n{}",
        first_difference(&alone, &runs)
    );
}

/// Found by the property above: a shmem fault at a hole chose a 64K folio
/// whose aligned range still held a swap entry (the kernel's
/// `shmem_suitable_orders` looks for any entry, `XA_PRESENT`, not only
/// folios), so the folio covered a swapped page.
#[test]
fn a_shmem_hole_takes_no_large_folio_over_a_swapped_page() {
    let text = PREAMBLE.to_string()
        + "tick 1000000
1 punch_hole 3 1761280 196608
1 clone 2 process
1 touch 0x7f0000000000 1859584 w
2 touch 0x7d0000048000 69632 w
1 munmap 0x7f0000000000 4096
1 touch 0x7d00001c0000 69632 w
1 munmap 0x7f0000000000 4096
2 exit
1 exit
";
    replay_checked(&SETUPS[0], &text);
}

/// Found by the property above: the CoW fault's allocation reclaimed, and
/// reclaim unmapped the very page being copied (into the swap cache); the
/// fault then mapped its copy over the swap entry. The kernel's
/// `wp_page_copy` rechecks the entry (`pte_same`) and lets the access
/// fault again.
#[test]
fn a_cow_fault_whose_page_reclaim_unmapped_faults_again() {
    let text = PREAMBLE.to_string()
        + "1 munmap 0x7f0000411000 4096
1 punch_hole 3 2093056 106496
1 munmap 0x7f0000bb3000 4096
1 drop_caches 2
1 clone 2 process
1 touch 0x7f000091d000 1769472 w
1 touch 0x7f00009a6000 2084864 w
1 clone 3 process
2 mprotect 0x7f0000000000 4096 r--
3 touch 0x7f0000000000 188416 w
3 touch 0x7f00003a3000 385024 w
3 exit
2 exit
1 exit
";
    replay_checked(&SETUPS[3], &text);
}

/// Found by the property above: khugepaged's collapse allocated and
/// charged its PMD folio, the charge reclaimed pages of the very range
/// being collapsed, and the copy then met swap entries. The kernel walks
/// the entries again under the PMD lock (`__collapse_huge_page_isolate`)
/// and gives up on one that is not present (`SCAN_PTE_NON_PRESENT`).
#[test]
fn a_collapse_whose_range_reclaim_swapped_out_gives_up() {
    let text = PREAMBLE.to_string()
        + "1 madvise 0x7f0000a01000 143360 cold
1 drop_caches 2
1 exit
";
    let c = replay_checked(&SETUPS[0], &text);
    assert!(
        c.vmstat("thp_collapse_alloc") > c.khugepaged.pages_collapsed,
        "a collapse allocated its folio and gave up: {} allocated, {} collapsed",
        c.vmstat("thp_collapse_alloc"),
        c.khugepaged.pages_collapsed
    );
}

/// Found by the property above (CI): with 64K pages the 12 MiB memcg holds
/// 192 pages, and reclaim had moved all of them to the active anon list
/// before the memcg statistics were first flushed (every `FLUSH_TIME`; no
/// time passes in this trace). `shrink_lruvec` scans the active anon list
/// only beside other targets or when the flushed statistics call the
/// inactive list low, and the flushed lists are empty: nothing is
/// reclaimed, and the fork's page-table charge OOM-kills in the memcg
/// (from the charge: a fork is no user fault). The victim is the forking
/// process itself, so the fork fails; the child never runs, and its exit
/// is no event to replay.
#[test]
fn a_fork_the_memcg_cannot_charge_kills_the_parent() {
    let text = PREAMBLE.replace("@page_size 4096", "@page_size 65536")
        + "1 munmap 0x7f0000000000 65536
1 clone 2 thread
1 touch 0x7f00005d0000 6029312 r
1 munmap 0x7d0000050000 1376256
1 mmap 0x7c0000000000 2097152 rw- shared,anonymous
1 touch 0x7c0000020000 1769472 w
2 brk 0x555500010000
2 touch 0x555500000000 65536 w
1 clone 3 process
3 touch 0x7f0000010000 131072 r
1 touch 0x7f0000010000 131072 r
3 exit
2 exit
1 exit
";
    let setup = &SETUPS[8];
    assert_eq!(setup.preset, Preset::Arm64_64k);
    let out = replay_checked_outcome(setup, &text);
    let problems = &out.run.problems;
    assert_eq!(problems.oom_killed_tasks, 1, "{problems:?}");
    assert!(
        problems.failed_syscalls.iter().any(|f| f.starts_with("clone: ENOMEM")),
        "{problems:?}"
    );
    assert_eq!(out.run.counters.vmstat("oom_kill"), 1);
}
