//! [`Machine`]: one modelled machine, the only mutable root of the engine.

use largo_physmem::{new_backing, Backing, BackingError, BackingKind};
use largo_types::{format_size, Geometry, GeometryError, GeometryOverrides, Preset};

use crate::knobs::{KnobError, ThpKnobs};
use crate::layout::{Layout, LayoutError, LayoutSpec, ReservedKind, DEFAULT_KERNEL_RESERVED_BYTES};
use crate::memmap::Folio;
use crate::page_alloc::check::{CheckReport, InvariantError};
use crate::page_alloc::gfp::Gfp;
use crate::page_alloc::{AllocError, FreeError, PageAlloc, SplitError, Tunables};
use crate::reporting::ReportSink;
use crate::sparse::Sparse;
use crate::vm::{Ctx, Vm, VmInvariantError};

/// Everything that describes a machine before it boots.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    pub preset: Preset,
    pub overrides: GeometryOverrides,
    pub mem_bytes: u64,
    pub nr_nodes: usize,
    /// Memory of each node (`--node-mem`), in proportion; empty: even.
    pub node_mem_bytes: Vec<u64>,
    pub nr_cpus: usize,
    /// Size of ZONE_MOVABLE (`movablecore=`), 0 for none.
    pub movable_bytes: u64,
    pub backing: BackingKind,
    /// Kernel image and early allocations reserved at 16 MiB.
    pub kernel_reserved_bytes: u64,
    /// Knob writes applied after boot, in order (`--set`).
    pub knobs: Vec<(String, String)>,
    /// A virtio-balloon device with free page reporting, registered at
    /// boot; `None` for no device (the default).
    pub balloon: Option<Balloon>,
    /// Shape the free memory like a snapshot of a real machine after boot
    /// and the knob writes (`--machine host`).
    pub shape: Option<MachineShape>,
    /// Lay the free memory out exactly as a host snapshot found it, pfn
    /// by pfn (`--machine snapshot:FILE`), before `shape` (whose zones
    /// are then empty: it only marks reported memory).
    pub snapshot: Option<std::sync::Arc<crate::snapshot::HostSnapshot>>,
    /// Memory block size (`memory_block_size_bytes`); `None` probes it as
    /// the host does. Below the section size (down to a 2 MiB subsection)
    /// is the seed's decoupled hotplug granularity.
    pub memory_block_bytes: Option<u64>,
    /// Physical memory the machine may grow to by hot-add (QEMU's
    /// `-m ...,maxmem=`); the region above boot RAM has no RAM at boot.
    pub maxmem_bytes: Option<u64>,
    /// Swap devices swapped on at boot, in priority order (`--swap`).
    pub swap: Vec<crate::swap::SwapSpec>,
    /// zswap enabled at boot (`--zswap`).
    pub zswap: bool,
    /// CMA areas reserved at boot (`--cma SIZE[@NODE]`), in order.
    pub cma: Vec<crate::cma::CmaSpec>,
    /// A virtio-mem device (`--virtio-mem`).
    pub virtio_mem: Option<crate::virtio_mem::VirtioMemSpec>,
    /// The workload's memory cgroup limit (`--memcg-max`): every task the
    /// workload starts runs in one memcg with this `memory.limit_in_bytes`.
    pub memcg_max_bytes: Option<u64>,
    /// Resident file pages outside the model (the rest of a real
    /// machine's page cache, `--page-cache`): only their count is kept,
    /// in node 0's root lruvec, where refaults of memory reclaimed without
    /// a memcg target (MADV_PAGEOUT, global reclaim) are judged
    /// (`workingset_test_recent`). Nothing reclaims them.
    pub page_cache_bytes: u64,
}

/// A snapshot of a real machine's zones to shape the free memory after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineShape {
    pub zones: Vec<crate::page_alloc::shape::ZoneShape>,
    /// Free blocks at or above this order start out reported (the
    /// snapshot's reporting had caught up).
    pub reported_from_order: Option<u32>,
}

/// The free page reporting device (virtio-balloon `VIRTIO_BALLOON_F_REPORTING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Balloon {
    /// `pr_dev_info.order`: 0 for the default (pageblock_order); the
    /// arm64 64K-page driver asks for 5 (2 MiB).
    pub order: u32,
    /// Time from a report call to the host's acknowledgement.
    pub ack_latency_ns: u64,
}

/// `pr_dev_info.order` of virtio_balloon on arm64 with 64 KiB pages:
/// order 5 (2 MiB), not the 512 MiB pageblock.
pub const VIRTIO_BALLOON_ARM64_64K_ORDER: u32 = 5;

impl Balloon {
    /// The virtio-balloon driver's device as `virtballoon_probe`
    /// (drivers/virtio/virtio_balloon.c) registers it on `preset`: with
    /// `CONFIG_ARM64 && CONFIG_ARM64_64K_PAGES` it asks for reporting
    /// order 5, elsewhere it leaves the order to `page_reporting_register`
    /// (pageblock order).
    pub fn virtio(preset: Preset, ack_latency_ns: u64) -> Balloon {
        let order = match preset {
            Preset::Arm64_64k => VIRTIO_BALLOON_ARM64_64K_ORDER,
            _ => 0,
        };
        Balloon { order, ack_latency_ns }
    }
}

impl Default for MachineConfig {
    /// The built-in default machine: x86_64, 16 GiB, one node, 2 cpus, sim.
    fn default() -> Self {
        MachineConfig {
            preset: Preset::X86_64,
            overrides: GeometryOverrides::default(),
            mem_bytes: 16 << 30,
            nr_nodes: 1,
            node_mem_bytes: Vec::new(),
            nr_cpus: 2,
            movable_bytes: 0,
            backing: BackingKind::Sim,
            kernel_reserved_bytes: DEFAULT_KERNEL_RESERVED_BYTES,
            knobs: Vec::new(),
            balloon: None,
            shape: None,
            snapshot: None,
            memory_block_bytes: None,
            maxmem_bytes: None,
            swap: Vec::new(),
            zswap: false,
            memcg_max_bytes: None,
            page_cache_bytes: 0,
            cma: Vec::new(),
            virtio_mem: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Backing(#[from] BackingError),
    #[error(transparent)]
    Knob(#[from] KnobError),
    #[error("the machine needs a kernel image reservation (it holds the zero page)")]
    NoKernelImage,
    #[error("memory block size {0}: must be a power of two from 2M (one subsection) to 2G")]
    MemoryBlockSize(String),
    #[error(
        "the hot-add limit {maxmem} must exceed the memory size {mem} by a multiple of the memory block size ({block})"
    )]
    Maxmem { maxmem: String, mem: String, block: String },
    #[error(transparent)]
    VirtioMem(#[from] crate::virtio_mem::VirtioMemError),
    #[error(transparent)]
    Swap(#[from] crate::swap::SwapError),
    #[error("a memory cgroup limit of {0} holds no page")]
    MemcgLimit(String),
}

/// Either checker's finding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Alloc(#[from] InvariantError),
    #[error(transparent)]
    Vm(#[from] VmInvariantError),
}

/// A booted machine.
pub struct Machine {
    config: MachineConfig,
    geo: Geometry,
    layout: Layout,
    pub(crate) sparse: Sparse,
    pub(crate) page_alloc: PageAlloc,
    pub(crate) backing: Box<dyn Backing>,
    pub(crate) vm: Vm,
    /// Where free page reporting sends its batches (see `reporting/device.rs`).
    pub(crate) report_sink: Box<dyn ReportSink>,
    /// How each zone came out of `MachineConfig::shape`.
    shaped: Vec<crate::page_alloc::shape::ZoneShaped>,
    /// How the layout came out of `MachineConfig::snapshot`.
    exact: Option<crate::page_alloc::exact::ExactLayout>,
    /// The virtio-mem device and its driver's state.
    pub(crate) virtio_mem: Option<crate::virtio_mem::VirtioMem>,
}

impl Machine {
    /// Validates the configuration, lays out memory, boots the allocator
    /// and applies the knob writes.
    pub fn new(config: MachineConfig) -> Result<Machine, MachineError> {
        let geo = config.preset.geometry().with_overrides(config.overrides)?;
        let spec = LayoutSpec {
            nr_nodes: config.nr_nodes,
            node_weights: config.node_mem_bytes.clone(),
            movable_bytes: config.movable_bytes,
            kernel_reserved_bytes: config.kernel_reserved_bytes,
            cma: config.cma.clone(),
            ..LayoutSpec::new(config.mem_bytes, config.nr_cpus)
        };
        let mut layout = Layout::build(&geo, &spec)?;
        if let Some(bytes) = config.memory_block_bytes {
            if !bytes.is_power_of_two() || !(2 << 20..=2 << 30).contains(&bytes) || bytes < geo.page_size() {
                return Err(MachineError::MemoryBlockSize(format_size(bytes)));
            }
            layout.memory_block_bytes = bytes;
        }
        if let Some(maxmem) = config.maxmem_bytes {
            reserve_hotplug_region(&geo, &mut layout, config.mem_bytes, maxmem)?;
        }
        let virtio_mem = match config.virtio_mem {
            Some(spec) => Some(reserve_virtio_mem_region(&geo, &mut layout, spec)?),
            None => None,
        };
        let sparse = Sparse::build(&geo, &layout);
        let thp = ThpKnobs::defaults(geo.pmd_order);
        let tunables = Tunables {
            thp_pmd_enabled: thp.pmd_enabled(),
            ..Tunables::default()
        };
        let page_alloc = PageAlloc::boot(geo, &layout, config.nr_cpus, tunables);
        let backing = new_backing(config.backing, layout.max_pfn, geo.page_size())?;
        let zero_pfn = layout
            .reserved
            .iter()
            .find(|(_, kind)| *kind == ReservedKind::Kernel)
            .map(|(r, _)| r.start)
            .ok_or(MachineError::NoKernelImage)?;
        let vm = Vm::new(
            geo,
            layout.nodes.len(),
            page_alloc.zones().len(),
            config.nr_cpus,
            zero_pfn,
            thp,
            config.backing == BackingKind::Ram,
        );
        let knobs = config.knobs.clone();
        let report_sink = crate::reporting::sink_for(config.backing);
        let balloon = config.balloon;
        let mut machine = Machine {
            config,
            geo,
            layout,
            sparse,
            page_alloc,
            backing,
            vm,
            report_sink,
            shaped: Vec::new(),
            exact: None,
            virtio_mem,
        };
        if let Some(b) = balloon {
            let max_pfn = machine.layout.max_pfn;
            let geo = machine.geo;
            machine
                .page_alloc
                .reporting_mut()
                .register(b.order, b.ack_latency_ns, max_pfn, &geo);
        }
        for spec in machine.config.swap.clone() {
            machine.vm.swap.swapon(spec)?;
        }
        if machine.config.zswap {
            machine.vm.swap.zswap.set_enabled(true);
        }
        for (path, value) in &knobs {
            machine.set_knob(path, value)?;
        }
        machine.vm.page_cache_pages = machine.config.page_cache_bytes / machine.geo.page_size();
        if let Some(bytes) = machine.config.memcg_max_bytes {
            let pages = bytes / machine.geo.page_size();
            if pages == 0 {
                return Err(MachineError::MemcgLimit(format_size(bytes)));
            }
            machine.vm.create_workload_memcg(pages);
        }
        if let Some(bytes) = machine.config.virtio_mem.map(|v| v.plugged_bytes).filter(|&b| b > 0) {
            machine.virtio_mem_resize(bytes)?;
        }
        if let Some(snap) = machine.config.snapshot.clone() {
            let zero_pfn = machine.vm.zero_pfn;
            machine.exact = Some(machine.page_alloc.shape_exact(&snap, zero_pfn));
        }
        if let Some(shape) = machine.config.shape.clone() {
            machine.shaped = machine.page_alloc.shape_free_memory(&shape.zones);
            if let Some(order) = shape.reported_from_order {
                // The snapshot's reporting had caught up: idle, nothing due.
                machine.page_alloc.mark_free_reported(order);
                let r = machine.page_alloc.reporting_mut();
                r.state = crate::reporting::PrState::Idle;
                r.due_ns = None;
            }
        }
        Ok(machine)
    }

    pub fn config(&self) -> &MachineConfig {
        &self.config
    }

    /// How the memory came out of the configuration's snapshot, if any.
    pub fn exact_layout(&self) -> Option<&crate::page_alloc::exact::ExactLayout> {
        self.exact.as_ref()
    }

    /// How each zone came out of the configuration's shape (empty without one).
    pub fn shaped(&self) -> &[crate::page_alloc::shape::ZoneShaped] {
        &self.shaped
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn sparse(&self) -> &Sparse {
        &self.sparse
    }

    pub fn page_alloc(&self) -> &PageAlloc {
        &self.page_alloc
    }

    pub fn page_alloc_mut(&mut self) -> &mut PageAlloc {
        &mut self.page_alloc
    }

    pub fn backing(&self) -> &dyn Backing {
        self.backing.as_ref()
    }

    pub fn backing_mut(&mut self) -> &mut dyn Backing {
        self.backing.as_mut()
    }

    /// The THP settings (the knobs under transparent_hugepage/), to write.
    pub(crate) fn thp_mut(&mut self) -> &mut ThpKnobs {
        self.vm.thp_mut()
    }

    pub fn thp(&self) -> &ThpKnobs {
        self.vm.thp()
    }

    pub fn vm(&self) -> &Vm {
        &self.vm
    }

    /// `lru_add_drain_all`: every cpu's batched folios join the LRU, and
    /// those only a batch held are freed.
    pub fn lru_add_drain_all(&mut self) {
        self.with_vm(0, |vm, ctx| vm.lru_add_drain_all(ctx.pa));
    }

    /// Runs a VM operation on `cpu` with the machine's allocator and backing.
    pub fn with_vm<R>(&mut self, cpu: usize, f: impl FnOnce(&mut Vm, &mut Ctx) -> R) -> R {
        let mut ctx = Ctx::new(&mut self.page_alloc, self.backing.as_mut(), cpu);
        let out = f(&mut self.vm, &mut ctx);
        // Slab objects made or freed by the operation meet the charge path,
        // and folios a batch drain released are freed.
        self.vm.flush_slab_ops(&mut ctx);
        self.vm.free_drained(&mut ctx);
        // With no task left the cpus idle: queued RCU callbacks run.
        if self.vm.rcu_callbacks_pending() && !self.vm.tasks.values().any(|t| t.alive) {
            self.vm.rcu_callbacks(&mut ctx);
        }
        out
    }

    /// The RCU callbacks queued so far run (`Vm::rcu_callbacks`), as they
    /// do once the cpus idle after a grace period.
    pub fn run_rcu_callbacks(&mut self) {
        if self.vm.rcu_callbacks_pending() {
            self.with_vm(0, |vm, ctx| vm.rcu_callbacks(ctx));
        }
    }

    /// Runs khugepaged now if a registration woke it and it has not run
    /// yet. A woken khugepaged starts scanning some milliseconds later
    /// (`lru_add_drain_all` first, at nice 19): not within the
    /// registering task's burst of work but when that task next gives up
    /// its cpu for long: it sleeps (`advance_time`), waits for a child it
    /// forked, or runs drop_caches; callers mark those points.
    pub fn run_woken_khugepaged(&mut self) {
        if self.vm.khugepaged.wake_now {
            self.advance_time(0);
        }
    }

    /// Allocates a folio for `cpu`; `__GFP_ZERO` clears it through the
    /// backing. Pending kswapd work runs before returning.
    pub fn alloc_pages(&mut self, cpu: usize, gfp: Gfp, order: u32) -> Result<Option<Folio>, AllocError> {
        let folio = self.page_alloc.alloc_pages(cpu, gfp, order)?;
        if let Some(f) = folio {
            if gfp.contains(Gfp::ZERO) {
                self.backing
                    .zero(f.pfn, f.nr_pages())
                    .unwrap_or_else(|e| unreachable!("allocated folio outside the backing: {e}"));
            }
        }
        if self.page_alloc.kswapd_pending() {
            self.page_alloc.run_kswapd();
        }
        Ok(folio)
    }

    /// Runs an allocator operation that may reclaim or migrate, with the
    /// VM as its [`Reclaim`](crate::page_alloc::Reclaim).
    pub fn with_reclaim<R>(&mut self, f: impl FnOnce(&mut PageAlloc, &mut dyn crate::page_alloc::Reclaim) -> R) -> R {
        let mut reclaim = crate::vm::reclaim::VmReclaim {
            vm: &mut self.vm,
            backing: self.backing.as_mut(),
        };
        let out = f(&mut self.page_alloc, &mut reclaim);
        // Folios the drains of reclaim or migration released are freed.
        let mut ctx = Ctx::new(&mut self.page_alloc, self.backing.as_mut(), 0);
        self.vm.free_drained(&mut ctx);
        out
    }

    /// `alloc_pages` with direct reclaim and compaction through the VM.
    pub fn alloc_pages_compact(&mut self, cpu: usize, gfp: Gfp, order: u32) -> Result<Option<Folio>, AllocError> {
        let folio = self.with_reclaim(|pa, r| pa.alloc_pages_reclaim(cpu, gfp, order, r))?;
        if self.page_alloc.kswapd_pending() {
            self.with_reclaim(|pa, r| pa.run_kswapd_with(r));
        }
        Ok(folio)
    }

    /// `alloc_contig_pages(nr_pages, GFP_KERNEL | __GFP_COMP, nid)`: a
    /// naturally aligned folio of `nr_pages` (a power of two, may exceed
    /// MAX_PAGE_ORDER), movable pages migrated out of its way.
    pub fn alloc_contig_pages(&mut self, nr_pages: u64, nid: usize) -> Result<Option<Folio>, AllocError> {
        let gfp = crate::gfp::GFP_KERNEL | Gfp::COMP;
        self.with_reclaim(|pa, r| pa.compactor().alloc_contig_pages(nr_pages, gfp, nid, 0, r))
    }

    /// `alloc_contig_range` of `[start, end)` as one folio (a naturally
    /// aligned power of two).
    pub fn alloc_contig_range(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Option<Folio>, crate::compaction::ContigError> {
        self.with_reclaim(|pa, r| pa.compactor().alloc_contig_range(start, end, true, 0, r))
    }

    /// `free_contig_range` of a folio `alloc_contig_*` returned.
    pub fn free_contig_folio(&mut self, folio: Folio) {
        self.page_alloc
            .compactor()
            .free_contig_range(folio.pfn.0, folio.nr_pages());
    }

    /// `echo 1 > /proc/sys/vm/compact_memory`; returns base pages migrated.
    pub fn compact_memory(&mut self) -> u64 {
        self.with_reclaim(|pa, r| pa.compactor().compact_memory(r))
    }

    pub fn free_folio(&mut self, cpu: usize, folio: Folio) -> Result<(), FreeError> {
        self.page_alloc.free_folio(cpu, folio)
    }

    pub fn split_folio(&mut self, folio: Folio, new_order: u32) -> Result<Vec<Folio>, SplitError> {
        Ok(self.page_alloc.split_folio(folio, new_order)?.collect())
    }

    /// Faults in the whole memmap now instead of on first touch (see
    /// [`crate::memmap::Memmap::populate`]).
    pub fn populate_memmap(&mut self) {
        self.page_alloc.memmap.populate();
    }

    /// Runs the invariant checkers over the whole machine: the allocator's
    /// structures, then page tables, rmap and the VM counters.
    pub fn check(&self) -> Result<CheckReport, CheckError> {
        let report = self.page_alloc.check_invariants()?;
        self.vm.check_invariants(&self.page_alloc)?;
        Ok(report)
    }

    // --- knobs ---

    /// A one-line description of the machine for reports.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{} {} {} node(s) {} cpu(s) {} backing, {}K pages, MAX_PAGE_ORDER {}, pageblock order {}",
            self.config.preset.name(),
            format_size(self.config.mem_bytes),
            self.config.nr_nodes,
            self.config.nr_cpus,
            self.config.backing.name(),
            self.geo.page_size() >> 10,
            self.geo.max_page_order,
            self.geo.pageblock_order,
        );
        for swap in &self.config.swap {
            text += &format!(", swap {} {}", format_size(swap.size_bytes), swap.kind.name());
        }
        if self.config.zswap {
            text += ", zswap";
        }
        if let Some(max) = self.config.memcg_max_bytes {
            text += &format!(", memcg max {}", format_size(max));
        }
        text
    }
}

/// Places a virtio-mem device's region above boot RAM (and any --maxmem
/// region), at a unit boundary; the hot-add region grows to cover it.
fn reserve_virtio_mem_region(
    geo: &Geometry,
    layout: &mut Layout,
    spec: crate::virtio_mem::VirtioMemSpec,
) -> Result<crate::virtio_mem::VirtioMem, MachineError> {
    let mb_pages = layout.memory_block_bytes >> geo.page_shift;
    let from = layout.max_pfn.next_multiple_of(mb_pages.max(geo.pages_per_section()));
    let dev = crate::virtio_mem::VirtioMem::new(spec, geo.page_shift, geo.pageblock_nr_pages(), mb_pages, from)?;
    if dev.end_pfn() >= u32::MAX as u64 {
        return Err(MachineError::VirtioMem(crate::virtio_mem::VirtioMemError::Region {
            region: format_size(spec.region_bytes),
            unit: "addressable".into(),
        }));
    }
    let start = layout.hotplug_region.map_or(dev.addr_pfn, |r| r.start);
    layout.hotplug_region = Some(crate::layout::PfnRange::new(start, dev.end_pfn()));
    layout.max_pfn = dev.end_pfn();
    Ok(dev)
}

/// Reserves the hot-add region above boot RAM, starting at the next
/// memory block boundary (`maxmem - mem` bytes of it).
fn reserve_hotplug_region(geo: &Geometry, layout: &mut Layout, mem: u64, maxmem: u64) -> Result<(), MachineError> {
    let block_pages = layout.memory_block_bytes >> geo.page_shift;
    let extra = maxmem.saturating_sub(mem) >> geo.page_shift;
    let start = layout.max_pfn.next_multiple_of(block_pages);
    if extra == 0 || !extra.is_multiple_of(block_pages) || start + extra >= u32::MAX as u64 {
        return Err(MachineError::Maxmem {
            maxmem: format_size(maxmem),
            mem: format_size(mem),
            block: format_size(layout.memory_block_bytes),
        });
    }
    layout.hotplug_region = Some(crate::layout::PfnRange::new(start, start + extra));
    layout.max_pfn = start + extra;
    Ok(())
}
