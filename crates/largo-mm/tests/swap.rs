//! Swap of anonymous memory: MADV_PAGEOUT and MADV_COLD, swap-out of large
//! folios without a split when the device has contiguous slots (and with
//! one when it has not), swap-in on fault (whole large folios from a
//! synchronous device, order 0 with readahead otherwise), swap entries
//! across fork, munmap, MADV_FREE and exit, zswap, memcg limit reclaim and
//! the bytes on the ram backing. Counts are the host kernel's (6.18 on the
//! development VM, zram swap; see the host validation scenarios).

use largo_mm::stats::render::{meminfo_kb, vmstat_value};
use largo_mm::swap::SwapSpec;
use largo_mm::vm::stats::MthpStat;
use largo_mm::vm::{Access, Advice, MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::BackingKind;
use largo_types::Pfn;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

fn config(swap: &str) -> MachineConfig {
    MachineConfig {
        mem_bytes: 2 << 30,
        swap: vec![SwapSpec::parse(swap).unwrap()],
        ..MachineConfig::default()
    }
}

/// [`config`] with the workload in a memcg of `limit_bytes`.
fn memcg_config(swap: &str, limit_bytes: u64) -> MachineConfig {
    MachineConfig {
        memcg_max_bytes: Some(limit_bytes),
        ..config(swap)
    }
}

#[track_caller]
fn machine(config: MachineConfig, knobs: &[(&str, &str)]) -> Machine {
    let mut m = Machine::new(config).unwrap();
    for (k, v) in knobs {
        m.set_knob(k, v).unwrap();
    }
    m
}

const SIZE_64K: &str = "transparent_hugepage/hugepages-64kB/enabled";

struct Proc<'m> {
    m: &'m mut Machine,
    pid: u32,
}

impl<'m> Proc<'m> {
    fn spawn(m: &'m mut Machine) -> Proc<'m> {
        let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
        Proc { m, pid }
    }

    /// A new process with `len` bytes of anonymous memory mapped and
    /// written; returns it and the mapping's address.
    fn spawn_written(m: &'m mut Machine, len: u64) -> (Proc<'m>, u64) {
        let mut p = Proc::spawn(m);
        let addr = p.mmap(len);
        p.touch(addr, len, true);
        (p, addr)
    }

    fn mmap(&mut self, len: u64) -> u64 {
        let pid = self.pid;
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        self.m
            .with_vm(0, |vm, ctx| vm.mmap(ctx, pid, 0, len, Prot::READ | Prot::WRITE, flags))
            .unwrap()
    }

    #[track_caller]
    fn touch(&mut self, addr: u64, len: u64, write: bool) -> u64 {
        let pid = self.pid;
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

    #[track_caller]
    fn madvise(&mut self, addr: u64, len: u64, advice: Advice) {
        self.madvise_on(0, addr, len, advice);
    }

    /// The madvise made by a thread of the process running on `cpu`.
    #[track_caller]
    fn madvise_on(&mut self, cpu: usize, addr: u64, len: u64, advice: Advice) {
        let pid = self.pid;
        self.m
            .with_vm(cpu, |vm, ctx| vm.madvise(ctx, pid, addr, len, advice))
            .unwrap();
    }

    fn vmstat(&self, name: &str) -> u64 {
        vmstat_value(self.m, name)
    }

    fn mthp(&self, kb: u32, stat: MthpStat) -> i64 {
        let order = (kb / 4).trailing_zeros();
        self.m.vm().mthp.get(order, stat)
    }
}

#[test]
fn pageout_of_64k_folios_swaps_each_whole_and_reads_come_back_whole_from_zram() {
    let mut m = machine(config("1G"), &[(SIZE_64K, "always")]);
    let mut p = Proc::spawn(&mut m);
    let len = 64 * MIB;
    let addr = p.mmap(len);
    assert_eq!(p.touch(addr, len, true), 1024);
    p.madvise(addr, len, Advice::PageOut);
    assert_eq!(p.mthp(64, MthpStat::Swpout), 1024);
    assert_eq!(p.mthp(64, MthpStat::SwpoutFallback), 0);
    assert_eq!(p.vmstat("pswpout"), 16384);
    assert_eq!(p.vmstat("pgscan_anon"), 0, "MADV_PAGEOUT is not LRU reclaim");
    assert_eq!(meminfo_kb(p.m, "AnonPages"), 0);
    assert_eq!(meminfo_kb(p.m, "SwapFree"), meminfo_kb(p.m, "SwapTotal") - 65536);
    assert_eq!(
        meminfo_kb(p.m, "SwapCached"),
        0,
        "zram writes synchronously: the folios are freed"
    );
    p.m.check().unwrap();
    // Reading half of it back: one fault per 64K folio, each a major fault
    // swapping in the whole folio, mapped writable.
    assert_eq!(p.touch(addr, len / 2, false), 512);
    assert_eq!(p.mthp(64, MthpStat::Swpin), 512);
    assert_eq!(p.vmstat("pswpin"), 8192);
    assert_eq!(p.vmstat("pgmajfault"), 512);
    assert_eq!(p.vmstat("swap_ra"), 0);
    assert_eq!(
        p.touch(addr, len / 2, true),
        0,
        "swapped-in exclusive pages are writable"
    );
    assert_eq!(meminfo_kb(p.m, "SwapFree"), meminfo_kb(p.m, "SwapTotal") - 32768);
    p.m.check().unwrap();
}

#[test]
fn pageout_without_contiguous_slots_splits_and_counts_the_fallback() {
    // 8 MiB of zram: the header's cluster and three free 2 MiB clusters.
    let mut m = machine(config("8M"), &[(SIZE_64K, "always")]);
    let mut p = Proc::spawn(&mut m);
    let len = 8 * MIB;
    let addr = p.mmap(len);
    p.touch(addr, len, true);
    p.madvise(addr, len, Advice::PageOut);
    // Three free clusters hold 96 folios of 64K; the rest are split and
    // go out page by page until the device is full.
    assert_eq!(p.mthp(64, MthpStat::Swpout), 96);
    assert!(p.mthp(64, MthpStat::SwpoutFallback) > 0);
    assert_eq!(p.vmstat("pswpout"), 2047, "every slot but the header is used");
    p.m.check().unwrap();
}

#[test]
fn a_disk_keeps_paged_out_folios_in_the_swap_cache_until_reclaim() {
    let mut m = machine(config("1G:disk"), &[]);
    let (mut p, addr) = Proc::spawn_written(&mut m, MIB);
    p.madvise(addr, MIB, Advice::PageOut);
    assert_eq!(p.vmstat("pswpout"), 256);
    assert_eq!(
        meminfo_kb(p.m, "SwapCached"),
        1024,
        "written asynchronously, still cached"
    );
    p.m.check().unwrap();
    // A read finds them in the swap cache: minor faults, no I/O.
    assert_eq!(p.touch(addr, MIB, false), 256);
    assert_eq!(p.vmstat("pswpin"), 0);
    assert_eq!(p.vmstat("pgmajfault"), 0);
    p.m.check().unwrap();
}

#[test]
fn all_zero_folios_use_the_zero_map_and_come_back_without_io() {
    let mut cfg = config("256M");
    cfg.backing = BackingKind::Ram;
    cfg.mem_bytes = 512 << 20;
    let mut m = machine(cfg, &[(SIZE_64K, "always")]);
    let mut p = Proc::spawn(&mut m);
    // A PMD-multiple length is PMD-aligned: 32 folios of 64K.
    let addr = p.mmap(2 * MIB);
    p.touch(addr, 2 * MIB, true);
    // The program wrote zeroes over the first 64K folio.
    let pid = p.pid;
    for a in (addr..addr + 64 * 1024).step_by(PAGE as usize) {
        let pfn = p.m.vm().translate(pid, a).unwrap();
        p.m.backing_mut().write(Pfn(pfn), 0, &[0u8; PAGE as usize]).unwrap();
    }
    p.madvise(addr, 2 * MIB, Advice::PageOut);
    assert_eq!(p.vmstat("swpout_zero"), 16);
    assert_eq!(p.mthp(64, MthpStat::Swpout), 31, "the other folios are written");
    assert_eq!(p.vmstat("pswpout"), 496);
    assert_eq!(p.touch(addr, 2 * MIB, false), 32);
    assert_eq!(p.vmstat("swpin_zero"), 16);
    assert_eq!(p.vmstat("pswpin"), 496);
    assert_eq!(
        p.mthp(64, MthpStat::Swpin),
        31,
        "zero-map folios are not per-size swap-ins"
    );
    p.m.check().unwrap();
}

#[test]
fn fork_shares_swap_entries_and_the_child_swaps_in_order_0_with_readahead() {
    let mut m = machine(config("1G"), &[(SIZE_64K, "always")]);
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let mut p = Proc { m: &mut m, pid };
    let len = MIB;
    let addr = p.mmap(len);
    p.touch(addr, len, true);
    p.madvise(addr, len, Advice::PageOut);
    let child = p.m.with_vm(0, |vm, ctx| vm.fork(ctx, pid)).unwrap();
    p.m.check().unwrap();
    // Swap count 2: no large swap-in, the readahead path even on zram.
    let mut c = Proc { m: p.m, pid: child };
    assert_eq!(c.touch(addr, len, false), 256);
    assert_eq!(c.mthp(64, MthpStat::Swpin), 0);
    assert_eq!(c.vmstat("pswpin"), 256, "every page read once");
    assert!(c.vmstat("swap_ra") > 0);
    c.m.check().unwrap();
    c.m.with_vm(0, |vm, ctx| vm.exit(ctx, child)).unwrap();
    c.m.with_vm(0, |vm, ctx| vm.exit(ctx, pid)).unwrap();
    c.m.check().unwrap();
    assert_eq!(
        meminfo_kb(c.m, "SwapFree"),
        meminfo_kb(c.m, "SwapTotal"),
        "every slot freed"
    );
    assert_eq!(meminfo_kb(c.m, "SwapCached"), 0);
}

#[test]
fn madv_free_drops_swapped_out_data_and_munmap_frees_the_slots() {
    let mut m = machine(config("1G"), &[]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    p.touch(addr, 2 * MIB, true);
    p.madvise(addr, 2 * MIB, Advice::PageOut);
    p.madvise(addr, MIB, Advice::Free);
    assert_eq!(meminfo_kb(p.m, "SwapFree"), meminfo_kb(p.m, "SwapTotal") - 1024);
    // A fault there now is a fresh zero-filled page, not a swap-in.
    p.touch(addr, MIB, true);
    assert_eq!(p.vmstat("pswpin"), 0);
    p.m.check().unwrap();
    let pid = p.pid;
    p.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, 2 * MIB)).unwrap();
    assert_eq!(meminfo_kb(p.m, "SwapFree"), meminfo_kb(p.m, "SwapTotal"));
    p.m.check().unwrap();
}

/// A write to a lazyfree page that a read made young but left clean still
/// dirties its entry (the MMU sets each bit it finds clear), so reclaim
/// keeps the data (the folio becomes swap-backed again) instead of
/// discarding it; pages only read are discarded. The host scenario
/// `madv-free-read-write-reclaim` checks the same against the kernel.
#[test]
fn a_write_after_a_read_of_lazyfree_memory_keeps_it_from_being_discarded() {
    let mut m = machine(config("1G"), &[]);
    let mut p = Proc::spawn(&mut m);
    let addr = p.mmap(2 * MIB);
    p.touch(addr, 2 * MIB, true);
    p.madvise(addr, 2 * MIB, Advice::Free);
    assert_eq!(
        p.vmstat("pglazyfree"),
        512 - 512 % 31,
        "the last 16 folios wait in the cpu's lru_lazyfree batch (31 a batch)"
    );
    assert_eq!(p.touch(addr, 2 * MIB, false), 0, "lazyfree pages stay mapped");
    assert_eq!(p.touch(addr, MIB, true), 0);
    p.madvise(addr, 2 * MIB, Advice::PageOut);
    assert_eq!(
        p.vmstat("pglazyfreed"),
        256,
        "only the pages not written again are discarded"
    );
    assert_eq!(meminfo_kb(p.m, "AnonPages"), 1024, "the written half stays");
    p.m.check().unwrap();
}

#[test]
fn the_ram_backing_gets_every_swapped_byte_back() {
    let mut cfg = config("256M");
    cfg.backing = BackingKind::Ram;
    cfg.mem_bytes = 512 << 20;
    let mut m = machine(cfg, &[(SIZE_64K, "always")]);
    let mut p = Proc::spawn(&mut m);
    let len = 8 * MIB;
    let addr = p.mmap(len);
    p.touch(addr, len, true);
    let pid = p.pid;
    let pattern = |a: u64| -> Vec<u8> { (0..PAGE).map(|i| ((a >> 12) + i * 7) as u8).collect() };
    for a in (addr..addr + len).step_by(PAGE as usize) {
        let pfn = p.m.vm().translate(pid, a).unwrap();
        p.m.backing_mut().write(Pfn(pfn), 0, &pattern(a)).unwrap();
    }
    p.madvise(addr, len, Advice::PageOut);
    assert_eq!(meminfo_kb(p.m, "AnonPages"), 0);
    assert_eq!(p.vmstat("pswpout"), len / PAGE);
    p.touch(addr, len, false);
    for a in (addr..addr + len).step_by(PAGE as usize) {
        let pfn = p.m.vm().translate(pid, a).unwrap();
        let mut buf = vec![0u8; PAGE as usize];
        p.m.backing().read(Pfn(pfn), 0, &mut buf).unwrap();
        assert_eq!(buf, pattern(a), "page at {a:#x}");
    }
    p.m.check().unwrap();
}

#[test]
fn cold_deactivates_only_active_folios_and_pageout_ignores_shared_ones() {
    let mut m = machine(config("1G"), &[]);
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let mut p = Proc { m: &mut m, pid };
    let addr = p.mmap(MIB);
    p.touch(addr, MIB, true);
    p.madvise(addr, MIB, Advice::Cold);
    assert_eq!(p.vmstat("pgdeactivate"), 0, "new folios are inactive already");
    let child = p.m.with_vm(0, |vm, ctx| vm.fork(ctx, pid)).unwrap();
    p.madvise(addr, MIB, Advice::PageOut);
    assert_eq!(p.vmstat("pswpout"), 0, "pages mapped by two processes stay");
    p.m.with_vm(0, |vm, ctx| vm.exit(ctx, child)).unwrap();
    p.madvise(addr, MIB, Advice::PageOut);
    assert_eq!(p.vmstat("pswpout"), 256);
    p.m.check().unwrap();
}

/// Shmem swapped to a disk beside anonymous memory in a small memcg:
/// cluster readahead of the anonymous faults reads shmem slots as order-0
/// swap-cache folios, so a 64K shmem entry meets a cached folio smaller
/// than itself. The fault splits the entry and takes the page back alone,
/// as `shmem_swapin_folio` does; every slot stays accounted.
#[test]
fn shmem_entries_read_ahead_by_anonymous_faults_split_and_come_back() {
    let cfg = memcg_config("1G:disk", 4 * MIB);
    let mut m = machine(
        cfg,
        &[
            (SIZE_64K, "always"),
            ("transparent_hugepage/hugepages-64kB/shmem_enabled", "always"),
            ("vm/page-cluster", "5"),
            ("swap/vma_ra_enabled", "false"),
        ],
    );
    let mut p = Proc::spawn(&mut m);
    let anon = p.mmap(8 * MIB);
    let pid = p.pid;
    let shm =
        p.m.with_vm(0, |vm, ctx| {
            let flags = MapFlags::SHARED | MapFlags::ANONYMOUS;
            vm.mmap(ctx, pid, 0, 8 * MIB, Prot::READ | Prot::WRITE, flags)
        })
        .unwrap();
    for chunk in 0..(8 * MIB / (64 << 10)) {
        let off = chunk * (64 << 10);
        p.touch(anon + off, 64 << 10, true);
        p.touch(shm + off, 64 << 10, true);
    }
    p.m.check().unwrap();
    for chunk in 0..(8 * MIB / (64 << 10)) {
        let off = chunk * (64 << 10);
        p.touch(anon + off, 64 << 10, false);
        p.touch(shm + off, 64 << 10, false);
        if chunk % 16 == 0 {
            p.m.check().unwrap();
        }
    }
    assert!(vmstat_value(&*p.m, "pswpin") > 0, "it swapped");
    p.m.check().unwrap();
}

/// MADV_FREE queues small folios in the cpu's `lru_lazyfree` batch, which
/// holds a reference on each: unmapped before the batch moves, they stay
/// allocated (and charged) until it does; the next drain frees them. The
/// host scenario `madv-free-batch-unmap` checks the same against the kernel.
#[test]
fn small_folios_freed_lazily_stay_allocated_after_munmap_until_their_batch_moves() {
    let mut m = machine(config("1G"), &[]);
    let (mut p, addr) = Proc::spawn_written(&mut m, MIB);
    // Free pages, those on the per-cpu lists too.
    let free_kb = |m: &Machine| meminfo_kb(m, "MemFree") + m.page_alloc().nr_pcp_pages() * 4;
    let before = free_kb(p.m);
    p.madvise(addr, 64 * KIB, Advice::Free);
    assert_eq!(p.vmstat("pglazyfree"), 0, "16 folios: the batch has not moved");
    let pid = p.pid;
    p.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, 64 * KIB)).unwrap();
    assert_eq!(free_kb(p.m), before, "the batch still holds them");
    p.m.check().unwrap();
    p.madvise(addr + 512 * KIB, 4 * KIB, Advice::Cold);
    assert_eq!(
        p.vmstat("pglazyfree"),
        16,
        "MADV_COLD's drain moved them to the file list first"
    );
    assert_eq!(free_kb(p.m), before + 64, "and then freed them");
    p.m.check().unwrap();
}

/// A 64K folio left partially mapped by munmap waits on its memcg's
/// deferred split queue. Memcg limit reclaim runs the memcg-aware deferred
/// split shrinker after each priority's LRU pass, priority-scaled
/// (`do_shrink_slab`); a 24M write into the 24M memcg reclaims hard enough
/// that it splits the folio: its 6 unmapped pages are freed, its mapped
/// ones stay. The host scenario `memcg-deferred-split-shrinker` checks the
/// same against the kernel.
#[test]
fn memcg_reclaim_splits_a_partially_mapped_folio_through_its_shrinker() {
    let cfg = memcg_config("256M:zram", 24 * MIB);
    let mut m = machine(cfg, &[(SIZE_64K, "always")]);
    let mut p = Proc::spawn(&mut m);
    let pid = p.pid;
    let fixed = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    let rw = Prot::READ | Prot::WRITE;
    let (region, pressure) = (0x7f00_0400_0000u64, 0x7e00_0000_0000u64);
    p.m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, region, 6 * MIB, rw, fixed))
        .unwrap();
    p.touch(region + 0x51d000, 929792, true);
    p.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, region + 0x554000, 6 * PAGE))
        .unwrap();
    assert_eq!(p.mthp(64, MthpStat::NrAnonPartiallyMapped), 1);
    assert_eq!(p.mthp(64, MthpStat::Split), 0);
    p.m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, pressure, 24 * MIB, rw, fixed))
        .unwrap();
    p.touch(pressure, 24 * MIB, true);
    assert!(p.vmstat("pswpout") > 0, "the memcg reclaimed");
    assert_eq!(p.mthp(64, MthpStat::Split), 1, "the shrinker split it");
    assert_eq!(p.mthp(64, MthpStat::NrAnonPartiallyMapped), 0);
    p.m.check().unwrap();
}

/// munmap frees its page tables through RCU (`tlb_remove_table`): they
/// leave the mm at once, but their pages, `NR_PAGETABLE` and their kmem
/// charge stay until the callbacks run, when the task's cpu idles. A
/// memcg at its limit right after a munmap therefore reclaims one page
/// earlier than if the tables had gone at once (host-fuzz seed 5012: the
/// host reclaimed one page more, in the same pass).
#[test]
fn munmap_gives_page_tables_back_after_a_grace_period() {
    let cfg = memcg_config("256M:zram", 64 * MIB);
    let mut m = machine(cfg, &[]);
    let mut p = Proc::spawn(&mut m);
    let pid = p.pid;
    let len = 8 * MIB;
    let addr = p.mmap(len);
    p.touch(addr, len, true);
    let memcg = p.m.vm().workload_memcg().expect("the machine has a memcg");
    let kmem = |m: &Machine| m.vm().memcg.get(memcg).kmem_pages;
    let (tables, charged) = (meminfo_kb(p.m, "PageTables"), kmem(p.m));
    p.m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, len)).unwrap();
    assert_eq!(meminfo_kb(p.m, "PageTables"), tables, "freed tables wait for RCU");
    assert_eq!(kmem(p.m), charged, "and so does their charge");
    p.m.check().unwrap();
    p.m.run_rcu_callbacks();
    let freed_kb = tables - meminfo_kb(p.m, "PageTables");
    assert!(freed_kb >= 4 * 4, "the four PTE tables of 8 MiB went: {freed_kb} kB");
    assert_eq!(charged - kmem(p.m), freed_kb / 4, "their kmem charge went with them");
    p.m.check().unwrap();
}

/// MADV_PAGEOUT drains only its own cpu's batches. A folio another cpu's
/// `lru_lazyfree` batch holds still carries that batch's reference, so
/// `pageout` finds it not freeable (`is_page_cache_freeable`) and keeps
/// it unwritten in the swap cache; the rest of the range is written.
#[test]
fn pageout_keeps_an_anonymous_folio_another_cpus_batch_holds() {
    let mut m = machine(config("1G"), &[]);
    let (mut p, addr) = Proc::spawn_written(&mut m, MIB);
    let held = 8;
    p.madvise_on(1, addr, held * PAGE, Advice::Free);
    p.madvise(addr, MIB, Advice::PageOut);
    assert_eq!(
        p.vmstat("pswpout"),
        MIB / PAGE - held,
        "the batch's folios are not written"
    );
    assert_eq!(
        meminfo_kb(p.m, "SwapCached"),
        held * PAGE / KIB,
        "kept in the swap cache"
    );
    p.m.check().unwrap();
}

/// A lazyfree folio another cpu's `lru_lazyfree` batch still holds (two
/// cpus advised it; MADV_PAGEOUT moved only its own cpu's batch) is not
/// discarded: `try_to_unmap_one` finds a reference beyond reclaim's and
/// the mappings', restores the entries and fails, so reclaim activates
/// it. The rest of the range is swapped out.
#[test]
fn pageout_keeps_a_lazyfree_folio_another_cpus_batch_holds() {
    let mut m = machine(config("1G"), &[]);
    let (mut p, addr) = Proc::spawn_written(&mut m, MIB);
    let held = 8;
    p.madvise_on(1, addr, held * PAGE, Advice::Free);
    p.madvise(addr, held * PAGE, Advice::Free);
    p.madvise(addr, MIB, Advice::PageOut);
    assert_eq!(p.vmstat("pglazyfree"), held, "cpu 0's batch moved them");
    assert_eq!(p.vmstat("pglazyfreed"), 0, "cpu 1's batch still holds them");
    assert_eq!(p.vmstat("pswpout"), MIB / PAGE - held);
    p.m.check().unwrap();
}
