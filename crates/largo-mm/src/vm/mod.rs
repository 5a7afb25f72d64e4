//! Anonymous memory: address spaces, VMAs, page tables, rmap, the fault
//! path with multi-size THP, the large folio lifecycle (deferred split,
//! underused THPs, MADV_FREE), fork and CoW, reclaim and OOM.
//!
//! One concept per file:
//! - `types.rs`: syscall flags, `vm_flags`, advice, errors
//! - `pgtable.rs`: the page-table tree; `vma.rs`, `mm.rs`: VMAs, anon_vmas, mms
//! - `folio.rs`: anon folio metadata; `rmap.rs`: mapcounts and rmap walks
//! - `order.rs`: which folio orders a fault may use (mm/huge_memory.c)
//! - `fault.rs`: `handle_mm_fault`, `do_anonymous_page`, `do_wp_page`;
//!   `access_run.rs`: runs of accesses, hits taken table by table;
//!   `fault_run.rs`: runs of order-0 anonymous write faults; `large_fault_run.rs`:
//!   runs of faults that may map large folios, with the hits in each folio
//! - `huge.rs`: the PMD paths (THP faults, the huge zero page, PMD splits)
//! - `zap.rs`: unmapping ranges; `mmap.rs`: mmap, munmap, mprotect, mremap, brk;
//!   `maps.rs`: the address space as `/proc/PID/maps` shows it
//! - `shmem/`: shared anonymous memory and memfds (shmem inodes, page
//!   cache, the shmem fault with fault-around, file rmap)
//! - `collapse.rs`, `khugepaged.rs`: PMD collapse by MADV_COLLAPSE and
//!   by the khugepaged scanner on simulated time
//! - `madvise.rs`, `fork.rs`, `split.rs` (folio split, deferred split),
//!   `reclaim.rs` (shrinkers, lazyfree, kswapd, drop_caches, OOM)
//! - `stats.rs`: per-size mTHP stats and node counters; `check.rs`: invariants;
//!   `thpmaps.rs`: mapped memory by folio size (tools/mm/thpmaps)

mod access_run;
mod check;
mod check_swap;
mod cold;
mod collapse;
mod fault;
mod fault_run;
pub mod folio;
mod fork;
mod huge;
pub mod khugepaged;
mod kmem;
mod large_fault_run;
pub mod lru;
mod madvise;
pub mod maps;
mod memcg;
pub mod migrate;
pub mod mm;
mod mmap;
mod order;
pub mod pgtable;
pub mod policy;
mod policy_glue;
mod promote;
pub(crate) mod reclaim;
mod rmap;
mod rmap_index;
pub mod shmem;
mod split;
pub mod stats;
mod swapcache;
pub(crate) mod swapin;
mod thpmaps;
pub mod translation;
pub mod types;
pub mod vma;
mod vmscan;
mod zap;
mod zap_run;

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

use largo_physmem::Backing;
use largo_types::{Arch, Geometry, Pfn};
use slab::Slab;

use crate::knobs::ThpKnobs;
use crate::memmap::{Folio, PageFlags};
use crate::page_alloc::gfp::{Gfp, GFP_KERNEL};
use crate::page_alloc::PageAlloc;
use folio::{AnonFolio, NO_LINK};
use mm::Mm;
use pgtable::{PageTables, Slot};
use stats::{LruStat, MthpStats, NodeVmStat, VmWork};
use types::{MmId, Pid, VmFlags, VmaId};
use vma::{AnonVma, Vma};

pub use access_run::AccessRun;
pub use check::VmInvariantError;
pub use fault_run::FaultRunStats;
pub use maps::MapEntry;
pub use mmap::MremapFlags;
pub use reclaim::OomKill;
pub use thpmaps::ThpMaps;
pub use types::{Access, Advice, MapFlags, Prot, SegvCode, ThpDisable, VmError};

/// `GFP_PGTABLE_USER`.
const GFP_PGTABLE_USER: Gfp = GFP_KERNEL.union(Gfp::ZERO).union(Gfp::ACCOUNT);
/// The x86_64 stack top without randomization (`STACK_TOP`), below `TASK_SIZE`.
const INITIAL_STACK_BYTES: u64 = 132 << 10;
/// `mmap_base` keeps at least this much room below the stack.
const MMAP_GAP_MIN: u64 = 128 << 20;

/// What a VM operation works with besides the VM itself.
pub struct Ctx<'a> {
    pub pa: &'a mut PageAlloc,
    pub backing: &'a mut dyn Backing,
    /// The cpu the operation runs on (its pcp lists are used).
    pub cpu: usize,
    /// The backing holds the frames' contents (`ram`): user writes go to
    /// it. Asked once here, not at every store (a dynamic call).
    pub ram: bool,
}

impl<'a> Ctx<'a> {
    pub fn new(pa: &'a mut PageAlloc, backing: &'a mut dyn Backing, cpu: usize) -> Ctx<'a> {
        let ram = backing.kind() == largo_physmem::BackingKind::Ram;
        Ctx { pa, backing, cpu, ram }
    }
}

/// A task: a process or a thread of one.
#[derive(Clone, Debug)]
pub struct Task {
    pub pid: Pid,
    pub mm: MmId,
    /// The process (thread group) this task belongs to.
    pub tgid: Pid,
    pub alive: bool,
    /// The OOM killer picked it.
    pub oom_killed: bool,
}

/// Huge zero folio state (`huge_zero_folio`, `huge_zero_refcount`).
#[derive(Clone, Debug, Default)]
pub struct HugeZero {
    pub folio: Option<Folio>,
    /// mms holding a reference (the global refcount minus its own 1).
    pub mm_refs: u64,
}

/// The per-node deferred split queue (`struct deferred_split`).
#[derive(Clone, Debug)]
pub struct DeferredQueue {
    pub head: usize,
    pub tail: usize,
    pub len: u64,
}

impl Default for DeferredQueue {
    fn default() -> Self {
        DeferredQueue {
            head: NO_LINK,
            tail: NO_LINK,
            len: 0,
        }
    }
}

/// Lock acquisitions the VM counts (`split_queue_lock`).
#[derive(Clone, Copy, Debug, Default)]
pub struct VmLockStats {
    pub deferred_split: u64,
    /// lruvec `lru_lock` acquisitions: one per `lru_add`/`lru_deactivate`
    /// batch moved (`folio_batch_move_lru`), per reclaim isolation or
    /// putback (`isolate_lru_folios`, `move_folios_to_lru`), and per 31
    /// folios freed off the LRU (`folios_put_refs` relocks per batch; the
    /// model counts frees in runs of 31 across calls, so a call freeing
    /// one folio may share its acquisition with the next). LRU moves of
    /// MADV_FREE, splits and page-out are not counted.
    pub lru: u64,
    /// Folios added to or removed from the LRU lists under it.
    pub lru_folios: u64,
    /// Folios freed off the LRU since the last counted batch.
    pub(crate) lru_free_pending: u64,
}

/// The anonymous-memory model of one machine.
pub struct Vm {
    pub(crate) geo: Geometry,
    pub(crate) pt: PageTables,
    pub(crate) mms: Slab<Mm>,
    pub(crate) vmas: Slab<Vma>,
    pub(crate) anon_vmas: Slab<AnonVma>,
    pub(crate) folios: Slab<AnonFolio>,
    /// Shmem inodes and their page cache folios.
    pub(crate) shmem: shmem::ShmemFs,
    /// khugepaged's mm list, scan position and counters.
    pub khugepaged: khugepaged::Khugepaged,
    /// When the periodic memcg statistics flush runs next (simulated ns).
    pub stats_flush_due_ns: u64,
    /// Accounted slab objects made or freed since the charge path last
    /// ran, in order (`vm/kmem.rs`).
    pub(crate) slab_pending: Vec<crate::memcg::SlabOp>,
    /// RCU callbacks queued and not yet run, in order, with the cpu that
    /// queued each (`vm/kmem.rs`).
    pub(crate) rcu_pending: Vec<(usize, kmem::RcuCallback)>,
    /// File pages outside the model in node 0 ([`crate::MachineConfig::page_cache_bytes`]).
    pub page_cache_pages: u64,
    /// Every task. Change a task only through [`Vm::task_mut`] and add one
    /// only in `new_task`: both keep [`Vm::last_task`] true.
    pub(crate) tasks: BTreeMap<Pid, Task>,
    /// The last live task [`Vm::task_mm`] found, and its mm: dropped
    /// whenever a task changes.
    last_task: std::cell::Cell<Option<(Pid, MmId)>>,
    /// The VMA the last fault found (the kernel's old per-thread
    /// `vmacache`): used only after checking it still covers the address
    /// in the same mm, so it never needs dropping (every VMA in `vmas` is
    /// in its mm's tree under its start).
    vma_hint: std::cell::Cell<Option<VmaId>>,
    /// Whether an access run takes its anonymous write faults as runs,
    /// order-0 or large ([`Vm::set_fault_runs`]); on unless a test
    /// compares the two.
    fault_runs: bool,
    /// Whether zaps free runs of sole order-0 folios together
    /// ([`Vm::set_zap_runs`]); on unless a test compares the two.
    zap_runs: bool,
    /// Whether a cpu's `lru_add` batch moves its folios to a list linked
    /// together ([`Vm::set_lru_chains`]); on unless a test compares the
    /// two.
    lru_chains: bool,
    /// Pages zapped in runs so far ([`Vm::zap_run_pages`], diagnostics).
    zap_run_pages: u64,
    /// The pages a fault run's batch of pcp allocations took, reused
    /// from run to run (empty between runs).
    fault_run_pfns: Vec<u64>,
    /// A zap run's pages on their way to the pcp lists, reused from run
    /// to run (empty between runs).
    zap_run_frees: zap_run::RunFrees,
    fault_run_stats: fault_run::FaultRunStats,
    /// Bumped by every change to the VMAs' ranges or anon_vma lists
    /// ([`Vm::vma_layout_changed`]): rmap indexes of an older value are
    /// rebuilt before use.
    vma_layout_gen: u64,
    next_pid: Pid,
    next_mm_id: u32,
    pub(crate) thp: ThpKnobs,
    pub mthp: MthpStats,
    pub(crate) node_stat: Vec<NodeVmStat>,
    /// LRU sizes by zone index.
    pub(crate) zone_lru: Vec<LruStat>,
    pub(crate) deferred: Vec<DeferredQueue>,
    pub(crate) huge_zero: HugeZero,
    /// The shared zero page (`empty_zero_page`): a page of the kernel image.
    pub(crate) zero_pfn: u64,
    /// Page tables deposited with PMD mappings, by (PMD table, index).
    pub(crate) deposits: HashMap<Slot, usize>,
    /// `vm_committed_as`, in pages.
    pub(crate) committed_pages: i64,
    /// The LRU lists of every (memcg, node) (`lruvec_index`).
    pub(crate) lruvecs: Vec<lru::Lruvec>,
    /// Each cpu's `lru_add` batch.
    pub(crate) lru_batches: Vec<Vec<lru::FolioRef>>,
    /// Each cpu's `lru_deactivate` batch (MADV_COLD).
    pub(crate) lru_deactivate_batches: Vec<Vec<lru::FolioRef>>,
    /// Each cpu's `lru_lazyfree` batch (MADV_FREE'd folios waiting to
    /// move to the file list; the batch holds a reference on each).
    pub(crate) lru_lazyfree_batches: Vec<Vec<lru::FolioRef>>,
    /// Each cpu's `activate` batch (`folio_activate`): folios on their
    /// inactive list waiting to move to the active one.
    pub(crate) lru_activate_batches: Vec<Vec<lru::FolioRef>>,
    /// Folios whose last reference was their `lru_add` batch's, freed by
    /// a drain (`folios_put` after `folio_batch_move_lru`) and waiting
    /// for a context to be uncharged and given back ([`Vm::free_drained`]).
    pub(crate) lru_drained_dead: Vec<lru::FolioRef>,
    /// Swap devices, the swap cache table and zswap.
    pub swap: crate::swap::Swap,
    /// Memory cgroups (memcg 0: the root).
    pub memcg: crate::memcg::Memcgs,
    /// `vm.swappiness`.
    pub swappiness: u64,
    /// The memcg new address spaces belong to (the workload's, or the root).
    pub(crate) default_memcg: u16,
    /// A memcg whose charge failed for want of an OOM kill, done when the
    /// fault ends (`pagefault_out_of_memory`).
    pub(crate) memcg_oom_pending: Option<usize>,
    /// Failure injection for tests: every Nth folio a migration tries to
    /// unmap is refused as busy (0: never), and the attempts so far.
    pub(crate) migrate_fail_every: u32,
    pub(crate) migrate_attempts: u64,
    pub locks: VmLockStats,
    pub work: VmWork,
    /// The reclaim running now is a kernel thread's (kswapd, khugepaged),
    /// for `work.reclaim_bg`.
    pub(crate) reclaiming_in_background: bool,
    pub(crate) oom_kills: Vec<OomKill>,
}

impl Vm {
    /// A VM with no tasks. `zero_pfn` is a reserved page used as the zero
    /// page; `keep_swap_data` keeps what is swapped out (the ram backing).
    pub fn new(
        geo: Geometry,
        nr_nodes: usize,
        nr_zones: usize,
        nr_cpus: usize,
        zero_pfn: u64,
        thp: ThpKnobs,
        keep_swap_data: bool,
    ) -> Vm {
        let mut swap = crate::swap::Swap::new(nr_cpus, geo.pmd_order, geo.page_size(), keep_swap_data);
        swap.zswap.set_page_size(geo.page_size());
        Vm {
            pt: PageTables::new(&geo),
            geo,
            mms: Slab::new(),
            vmas: Slab::new(),
            anon_vmas: Slab::new(),
            folios: Slab::new(),
            shmem: shmem::ShmemFs::default(),
            khugepaged: khugepaged::Khugepaged::default(),
            stats_flush_due_ns: lru::STATS_FLUSH_NS,
            slab_pending: Vec::new(),
            rcu_pending: Vec::new(),
            page_cache_pages: 0,
            tasks: BTreeMap::new(),
            last_task: std::cell::Cell::new(None),
            vma_hint: std::cell::Cell::new(None),
            fault_runs: true,
            zap_runs: true,
            lru_chains: true,
            zap_run_pages: 0,
            fault_run_pfns: Vec::new(),
            zap_run_frees: zap_run::RunFrees::default(),
            fault_run_stats: fault_run::FaultRunStats::default(),
            vma_layout_gen: 0,
            next_pid: 1,
            next_mm_id: 1,
            mthp: MthpStats::new(thp.pmd_order),
            thp,
            node_stat: vec![NodeVmStat::default(); nr_nodes],
            zone_lru: vec![LruStat::default(); nr_zones],
            deferred: vec![DeferredQueue::default(); nr_nodes],
            huge_zero: HugeZero::default(),
            zero_pfn,
            deposits: HashMap::default(),
            committed_pages: 0,
            lruvecs: vec![lru::Lruvec::default(); nr_nodes],
            lru_batches: vec![Vec::new(); nr_cpus.max(1)],
            lru_deactivate_batches: vec![Vec::new(); nr_cpus.max(1)],
            lru_lazyfree_batches: vec![Vec::new(); nr_cpus.max(1)],
            lru_activate_batches: vec![Vec::new(); nr_cpus.max(1)],
            lru_drained_dead: Vec::new(),
            swap,
            memcg: crate::memcg::Memcgs::new(nr_cpus),
            swappiness: 60,
            default_memcg: 0,
            memcg_oom_pending: None,
            migrate_fail_every: 0,
            migrate_attempts: 0,
            locks: VmLockStats::default(),
            work: VmWork::default(),
            reclaiming_in_background: false,
            oom_kills: Vec::new(),
        }
    }

    pub fn thp(&self) -> &ThpKnobs {
        &self.thp
    }

    pub fn thp_mut(&mut self) -> &mut ThpKnobs {
        &mut self.thp
    }

    /// Page-table entry writes so far.
    pub fn pt_work(&self) -> pgtable::PtWork {
        self.pt.work
    }

    pub fn node_stats(&self) -> &[NodeVmStat] {
        &self.node_stat
    }

    /// LRU sizes of zone index `zi`.
    pub fn zone_lru(&self, zi: usize) -> LruStat {
        self.zone_lru[zi]
    }

    /// LRU sizes summed over every zone.
    pub fn total_lru(&self) -> LruStat {
        self.zone_lru.iter().fold(LruStat::default(), |a, z| LruStat {
            inactive_anon: a.inactive_anon + z.inactive_anon,
            active_anon: a.active_anon + z.active_anon,
            inactive_file: a.inactive_file + z.inactive_file,
            active_file: a.active_file + z.active_file,
        })
    }

    pub fn committed_pages(&self) -> i64 {
        self.committed_pages
    }

    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }

    pub fn task(&self, pid: Pid) -> Option<&Task> {
        self.tasks.get(&pid)
    }

    /// Whether task `pid` exists and has not exited (the last task asked
    /// about is answered without a search).
    #[inline]
    pub fn task_alive(&self, pid: Pid) -> bool {
        self.task_mm(pid).is_ok()
    }

    /// The OOM kills so far, in order.
    pub fn oom_kills(&self) -> &[OomKill] {
        &self.oom_kills
    }

    /// Every page table of every mm, for inspection.
    pub fn page_tables(&self) -> &PageTables {
        &self.pt
    }

    /// `MM_ANONPAGES` of a task's mm.
    pub fn rss_anon(&self, pid: Pid) -> Option<u64> {
        let t = self.tasks.get(&pid)?;
        Some(self.mms[t.mm].rss_anon)
    }

    /// Total deferred split queue length.
    pub fn deferred_split_len(&self) -> u64 {
        self.deferred.iter().map(|q| q.len).sum()
    }

    #[inline]
    pub(crate) fn page_shift(&self) -> u32 {
        self.geo.page_shift
    }

    #[inline]
    pub(crate) fn page_size(&self) -> u64 {
        self.geo.page_size()
    }

    #[inline]
    pub(crate) fn pmd_order(&self) -> u32 {
        self.geo.pmd_order
    }

    #[inline]
    pub(crate) fn pmd_size(&self) -> u64 {
        self.geo.pmd_size_bytes()
    }

    /// `pmd_addr_end`: the next PMD boundary after `addr`, or `end`.
    #[inline]
    pub(crate) fn pmd_addr_end(&self, addr: u64, end: u64) -> u64 {
        let pmd_size = self.pmd_size();
        ((addr & !(pmd_size - 1)) + pmd_size).min(end)
    }

    /// The PMD entry covering `addr` in `mm`, if the tables above it exist
    /// (`pmd_offset` after a walk that allocates nothing).
    pub(crate) fn pmd_slot(&self, mm: MmId, addr: u64) -> Option<Slot> {
        let table = self.pt.lookup(self.mms[mm].pgd, addr, 1)?;
        Some(Slot {
            table,
            index: self.pt.shape.index(1, addr),
        })
    }

    // --- tasks and address spaces ---

    /// A new process with an empty address space: a stack VMA at the top
    /// and the mmap area below `mmap_base` (no randomization, as the host
    /// with ASLR off). Allocates its PGD.
    pub fn spawn(&mut self, ctx: &mut Ctx) -> Result<Pid, VmError> {
        let mm = self.new_process_mm(ctx)?;
        let stack_top = self.pt.shape.task_size;
        let flags = VmFlags::from_prot(Prot::READ | Prot::WRITE) | VmFlags::GROWSDOWN | VmFlags::ACCOUNT;
        let start = stack_top - INITIAL_STACK_BYTES.next_multiple_of(self.page_size());
        self.insert_vma(mm, start, stack_top, start >> self.page_shift(), flags);
        Ok(self.new_task(mm, None))
    }

    /// A new process with an address space holding no VMA at all, for a
    /// replay that lays out the image itself (`exec` followed by fixed
    /// mappings).
    ///
    /// A PGD charge the memcg refuses OOM-kills there, and the spawn is
    /// made again (see [`Self::fork`]).
    pub fn spawn_empty(&mut self, ctx: &mut Ctx) -> Result<Pid, VmError> {
        let mm = self.new_process_mm(ctx)?;
        Ok(self.new_task(mm, None))
    }

    /// The mm of a process about to be made: a PGD charge the memcg
    /// refuses OOM-kills there and is made again.
    fn new_process_mm(&mut self, ctx: &mut Ctx) -> Result<MmId, VmError> {
        let trigger = self.next_pid;
        self.retry_after_memcg_oom(ctx, trigger, None, |vm, ctx| vm.new_mm(ctx))
    }

    /// [`Self::spawn_empty`] for a process forked outside the workload's
    /// memcg that joined it before its first step (the host side of a
    /// validation): its page-table root was charged to the root memcg;
    /// everything after to the workload's.
    pub fn spawn_empty_joined(&mut self, ctx: &mut Ctx) -> Result<Pid, VmError> {
        let memcg = self.default_memcg;
        self.default_memcg = 0;
        let mm = self.new_mm(ctx);
        self.default_memcg = memcg;
        let mm = mm?;
        self.mms[mm].memcg = memcg;
        Ok(self.new_task(mm, None))
    }

    /// `execve`: the task gets a fresh, empty address space; the old one
    /// goes when its last user leaves (a vfork child stops borrowing its
    /// parent's). Threads of the old image are not modelled as dying here:
    /// a trace exits them itself. A PGD charge the memcg refuses OOM-kills
    /// there (see [`Self::fork`]).
    pub fn exec(&mut self, ctx: &mut Ctx, pid: Pid) -> Result<(), VmError> {
        let old = self.task_mm(pid)?;
        let tgid = self.tasks[&pid].tgid;
        let new = self.retry_after_memcg_oom(ctx, pid, Some(tgid), |vm, ctx| vm.new_mm(ctx))?;
        if let Some(t) = self.task_mut(pid) {
            t.mm = new;
            t.tgid = pid;
        }
        self.mms[old].users -= 1;
        if self.mms[old].users == 0 {
            self.exit_mmap(ctx, old);
        }
        Ok(())
    }

    /// `vfork`: a new process borrowing `pid`'s address space until it
    /// execs or exits.
    pub fn spawn_vfork(&mut self, pid: Pid) -> Result<Pid, VmError> {
        let mm = self.task_mm(pid)?;
        self.mms[mm].users += 1;
        Ok(self.new_task(mm, None))
    }

    /// Sets where the brk heap of `pid`'s image starts (the loader's
    /// `start_brk`); the break is there too.
    pub fn set_brk_start(&mut self, pid: Pid, addr: u64) -> Result<(), VmError> {
        let mm = self.task_mm(pid)?;
        let m = &mut self.mms[mm];
        m.start_brk = addr;
        m.brk = addr;
        Ok(())
    }

    /// A thread sharing `pid`'s address space (`clone(CLONE_VM)`).
    pub fn spawn_thread(&mut self, pid: Pid) -> Result<Pid, VmError> {
        let parent = self.tasks.get(&pid).filter(|t| t.alive).ok_or(VmError::NoTask(pid))?;
        let (mm, tgid) = (parent.mm, parent.tgid);
        self.mms[mm].users += 1;
        Ok(self.new_task(mm, Some(tgid)))
    }

    fn new_task(&mut self, mm: MmId, tgid: Option<Pid>) -> Pid {
        self.last_task.set(None);
        let pid = self.next_pid;
        self.next_pid += 1;
        self.tasks.insert(
            pid,
            Task {
                pid,
                mm,
                tgid: tgid.unwrap_or(pid),
                alive: true,
                oom_killed: false,
            },
        );
        pid
    }

    /// `mm_alloc` + `pgd_alloc`: an empty mm with its root table.
    fn new_mm(&mut self, ctx: &mut Ctx) -> Result<MmId, VmError> {
        let task_size = self.pt.shape.task_size;
        let mmap_base = (task_size - MMAP_GAP_MIN) & !(self.page_size() - 1);
        let start_brk = match self.geo.arch {
            Arch::X86_64 => 0x5555_5555_9000,
            Arch::Arm64 => 0xaaaa_aaab_9000,
        } & !(self.page_size() - 1);
        let mm = self.mms.insert(Mm {
            vmas: BTreeMap::new(),
            pgd: usize::MAX,
            mmap_base,
            start_brk,
            brk: start_brk,
            mm_id: self.next_mm_id,
            thp_disable: ThpDisable::Off,
            huge_zero_ref: false,
            rss_anon: 0,
            rss_shmem: 0,
            swap_ents: 0,
            memcg: self.default_memcg,
            files: BTreeMap::new(),
            khugepaged: false,
            nr_pgtables: 0,
            committed_pages: 0,
            users: 1,
        });
        self.next_mm_id += 1;
        let top = self.pt.shape.levels - 1;
        match self.alloc_table(ctx, mm, top) {
            Some(pgd) => {
                self.mms[mm].pgd = pgd;
                Ok(mm)
            }
            None => {
                self.mms.remove(mm);
                Err(VmError::NoMem("no memory for the page tables"))
            }
        }
    }

    /// The mm of live task `pid`.
    #[inline]
    pub(crate) fn task_mm(&self, pid: Pid) -> Result<MmId, VmError> {
        if let Some((p, mm)) = self.last_task.get() {
            if p == pid {
                return Ok(mm);
            }
        }
        let mm = self
            .tasks
            .get(&pid)
            .filter(|t| t.alive)
            .map(|t| t.mm)
            .ok_or(VmError::NoTask(pid))?;
        self.last_task.set(Some((pid, mm)));
        Ok(mm)
    }

    /// Task `pid` to change (its mm, liveness, OOM mark).
    pub(crate) fn task_mut(&mut self, pid: Pid) -> Option<&mut Task> {
        self.last_task.set(None);
        self.tasks.get_mut(&pid)
    }

    /// The VMA of `mm` holding `addr` (`find_vma` plus the `vm_start`
    /// check), trying the VMA the last lookup found first.
    #[inline]
    pub(crate) fn find_vma(&self, mm: MmId, addr: u64) -> Option<VmaId> {
        if let Some(id) = self.vma_hint.get() {
            if self.vmas.get(id).is_some_and(|v| v.mm == mm && v.contains(addr)) {
                return Some(id);
            }
        }
        let id = self.mms[mm].vma_at(addr, &self.vmas)?;
        self.vma_hint.set(Some(id));
        Some(id)
    }

    // --- allocation ---

    /// Allocates a folio, entering direct reclaim through this VM when the
    /// gfp allows, and zeroing it when asked. `None` is a failure after reclaim.
    pub(crate) fn alloc_folio(&mut self, ctx: &mut Ctx, gfp: Gfp, order: u32) -> Option<Folio> {
        let folio = {
            let mut reclaimer = reclaim::VmReclaim {
                vm: self,
                backing: &mut *ctx.backing,
            };
            ctx.pa
                .alloc_pages_reclaim(ctx.cpu, gfp, order, &mut reclaimer)
                .unwrap_or_else(|e| unreachable!("the VM only makes valid requests: {e}"))
        }?;
        if gfp.contains(Gfp::ZERO) {
            self.work.pages_zeroed += folio.nr_pages();
            ctx.backing
                .zero(folio.pfn, folio.nr_pages())
                .unwrap_or_else(|e| unreachable!("allocated memory outside the backing: {e}"));
        }
        Some(folio)
    }

    /// Runs kswapd if an allocation woke it, with this VM as reclaimer.
    pub(crate) fn run_pending_kswapd(&mut self, ctx: &mut Ctx) {
        if ctx.pa.kswapd_pending() {
            let mut reclaimer = reclaim::VmReclaim {
                vm: self,
                backing: &mut *ctx.backing,
            };
            ctx.pa.run_kswapd_with(&mut reclaimer);
        }
    }

    /// `pte_alloc_one` / `pmd_alloc_one` / `pgd_alloc`: a zeroed unmovable
    /// page becomes a table of `level`; `NR_PAGETABLE` and the mm's count
    /// grow. The page is kernel memory charged to the mm's memcg
    /// (`__GFP_ACCOUNT`); a failed charge fails the allocation.
    pub(crate) fn alloc_table(&mut self, ctx: &mut Ctx, mm: MmId, level: u32) -> Option<usize> {
        let f = self.alloc_folio(ctx, GFP_PGTABLE_USER, 0)?;
        let memcg = self.mms[mm].memcg as usize;
        if !self.try_charge_memcg(ctx, memcg, GFP_PGTABLE_USER, 1, false) {
            self.free_unused_folio(ctx, f);
            return None;
        }
        let idx = self.pt.insert(f.pfn.0, level);
        self.pt.pages[idx].memcg = memcg as u16;
        self.work.pgtable_alloc += 1;
        let page = ctx.pa.memmap.page_mut(f.pfn.0);
        page.insert_flags(PageFlags::PGTABLE);
        page.set_private(idx as u32 + 1);
        let nid = self.node_of(ctx.pa, f.pfn.0);
        self.node_stat[nid].pagetable += 1;
        self.mms[mm].nr_pgtables += 1;
        Some(idx)
    }

    /// Frees a page-table page at once (`pte_free`: a table allocated and
    /// not used, a PMD mapping's deposited table; `pgd_free`: the PGD).
    pub(crate) fn free_table(&mut self, ctx: &mut Ctx, mm: MmId, idx: usize) {
        let (pfn, memcg) = self.unlink_table(mm, idx);
        self.release_table_page(ctx, pfn, memcg);
    }

    /// Frees a page-table page that hardware and lockless walkers may
    /// still see: gone from the mm now, the page itself after a grace
    /// period (`tlb_remove_table` with `CONFIG_MMU_GATHER_RCU_TABLE_FREE`,
    /// `tlb_remove_table_rcu` -> `__tlb_remove_table`, which runs the
    /// destructor, `NR_PAGETABLE`, and frees the page and its kmem
    /// charge). What munmap, exit and MADV_DONTNEED's page-table reclaim
    /// free.
    pub(crate) fn free_table_rcu(&mut self, ctx: &mut Ctx, mm: MmId, idx: usize) {
        let (pfn, memcg) = self.unlink_table(mm, idx);
        self.rcu_pending
            .push((ctx.cpu, kmem::RcuCallback::Table { pfn, memcg }));
    }

    /// A table out of the mm (`mm_dec_nr_ptes` and friends): its page
    /// and charge.
    fn unlink_table(&mut self, mm: MmId, idx: usize) -> (u64, usize) {
        let page = self.pt.remove(idx);
        self.work.pgtable_free += 1;
        self.mms[mm].nr_pgtables -= 1;
        (page.pfn, page.memcg as usize)
    }

    /// `pagetable_dtor_free`: the page-table page's kmem charge,
    /// `NR_PAGETABLE` and the page itself go.
    pub(crate) fn release_table_page(&mut self, ctx: &mut Ctx, pfn: u64, memcg: usize) {
        self.memcg_kmem_uncharge(ctx, memcg, 1);
        let nid = self.node_of(ctx.pa, pfn);
        self.node_stat[nid].pagetable -= 1;
        let record = ctx.pa.memmap.page_mut(pfn);
        record.remove_flags(PageFlags::PGTABLE);
        record.set_private(0);
        ctx.pa
            .free_folio(
                ctx.cpu,
                Folio {
                    pfn: Pfn(pfn),
                    order: 0,
                },
            )
            .unwrap_or_else(|e| unreachable!("page table page {pfn:#x} not freeable: {e}"));
    }

    /// The node a pfn belongs to.
    #[inline]
    pub(crate) fn node_of(&self, pa: &PageAlloc, pfn: u64) -> usize {
        node_of_pfn(pa, self.node_stat.len(), pfn)
    }

    /// The metadata key of an anon folio from its head record.
    #[inline]
    pub(crate) fn folio_key(&self, pa: &PageAlloc, head_pfn: u64) -> usize {
        let private = pa.memmap.page(head_pfn).private();
        debug_assert!(private > 0, "pfn {head_pfn:#x} has no anon folio metadata");
        private as usize - 1
    }

    /// The anon folio metadata key of the folio mapping `pfn`, if any.
    pub(crate) fn folio_key_of_pfn(&self, pa: &PageAlloc, pfn: u64) -> Option<usize> {
        let head = pa.memmap.folio_head(pfn)?;
        let page = pa.memmap.page(head);
        (page.flags().contains(PageFlags::ANON) && page.private() > 0).then(|| page.private() as usize - 1)
    }
}

/// The node of `pfn` on a machine of `nr_nodes` nodes ([`Vm::node_of`],
/// for callers that hold a borrow of the Vm's records).
#[inline]
pub(crate) fn node_of_pfn(pa: &PageAlloc, nr_nodes: usize, pfn: u64) -> usize {
    if nr_nodes == 1 {
        return 0;
    }
    pa.page_zone_index(pfn).map_or(0, |zi| pa.zones()[zi].nid)
}
