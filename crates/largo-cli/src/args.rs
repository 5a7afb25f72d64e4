//! Command-line arguments: the command tree, and the MACHINE and POLICY
//! option groups shared by every command (README: Using it). MACHINE
//! options are optional values so that a `--config` can override some of
//! them and inherit the rest (`config.rs`); the defaults apply when the
//! machine is built.

use std::fmt;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use largo_mm::knobs::parse_assignment;
use largo_mm::MachineConfig;
use largo_physmem::BackingKind;
use largo_types::{parse_size, GeometryOverrides, Preset};

/// Bad input found after parsing (a malformed `--set`, an unreadable
/// profile, ...): exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

#[derive(Parser, Debug)]
#[command(
    name = "largo",
    version,
    about = "A user-space model of Linux's large-folio memory management",
    long_about = "largo models one machine's memory the way Linux 6.18 does (buddy allocator, \
                  migratetypes, pcp lists, watermarks, anonymous mTHP, compaction, migration, \
                  hotplug, free page reporting), runs workloads and recorded programs on it, and \
                  prints what the kernel would, in the kernel's own names and formats."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run workloads under named configurations and compare them (with no
    /// arguments: the default suite).
    Run(crate::cmd::run::RunArgs),
    /// Replay recorded traces under named configurations, with the tables
    /// and JSON of `largo run`.
    Replay(crate::cmd::run::ReplayArgs),
    /// Run workloads on the model and natively on this host under the same
    /// THP settings (root) and compare the counters (exit 1 if any differ);
    /// `validate trace` and `validate reporting` compare a recorded program
    /// and free page reporting.
    Validate(crate::cmd::validate::ValidateCmd),
    /// Which anonymous mTHP sizes should a workload use? Replays it under
    /// candidate mixes, ranks them by estimated kernel time and prints the
    /// sysfs writes of the best within a memory-bloat budget.
    Advise(crate::cmd::advise::AdviseArgs),
    /// Measure this host's kernel on page_fault1 at every folio size (root)
    /// and fit the kernel-time cost model.
    Calibrate(crate::cmd::calibrate::CalibrateArgs),
    /// Run a command on this host (root) and record what its processes do
    /// to memory into a trace (every THP size off, ASLR off).
    Record(crate::cmd::record::RecordArgs),
    /// (internal) The launcher of `largo record`.
    #[command(hide = true)]
    RecordExec(crate::cmd::record::RecordExecArgs),
    /// Take memory blocks offline and online (`offline:N online:N list`),
    /// after a workload if given; down to 2 MiB with --memory-block-size 2M.
    Hotplug(crate::cmd::hotplug::HotplugArgs),
    /// Print a /proc file of the modelled machine in the kernel's format,
    /// after running WORKLOAD if given (its memory still mapped).
    Show(crate::cmd::show::ShowArgs),
    /// List workloads, presets, knobs or trace events.
    List(crate::cmd::list::ListArgs),
    /// Age a machine over hours of simulated time (`phone`, `server`)
    /// under each configuration, sampled every simulated minute: large
    /// folio success per size, free pageblocks, compaction, per hour.
    Age(crate::cmd::age::AgeArgs),
    /// This host as it is now (root): `snapshot -o FILE` records its
    /// memory pfn by pfn for `--machine snapshot:FILE`; `fragment`
    /// fragments it; `thpmaps` shows its processes' THP layout.
    Host {
        #[command(subcommand)]
        host: HostCommand,
    },
    /// Benchmarks, measured side by side in one run.
    Bench {
        #[command(subcommand)]
        bench: BenchCommand,
    },
    /// Print a shell completion script (`largo completions bash >
    /// /etc/bash_completion.d/largo`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff: `largo man | man -l -`); with --dir,
    /// write it and one page per command there.
    Man {
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

impl Command {
    /// Whether the command only models (no program forked to measure the
    /// host kernel), so that the model's large arrays may go on host huge
    /// pages (`largo_physmem::HugeAlloc`).
    pub fn models_only(&self) -> bool {
        match self {
            Command::Run(_) | Command::Replay(_) | Command::Show(_) | Command::List(_) | Command::Age(_) => true,
            Command::Bench { bench } => matches!(
                bench,
                BenchCommand::Alloc(_)
                    | BenchCommand::Replay(_)
                    | BenchCommand::Gigantic(_)
                    | BenchCommand::Pageblock(_)
            ),
            _ => false,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum HostCommand {
    /// Record this host's physical memory pfn by pfn (/proc/kpageflags,
    /// /proc/kpagecount, zoneinfo, pagetypeinfo, knobs) into FILE: free
    /// buddy blocks at their order and place, what holds every other
    /// frame, each pageblock's inferred migratetype.
    Snapshot(crate::cmd::host::snapshot::SnapshotArgs),
    /// Fragment this host's free memory and stay alive: fill most of it
    /// with base pages, free every other one, hold the rest until killed.
    Fragment(crate::cmd::host::fragment::FragmentArgs),
    /// tools/mm/thpmaps without Python: how this host's processes map
    /// memory with THPs of each size (aligned, unaligned, partial) and in
    /// contiguous blocks (--cont), per VMA or --rollup.
    Thpmaps(crate::cmd::host::thpmaps::ThpmapsArgs),
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The page allocator against buddy_system_allocator::FrameAllocator on
    /// the same stream of mixed-order allocations and frees, and order-0
    /// alloc+free through the pcp lists.
    Alloc(crate::cmd::bench::alloc::AllocBenchArgs),
    /// The page_fault1 loop simulated by largo against the same loop run by
    /// this host's kernel (root), at each folio size: pages per second.
    Fault(crate::cmd::bench::fault::FaultBenchArgs),
    /// Trace replay on a sim machine: events per second, next to decoding
    /// the same trace.
    Replay(crate::cmd::bench::replay::ReplayBenchArgs),
    /// move_pages of N folios between two nodes of a ram machine with each
    /// copy policy (vanilla, batch, mt_1..mt_CPUs): GB/s of the measured
    /// copy plus the estimated kernel work around it, next to memcpy of
    /// the same frames.
    Migrate(crate::cmd::bench::migrate::MigrateBenchArgs),
    /// The seed's fragmentation experiment: success of 2M, 32M and 1G
    /// allocations on an aged sim machine under MAX_PAGE_ORDER 10 +
    /// alloc_contig_pages, 18, 18 + gigapageblocks, 19 with 2G sections.
    Gigantic(crate::cmd::bench::gigantic::GiganticBenchArgs),
    /// The seed thread's pageblock debate: pageblock order 9 vs 18 on aged
    /// 4 and 16 GiB machines: free page reporting, virtio-mem unplug at 2M
    /// and 128M device blocks, CMA area size and cma_alloc, 2M THP and 1G.
    Pageblock(crate::cmd::bench::pageblock::PageblockBenchArgs),
    /// Dependent loads over memory mapped with each folio size, natively on
    /// this host (root) and through largo's TLB model: ns per access.
    Tlb(crate::cmd::bench::tlb::TlbBenchArgs),
    /// will-it-scale page_fault1 with 1 and 2 tasks (processes, threads)
    /// on this host (root) beside largo's lock-wait estimate.
    Contention(crate::cmd::bench::contention::ContentionBenchArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpEnabledArg {
    Always,
    Madvise,
    Never,
}

impl ThpEnabledArg {
    fn sysfs(self) -> &'static str {
        match self {
            ThpEnabledArg::Always => "always",
            ThpEnabledArg::Madvise => "madvise",
            ThpEnabledArg::Never => "never",
        }
    }
}

/// MACHINE: what hardware and kernel build to model. Unset options take
/// their defaults when the machine is built (`MachineArgs::config`).
#[derive(Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// Architecture preset: x86_64 (default), arm64-4k, arm64-16k,
    /// arm64-64k; or `host`: this machine now (its zones, free blocks per
    /// order and migratetype, min_free_kbytes, free page reporting).
    #[arg(long, value_parser = parse_machine)]
    pub machine: Option<MachineChoice>,
    /// Memory size, with K/M/G/T suffix [default: 16G].
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub mem: Option<u64>,
    /// NUMA nodes; memory is split evenly [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub nodes: Option<u16>,
    /// The memory of each node, e.g. `6G,2G` (sets --nodes and --mem).
    #[arg(long, value_delimiter = ',', value_parser = parse_size_arg, value_name = "SIZES", conflicts_with = "nodes")]
    pub node_mem: Vec<u64>,
    /// CPUs, numbered node by node [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub cpus: Option<u16>,
    /// Page frame backing: sim (metadata only) or ram (real host memory) [default: sim].
    #[arg(long, value_parser = parse_backing)]
    pub backing: Option<BackingKind>,
    /// Override MAX_PAGE_ORDER (inclusive).
    #[arg(long, value_name = "N")]
    pub max_page_order: Option<u32>,
    /// Override the pageblock order.
    #[arg(long, value_name = "N")]
    pub pageblock_order: Option<u32>,
    /// Override SECTION_SIZE_BITS.
    #[arg(long, value_name = "N")]
    pub section_bits: Option<u32>,
    /// Memory block size (hotplug unit), a power of two from 2M; below
    /// the section size is the seed's subsection-granular hotplug.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub memory_block_size: Option<u64>,
    /// Physical memory the machine may grow to by hot-add (QEMU's maxmem);
    /// the region above --mem starts with no RAM (`largo hotplug add:N`).
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub maxmem: Option<u64>,
    /// Let buddy blocks exceed a section (MAX_PAGE_ORDER 18 with 128 MiB
    /// sections): the seed thread's contiguous-memmap proposal.
    #[arg(long)]
    pub buddy_beyond_section: bool,
    /// Let the pageblock order exceed the PMD order, up to MAX_PAGE_ORDER
    /// (the seed thread's 1 GiB pageblock; mainline caps it at the PMD).
    #[arg(long)]
    pub pageblock_beyond_pmd: bool,
    /// A CMA area reserved at boot: `SIZE` (`cma=`, any node) or
    /// `SIZE@NODE` (`numa_cma=NODE:SIZE`); rounded up to a pageblock;
    /// repeatable. The machine then models a CONFIG_CMA kernel (CmaTotal,
    /// CmaFree, cma_alloc_success/fail, a CMA pagetypeinfo row).
    #[arg(long, value_name = "SIZE[@NODE]", value_parser = parse_cma_spec)]
    pub cma: Vec<largo_mm::cma::CmaSpec>,
    /// A virtio-mem device above boot RAM:
    /// `SIZE[,block=SIZE][,plugged=SIZE][,movable]` (device block 2M by
    /// default, nothing plugged at boot, onlined to ZONE_NORMAL unless
    /// `movable`); `largo hotplug plug:SIZE unplug:SIZE` resize it.
    #[arg(long, value_name = "SPEC", value_parser = parse_virtio_mem_spec)]
    pub virtio_mem: Option<largo_mm::virtio_mem::VirtioMemSpec>,
    /// Size of ZONE_MOVABLE, taken from the top of each node (movablecore=) [default: 0].
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub movable: Option<u64>,
    /// A virtio-balloon device with free page reporting (the knobs
    /// page_reporting/* then apply).
    #[arg(long)]
    pub balloon: bool,
    /// The balloon's acknowledge latency per report call, in microseconds
    /// (with --balloon) [default: 0].
    #[arg(long, value_name = "US")]
    pub balloon_ack_us: Option<u64>,
    /// A swap device swapped on at boot: `SIZE[:zram|:disk]`, zram
    /// (synchronous, compressed in RAM) by default; repeatable, the first
    /// has the highest priority.
    #[arg(long, value_name = "SIZE[:KIND]", value_parser = parse_swap_spec)]
    pub swap: Vec<largo_mm::swap::SwapSpec>,
    /// zswap enabled at boot (the knobs zswap/max_pool_percent and
    /// zswap/accept_threshold_percent then apply).
    #[arg(long)]
    pub zswap: bool,
    /// Run the workload's tasks in one memory cgroup with this limit
    /// (cgroup v1 memory.limit_in_bytes): charging, memcg reclaim, OOM.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub memcg_max: Option<u64>,
    /// Resident page cache outside the workload, as a real machine has
    /// (counted, never reclaimed): refaults of memory reclaimed without a
    /// memcg target are judged against it [default: 0; --machine host:
    /// this host's].
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub page_cache: Option<u64>,
}

fn parse_swap_spec(s: &str) -> Result<largo_mm::swap::SwapSpec, String> {
    largo_mm::swap::SwapSpec::parse(s)
}

/// `--cma SIZE[@NODE]`.
fn parse_cma_spec(s: &str) -> Result<largo_mm::cma::CmaSpec, String> {
    let (size, nid) = match s.split_once('@') {
        Some((size, node)) => {
            let nid = node
                .parse::<usize>()
                .map_err(|_| format!("'{node}' is not a node number (--cma SIZE[@NODE])"))?;
            (size, Some(nid))
        }
        None => (s, None),
    };
    let bytes = parse_size_arg(size)?;
    if bytes == 0 {
        return Err("a CMA area of size 0 (-EINVAL)".into());
    }
    Ok(largo_mm::cma::CmaSpec { bytes, nid })
}

/// `--virtio-mem SIZE[,block=SIZE][,plugged=SIZE][,movable]`.
fn parse_virtio_mem_spec(s: &str) -> Result<largo_mm::virtio_mem::VirtioMemSpec, String> {
    let mut parts = s.split(',');
    let region_bytes = parse_size_arg(parts.next().unwrap_or(""))?;
    let mut spec = largo_mm::virtio_mem::VirtioMemSpec {
        region_bytes,
        block_bytes: 2 << 20,
        plugged_bytes: 0,
        movable: false,
    };
    for part in parts {
        match part.split_once('=') {
            Some(("block", v)) => spec.block_bytes = parse_size_arg(v)?,
            Some(("plugged", v)) => spec.plugged_bytes = parse_size_arg(v)?,
            None if part == "movable" => spec.movable = true,
            _ => {
                return Err(format!(
                    "'{part}' is not a virtio-mem option: use SIZE[,block=SIZE][,plugged=SIZE][,movable]"
                ))
            }
        }
    }
    if spec.plugged_bytes > spec.region_bytes {
        return Err("virtio-mem: plugged exceeds the region size".into());
    }
    Ok(spec)
}

/// A knob write: `KNOB=VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnobWrite {
    pub path: String,
    pub value: String,
}

pub fn parse_knob_write(s: &str) -> Result<KnobWrite, String> {
    parse_assignment(s)
        .map(|(path, value)| KnobWrite { path, value })
        .map_err(|e| e.to_string())
}

/// `--thp SIZES[=MODE]`: the per-size `enabled` writes it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThpSpec(pub Vec<KnobWrite>);

pub fn parse_thp_spec(s: &str) -> Result<ThpSpec, String> {
    spec_of(largo_workloads::policy::thp_knobs(s))
}

/// The knob writes of a parsed `SIZES[=MODE]`.
fn spec_of(writes: Result<Vec<(String, String)>, largo_workloads::policy::PolicyError>) -> Result<ThpSpec, String> {
    writes
        .map(|w| ThpSpec(w.into_iter().map(|(path, value)| KnobWrite { path, value }).collect()))
        .map_err(|e| e.to_string())
}

/// `--thp-policy`: checked here, applied as `largo/thp_policy`.
pub fn parse_thp_policy(s: &str) -> Result<String, String> {
    largo_mm::vm::policy::ThpPolicy::parse(s)
        .map(|p| p.spec())
        .map_err(|e| e.to_string())
}

pub fn parse_shmem_spec(s: &str) -> Result<ThpSpec, String> {
    spec_of(largo_workloads::policy::shmem_knobs(s))
}

/// POLICY: knob settings applied after boot.
#[derive(Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// Anonymous folio sizes to enable: `16K,32K,64K` (always), `2M=madvise`;
    /// modes always, inherit, madvise, never (repeatable).
    #[arg(long, value_name = "SIZES[=MODE]", value_parser = parse_thp_spec)]
    pub thp: Vec<ThpSpec>,
    /// Top-level transparent_hugepage/enabled.
    #[arg(long, value_enum)]
    pub thp_enabled: Option<ThpEnabledArg>,
    /// Anonymous shmem (MAP_SHARED|MAP_ANONYMOUS, memfd) folio sizes to
    /// enable: `64K` (always), `2M=within_size`; modes always, inherit,
    /// within_size, advise, never (repeatable). `inherit` sizes follow
    /// transparent_hugepage/shmem_enabled (--set).
    #[arg(long, value_name = "SIZES[=MODE]", value_parser = parse_shmem_spec)]
    pub shmem: Vec<ThpSpec>,
    /// The order policy of anonymous write faults (largo only): `static`
    /// (the kernel's choice, the default), `adaptive[:grow=N,small=PAGES]`
    /// (folios grow with contiguous runs of faults, fall on sparse ones),
    /// `ingens[:util=PERCENT]` (base pages, blocks promoted once that full).
    /// Policies choose among the sizes the THP knobs allow.
    #[arg(long, value_name = "NAME[:PARAM=VALUE,...]", value_parser = parse_thp_policy)]
    pub thp_policy: Option<String>,
    /// Set any knob by kernel path, e.g. vm/min_free_kbytes=65536 (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE", value_parser = parse_knob_write)]
    pub set: Vec<KnobWrite>,
}

impl PolicyArgs {
    /// Any policy flag given.
    pub fn is_set(&self) -> bool {
        !self.thp.is_empty()
            || self.thp_enabled.is_some()
            || !self.shmem.is_empty()
            || self.thp_policy.is_some()
            || !self.set.is_empty()
    }

    /// The knob writes, in order: `--thp-enabled`, `--thp`, `--shmem`,
    /// `--thp-policy`, `--set`.
    pub fn knobs(&self) -> Vec<(String, String)> {
        let top = self.thp_enabled.map(|m| KnobWrite {
            path: "transparent_hugepage/enabled".into(),
            value: m.sysfs().into(),
        });
        top.into_iter()
            .chain(self.thp.iter().flat_map(|t| t.0.iter().cloned()))
            .chain(self.shmem.iter().flat_map(|t| t.0.iter().cloned()))
            .chain(self.thp_policy.iter().map(|p| KnobWrite {
                path: "largo/thp_policy".into(),
                value: p.clone(),
            }))
            .chain(self.set.iter().cloned())
            .map(|k| (k.path, k.value))
            .collect()
    }

    /// These writes followed by `then`'s (a `--config` after the flags
    /// given to every configuration).
    pub fn then(&self, then: &PolicyArgs) -> Vec<(String, String)> {
        let mut knobs = self.knobs();
        knobs.extend(then.knobs());
        knobs
    }
}

/// Default memory size.
pub const DEFAULT_MEM_BYTES: u64 = 16 << 30;
/// Default CPUs.
pub const DEFAULT_CPUS: u16 = 2;

impl MachineArgs {
    /// `over`'s options where given, these elsewhere (flags given to every
    /// configuration, overridden by one `--config`'s).
    pub fn merged(&self, over: &MachineArgs) -> MachineArgs {
        let (nodes, node_mem) = if over.nodes.is_some() || !over.node_mem.is_empty() {
            (over.nodes, over.node_mem.clone())
        } else {
            (self.nodes, self.node_mem.clone())
        };
        MachineArgs {
            machine: over.machine.clone().or_else(|| self.machine.clone()),
            mem: over.mem.or(self.mem),
            nodes,
            node_mem,
            cpus: over.cpus.or(self.cpus),
            backing: over.backing.or(self.backing),
            max_page_order: over.max_page_order.or(self.max_page_order),
            pageblock_order: over.pageblock_order.or(self.pageblock_order),
            section_bits: over.section_bits.or(self.section_bits),
            memory_block_size: over.memory_block_size.or(self.memory_block_size),
            maxmem: over.maxmem.or(self.maxmem),
            buddy_beyond_section: over.buddy_beyond_section || self.buddy_beyond_section,
            pageblock_beyond_pmd: over.pageblock_beyond_pmd || self.pageblock_beyond_pmd,
            cma: if over.cma.is_empty() {
                self.cma.clone()
            } else {
                over.cma.clone()
            },
            virtio_mem: over.virtio_mem.or(self.virtio_mem),
            movable: over.movable.or(self.movable),
            balloon: over.balloon || self.balloon,
            balloon_ack_us: over.balloon_ack_us.or(self.balloon_ack_us),
            swap: if over.swap.is_empty() {
                self.swap.clone()
            } else {
                over.swap.clone()
            },
            zswap: over.zswap || self.zswap,
            memcg_max: over.memcg_max.or(self.memcg_max),
            page_cache: over.page_cache.or(self.page_cache),
        }
    }

    /// The machine configuration these options describe, with `knobs`
    /// written after boot.
    pub fn config_with(&self, knobs: Vec<(String, String)>) -> Result<MachineConfig, UsageError> {
        if self.balloon_ack_us.is_some() && !self.balloon {
            return Err(UsageError("--balloon-ack-us needs --balloon".into()));
        }
        let preset = match &self.machine {
            Some(MachineChoice::Host) => return self.host_config(knobs),
            Some(MachineChoice::Snapshot(path)) => return self.snapshot_file_config(path, knobs),
            Some(MachineChoice::Preset(p)) => *p,
            None => Preset::X86_64,
        };
        let ack_ns = self.balloon_ack_us.unwrap_or(0) * 1000;
        Ok(MachineConfig {
            preset,
            overrides: GeometryOverrides {
                max_page_order: self.max_page_order,
                pageblock_order: self.pageblock_order,
                section_bits: self.section_bits,
                buddy_beyond_section: self.buddy_beyond_section,
                pageblock_beyond_pmd: self.pageblock_beyond_pmd,
            },
            mem_bytes: if self.node_mem.is_empty() {
                self.mem.unwrap_or(DEFAULT_MEM_BYTES)
            } else {
                self.node_mem.iter().sum()
            },
            nr_nodes: if self.node_mem.is_empty() {
                self.nodes.unwrap_or(1) as usize
            } else {
                self.node_mem.len()
            },
            node_mem_bytes: self.node_mem.clone(),
            nr_cpus: self.cpus.unwrap_or(DEFAULT_CPUS) as usize,
            movable_bytes: self.movable.unwrap_or(0),
            backing: self.backing.unwrap_or(BackingKind::Sim),
            knobs,
            memory_block_bytes: self.memory_block_size,
            maxmem_bytes: self.maxmem,
            balloon: self.balloon.then(|| largo_mm::machine::Balloon::virtio(preset, ack_ns)),
            swap: self.swap.clone(),
            zswap: self.zswap,
            memcg_max_bytes: self.memcg_max,
            page_cache_bytes: self.page_cache.unwrap_or(0),
            cma: self.cma.clone(),
            virtio_mem: self.virtio_mem,
            ..MachineConfig::default()
        })
    }

    /// The machine configuration with `policy`'s knob writes.
    pub fn config(&self, policy: &PolicyArgs) -> Result<MachineConfig, UsageError> {
        self.config_with(policy.knobs())
    }

    /// `--machine snapshot:FILE`: the host the snapshot recorded, its
    /// memory laid out pfn by pfn; the rest as `--machine host`.
    fn snapshot_file_config(
        &self,
        path: &std::path::Path,
        knobs: Vec<(String, String)>,
    ) -> Result<MachineConfig, UsageError> {
        let snap = largo_host::snapshot::file::load(path)
            .map_err(|e| UsageError(format!("--machine snapshot:{}: {e}", path.display())))?;
        let c = largo_host::snapshot::snapshot_config(std::sync::Arc::new(snap))
            .map_err(|e| UsageError(format!("--machine snapshot:{}: {e}", path.display())))?;
        self.host_like(c, knobs)
    }

    /// `--machine host`: this host now, from a snapshot taken on the fly
    /// (root: every free block where it is), else from its zone counts
    /// (free blocks per order and migratetype, laid out so none merge);
    /// the geometry is x86_64's and the size the host's, so --mem and the
    /// geometry overrides do not apply; `--backing`, `--cpus`, the balloon
    /// and the POLICY knobs do.
    fn host_config(&self, knobs: Vec<(String, String)>) -> Result<MachineConfig, UsageError> {
        let c = largo_host::snapshot::host_config_now().map_err(|e| UsageError(format!("--machine host: {e}")))?;
        self.host_like(c, knobs)
    }

    /// A host's configuration with this command line's settings.
    fn host_like(&self, mut c: MachineConfig, knobs: Vec<(String, String)>) -> Result<MachineConfig, UsageError> {
        c.backing = self.backing.unwrap_or(BackingKind::Sim);
        c.nr_cpus = self.cpus.unwrap_or(DEFAULT_CPUS) as usize;
        let ack_ns = self.balloon_ack_us.unwrap_or(0) * 1000;
        match c.balloon.as_mut() {
            Some(b) => b.ack_latency_ns = ack_ns,
            None if self.balloon => c.balloon = Some(largo_mm::machine::Balloon::virtio(Preset::X86_64, ack_ns)),
            None => {}
        }
        c.knobs.extend(knobs);
        c.swap = self.swap.clone();
        c.zswap = self.zswap;
        c.memcg_max_bytes = self.memcg_max;
        if let Some(bytes) = self.page_cache {
            c.page_cache_bytes = bytes;
        }
        Ok(c)
    }
}

/// Boots a machine from a configuration the command line described: its
/// errors name the flag to change.
pub fn boot(config: MachineConfig) -> Result<largo_mm::Machine, UsageError> {
    largo_mm::Machine::new(config).map_err(|e| UsageError(machine_error(&e)))
}

/// A machine error as the command line says it: the flag first, and the
/// flags that fix it.
pub fn machine_error(e: &largo_mm::MachineError) -> String {
    use largo_mm::layout::LayoutError as L;
    use largo_mm::MachineError as M;
    use largo_types::GeometryError as G;
    let (flag, fix) = match e {
        M::Geometry(G::MaxOrderExceedsSection { needed, .. }) => (
            "--max-page-order",
            format!(" (raise --section-bits to at least {needed}, or pass --buddy-beyond-section)"),
        ),
        M::Geometry(G::MaxOrderBelowPmd { .. } | G::MaxOrderOutOfRange(_)) => ("--max-page-order", String::new()),
        M::Geometry(G::PageblockOrderOutOfRange { .. }) => ("--pageblock-order", String::new()),
        M::Geometry(G::SectionBitsOutOfRange { .. }) => ("--section-bits", String::new()),
        M::Layout(L::MemTooSmall(_) | L::MemNotAligned(_) | L::TooManyPages { .. }) => ("--mem", String::new()),
        M::Layout(L::BadNodes { .. }) => ("--nodes", String::new()),
        M::Layout(L::BadCpus(_)) => ("--cpus", String::new()),
        M::Layout(L::MovableTooLarge { .. }) => ("--movable", String::new()),
        M::MemoryBlockSize(_) => ("--memory-block-size", String::new()),
        M::Maxmem { .. } => ("--maxmem", String::new()),
        M::Knob(_) => ("--set", String::new()),
        M::Swap(_) => ("--swap", String::new()),
        M::MemcgLimit(_) => ("--memcg-max", String::new()),
        _ => return e.to_string(),
    };
    format!("{flag}: {e}{fix}")
}

/// `--machine`: a preset, this host, or a snapshot of a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MachineChoice {
    Preset(Preset),
    Host,
    Snapshot(std::path::PathBuf),
}

pub fn parse_machine(s: &str) -> Result<MachineChoice, String> {
    if s == "host" {
        return Ok(MachineChoice::Host);
    }
    if let Some(path) = s.strip_prefix("snapshot:") {
        if path.is_empty() {
            return Err("--machine snapshot:FILE needs a file (from `largo host snapshot -o FILE`)".into());
        }
        return Ok(MachineChoice::Snapshot(path.into()));
    }
    Preset::from_name(s).map(MachineChoice::Preset).ok_or_else(|| {
        let names: Vec<_> = Preset::ALL.iter().map(|p| p.name()).collect();
        format!(
            "unknown machine '{s}': expected one of {}, host, snapshot:FILE",
            names.join(", ")
        )
    })
}

/// A byte size with a K/M/G/T suffix, for clap.
pub fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

pub fn parse_backing(s: &str) -> Result<BackingKind, String> {
    BackingKind::from_name(s).ok_or_else(|| format!("unknown backing '{s}': expected sim or ram"))
}

/// Prints help and version as clap does; any other parse error as one
/// line on stderr, exit status 2.
pub fn report_parse_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("largo: {}", first_error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// A clap error on one line, without its `error: ` prefix: the first
/// line, the indented lines that follow a line ending in `:` (the missing
/// arguments), and the possible values where clap lists them.
pub fn first_error_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines().skip_while(|l| l.trim().is_empty());
    let mut first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    let rest: Vec<&str> = lines.take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    if first.ends_with(':') {
        first = format!("{first} {}", rest.join(", "));
    } else if let Some(values) = rest.iter().find(|l| l.starts_with("[possible values:")) {
        first = format!("{first} {values}");
    }
    first
}
