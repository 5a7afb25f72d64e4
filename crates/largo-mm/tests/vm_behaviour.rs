//! Behaviour of the anonymous-memory model in the scenarios the host
//! kernel (6.18, CONFIG_MM_ID) was observed in, and the lifecycle rules of
//! the kernel's large folios: zero page, CoW, reuse, partial unmap and the
//! deferred split queue, underused THPs, MADV_FREE, OOM, prctl, and the
//! host's `anon_beside_full` policy. Counts are exact.

use largo_mm::gfp::{Gfp, GFP_KERNEL};
use largo_mm::stats::render::{meminfo_kb, vmstat_value};
use largo_mm::vm::stats::MthpStat;
use largo_mm::vm::{Access, Advice, MapFlags, Prot, ThpDisable, VmError};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::BackingKind;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const PAGE: u64 = 4096;

#[track_caller]
fn machine_with(config: MachineConfig, knobs: &[(&str, &str)]) -> Machine {
    let mut m = Machine::new(config).unwrap();
    for (k, v) in knobs {
        m.set_knob(k, v).unwrap();
    }
    m
}

#[track_caller]
fn machine(knobs: &[(&str, &str)]) -> Machine {
    machine_with(MachineConfig::default(), knobs)
}

fn shmem_size_knob(kb: u64) -> String {
    format!("transparent_hugepage/hugepages-{kb}kB/shmem_enabled")
}

fn size_knob(kb: u64) -> String {
    format!("transparent_hugepage/hugepages-{kb}kB/enabled")
}

/// One process of the machine, with the calls tests need.
struct Proc<'m> {
    m: &'m mut Machine,
    pid: u32,
}

impl<'m> Proc<'m> {
    fn spawn(m: &'m mut Machine) -> Proc<'m> {
        let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
        Proc { m, pid }
    }

    fn mmap(&mut self, len: u64) -> u64 {
        let pid = self.pid;
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        self.m
            .with_vm(0, |vm, ctx| vm.mmap(ctx, pid, 0, len, Prot::READ | Prot::WRITE, flags))
            .unwrap()
    }

    /// Touches every page of `[addr, addr + len)`; returns the faults taken.
    #[track_caller]
    fn touch(&mut self, pid: u32, addr: u64, len: u64, write: bool) -> u64 {
        self.m.with_vm(0, |vm, ctx| {
            let mut faults = 0;
            for a in (addr..addr + len).step_by(PAGE as usize) {
                match vm.access(ctx, pid, a, write).unwrap() {
                    Access::Faulted => faults += 1,
                    Access::Hit => {}
                    other => panic!("access at {a:#x}: {other:?}"),
                }
            }
            faults
        })
    }

    fn write(&mut self, addr: u64, len: u64) -> u64 {
        self.touch(self.pid, addr, len, true)
    }

    fn read(&mut self, addr: u64, len: u64) -> u64 {
        self.touch(self.pid, addr, len, false)
    }

    fn fork(&mut self) -> u32 {
        let pid = self.pid;
        self.m.with_vm(0, |vm, ctx| vm.fork(ctx, pid)).unwrap()
    }

    fn exit(&mut self, pid: u32) {
        self.m.with_vm(0, |vm, ctx| vm.exit(ctx, pid)).unwrap();
    }

    fn munmap(&mut self, addr: u64, len: u64) {
        let pid = self.pid;
        self.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, len)).unwrap();
    }

    fn madvise(&mut self, addr: u64, len: u64, advice: Advice) {
        let pid = self.pid;
        self.m
            .with_vm(0, |vm, ctx| vm.madvise(ctx, pid, addr, len, advice))
            .unwrap();
    }

    fn mprotect(&mut self, addr: u64, len: u64, prot: Prot) {
        let pid = self.pid;
        self.m
            .with_vm(0, |vm, ctx| vm.mprotect(ctx, pid, addr, len, prot))
            .unwrap();
    }

    fn try_madvise(&mut self, addr: u64, len: u64, advice: Advice) -> Result<(), VmError> {
        let pid = self.pid;
        self.m.with_vm(0, |vm, ctx| vm.madvise(ctx, pid, addr, len, advice))
    }

    fn drop_caches(&mut self) {
        self.m.with_vm(0, |vm, ctx| vm.drop_caches(ctx, 2));
    }

    fn stat(&self, name: &str) -> u64 {
        vmstat_value(self.m, name)
    }

    fn mthp(&self, kb: u64, stat: MthpStat) -> i64 {
        let order = (kb * KIB / PAGE).trailing_zeros();
        self.m.vm().mthp.get(order, stat)
    }

    #[track_caller]
    fn check(&self) {
        self.m.check().unwrap();
    }
}

#[test]
fn read_then_write_maps_the_zero_page_then_copies_4k_pages() {
    // Host: 16 MiB, only 64K always: 4096 read faults on the zero page,
    // then 4096 write faults each CoW one 4K page; no 64K folio.
    let mut m = machine(&[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(16 * MIB);
    assert_eq!(p.read(addr, 16 * MIB), 4096);
    assert_eq!(p.stat("nr_anon_pages"), 0, "the zero page is not anonymous memory");
    assert_eq!(p.write(addr, 16 * MIB), 4096);
    assert_eq!(p.stat("pgfault"), 8192);
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 0);
    assert_eq!(p.stat("nr_anon_pages"), 4096);
    p.check();
}

#[test]
fn fork_then_child_writes_copies_each_page_at_order_0() {
    let mut m = machine(&[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(16 * MIB);
    assert_eq!(p.write(addr, 16 * MIB), 256);
    let child = p.fork();
    p.check();
    assert_eq!(p.touch(child, addr, 16 * MIB, true), 4096);
    assert_eq!(
        p.mthp(64, MthpStat::AnonFaultAlloc),
        256,
        "CoW never allocates a large folio"
    );
    assert_eq!(p.stat("pgreuse"), 0);
    assert_eq!(p.stat("nr_anon_pages"), 2 * 4096);
    p.check();
    // The parent's folios are exclusive again: its writes reuse them.
    assert_eq!(p.write(addr, 16 * MIB), 4096);
    assert_eq!(p.stat("pgreuse"), 4096);
    p.check();
}

#[test]
fn after_the_child_exits_every_write_reuses_the_large_folio() {
    // Host: pgreuse grows by about 4096, one per PTE (MM_ID reuse path).
    let mut m = machine(&[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(16 * MIB);
    p.write(addr, 16 * MIB);
    let child = p.fork();
    p.exit(child);
    let before = p.stat("pgreuse");
    assert_eq!(p.write(addr, 16 * MIB), 4096);
    assert_eq!(p.stat("pgreuse") - before, 4096);
    assert_eq!(p.stat("nr_anon_pages"), 4096, "no copy was made");
    p.check();
}

#[test]
fn a_write_to_the_huge_zero_page_allocates_a_thp() {
    // 6.18 (do_huge_zero_wp_pmd): the write replaces the huge zero PMD
    // with a new THP; no PMD split.
    let mut m = machine(&[(&size_knob(2048), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(4 * MIB);
    assert_eq!(p.read(addr, 4 * MIB), 2);
    assert_eq!(p.stat("thp_zero_page_alloc"), 1);
    assert_eq!(p.stat("thp_fault_alloc"), 0);
    assert_eq!(p.write(addr, 2 * MIB), 1);
    assert_eq!(p.stat("thp_fault_alloc"), 1);
    assert_eq!(p.stat("thp_split_pmd"), 0);
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 2048);
    p.check();
}

#[test]
fn without_the_zero_page_knob_a_read_fault_allocates_a_thp() {
    let mut m = machine(&[
        (&size_knob(2048), "always"),
        ("transparent_hugepage/use_zero_page", "0"),
    ]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    assert_eq!(p.read(addr, 2 * MIB), 1, "a read fault allocates the THP");
    assert_eq!(p.stat("thp_zero_page_alloc"), 0);
    assert_eq!(p.stat("thp_fault_alloc"), 1);
    p.check();
}

#[test]
fn partial_munmap_of_mthp_queues_then_drop_caches_splits() {
    let mut m = machine(&[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    // PMD-multiple lengths are PMD-aligned, so every 64K block is whole.
    let addr = p.mmap(2 * MIB);
    p.write(addr, MIB);
    assert_eq!(p.mthp(64, MthpStat::NrAnon), 16);
    // Unmap the first 4K of every other folio.
    for i in (0..16).step_by(2) {
        p.munmap(addr + i * 64 * KIB, PAGE);
    }
    assert_eq!(p.mthp(64, MthpStat::SplitDeferred), 8);
    assert_eq!(p.mthp(64, MthpStat::NrAnonPartiallyMapped), 8);
    assert_eq!(p.m.vm().deferred_split_len(), 8);
    assert_eq!(p.stat("nr_anon_pages"), 256 - 8);
    p.check();
    let free_before = p.stat("nr_free_pages") + p.m.page_alloc().nr_pcp_pages();
    p.drop_caches();
    assert_eq!(p.mthp(64, MthpStat::Split), 8);
    assert_eq!(p.mthp(64, MthpStat::NrAnon), 8);
    assert_eq!(p.mthp(64, MthpStat::NrAnonPartiallyMapped), 0);
    assert_eq!(p.m.vm().deferred_split_len(), 0);
    let free_after = p.stat("nr_free_pages") + p.m.page_alloc().nr_pcp_pages();
    assert_eq!(
        free_after - free_before,
        8,
        "the unmapped page of each split folio is freed"
    );
    assert_eq!(p.stat("thp_split_page"), 0, "only PMD-sized splits count in vmstat");
    p.check();
}

/// One anon_vma holding many VMAs (partial munmaps split the mapping into
/// 64 pieces in the parent and in a forked child): each split walks the
/// rmap through the anon_vma's VMA index and finds exactly the folio's
/// mappings in both processes.
#[test]
fn splits_find_their_mappings_among_many_vmas_of_one_anon_vma() {
    let mut m = machine(&[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(4 * MIB);
    p.write(addr, 4 * MIB);
    assert_eq!(p.mthp(64, MthpStat::NrAnon), 64);
    let child = p.fork();
    // Both unmap the first 4K of each folio: 64 VMAs each, all on the
    // parent's anon_vma; each folio is partially mapped once the second
    // process lets go of that page.
    for pid in [p.pid, child] {
        for i in 0..64 {
            p.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr + i * 64 * KIB, PAGE))
                .unwrap();
        }
    }
    assert_eq!(p.mthp(64, MthpStat::SplitDeferred), 64);
    p.check();
    p.drop_caches();
    // Each split remapped the folio's 15 mapped pages in both mms.
    assert_eq!(p.mthp(64, MthpStat::Split), 64);
    assert_eq!(p.mthp(64, MthpStat::NrAnon), 0);
    assert_eq!(p.stat("nr_anon_pages"), 64 * 15);
    p.check();
    // The child writes every page it still maps: each is shared with the
    // parent, so each write copies it.
    let mut copies = 0;
    for i in 0..64 {
        copies += p.touch(child, addr + i * 64 * KIB + PAGE, 60 * KIB, true);
    }
    assert_eq!(copies, 64 * 15);
    assert_eq!(p.stat("nr_anon_pages"), 2 * 64 * 15);
    p.exit(child);
    assert_eq!(p.stat("nr_anon_pages"), 64 * 15);
    p.check();
}

#[test]
fn partial_munmap_of_a_pmd_thp_splits_the_pmd_and_queues_the_folio() {
    let mut m = machine(&[(&size_knob(2048), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    p.write(addr, 2 * MIB);
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 2048);
    p.munmap(addr + MIB, MIB);
    assert_eq!(p.stat("thp_split_pmd"), 1);
    assert_eq!(p.stat("thp_deferred_split_page"), 1);
    assert_eq!(p.mthp(2048, MthpStat::SplitDeferred), 1);
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 0, "no longer PMD-mapped");
    assert_eq!(meminfo_kb(p.m, "AnonPages"), 1024);
    p.check();
    p.drop_caches();
    assert_eq!(p.stat("thp_split_page"), 1);
    assert_eq!(p.mthp(2048, MthpStat::Split), 1);
    assert_eq!(meminfo_kb(p.m, "AnonPages"), 1024);
    p.check();
}

#[test]
fn madv_dontneed_of_part_of_a_folio_makes_it_partially_mapped() {
    let mut m = machine(&[(&size_knob(32), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    p.write(addr, 256 * KIB);
    p.madvise(addr + 8 * KIB, 8 * KIB, Advice::DontNeed);
    assert_eq!(p.mthp(32, MthpStat::SplitDeferred), 1);
    // Unmapping a whole folio frees it: no deferred split.
    p.madvise(addr + 32 * KIB, 32 * KIB, Advice::DontNeed);
    assert_eq!(p.mthp(32, MthpStat::SplitDeferred), 1);
    assert_eq!(p.mthp(32, MthpStat::NrAnon), 7);
    p.check();
}

#[test]
fn underused_thps_are_split_when_max_ptes_none_allows() {
    // Real bytes decide what is zero-filled: the ram backing.
    let config = MachineConfig {
        mem_bytes: 512 * MIB,
        backing: BackingKind::Ram,
        ..MachineConfig::default()
    };
    let knobs = [
        (size_knob(2048), "always".to_string()),
        ("transparent_hugepage/khugepaged/max_ptes_none".into(), "64".into()),
    ];
    let knobs: Vec<(&str, &str)> = knobs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut m = machine_with(config, &knobs);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(4 * MIB);
    // First THP: one page written. Second: every page written.
    p.write(addr, PAGE);
    p.write(addr + 2 * MIB, 2 * MIB);
    assert_eq!(p.m.vm().deferred_split_len(), 2, "fresh THPs are underused candidates");
    p.drop_caches();
    assert_eq!(p.stat("thp_underused_split_page"), 1);
    assert_eq!(p.stat("thp_split_page"), 1);
    assert_eq!(p.m.vm().deferred_split_len(), 0, "the used THP left the queue");
    // The 511 zero-filled pages now map the shared zero page.
    assert_eq!(p.stat("nr_anon_pages"), 1 + 512);
    assert_eq!(p.m.vm().rss_anon(p.pid), Some(1 + 512));
    p.check();
}

#[test]
fn default_max_ptes_none_never_splits_underused_thps() {
    let mut m = machine(&[(&size_knob(2048), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    p.write(addr, PAGE);
    p.drop_caches();
    assert_eq!(p.stat("thp_underused_split_page"), 0);
    assert_eq!(p.m.vm().deferred_split_len(), 0, "dropped from the queue as used");
    p.check();
}

#[test]
fn madv_free_folios_are_discarded_under_pressure_unless_written_again() {
    let config = MachineConfig {
        mem_bytes: 256 * MIB,
        ..MachineConfig::default()
    };
    let mut m = machine_with(config, &[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let a = p.mmap(32 * MIB);
    p.write(a, 32 * MIB);
    p.madvise(a, 32 * MIB, Advice::Free);
    assert_eq!(p.stat("pglazyfree"), 8192);
    assert_eq!(meminfo_kb(p.m, "Inactive(file)"), 32 * 1024);
    // Write again to the first MiB: those folios are dirty and stay.
    p.write(a, MIB);
    // Fill memory: reclaim discards the clean lazyfree folios.
    let b = p.mmap(200 * MIB);
    p.write(b, 200 * MIB);
    assert!(p.stat("pglazyfreed") > 0, "reclaim discarded lazyfree folios");
    assert_eq!(p.stat("oom_kill"), 0);
    assert_eq!(p.read(a, MIB), 0, "the rewritten MiB is still mapped");
    p.check();
}

#[test]
fn running_out_of_memory_kills_the_biggest_process() {
    let config = MachineConfig {
        mem_bytes: 128 * MIB,
        ..MachineConfig::default()
    };
    let mut m = machine_with(config, &[]);
    let small = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let big = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let (results, killed) = m.with_vm(0, |vm, ctx| {
        let a = vm
            .mmap(ctx, small, 0, 4 * MIB, Prot::READ | Prot::WRITE, flags)
            .unwrap();
        for off in (0..4 * MIB).step_by(PAGE as usize) {
            vm.access(ctx, small, a + off, true).unwrap();
        }
        let b = vm
            .mmap(ctx, big, 0, 256 * MIB, Prot::READ | Prot::WRITE, flags)
            .unwrap();
        let mut results = Vec::new();
        for off in (0..256 * MIB).step_by(PAGE as usize) {
            match vm.access(ctx, big, b + off, true) {
                Ok(Access::Faulted) => {}
                other => {
                    results.push(other);
                    break;
                }
            }
        }
        (results, vm.oom_kills().to_vec())
    });
    assert_eq!(results, vec![Ok(Access::Oom)]);
    assert_eq!(killed.len(), 1);
    assert_eq!(killed[0].victim, big);
    assert!(!m.vm().task(big).unwrap().alive);
    assert!(m.vm().task(small).unwrap().alive);
    assert_eq!(vmstat_value(&m, "oom_kill"), 1);
    assert_eq!(vmstat_value(&m, "nr_anon_pages"), 1024, "the victim's memory came back");
    m.check().unwrap();
}

#[test]
fn prctl_thp_disable_and_its_except_advised_mode() {
    let mut m = machine(&[
        (&size_knob(64), "madvise"),
        (&size_knob(32), "always"),
        (&size_knob(2048), "never"),
    ]);
    let mut p = Proc::spawn(&mut m);
    let pid = p.pid;
    p.m.with_vm(0, |vm, _| vm.prctl_thp_disable(pid, ThpDisable::Completely))
        .unwrap();
    let a = p.mmap(2 * MIB);
    p.madvise(a, 2 * MIB, Advice::HugePage);
    assert_eq!(p.write(a, MIB), 256, "no large folio at all");
    p.m.with_vm(0, |vm, _| vm.prctl_thp_disable(pid, ThpDisable::ExceptAdvised))
        .unwrap();
    let b = p.mmap(2 * MIB);
    assert_eq!(p.write(b, MIB), 256, "not advised: still disabled");
    let c = p.mmap(2 * MIB);
    p.madvise(c, 2 * MIB, Advice::HugePage);
    assert_eq!(p.write(c, MIB), 16, "advised: 64K folios");
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 16);
    p.check();
}

#[test]
fn anon_beside_full_declines_a_size_until_a_neighbour_block_is_full() {
    // Host kernel knob: per 2 MiB page table, the first 64K block is
    // faulted 4K at a time (64K declined once), every later block gets a
    // 64K folio because the block beside it is full.
    let mut m = machine(&[
        (&size_knob(64), "always"),
        ("transparent_hugepage/anon_beside_full", "1"),
    ]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(128 * MIB);
    let faults = p.write(addr, 128 * MIB);
    assert_eq!(faults, 64 * (16 + 31));
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 64 * 31);
    assert_eq!(p.mthp(64, MthpStat::AnonFaultDeclined), 64);
    assert_eq!(
        p.mthp(64, MthpStat::AnonFaultFallback),
        0,
        "declining is not a fallback"
    );
    p.check();
}

#[test]
fn mthp_sizes_fall_back_order_by_order_when_memory_is_fragmented() {
    // A machine whose free memory is all order-0 fragments: every size
    // falls back, each counted once per fault.
    let config = MachineConfig {
        mem_bytes: 64 * MIB,
        kernel_reserved_bytes: MIB,
        ..MachineConfig::default()
    };
    let mut m = machine_with(config, &[(&size_knob(16), "always"), (&size_knob(64), "always")]);
    // Take every free page (ignoring watermarks), then give back every
    // other one by pfn: no free block above order 0 remains.
    let mut pinned = Vec::new();
    let pin = GFP_KERNEL | Gfp::NORETRY | Gfp::MEMALLOC;
    while let Ok(Some(f)) = m.alloc_pages(0, pin, 0) {
        pinned.push(f);
    }
    pinned.sort_by_key(|f| f.pfn);
    for f in pinned.iter().skip(1).step_by(2).take(4000) {
        m.free_folio(0, *f).unwrap();
    }
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    let before = p.mthp(64, MthpStat::AnonFaultFallback);
    p.write(addr, PAGE);
    assert_eq!(p.mthp(64, MthpStat::AnonFaultFallback) - before, 1);
    assert_eq!(p.mthp(16, MthpStat::AnonFaultFallback), 1);
    assert_eq!(p.mthp(16, MthpStat::AnonFaultAlloc), 0);
    p.check();
}

#[test]
fn the_stack_grows_down_on_access_up_to_its_limit() {
    let mut m = machine(&[]);
    let mut p = Proc::spawn(&mut m);
    let pid = p.pid;
    let stack =
        p.m.vm()
            .maps(pid)
            .unwrap()
            .into_iter()
            .find(|v| v.flags.contains(largo_mm::vm::types::VmFlags::GROWSDOWN))
            .unwrap();
    // 100 pages below the stack: it grows.
    let below = stack.start - 100 * PAGE;
    assert_eq!(p.write(below, PAGE), 1);
    let grown =
        p.m.vm()
            .maps(pid)
            .unwrap()
            .into_iter()
            .find(|v| v.end == stack.end)
            .unwrap();
    assert_eq!(grown.start, below);
    // Beyond RLIMIT_STACK (8 MiB): SIGSEGV.
    let far = stack.end - (9 << 20);
    let r = p.m.with_vm(0, |vm, ctx| vm.access(ctx, pid, far, true)).unwrap();
    assert_eq!(r, Access::Segv(largo_mm::vm::SegvCode::MapErr));
    p.check();
}

#[test]
fn exec_replaces_the_address_space_and_vfork_borrows_it() {
    let mut m = machine(&[]);
    let mut p = Proc::spawn(&mut m);
    let a = p.mmap(2 * MIB);
    p.write(a, 2 * MIB);
    let parent = p.pid;
    let child = p.m.with_vm(0, |vm, _| vm.spawn_vfork(parent)).unwrap();
    // The vfork child writes into the parent's memory: no new pages.
    assert_eq!(p.touch(child, a, 2 * MIB, true), 0);
    p.m.with_vm(0, |vm, ctx| vm.exec(ctx, child)).unwrap();
    assert!(
        p.m.vm().maps(child).unwrap().is_empty(),
        "a fresh image has no mappings yet"
    );
    assert_eq!(p.stat("nr_anon_pages"), 512, "the parent's memory stays");
    p.m.with_vm(0, |vm, _| vm.set_brk_start(child, 0x5555_5555_8000))
        .unwrap();
    let brk =
        p.m.with_vm(0, |vm, ctx| vm.brk(ctx, child, 0x5555_5555_8000 + 64 * KIB))
            .unwrap();
    assert_eq!(brk, 0x5555_5555_8000 + 64 * KIB);
    assert_eq!(p.touch(child, 0x5555_5555_8000, 64 * KIB, true), 16);
    p.exit(child);
    p.check();
}

#[test]
fn thpmaps_counts_every_pmd_mapping() {
    let mut m = machine(&[(&size_knob(2048), "always")]);
    let mut p = Proc::spawn(&mut m);
    let a = p.mmap(6 * MIB);
    p.write(a, 6 * MIB);
    let t = p.m.vm().thpmaps(p.m.page_alloc());
    assert_eq!((t.pmd_pages, t.anon_pages), (3 * 512, 3 * 512));
}

#[test]
fn the_heap_never_merges_with_the_bss_below_it_but_grows_in_place() {
    // 64 KiB mTHP: a merged bss+heap VMA would let one fault span both.
    let mut m = machine(&[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let pid = p.pid;
    let bss = 0x5555_5554_0000;
    let start_brk = bss + 64 * KIB;
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    p.m.with_vm(0, |vm, ctx| {
        vm.mmap(ctx, pid, bss, 64 * KIB, Prot::READ | Prot::WRITE, flags)
    })
    .unwrap();
    p.m.with_vm(0, |vm, _| vm.set_brk_start(pid, start_brk)).unwrap();
    for step in 1..=3 {
        p.m.with_vm(0, |vm, ctx| vm.brk(ctx, pid, start_brk + step * 64 * KIB))
            .unwrap();
    }
    let spans: Vec<(u64, u64)> =
        p.m.vm()
            .maps(pid)
            .unwrap()
            .iter()
            .map(|v| (v.start, v.end))
            .filter(|&(s, _)| s < 0x7000_0000_0000)
            .collect();
    assert_eq!(
        spans,
        vec![(bss, start_brk), (start_brk, start_brk + 3 * 64 * KIB)],
        "the bss stays apart and three brk calls make one heap VMA"
    );
    // A fault at the heap's first page may use a 64 KiB folio of its own.
    assert_eq!(p.write(start_brk, 64 * KIB), 1);
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 1);
    p.check();
}

#[test]
fn an_exec_page_is_order_0_whatever_the_thp_settings() {
    let mut m = machine(&[(&size_knob(64), "always"), (&size_knob(2048), "always")]);
    let mut p = Proc::spawn(&mut m);
    let pid = p.pid;
    let a = p.mmap(2 * MIB);
    let r = p.m.with_vm(0, |vm, ctx| vm.exec_page(ctx, pid, a + MIB)).unwrap();
    assert_eq!(r, Access::Faulted);
    assert_eq!(p.stat("nr_anon_pages"), 1);
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 0);
    assert_eq!(p.stat("thp_fault_alloc"), 0);
    // The next ordinary write fault next to it still picks a large order
    // where the PTE range is empty.
    assert_eq!(p.write(a, 64 * KIB), 1);
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 1);
    p.check();
}

#[test]
fn file_mappings_hold_address_space_without_pages_and_shared_ones_get_shmem() {
    use largo_mm::vm::types::VmaBacking;
    use largo_mm::vm::SegvCode;
    let mut m = machine(&[]);
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let rw = Prot::READ | Prot::WRITE;
    let mmap = |m: &mut Machine, addr: u64, prot: Prot, flags: MapFlags| {
        m.with_vm(0, |vm, ctx| {
            vm.mmap(ctx, pid, addr, 64 * KIB, prot, flags | MapFlags::FIXED)
        })
        .unwrap()
    };
    let access =
        |m: &mut Machine, addr: u64, write: bool| m.with_vm(0, |vm, ctx| vm.access(ctx, pid, addr, write)).unwrap();
    let base = 0x7f00_0000_0000u64;
    let file = mmap(&mut m, base, Prot::READ, MapFlags::PRIVATE);
    let shared = mmap(&mut m, base + 64 * KIB, rw, MapFlags::SHARED | MapFlags::ANONYMOUS);
    let anon = mmap(&mut m, base + 128 * KIB, rw, MapFlags::PRIVATE | MapFlags::ANONYMOUS);
    let faults = vmstat_value(&m, "pgfault");
    // Reads of the file are allowed but not modelled; a write to the
    // read-only file mapping and an access outside every mapping are what
    // the program would get: SIGSEGV.
    assert_eq!(access(&mut m, file, false), Access::NotModelled);
    assert_eq!(access(&mut m, file, true), Access::Segv(SegvCode::AccErr));
    assert_eq!(access(&mut m, base + 256 * KIB, false), Access::Segv(SegvCode::MapErr));
    assert_eq!(vmstat_value(&m, "pgfault"), faults, "no modelled fault");
    // The shared anonymous mapping is shmem: a write allocates a page of
    // its inode's page cache.
    assert_eq!(access(&mut m, shared + PAGE, true), Access::Faulted);
    assert_eq!(vmstat_value(&m, "nr_shmem"), 1);
    assert_eq!(access(&mut m, anon, true), Access::Faulted);
    // Three VMAs, never merged across backings; /proc/PID/maps says 's'.
    let maps = m.vm().maps(pid).unwrap();
    let ours: Vec<_> = maps
        .iter()
        .filter(|v| v.start >= base && v.end <= base + 192 * KIB)
        .collect();
    assert_eq!(ours.len(), 3, "{ours:?}");
    assert_eq!(ours[0].backing, VmaBacking::File);
    assert_eq!(ours[1].backing, VmaBacking::Shmem);
    assert_eq!(ours[1].perms(), "rw-s");
    assert_eq!(ours[2].backing, VmaBacking::Anon);
    // MADV_FREE stops at the first non-anonymous VMA, as the kernel's walk does.
    let r = m.with_vm(0, |vm, ctx| vm.madvise(ctx, pid, base, 192 * KIB, Advice::Free));
    assert!(matches!(r, Err(largo_mm::vm::VmError::Invalid(_))), "{r:?}");
    // mprotect makes the file writable; a fork keeps every mapping.
    m.with_vm(0, |vm, ctx| vm.mprotect(ctx, pid, file, 64 * KIB, rw))
        .unwrap();
    assert_eq!(access(&mut m, file, true), Access::NotModelled);
    let child = m.with_vm(0, |vm, ctx| vm.fork(ctx, pid)).unwrap();
    assert_eq!(m.vm().maps(child).unwrap().len(), maps.len());
    // The child faults the parent's shmem page back in: nothing new.
    assert_eq!(
        m.with_vm(0, |vm, ctx| vm.access(ctx, child, shared + PAGE, true))
            .unwrap(),
        Access::Faulted
    );
    assert_eq!(vmstat_value(&m, "nr_shmem"), 1);
    m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, base, 128 * KIB)).unwrap();
    assert_eq!(access(&mut m, shared, false), Access::Segv(SegvCode::MapErr));
    assert_eq!(vmstat_value(&m, "nr_shmem"), 1, "the child's VMA keeps the inode");
    m.with_vm(0, |vm, ctx| vm.exit(ctx, child)).unwrap();
    assert_eq!(vmstat_value(&m, "nr_shmem"), 0, "the last VMA gone, the inode goes");
    m.check().unwrap();
    m.vm().check_invariants(m.page_alloc()).unwrap();
}

/// MADV_COLLAPSE: whole PMD ranges of the advised range become PMD folios
/// whatever the sysfs settings (on the ram backing, so pages are really
/// copied and zeroed); an untouched PMD ends the walk with EINVAL.
#[test]
fn madv_collapse_makes_pmd_folios_of_whole_ranges() {
    let config = MachineConfig {
        mem_bytes: 512 * MIB,
        backing: BackingKind::Ram,
        ..MachineConfig::default()
    };
    let mut m = machine_with(config, &[(&size_knob(64), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(8 * MIB);
    // 64K folios in the first 3 MiB, at the start of each 64K.
    for i in 0..48 {
        p.write(addr + i * 64 * KIB, PAGE);
    }
    assert_eq!(p.mthp(64, MthpStat::AnonFaultAlloc), 48);
    // [addr + 1M, addr + 5M) holds one whole PMD range, [2M, 4M): the
    // first and the third PMD are only partly covered.
    p.madvise(addr + MIB, 4 * MIB, Advice::Collapse);
    assert_eq!(p.stat("thp_collapse_alloc"), 1);
    assert_eq!(p.mthp(64, MthpStat::NrAnon), 32, "the 16 folios of [2M, 3M) are gone");
    assert_eq!(p.mthp(64, MthpStat::SplitDeferred), 0, "unmapped as whole folios");
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 2048);
    assert_eq!(meminfo_kb(p.m, "AnonPages"), 32 * 64 + 2048);
    // The whole range again: [0, 2M) collapses, [2M, 4M) is already
    // PMD-mapped, [4M, 6M) was never touched: the walk ends there.
    let err = p.try_madvise(addr, 8 * MIB, Advice::Collapse).unwrap_err();
    assert_eq!(err.errno(), -22, "{err}");
    assert_eq!(p.stat("thp_collapse_alloc"), 2);
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 4096);
    p.check();
    p.exit(p.pid);
    p.check();
}

/// MADV_COLLAPSE needs a VMA with an anon_vma (one written before) and
/// THPs allowed; since 6.18 not a writable entry: a range of zero-page
/// entries only collapses (scenarios `collapse-read-only` and
/// `collapse-zero-range` check both against the host).
#[test]
fn madv_collapse_needs_an_anon_vma_and_allowed_thps_not_a_writable_entry() {
    let mut m = machine(&[]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(4 * MIB);
    p.read(addr, 2 * MIB);
    let err = p.try_madvise(addr, 2 * MIB, Advice::Collapse).unwrap_err();
    assert_eq!(err.errno(), -22, "never written, no anon_vma: {err}");
    assert_eq!(p.stat("thp_collapse_alloc"), 0);
    p.write(addr + 2 * MIB, PAGE);
    p.madvise(addr, 2 * MIB, Advice::Collapse);
    assert_eq!(p.stat("thp_collapse_alloc"), 1, "zero-page entries only, collapsed");
    p.madvise(addr + 2 * MIB, 2 * MIB, Advice::NoHugePage);
    let err = p.try_madvise(addr + 2 * MIB, 2 * MIB, Advice::Collapse).unwrap_err();
    assert_eq!(err.errno(), -22, "VM_NOHUGEPAGE: {err}");
    p.madvise(addr + 2 * MIB, 2 * MIB, Advice::HugePage);
    p.madvise(addr + 2 * MIB, 2 * MIB, Advice::Collapse);
    assert_eq!(p.stat("thp_collapse_alloc"), 2);
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 4096);
    // A range holding no whole PMD of a large enough VMA is no work when
    // it contains a PMD boundary, and EINVAL when it does not: the kernel's
    // unsigned (hend - hstart) >> PMD_SHIFT wraps (the host returns the same).
    p.madvise(addr + 2 * MIB - PAGE, 2 * PAGE, Advice::Collapse);
    let err = p.try_madvise(addr + 2 * MIB + PAGE, MIB, Advice::Collapse).unwrap_err();
    assert_eq!(err.errno(), -22, "{err}");
    assert_eq!(p.stat("thp_collapse_alloc"), 2);
    p.check();
    // A VMA with no room for a PMD block is refused outright.
    let mut m = machine(&[]);
    let mut p = Proc::spawn(&mut m);
    let small = p.mmap(MIB);
    p.write(small, PAGE);
    let err = p.try_madvise(small, MIB, Advice::Collapse).unwrap_err();
    assert_eq!(err.errno(), -22, "{err}");
    p.check();
}

fn shmem_knob(kb: u64) -> String {
    format!("transparent_hugepage/hugepages-{kb}kB/shmem_enabled")
}

/// Shared anonymous memory under per-size shmem_enabled: a write
/// allocates the folio of the largest allowed size and maps it whole; a
/// read allocates too (no zero page); a start not aligned to the size
/// gets no folio of it.
#[test]
fn shared_anonymous_memory_takes_shmem_folios_mapped_whole() {
    let mut m = machine(&[(&shmem_knob(64), "always")]);
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let rw = Prot::READ | Prot::WRITE;
    let shared = MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED;
    let base = 0x7f00_0000_0000u64;
    let mut p = Proc { m: &mut m, pid };
    p.m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, base, MIB, rw, shared))
        .unwrap();
    assert_eq!(p.write(base, 512 * KIB), 8, "one fault per 64K folio");
    assert_eq!(
        p.read(base + 512 * KIB, 512 * KIB),
        8,
        "reads allocate and map whole folios"
    );
    assert_eq!(p.mthp(64, MthpStat::ShmemAlloc), 16);
    assert_eq!(p.stat("nr_shmem"), 256);
    assert_eq!(p.stat("nr_mapped"), 256);
    assert_eq!(p.stat("nr_anon_pages"), 0);
    // Misaligned by one page: no 64K folio fits the file offset.
    let odd = base + 4 * MIB + PAGE;
    p.m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, odd, 256 * KIB, rw, shared))
        .unwrap();
    assert_eq!(p.write(odd, 256 * KIB), 64);
    assert_eq!(p.mthp(64, MthpStat::ShmemAlloc), 16);
    p.check();
    p.m.vm().check_invariants(p.m.page_alloc()).unwrap();
    p.exit(pid);
    assert_eq!(p.stat("nr_shmem"), 0);
    assert_eq!(p.stat("nr_mapped"), 0);
}

/// A memfd: at order 0 a read maps the cached neighbours of the page in
/// the 64 KiB fault-around window; a PMD-sized folio is mapped by a PMD
/// only where the file offset is PMD-aligned in the VMA; punching a hole
/// frees the whole folios in it; the last close of an unmapped memfd
/// frees its page cache.
#[test]
fn memfd_fault_around_pmd_mapping_and_hole_punching() {
    let mut m = machine(&[]);
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let rw = Prot::READ | Prot::WRITE;
    let base = 0x7f00_0000_0000u64;
    let fixed = MapFlags::SHARED | MapFlags::FIXED;
    m.with_vm(0, |vm, ctx| -> Result<(), VmError> {
        vm.memfd_create(ctx, pid, 3)?;
        vm.ftruncate(ctx, pid, 3, 4 * MIB)?;
        vm.mmap_fd(ctx, pid, base, 4 * MIB, rw, fixed, 3, 0)?;
        vm.mmap_fd(ctx, pid, base + 8 * MIB, 4 * MIB, rw, fixed, 3, 0)?;
        Ok(())
    })
    .unwrap();
    let mut p = Proc { m: &mut m, pid };
    assert_eq!(p.write(base, 64 * KIB), 16, "order 0: one fault a page");
    assert_eq!(p.read(base + 8 * MIB, 64 * KIB), 1, "fault-around maps the other 15");
    assert_eq!(p.stat("nr_shmem"), 16);
    // PMD folios (the top level `always` makes the PMD size, inherit, allowed).
    p.m.set_knob("transparent_hugepage/shmem_enabled", "always").unwrap();
    assert_eq!(p.write(base + 2 * MIB, 2 * MIB), 1);
    assert_eq!(p.stat("thp_file_alloc"), 1);
    assert_eq!(p.stat("thp_file_mapped"), 1);
    assert_eq!(
        p.read(base + 8 * MIB + 2 * MIB, 2 * MIB),
        1,
        "fault-around maps the PMD"
    );
    assert_eq!(p.stat("thp_file_mapped"), 2);
    assert_eq!(meminfo_kb(p.m, "ShmemPmdMapped"), 2048);
    p.m.with_vm(0, |vm, ctx| vm.punch_hole(ctx, pid, 3, 2 * MIB, 2 * MIB))
        .unwrap();
    assert_eq!(p.stat("nr_shmem"), 16);
    assert_eq!(meminfo_kb(p.m, "ShmemHugePages"), 0);
    p.m.vm().check_invariants(p.m.page_alloc()).unwrap();
    p.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, base, 16 * MIB)).unwrap();
    assert_eq!(p.stat("nr_shmem"), 16, "the descriptor keeps the inode");
    p.m.with_vm(0, |vm, ctx| vm.close(ctx, pid, 3)).unwrap();
    assert_eq!(p.stat("nr_shmem"), 0);
    p.check();
}

/// A new process with memfd 3 of `size` bytes mapped shared and read-write
/// at a fixed address; returns its pid and the address.
fn memfd_mapped(m: &mut Machine, size: u64) -> (u32, u64) {
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let base = 0x7f00_0000_0000u64;
    let (rw, shared) = (Prot::READ | Prot::WRITE, MapFlags::SHARED | MapFlags::FIXED);
    m.with_vm(0, |vm, ctx| -> Result<(), VmError> {
        vm.memfd_create(ctx, pid, 3)?;
        vm.ftruncate(ctx, pid, 3, size)?;
        vm.mmap_fd(ctx, pid, base, size, rw, shared, 3, 0)?;
        Ok(())
    })
    .unwrap();
    (pid, base)
}

/// A hole punched through the middle of a PMD-mapped memfd folio: the
/// folio is split non-uniformly at the hole's first page, the piece
/// holding the page after the hole is split there too, the pages inside
/// are freed and the rest stays cached, unmapped (`thp_split_pmd`), and
/// faults back in by PTEs. Counts as on the 6.18 host (scenario
/// `memfd-punch-partial`): `split` once per folio split, for its size.
#[test]
fn a_hole_through_a_large_memfd_folio_splits_it_and_frees_only_the_hole() {
    let mut m = machine(&[("transparent_hugepage/shmem_enabled", "always")]);
    let (pid, base) = memfd_mapped(&mut m, 2 * MIB);
    let mut p = Proc { m: &mut m, pid };
    assert_eq!(p.write(base, 2 * MIB), 1);
    assert_eq!(p.stat("thp_file_mapped"), 1);
    // Pages 0x41 and 0x42 go: a split at 0x41 (order 9 into ten pieces),
    // then the order-1 piece [0x42, 0x44) is split at 0x43.
    p.m.with_vm(0, |vm, ctx| vm.punch_hole(ctx, pid, 3, 0x41 * PAGE, 2 * PAGE))
        .unwrap();
    assert_eq!(p.stat("nr_shmem"), 510);
    assert_eq!(p.stat("thp_split_page"), 1);
    assert_eq!(p.stat("thp_split_pmd"), 1);
    assert_eq!(p.mthp(2048, MthpStat::Split), 1);
    assert_eq!(meminfo_kb(p.m, "ShmemHugePages"), 0);
    assert_eq!(p.stat("nr_mapped"), 0, "the split unmapped the rest");
    p.check();
    // A hole inside one of the pieces (pages 0x100..0x200 are one order-8
    // piece): split at 0x110, then the piece holding 0x118 at 0x118.
    p.m.with_vm(0, |vm, ctx| vm.punch_hole(ctx, pid, 3, 0x110 * PAGE, 8 * PAGE))
        .unwrap();
    assert_eq!(p.stat("nr_shmem"), 502);
    assert_eq!(p.mthp(1024, MthpStat::Split), 1, "the order-8 piece");
    assert_eq!(p.mthp(32, MthpStat::Split), 1, "the order-3 piece [0x118, 0x120)");
    // Reading it all maps the cached pages back and fills the holes.
    p.read(base, 2 * MIB);
    assert_eq!(p.stat("nr_shmem"), 512);
    assert_eq!(p.stat("nr_mapped"), 512);
    p.check();
}

/// Unmapping a young shmem mapping marks its folios accessed
/// (`zap_present_folio_ptes`, `zap_huge_pmd`): the first time sets
/// PG_referenced, the second activates them, order-0 folios through the
/// cpu's `activate` batch (31 at a time), a PMD-sized folio at once. A
/// PMD split away (the hole punched here) only sets PG_referenced. As on
/// the 6.18 host (scenarios `shmem-zap-recency`,
/// `shmem-punch-split-referenced`).
#[test]
fn unmapping_a_young_shmem_mapping_twice_activates_its_folios() {
    let huge = [("transparent_hugepage/shmem_enabled", "always")];
    for (knobs, activated) in [(&[][..], 16 * 31), (&huge[..], 512)] {
        let mut m = machine(knobs);
        let (pid, base) = memfd_mapped(&mut m, 2 * MIB);
        let mut p = Proc { m: &mut m, pid };
        for round in 0..2 {
            if round > 0 {
                let (rw, shared) = (Prot::READ | Prot::WRITE, MapFlags::SHARED | MapFlags::FIXED);
                p.m.with_vm(0, |vm, ctx| vm.mmap_fd(ctx, pid, base, 2 * MIB, rw, shared, 3, 0))
                    .unwrap();
            }
            p.read(base, 2 * MIB);
            p.munmap(base, 2 * MIB);
            p.check();
        }
        assert_eq!(p.stat("pgactivate"), activated, "{knobs:?}");
        assert_eq!(meminfo_kb(p.m, "Active(anon)"), activated * PAGE / KIB, "{knobs:?}");
    }
    // A split PMD leaves PG_referenced (no activation): the pieces mapped
    // again by PTEs are activated by the first munmap that follows.
    let mut m = machine(&huge);
    let (pid, base) = memfd_mapped(&mut m, 2 * MIB);
    let mut p = Proc { m: &mut m, pid };
    p.read(base, 2 * MIB);
    p.m.with_vm(0, |vm, ctx| vm.punch_hole(ctx, pid, 3, 0x41 * PAGE, PAGE))
        .unwrap();
    assert_eq!((p.stat("thp_split_pmd"), p.stat("pgactivate")), (1, 0));
    p.read(base, 2 * MIB);
    p.munmap(base, 2 * MIB);
    assert_eq!(p.stat("pgactivate"), 511, "every piece but the hole's page");
    p.check();
}

/// MADV_REMOVE (`madvise_remove`) punches the range's file offset out of
/// the shmem file: through a second mapping at another offset, the pages
/// leave the first mapping too; a private mapping of the memfd, a
/// read-only SysV attach and private anonymous memory are refused
/// (EACCES, EACCES, EINVAL) and keep their pages (scenario
/// `memfd-madv-remove`).
#[test]
fn madv_remove_punches_the_shared_file_through_any_of_its_mappings() {
    let mut m = machine(&[]);
    let (pid, base) = memfd_mapped(&mut m, 2 * MIB);
    let second = base + 8 * MIB;
    let rw = Prot::READ | Prot::WRITE;
    let (shared, private) = (MapFlags::SHARED | MapFlags::FIXED, MapFlags::PRIVATE | MapFlags::FIXED);
    m.with_vm(0, |vm, ctx| vm.mmap_fd(ctx, pid, second, MIB, rw, shared, 3, MIB))
        .unwrap();
    let mut p = Proc { m: &mut m, pid };
    p.write(base, 2 * MIB);
    assert_eq!(p.stat("nr_shmem"), 512);
    // File pages [0x110, 0x118): 8 pages, at second + 0x10 pages.
    let advise = |p: &mut Proc, addr: u64, len: u64| {
        p.m.with_vm(0, |vm, ctx| vm.madvise(ctx, pid, addr, len, Advice::Remove))
    };
    advise(&mut p, second + 0x10 * PAGE, 8 * PAGE).unwrap();
    assert_eq!(p.stat("nr_shmem"), 504);
    assert_eq!(p.stat("nr_mapped"), 504, "gone from the first mapping too");
    let private_at = base + 16 * MIB;
    p.m.with_vm(0, |vm, ctx| vm.mmap_fd(ctx, pid, private_at, MIB, rw, private, 3, 0))
        .unwrap();
    assert_eq!(advise(&mut p, private_at, MIB).map_err(|e| e.errno()), Err(-13));
    let anon = base + 32 * MIB;
    p.m.with_vm(0, |vm, ctx| {
        vm.mmap(
            ctx,
            pid,
            anon,
            MIB,
            rw,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED,
        )
    })
    .unwrap();
    p.write(anon, MIB);
    assert_eq!(advise(&mut p, anon, MIB).map_err(|e| e.errno()), Err(-22));
    p.m.with_vm(0, |vm, _| vm.shmget(5, MIB)).unwrap();
    let attach = base + 48 * MIB;
    p.m.with_vm(0, |vm, ctx| vm.shmat(ctx, pid, 5, attach, false)).unwrap();
    assert_eq!(
        advise(&mut p, attach, MIB).map_err(|e| e.errno()),
        Err(-13),
        "SHM_RDONLY"
    );
    assert_eq!(p.stat("nr_shmem"), 504, "refused advice frees nothing");
    assert_eq!(p.stat("nr_anon_pages"), 256);
    p.check();
}

/// A read fault in a second mapping of cached 256K memfd folios: 6.18
/// fault-around maps each large folio it finds in the 64K window whole
/// (scenario `memfd-fault-around-whole`).
#[test]
fn fault_around_maps_a_large_memfd_folio_whole() {
    let mut m = machine(&[(&shmem_size_knob(256), "always")]);
    let (pid, base) = memfd_mapped(&mut m, 2 * MIB);
    let second = base + 8 * MIB;
    let (rw, shared) = (Prot::READ | Prot::WRITE, MapFlags::SHARED | MapFlags::FIXED);
    m.with_vm(0, |vm, ctx| vm.mmap_fd(ctx, pid, second, 2 * MIB, rw, shared, 3, 0))
        .unwrap();
    let mut p = Proc { m: &mut m, pid };
    assert_eq!(p.write(base, 2 * MIB), 8, "one fault per 256K folio");
    p.munmap(base, 2 * MIB);
    assert_eq!(p.stat("nr_mapped"), 0);
    assert_eq!(p.read(second + 64 * KIB, PAGE), 1);
    assert_eq!(
        p.stat("nr_mapped"),
        64,
        "the whole folio, not the 16 pages of the window"
    );
    p.check();
}

/// MADV_COLD over part of a PMD-mapped memfd folio splits it to order 0
/// (which unmaps it); over all of one deactivates it whole. As on the
/// host (scenario `memfd-cold-partial`).
#[test]
fn madv_cold_over_part_of_a_large_memfd_folio_splits_it() {
    let mut m = machine(&[("transparent_hugepage/shmem_enabled", "always")]);
    let (pid, base) = memfd_mapped(&mut m, 4 * MIB);
    let mut p = Proc { m: &mut m, pid };
    assert_eq!(p.write(base, 4 * MIB), 2);
    p.madvise(base + 2 * MIB, 2 * MIB, Advice::Cold);
    assert_eq!(p.stat("thp_split_page"), 0, "a whole PMD is deactivated, not split");
    p.madvise(base + 0x29000, 0x2b000, Advice::Cold);
    assert_eq!(p.stat("thp_split_page"), 1);
    assert_eq!(p.mthp(2048, MthpStat::Split), 1);
    assert_eq!(p.stat("nr_shmem"), 1024, "a split frees nothing");
    assert_eq!(meminfo_kb(p.m, "ShmemPmdMapped"), 2048);
    p.check();
}

/// khugepaged: an mm whose VMA gets MADV_HUGEPAGE joins the list and the
/// idle thread scans at the next chance; each qualifying PMD range is
/// collapsed (`pages_collapsed`), `pages_to_scan` limits a wake, the next
/// scan comes `scan_sleep_millisecs` later, and a range with more empty
/// entries than `max_ptes_none` is left (`thp_scan_exceed_none_pte`).
#[test]
fn khugepaged_collapses_registered_ranges_on_simulated_time() {
    let pmd_pages = 512u64;
    let mut m = machine(&[
        ("transparent_hugepage/khugepaged/pages_to_scan", &pmd_pages.to_string()),
        ("transparent_hugepage/khugepaged/max_ptes_none", "255"),
    ]);
    let mut p = Proc::spawn(&mut m);
    let base = p.mmap(8 * MIB);
    let aligned = base.next_multiple_of(2 * MIB);
    // Two full ranges and one a quarter full (384 empty entries).
    p.write(aligned, 4 * MIB);
    p.write(aligned + 4 * MIB, 512 * KIB);
    assert_eq!(p.stat("thp_fault_alloc"), 0, "no VM_HUGEPAGE yet: 4K faults");
    p.madvise(base, 8 * MIB, Advice::HugePage);
    let collapsed = |p: &Proc| p.m.vm().khugepaged.pages_collapsed;
    assert_eq!(collapsed(&p), 0, "nothing scans until time passes");
    p.m.advance_time(0);
    assert_eq!(collapsed(&p), 1, "one wake scans pages_to_scan = one range");
    p.m.advance_time(9_999_000_000);
    assert_eq!(collapsed(&p), 1, "the next scan is scan_sleep_millisecs later");
    p.m.advance_time(1_000_000);
    assert_eq!(collapsed(&p), 2);
    p.m.advance_time(60_000_000_000);
    assert_eq!(collapsed(&p), 2, "the quarter-full range stays");
    assert!(p.stat("thp_scan_exceed_none_pte") >= 1);
    assert_eq!(p.stat("thp_collapse_alloc"), 2);
    assert_eq!(p.mthp(2048, MthpStat::NrAnon), 2);
    assert_eq!(meminfo_kb(p.m, "AnonHugePages"), 4096);
    p.check();
    p.m.vm().check_invariants(p.m.page_alloc()).unwrap();
}

#[test]
fn a_sysv_segment_lives_until_removed_and_detached_and_ignores_the_per_size_knobs() {
    let mut m = machine(&[
        ("transparent_hugepage/hugepages-64kB/shmem_enabled", "always"),
        ("transparent_hugepage/shmem_enabled", "never"),
    ]);
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let base = 0x7f00_0000_0000u64;
    m.with_vm(0, |vm, _| vm.shmget(5, 4 * MIB + 1)).unwrap();
    assert_eq!(m.with_vm(0, |vm, _| vm.shmget(5, MIB)), Err(VmError::Exists));
    assert_eq!(m.with_vm(0, |vm, ctx| vm.shmat(ctx, pid, 5, base, true)), Ok(base));
    let len = 4 * MIB + PAGE; // the whole segment, in pages
    assert!(m
        .vm()
        .maps(pid)
        .unwrap()
        .iter()
        .any(|v| v.start == base && v.end == base + len));
    for off in (0..len).step_by(PAGE as usize) {
        m.with_vm(0, |vm, ctx| vm.access(ctx, pid, base + off, true)).unwrap();
    }
    // Not anonymous shmem: 4K folios despite the 64K per-size knob.
    assert_eq!(m.vm().mthp.get(4, MthpStat::ShmemAlloc), 0);
    assert_eq!(vmstat_value(&m, "nr_shmem"), len / PAGE);
    // Detached, the segment keeps its pages until IPC_RMID.
    m.with_vm(0, |vm, ctx| vm.shmdt(ctx, pid, base)).unwrap();
    assert!(m
        .vm()
        .maps(pid)
        .unwrap()
        .iter()
        .all(|v| v.end <= base || v.start >= base + len));
    assert_eq!(vmstat_value(&m, "nr_shmem"), len / PAGE);
    assert!(
        m.with_vm(0, |vm, ctx| vm.shmdt(ctx, pid, base)).is_err(),
        "nothing attached"
    );
    // Attached again then removed: the pages go with the last mapping.
    m.with_vm(0, |vm, ctx| vm.shmat(ctx, pid, 5, base, false)).unwrap();
    m.with_vm(0, |vm, ctx| vm.shm_rmid(ctx, 5)).unwrap();
    assert_eq!(vmstat_value(&m, "nr_shmem"), len / PAGE, "still attached");
    m.check().unwrap();
    m.with_vm(0, |vm, ctx| vm.shmdt(ctx, pid, base)).unwrap();
    assert_eq!(vmstat_value(&m, "nr_shmem"), 0);
    assert!(
        m.with_vm(0, |vm, ctx| vm.shmat(ctx, pid, 5, base, true)).is_err(),
        "removed"
    );
    m.check().unwrap();
}

/// An address at or above TASK_SIZE maps nothing for the user, even where
/// the page-table walk would wrap onto a mapped user page (the top index
/// takes only the address bits below TASK_SIZE): SIGSEGV, for a single
/// access and inside a run, and no fault is counted.
#[test]
fn accesses_above_task_size_are_sigsegv_not_hits() {
    let mut m = machine(&[]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(4 * PAGE);
    assert_eq!(p.write(addr, 4 * PAGE), 4);
    let pid = p.pid;
    let task_size = 0x7fff_ffff_f000u64;
    // addr + 2 pages + 2^47: the same top index modulo the 256 user
    // entries of the x86_64 root.
    let alias = addr + 2 * PAGE + (1 << 47);
    assert!(alias >= task_size);
    let faults = vmstat_value(p.m, "pgfault");
    let single = p.m.with_vm(0, |vm, ctx| vm.access(ctx, pid, alias, true));
    assert_eq!(single, Ok(Access::Segv(largo_mm::vm::SegvCode::MapErr)));
    let run =
        p.m.with_vm(0, |vm, ctx| vm.access_run(ctx, pid, addr, 1 << 47, 2, false));
    assert_eq!(
        (run.done, run.stop),
        (2, Some(Ok(Access::Segv(largo_mm::vm::SegvCode::MapErr))))
    );
    assert_eq!(
        vmstat_value(p.m, "pgfault"),
        faults,
        "a SIGSEGV above TASK_SIZE takes no fault"
    );
}

/// `mprotect_fixup` and `madvise_update_vma` return before splitting a VMA
/// whose flags would not change: an mprotect to the same protection, or
/// MADV_HUGEPAGE on a VMA that has it, inside a PMD-mapped THP splits
/// nothing (the host scenario `mprotect-unchanged` checks the same).
#[test]
fn mprotect_or_madvise_that_changes_no_flags_splits_no_vma_and_no_pmd() {
    let mut m = machine(&[(&size_knob(2048), "always")]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(4 * MIB);
    let pid = p.pid;
    let vmas_before = p.m.vm().maps(pid).unwrap().len();
    p.write(addr, 4 * MIB);
    assert_eq!(p.stat("thp_fault_alloc"), 2);
    p.mprotect(addr + 0x47000, MIB, Prot::READ | Prot::WRITE);
    p.madvise(addr + 0x247000, MIB, Advice::NoHugePage);
    assert_eq!(p.stat("thp_split_pmd"), 1, "only the advice that changes flags splits");
    p.madvise(addr + 0x247000, MIB, Advice::NoHugePage);
    p.mprotect(addr + 0x247000, MIB, Prot::READ | Prot::WRITE);
    assert_eq!(p.stat("thp_split_pmd"), 1);
    assert_eq!(
        p.m.vm().maps(pid).unwrap().len(),
        vmas_before + 2,
        "only the MADV_NOHUGEPAGE range is a VMA of its own"
    );
    p.check();
}

/// Dropping write from an anonymous VMA never faulted gives its commit
/// charge back (`mprotect_fixup` clears VM_ACCOUNT); making it writable
/// again charges it again. Measured on the 6.18 host with a 1 GiB mapping:
/// Committed_AS +1048576 kB, then +0, then +1048576 kB.
#[test]
fn mprotect_read_only_uncharges_the_commit_of_a_vma_never_faulted() {
    let mut m = machine(&[]);
    let mut p = Proc::spawn(&mut m);
    let base = meminfo_kb(p.m, "Committed_AS");
    let addr = p.mmap(1024 * MIB);
    assert_eq!(meminfo_kb(p.m, "Committed_AS") - base, 1024 * 1024);
    p.mprotect(addr, 1024 * MIB, Prot::READ);
    assert_eq!(meminfo_kb(p.m, "Committed_AS"), base);
    p.mprotect(addr, 1024 * MIB, Prot::READ | Prot::WRITE);
    assert_eq!(meminfo_kb(p.m, "Committed_AS") - base, 1024 * 1024);
    // Faulted once (an anon_vma), it keeps its charge read-only.
    p.write(addr, PAGE);
    p.mprotect(addr, 1024 * MIB, Prot::READ);
    assert_eq!(meminfo_kb(p.m, "Committed_AS") - base, 1024 * 1024);
    p.check();
}

/// A kswapd wakeup left pending by an allocation outside a fault runs
/// after the next fault, and a run of faults (`fault_run.rs`) must take
/// one page for that fault, not a batch it would not use: the machine
/// ends as with each fault made alone.
#[test]
fn a_kswapd_wakeup_pending_before_a_fault_run_ends_it_after_one_fault() {
    let state = |runs: bool| {
        let mut m = machine_with(
            MachineConfig {
                mem_bytes: 256 * MIB,
                ..MachineConfig::default()
            },
            &[],
        );
        m.with_vm(0, |vm, _| vm.set_fault_runs(runs));
        let len = 4 * MIB;
        let (pid, addr) = m.with_vm(0, |vm, ctx| {
            let pid = vm.spawn(ctx).unwrap();
            let addr = vm
                .mmap(
                    ctx,
                    pid,
                    0,
                    len,
                    Prot::READ | Prot::WRITE,
                    MapFlags::PRIVATE | MapFlags::ANONYMOUS,
                )
                .unwrap();
            // The run's PTE table: the first page faulted alone.
            vm.access(ctx, pid, addr, true).unwrap();
            (pid, addr)
        });
        // Below the low watermark without reclaim (kswapd woken, not run),
        // then back above it: the pcp lists hold pages again.
        let mut held = Vec::new();
        while !m.page_alloc().kswapd_pending() {
            held.push(m.page_alloc_mut().alloc_pages(0, GFP_KERNEL, 0).unwrap().unwrap());
        }
        for folio in held {
            m.page_alloc_mut().free_folio(0, folio).unwrap();
        }
        assert!(m.page_alloc().kswapd_pending());
        let run = m.with_vm(0, |vm, ctx| {
            vm.access_run(ctx, pid, addr + PAGE, PAGE, len / PAGE - 1, true)
        });
        assert_eq!((run.done, run.stop), (len / PAGE - 1, None));
        m.check().unwrap();
        let pfns: Vec<_> = (0..len / PAGE)
            .map(|i| m.vm().translate(pid, addr + i * PAGE))
            .collect();
        let runs_made = m.vm().fault_run_stats().faults;
        (
            pfns,
            vmstat_value(&m, "nr_free_pages"),
            vmstat_value(&m, "pgalloc_normal"),
            runs_made,
        )
    };
    let (alone, runs) = (state(false), state(true));
    assert_eq!(alone.3, 0);
    assert!(runs.3 > 1000, "the faults did not go as runs");
    assert_eq!((&alone.0, alone.1, alone.2), (&runs.0, runs.1, runs.2));
}

/// Runs of faults that map 64 KiB folios (`large_fault_run.rs`) in a
/// machine too small for what they touch: their allocations wake kswapd,
/// whose reclaim swaps out folios of the same tables between faults, and
/// some fall back to order 0. Each run ends after a fault that ran
/// kswapd; the machine ends as with each access made alone: every /proc
/// file, the LRU lists in order, and each page's pfn and record flags.
#[test]
fn large_folio_fault_runs_under_kswapd_reclaim_leave_the_machine_as_single_accesses() {
    let state = |runs: bool| {
        let mut m = machine_with(
            MachineConfig {
                mem_bytes: 64 * MIB,
                swap: vec![largo_mm::swap::SwapSpec::parse("128M").unwrap()],
                ..MachineConfig::default()
            },
            &[(&size_knob(64), "always")],
        );
        m.with_vm(0, |vm, _| vm.set_fault_runs(runs));
        let len = 96 * MIB;
        let mut p = Proc::spawn(&mut m);
        let (pid, addr) = (p.pid, p.mmap(len));
        // Each 2 MiB table's first page alone (the run takes a table
        // that exists), then the rest of it as one run.
        let table = 2 * MIB;
        for t in 0..len / table {
            let start = addr + t * table;
            m.with_vm(0, |vm, ctx| {
                assert_eq!(vm.access(ctx, pid, start, true), Ok(Access::Faulted));
                let run = vm.access_run(ctx, pid, start + PAGE, PAGE, table / PAGE - 1, true);
                assert_eq!((run.done, run.stop), (table / PAGE - 1, None));
            });
            m.check().unwrap();
        }
        // Each page's pfn and the flags of its record, every /proc file,
        // and the LRU lists in order.
        let memmap = m.page_alloc().memmap();
        let pages: Vec<_> = (0..len / PAGE)
            .map(|i| {
                let pfn = m.vm().translate(pid, addr + i * PAGE);
                (pfn, pfn.map(|p| format!("{:?}", memmap.page(p).flags())))
            })
            .collect();
        let files: String = largo_mm::stats::render::ProcFile::ALL
            .iter()
            .map(|f| f.render(&m))
            .collect();
        let state = format!("{files}\nlru {:?}", m.vm().lru_order());
        let stats = m.vm().fault_run_stats();
        let swapped = vmstat_value(&m, "pswpout");
        let fallbacks = m.vm().mthp.get(4, MthpStat::AnonFaultFallback);
        (
            pages,
            state,
            (swapped, fallbacks),
            stats.large_runs,
            stats.large_accesses,
        )
    };
    let (alone, runs) = (state(false), state(true));
    assert_eq!((alone.3, alone.4), (0, 0));
    assert!(runs.4 > 10_000, "the faults did not go as runs: {} accesses", runs.4);
    let (swapped, fallbacks) = runs.2;
    assert!(
        swapped > 0 && fallbacks > 0,
        "swapped out {swapped}, fallbacks {fallbacks}"
    );
    // More runs than tables: kswapd ended some of them early.
    assert!(runs.3 > 48, "{} runs for 48 tables", runs.3);
    assert!(
        alone.1 == runs.1,
        "the runs changed the machine's counters or LRU lists"
    );
    assert!(
        alone.0 == runs.0,
        "the runs mapped other pages, or left other page flags"
    );
}
