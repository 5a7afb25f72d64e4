//! Aging a machine over hours of simulated time (`largo age`): long
//! running generators drive the engine minute by minute and every
//! simulated minute is sampled: each folio size's fault successes and
//! fallbacks, free blocks of the pageblock order and above, compaction.
//!
//! - `phone`: apps launched (a heap of 16-256 MiB, written 60-100%, and a
//!   few small mappings: page tables and small folios) about twice a
//!   minute, each with unmovable kernel memory (1/16 of what it writes,
//!   orders 0-2, allocated between its faults, freed when the app dies, a third of it living on for hours: the
//!   slab and driver memory that pins pageblocks), and killed oldest
//!   first whenever apps hold more than 85% of memory, as Android's lmkd
//!   does; background kernel threads (kcompactd, khugepaged) run while
//!   the minute passes. Each launch also reads the app's files: a page
//!   cache of 4K pages (8-128 MiB per launch) that outlives the app,
//!   held by one cache process as clean pages reclaim drops without
//!   I/O (lazyfree anon pages: MADV_NOHUGEPAGE, written, MADV_FREE), so
//!   free memory is whatever kswapd keeps above the high watermark, got
//!   back page by page in LRU order from wherever the cache sits; and
//!   reclaimable slab for those files (1/64 of their size: dentries,
//!   inodes), freed when the cache entry is dropped (oldest beyond twice
//!   memory), a third of it outliving that by 1-6 hours.
//! - `server`: one long-lived heap of 40% of memory, written once; every
//!   minute 2-32 MiB regions of it are unmapped and mapped again and
//!   written (allocator churn), with short-lived unmovable allocations.
//!
//! Deterministic: the generator's choices come from the seed alone.

use std::collections::VecDeque;

use largo_mm::page_alloc::gfp::{Gfp, GFP_KERNEL};
use largo_mm::vm::{Advice, MapFlags, Prot};
use largo_mm::Machine;
use serde::Serialize;

use crate::report::Counters;

const MIB: u64 = 1 << 20;
const MINUTE_NS: u64 = 60_000_000_000;

/// Which generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    Phone,
    Server,
}

impl Generator {
    pub fn from_name(s: &str) -> Option<Generator> {
        match s {
            "phone" => Some(Generator::Phone),
            "server" => Some(Generator::Server),
            _ => None,
        }
    }
}

/// One simulated minute.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sample {
    pub minute: u64,
    /// Per folio size (`"64kB"`): faults that got it, and fell back.
    pub alloc: std::collections::BTreeMap<String, u64>,
    pub fallback: std::collections::BTreeMap<String, u64>,
    /// Free blocks of the pageblock order and above, in pageblocks.
    pub free_pageblocks: u64,
    pub free_pages: u64,
    pub compact_stall: u64,
    pub compact_daemon_wake: u64,
    pub pgmigrate_success: u64,
    /// Kernel (unmovable) allocations that failed this minute.
    pub kernel_alloc_failed: u64,
}

impl Sample {
    /// Share of faults of a size that got it (None: no fault tried it).
    pub fn success(&self, size: &str) -> Option<f64> {
        let a = *self.alloc.get(size).unwrap_or(&0) as f64;
        let f = *self.fallback.get(size).unwrap_or(&0) as f64;
        (a + f > 0.0).then(|| a / (a + f))
    }
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Log-uniform in [lo, hi], a multiple of 64 KiB (every base page
    /// size divides it).
    fn size(&mut self, lo: u64, hi: u64) -> u64 {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let x = a + (b - a) * (self.below(1 << 20) as f64 / (1 << 20) as f64);
        (x.exp() as u64).next_multiple_of(64 << 10)
    }
}

/// An app (or the server's heap): its process and mappings.
struct App {
    pid: largo_mm::vm::types::Pid,
    bytes: u64,
    /// Kernel memory freed when the app dies.
    kernel: Vec<largo_mm::memmap::Folio>,
    /// Kernel memory that outlives the app by 1-6 hours.
    lingering: Vec<largo_mm::memmap::Folio>,
    /// Minutes it outlives the app (drawn at launch).
    linger: u64,
}

/// The state a generator carries from minute to minute.
pub struct Aging {
    generator: Generator,
    rng: Rng,
    apps: VecDeque<App>,
    /// Long-lived kernel allocations and the minute they are freed.
    pinned: Vec<(largo_mm::memmap::Folio, u64)>,
    minute: u64,
    kernel_failed: u64,
    /// The server's heap: (address, length) of its regions.
    heap: Vec<(u64, u64)>,
    /// The phone's page cache: its process and entries, oldest first.
    cache: Option<PageCache>,
}

/// Files read by apps, cached after they exit.
struct PageCache {
    pid: largo_mm::vm::types::Pid,
    entries: VecDeque<CacheEntry>,
    /// Bytes mapped by the entries (the cache may hold less: reclaim).
    mapped_bytes: u64,
}

/// One app's files: the mapping that holds their page cache and the
/// reclaimable slab describing them.
struct CacheEntry {
    addr: u64,
    len: u64,
    slab: Vec<largo_mm::memmap::Folio>,
    /// Minutes the lingering third of the slab outlives the entry
    /// (drawn when the entry is made, whatever its allocations got).
    linger: u64,
}

fn write_range(m: &mut Machine, pid: largo_mm::vm::types::Pid, addr: u64, len: u64) {
    // Only an error ends the range early (an OOM kill or a SIGSEGV does
    // not), and the generator goes on either way.
    let _ = m.with_vm(0, |vm, ctx| vm.access_pages(ctx, pid, addr, len, true));
}

fn map(m: &mut Machine, pid: largo_mm::vm::types::Pid, len: u64) -> Option<u64> {
    m.with_vm(0, |vm, ctx| {
        vm.mmap(
            ctx,
            pid,
            0,
            len,
            Prot::READ | Prot::WRITE,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS,
        )
    })
    .ok()
}

impl Aging {
    pub fn new(generator: Generator, seed: u64) -> Aging {
        Aging {
            generator,
            rng: Rng(seed ^ 0xa9e1),
            apps: VecDeque::new(),
            pinned: Vec::new(),
            minute: 0,
            kernel_failed: 0,
            heap: Vec::new(),
            cache: None,
        }
    }

    /// `pages` order-0 reclaimable kernel pages (slab for files).
    fn slab_alloc(&mut self, m: &mut Machine, pages: u64) -> Vec<largo_mm::memmap::Folio> {
        let gfp = GFP_KERNEL | Gfp::RECLAIMABLE;
        let mut out = Vec::new();
        for _ in 0..pages {
            match m.alloc_pages_compact(0, gfp, 0) {
                Ok(Some(f)) => out.push(f),
                _ => self.kernel_failed += 1,
            }
        }
        out
    }

    /// An app reads its files: `len` bytes of 4K page cache in the cache
    /// process, clean (lazyfree) once read, with their slab; the oldest
    /// entries are dropped beyond twice the machine's memory.
    fn read_files(&mut self, m: &mut Machine, len: u64) {
        if self.cache.is_none() {
            let Ok(pid) = m.with_vm(0, |vm, ctx| vm.spawn(ctx)) else {
                return;
            };
            self.cache = Some(PageCache {
                pid,
                entries: VecDeque::new(),
                mapped_bytes: 0,
            });
        }
        let pid = self.cache.as_ref().expect("cache set").pid;
        let linger = 60 + self.rng.below(300);
        let Some(addr) = map(m, pid, len) else {
            // The cache process is gone (killed): the cache starts over.
            self.drop_cache(m);
            return;
        };
        let _ = m.with_vm(0, |vm, ctx| vm.madvise(ctx, pid, addr, len, Advice::NoHugePage));
        let page = m.geometry().page_size();
        let slab = self.slab_alloc(m, len / page / 64);
        write_range(m, pid, addr, len);
        let _ = m.with_vm(0, |vm, ctx| vm.madvise(ctx, pid, addr, len, Advice::Free));
        let limit = 2 * m.config().mem_bytes;
        let cache = self.cache.as_mut().expect("cache set");
        cache.entries.push_back(CacheEntry {
            addr,
            len,
            slab,
            linger,
        });
        cache.mapped_bytes += len;
        let mut dropped = Vec::new();
        while cache.mapped_bytes > limit {
            let Some(old) = cache.entries.pop_front() else { break };
            cache.mapped_bytes -= old.len;
            dropped.push(old);
        }
        for old in dropped {
            let _ = m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, old.addr, old.len));
            self.drop_slab(m, old.slab, old.linger);
        }
    }

    /// Two thirds of an entry's slab freed now, the rest after `linger` minutes.
    fn drop_slab(&mut self, m: &mut Machine, mut slab: Vec<largo_mm::memmap::Folio>, linger: u64) {
        let lingering = slab.split_off(slab.len() - slab.len() / 3);
        for f in slab {
            let _ = m.free_folio(0, f);
        }
        let until = self.minute + linger;
        self.pinned.extend(lingering.into_iter().map(|f| (f, until)));
    }

    /// The cache process died: its entries' slab goes, a new one starts.
    fn drop_cache(&mut self, m: &mut Machine) {
        let Some(cache) = self.cache.take() else { return };
        let _ = m.with_vm(0, |vm, ctx| vm.exit(ctx, cache.pid));
        for e in cache.entries {
            self.drop_slab(m, e.slab, e.linger);
        }
    }

    fn kernel_alloc(&mut self, m: &mut Machine, pages: u64) -> Vec<largo_mm::memmap::Folio> {
        let mut out = Vec::new();
        let mut left = pages;
        while left > 0 {
            let order = self.rng.below(3) as u32;
            // GFP_KERNEL may reclaim and compact.
            match m.alloc_pages_compact(0, GFP_KERNEL, order) {
                Ok(Some(f)) => out.push(f),
                _ => self.kernel_failed += 1,
            }
            left = left.saturating_sub(1 << order);
        }
        out
    }

    fn launch(&mut self, m: &mut Machine) {
        let Ok(pid) = m.with_vm(0, |vm, ctx| vm.spawn(ctx)) else {
            return;
        };
        let page = m.geometry().page_size();
        let heap = self.rng.size(16 * MIB, 256 * MIB);
        // Drawn before the mapping, so every configuration sees the same
        // choices whatever succeeds.
        let share = 60 + self.rng.below(41);
        let files = self.rng.size(8 * MIB, 128 * MIB);
        let linger = 60 + self.rng.below(300);
        self.read_files(m, files);
        let mut bytes = 0;
        let mut kernel = Vec::new();
        if let Some(addr) = map(m, pid, heap) {
            let written = heap * share / 100 / page * page;
            // The app's kernel memory is allocated as it runs, between
            // its faults (1/16 of what it writes), not all at once.
            let step = 4 * MIB;
            let mut at = 0;
            while at < written {
                let len = step.min(written - at);
                write_range(m, pid, addr + at, len);
                kernel.extend(self.kernel_alloc(m, len / page / 16));
                at += len;
            }
            bytes += written;
        }
        for _ in 0..1 + self.rng.below(8) {
            let len = self.rng.size(64 << 10, MIB);
            if let Some(addr) = map(m, pid, len) {
                write_range(m, pid, addr, len);
                bytes += len;
            }
        }
        // A third lives on for 1-6 hours after the app dies.
        let lingering = kernel.split_off(kernel.len() - kernel.len() / 3);
        self.apps.push_back(App {
            pid,
            bytes,
            kernel,
            lingering,
            linger,
        });
    }

    fn kill(&mut self, m: &mut Machine, app: App) {
        let _ = m.with_vm(0, |vm, ctx| vm.exit(ctx, app.pid));
        for f in app.kernel {
            let _ = m.free_folio(0, f);
        }
        let until = self.minute + app.linger;
        self.pinned.extend(app.lingering.into_iter().map(|f| (f, until)));
    }

    fn free_expired(&mut self, m: &mut Machine) {
        let now = self.minute;
        let (due, keep): (Vec<_>, Vec<_>) = self.pinned.drain(..).partition(|&(_, until)| until <= now);
        self.pinned = keep;
        for (f, _) in due {
            let _ = m.free_folio(0, f);
        }
    }

    fn phone_minute(&mut self, m: &mut Machine) {
        let budget = m.config().mem_bytes * 85 / 100;
        for _ in 0..1 + self.rng.below(3) {
            self.launch(m);
            while self.apps.iter().map(|a| a.bytes).sum::<u64>() > budget {
                let Some(old) = self.apps.pop_front() else { break };
                self.kill(m, old);
            }
        }
    }

    fn server_minute(&mut self, m: &mut Machine) {
        if self.apps.is_empty() {
            let Ok(pid) = m.with_vm(0, |vm, ctx| vm.spawn(ctx)) else {
                return;
            };
            let total = m.config().mem_bytes * 40 / 100;
            let mut mapped = 0;
            while mapped < total {
                let len = self
                    .rng
                    .size(2 * MIB, 32 * MIB)
                    .min(total - mapped)
                    .max(m.geometry().page_size());
                if let Some(addr) = map(m, pid, len) {
                    write_range(m, pid, addr, len);
                    self.heap.push((addr, len));
                }
                mapped += len;
            }
            self.apps.push_back(App {
                pid,
                bytes: mapped,
                kernel: Vec::new(),
                lingering: Vec::new(),
                linger: 0,
            });
        }
        let pid = self.apps[0].pid;
        for _ in 0..1 + self.rng.below(4) {
            if self.heap.is_empty() {
                break;
            }
            let i = self.rng.below(self.heap.len() as u64) as usize;
            let (addr, len) = self.heap.swap_remove(i);
            let _ = m.with_vm(0, |vm, ctx| vm.munmap(ctx, pid, addr, len));
            let len = self.rng.size(2 * MIB, 32 * MIB);
            if let Some(addr) = map(m, pid, len) {
                write_range(m, pid, addr, len);
                self.heap.push((addr, len));
            }
        }
        let short = self.kernel_alloc(m, 256);
        for f in short {
            let until = self.minute + 1 + self.rng.below(30);
            self.pinned.push((f, until));
        }
    }

    /// One simulated minute: the generator's work, then the minute passes
    /// for the kernel threads; returns its sample.
    pub fn minute(&mut self, m: &mut Machine) -> Sample {
        let before = Counters::read(m);
        self.kernel_failed = 0;
        self.free_expired(m);
        match self.generator {
            Generator::Phone => self.phone_minute(m),
            Generator::Server => self.server_minute(m),
        }
        m.advance_time(MINUTE_NS);
        self.minute += 1;
        let after = Counters::read(m);
        sample(m, self.minute, &before, &after, self.kernel_failed)
    }
}

fn sample(m: &Machine, minute: u64, before: &Counters, after: &Counters, kernel_failed: u64) -> Sample {
    let d = |k: &str| after.vmstat(k).saturating_sub(before.vmstat(k));
    let mut s = Sample {
        minute,
        compact_stall: d("compact_stall"),
        compact_daemon_wake: d("compact_daemon_wake"),
        pgmigrate_success: d("pgmigrate_success"),
        kernel_alloc_failed: kernel_failed,
        ..Sample::default()
    };
    for size in after.mthp.keys() {
        let dd = |stat: &str| (after.mthp(size, stat) - before.mthp(size, stat)).max(0) as u64;
        let (a, f) = (dd("anon_fault_alloc"), dd("anon_fault_fallback"));
        if a + f > 0 {
            s.alloc.insert(size.clone(), a);
            s.fallback.insert(size.clone(), f);
        }
    }
    let pa = m.page_alloc();
    let pb = m.geometry().pageblock_order;
    for z in pa.zones() {
        s.free_pages += z.free_pages().max(0) as u64;
        for (order, area) in z.free_area.iter().enumerate().skip(pb as usize) {
            s.free_pageblocks += area.nr_free << (order as u32 - pb);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_mm::MachineConfig;

    fn machine() -> Machine {
        Machine::new(MachineConfig {
            mem_bytes: 2 << 30,
            knobs: vec![
                ("transparent_hugepage/hugepages-64kB/enabled".into(), "always".into()),
                ("transparent_hugepage/hugepages-2048kB/enabled".into(), "always".into()),
            ],
            ..MachineConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn a_phone_ages_and_large_folios_get_scarcer() {
        let mut m = machine();
        let mut a = Aging::new(Generator::Phone, 1);
        let samples: Vec<Sample> = (0..60).map(|_| a.minute(&mut m)).collect();
        let first = samples[0].success("2048kB").expect("2M faults tried");
        let late: Vec<f64> = samples[40..].iter().filter_map(|s| s.success("2048kB")).collect();
        let late = late.iter().sum::<f64>() / late.len().max(1) as f64;
        println!("2M success: first minute {first:.2}, minutes 40-60 {late:.2}");
        assert!(first > 0.9, "a fresh machine has PMD blocks: {first}");
        assert!(
            late < first,
            "kills leave unmovable memory in pageblocks: {late} vs {first}"
        );
        m.check().unwrap();
        // The same seed gives the same minutes.
        let mut m2 = machine();
        let mut b = Aging::new(Generator::Phone, 1);
        let again: Vec<Sample> = (0..5).map(|_| b.minute(&mut m2)).collect();
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            serde_json::to_string(&samples[..5]).unwrap()
        );
    }

    #[test]
    fn a_server_churns_its_heap() {
        let mut m = machine();
        let mut a = Aging::new(Generator::Server, 2);
        let samples: Vec<Sample> = (0..10).map(|_| a.minute(&mut m)).collect();
        assert!(samples.iter().all(|s| !s.alloc.is_empty()), "every minute faults");
        m.check().unwrap();
    }
}
