//! Command-line arguments: the MACHINE and POLICY option groups shared by
//! every command (DESIGN.md section 5).

use std::fmt;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use largo_mm::knobs::parse_assignment;
use largo_mm::MachineConfig;
use largo_physmem::BackingKind;
use largo_types::{parse_size, GeometryOverrides, Preset};

/// Bad input found after parsing (a malformed `--set`, ...): exit status 2.
#[derive(Debug)]
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
                  migratetypes, pcp lists, watermarks, ...) and prints what the kernel would, \
                  in the kernel's own formats."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run workloads under named configurations and compare them (with no
    /// arguments: the default suite).
    Run(crate::cmd::run::RunArgs),
    /// Replay recorded traces under named configurations, with the tables
    /// and JSON of `largo run`.
    Replay(crate::cmd::run::ReplayArgs),
    /// Run workloads on the model and natively on this host under the same
    /// THP settings (root) and compare the counters (exit 1 if any differ).
    Validate(crate::cmd::validate::ValidateArgs),
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
    Show {
        /// Which file.
        #[arg(value_enum)]
        file: ShowFile,
        /// A workload to run first, e.g. anon-w-seq:size=256M.
        workload: Option<String>,
        #[command(flatten)]
        machine: MachineArgs,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Tasks running the workload.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
        tasks: u32,
        /// Seed of the workload's random choices.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// List presets or knobs.
    List {
        #[arg(value_enum)]
        what: ListWhat,
        #[command(flatten)]
        machine: MachineArgs,
    },
    /// Benchmarks, measured side by side in one run.
    Bench {
        #[command(subcommand)]
        bench: BenchCommand,
    },
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
    /// copy policy (vanilla, mt_1..mt_CPUs), GB/s, next to memcpy.
    Migrate(crate::cmd::bench::migrate::MigrateBenchArgs),
    /// The seed's fragmentation experiment: success of 2M, 32M and 1G
    /// allocations on an aged sim machine under MAX_PAGE_ORDER 10 +
    /// alloc_contig_pages, 18, 18 + gigapageblocks, 19 with 2G sections.
    Gigantic(crate::cmd::bench::gigantic::GiganticBenchArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowFile {
    Buddyinfo,
    Pagetypeinfo,
    Zoneinfo,
    Vmstat,
    Meminfo,
    /// Per-size mTHP stats, as `grep . hugepages-*/stats/*` prints them.
    Mthp,
    /// Mapped anonymous memory by folio size (tools/mm/thpmaps --rollup).
    Thpmaps,
    /// Free page reporting: parameters, counters, Reported blocks per order.
    #[value(name = "page_reporting")]
    PageReporting,
    /// debugfs extfrag/extfrag_index: fragmentation index per order.
    #[value(name = "extfrag_index")]
    ExtfragIndex,
    /// debugfs extfrag/unusable_index: free memory unusable per order.
    #[value(name = "unusable_index")]
    UnusableIndex,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListWhat {
    Workloads,
    Presets,
    Knobs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpEnabledArg {
    Always,
    Madvise,
    Never,
}

/// MACHINE: what hardware and kernel build to model.
#[derive(Args, Debug, Clone)]
pub struct MachineArgs {
    /// Architecture preset: x86_64 (default), arm64-4k, arm64-16k,
    /// arm64-64k; or `host`: this machine now (its zones, free blocks per
    /// order and migratetype, min_free_kbytes, free page reporting).
    #[arg(long, value_parser = parse_machine)]
    pub machine: Option<MachineChoice>,
    /// Memory size, with K/M/G/T suffix.
    #[arg(long, default_value = "16G", value_parser = parse_size_arg, value_name = "SIZE")]
    pub mem: u64,
    /// NUMA nodes; memory is split evenly.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub nodes: u16,
    /// The memory of each node, e.g. `6G,2G` (sets --nodes and --mem).
    #[arg(long, value_delimiter = ',', value_parser = parse_size_arg, value_name = "SIZES", conflicts_with = "nodes")]
    pub node_mem: Vec<u64>,
    /// CPUs, numbered node by node.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub cpus: u16,
    /// Page frame backing: sim (metadata only) or ram (real host memory).
    #[arg(long, default_value = "sim", value_parser = parse_backing)]
    pub backing: BackingKind,
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
    /// Size of ZONE_MOVABLE, taken from the top of each node (movablecore=).
    #[arg(long, default_value = "0", value_parser = parse_size_arg, value_name = "SIZE")]
    pub movable: u64,
    /// A virtio-balloon device with free page reporting (the knobs
    /// page_reporting/* then apply).
    #[arg(long)]
    pub balloon: bool,
    /// The balloon's acknowledge latency per report call, in microseconds.
    #[arg(long, default_value_t = 0, value_name = "US", requires = "balloon")]
    pub balloon_ack_us: u64,
}

/// POLICY: knob settings applied after boot.
#[derive(Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// Anonymous folio sizes to enable: `16K,32K,64K` (always), `2M=madvise`;
    /// modes always, inherit, madvise, never (repeatable).
    #[arg(long, value_name = "SIZES[=MODE]")]
    pub thp: Vec<String>,
    /// Top-level transparent_hugepage/enabled.
    #[arg(long, value_enum)]
    pub thp_enabled: Option<ThpEnabledArg>,
    /// Set any knob by kernel path, e.g. vm/min_free_kbytes=65536 (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub set: Vec<String>,
}

impl PolicyArgs {
    /// Any policy flag given.
    pub fn is_set(&self) -> bool {
        !self.thp.is_empty() || self.thp_enabled.is_some() || !self.set.is_empty()
    }

    /// The knob writes, in order: `--thp-enabled`, `--thp`, `--set`.
    pub fn knobs(&self) -> Result<Vec<(String, String)>, UsageError> {
        let mut knobs = Vec::new();
        if let Some(mode) = self.thp_enabled {
            let value = mode
                .to_possible_value()
                .map(|v| v.get_name().to_string())
                .unwrap_or_default();
            knobs.push(("transparent_hugepage/enabled".to_string(), value));
        }
        for spec in &self.thp {
            knobs.extend(parse_thp(spec)?);
        }
        for s in &self.set {
            knobs.push(parse_assignment(s).map_err(|e| UsageError(e.to_string()))?);
        }
        Ok(knobs)
    }

    /// The flags again, for merging with a `--config` SPEC.
    pub fn to_tokens(&self) -> Vec<String> {
        let mut t = Vec::new();
        for s in &self.thp {
            t.extend(["--thp".to_string(), s.clone()]);
        }
        if let Some(mode) = self.thp_enabled {
            let value = mode
                .to_possible_value()
                .map(|v| v.get_name().to_string())
                .unwrap_or_default();
            t.extend(["--thp-enabled".to_string(), value]);
        }
        for s in &self.set {
            t.extend(["--set".to_string(), s.clone()]);
        }
        t
    }
}

/// `--thp SIZES[=MODE]`: per-size `enabled` writes.
pub fn parse_thp(spec: &str) -> Result<Vec<(String, String)>, UsageError> {
    largo_workloads::policy::thp_knobs(spec).map_err(UsageError)
}

impl MachineArgs {
    /// The machine configuration these options describe, with `policy`'s knob writes.
    pub fn config(&self, policy: &PolicyArgs) -> Result<MachineConfig, UsageError> {
        let knobs = policy.knobs()?;
        let preset = match self.machine {
            Some(MachineChoice::Host) => return self.host_config(knobs),
            Some(MachineChoice::Preset(p)) => p,
            None => Preset::X86_64,
        };
        Ok(MachineConfig {
            preset,
            overrides: GeometryOverrides {
                max_page_order: self.max_page_order,
                pageblock_order: self.pageblock_order,
                section_bits: self.section_bits,
                buddy_beyond_section: self.buddy_beyond_section,
            },
            mem_bytes: if self.node_mem.is_empty() {
                self.mem
            } else {
                self.node_mem.iter().sum()
            },
            nr_nodes: if self.node_mem.is_empty() {
                self.nodes as usize
            } else {
                self.node_mem.len()
            },
            node_mem_bytes: self.node_mem.clone(),
            nr_cpus: self.cpus as usize,
            movable_bytes: self.movable,
            backing: self.backing,
            knobs,
            memory_block_bytes: self.memory_block_size,
            maxmem_bytes: self.maxmem,
            balloon: self.balloon.then_some(largo_mm::machine::Balloon {
                order: 0,
                ack_latency_ns: self.balloon_ack_us * 1000,
            }),
            ..MachineConfig::default()
        })
    }
}

impl MachineArgs {
    /// The flags again (every value explicit), for merging with a `--config` SPEC.
    pub fn to_tokens(&self) -> Vec<String> {
        let mut t = Vec::new();
        match self.machine {
            Some(MachineChoice::Preset(p)) => t.extend(["--machine".to_string(), p.name().to_string()]),
            Some(MachineChoice::Host) => t.extend(["--machine".to_string(), "host".to_string()]),
            None => {}
        }
        t.extend(["--mem".to_string(), self.mem.to_string()]);
        if self.node_mem.is_empty() {
            t.extend(["--nodes".to_string(), self.nodes.to_string()]);
        } else {
            let sizes: Vec<String> = self.node_mem.iter().map(|b| b.to_string()).collect();
            t.extend(["--node-mem".to_string(), sizes.join(",")]);
        }
        t.extend(["--cpus".to_string(), self.cpus.to_string()]);
        t.extend(["--backing".to_string(), self.backing.name().to_string()]);
        for (flag, v) in [
            ("--max-page-order", self.max_page_order),
            ("--pageblock-order", self.pageblock_order),
            ("--section-bits", self.section_bits),
        ] {
            if let Some(v) = v {
                t.extend([flag.to_string(), v.to_string()]);
            }
        }
        if self.buddy_beyond_section {
            t.push("--buddy-beyond-section".to_string());
        }
        if let Some(b) = self.memory_block_size {
            t.extend(["--memory-block-size".to_string(), b.to_string()]);
        }
        if let Some(b) = self.maxmem {
            t.extend(["--maxmem".to_string(), b.to_string()]);
        }
        t.extend(["--movable".to_string(), self.movable.to_string()]);
        if self.balloon {
            t.push("--balloon".to_string());
            t.extend(["--balloon-ack-us".to_string(), self.balloon_ack_us.to_string()]);
        }
        t
    }
}

/// `--machine`: a preset, or this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineChoice {
    Preset(Preset),
    Host,
}

fn parse_machine(s: &str) -> Result<MachineChoice, String> {
    if s == "host" {
        return Ok(MachineChoice::Host);
    }
    Preset::from_name(s).map(MachineChoice::Preset).ok_or_else(|| {
        let names: Vec<_> = Preset::ALL.iter().map(|p| p.name()).collect();
        format!("unknown machine '{s}': expected one of {}, host", names.join(", "))
    })
}

impl MachineArgs {
    /// `--machine host`: this host's shape; the geometry is x86_64's and
    /// the size the host's, so --mem and the geometry overrides do not
    /// apply; `--backing`, `--cpus` and the POLICY knobs do.
    fn host_config(&self, knobs: Vec<(String, String)>) -> Result<MachineConfig, UsageError> {
        let mut c = largo_host::hostshape::host_config().map_err(|e| UsageError(format!("--machine host: {e}")))?;
        c.backing = self.backing;
        c.nr_cpus = self.cpus as usize;
        if self.balloon && c.balloon.is_none() {
            c.balloon = Some(largo_mm::machine::Balloon {
                order: 0,
                ack_latency_ns: self.balloon_ack_us * 1000,
            });
        } else if let Some(b) = c.balloon.as_mut() {
            b.ack_latency_ns = self.balloon_ack_us * 1000;
        }
        c.knobs.extend(knobs);
        Ok(c)
    }
}

/// A byte size with a K/M/G/T suffix, for clap.
pub fn parse_size_value(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

pub(crate) fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn parse_backing(s: &str) -> Result<BackingKind, String> {
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

/// The first line of a clap error, without its `error: ` prefix; a line
/// ending in `:` takes the indented lines that follow it (the missing
/// arguments).
pub fn first_error_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines().skip_while(|l| l.trim().is_empty());
    let first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    if !first.ends_with(':') {
        return first;
    }
    let rest: Vec<&str> = lines
        .take_while(|l| l.starts_with(' ') && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    format!("{first} {}", rest.join(", "))
}
