//! `largo host thpmaps` (root): tools/mm/thpmaps in one binary, for hosts
//! that cannot run Python: how each process's memory is mapped by THPs of
//! each size, aligned or not, partially, and in contiguous blocks of
//! `--cont` sizes; per VMA in the tool's format, or summed (`--rollup`),
//! or as JSON.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use largo_host::thpmaps::scan::{parse_smaps, vma_stats, Vma, ALL_SMAPS_FIELDS};
use largo_host::thpmaps::stats::{format_stat, Geometry, Stat};

use crate::args::{parse_size_arg, UsageError};

#[derive(Args, Debug)]
pub struct ThpmapsArgs {
    /// A process to scan (repeatable); default: every process.
    #[arg(long, value_name = "PID", conflicts_with = "cgroup")]
    pub pid: Vec<u32>,
    /// Every process of this cgroup (v1 or v2 directory) and its children.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Sum the per-VMA statistics over everything scanned.
    #[arg(long)]
    pub rollup: bool,
    /// Also count memory mapped in naturally aligned contiguous blocks of
    /// SIZE within one THP (repeatable; a power-of-2 number of pages up to
    /// the PMD size), e.g. 64K for arm64 contpte.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub cont: Vec<u64>,
    /// Include every additive /proc/PID/smaps field.
    #[arg(long)]
    pub inc_smaps: bool,
    /// Show statistics whose value is 0 too.
    #[arg(long)]
    pub inc_empty: bool,
    /// One JSON object per VMA (or one for --rollup).
    #[arg(long)]
    pub json: bool,
}

fn geometry() -> Result<Geometry> {
    let page = largo_physmem::host::host_page_size();
    let pmd: u64 = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .context("reading hpage_pmd_size (no THP on this kernel?)")?
        .trim()
        .parse()
        .context("hpage_pmd_size")?;
    Ok(Geometry {
        page_shift: page.trailing_zeros(),
        pmd_order: (pmd / page).trailing_zeros(),
    })
}

/// `size2order`: a power-of-2 number of pages, at least 2, at most PMD.
fn cont_order(bytes: u64, geo: Geometry) -> Result<u32, UsageError> {
    let page = 1u64 << geo.page_shift;
    let pages = bytes / page;
    if !bytes.is_multiple_of(page) || !pages.is_power_of_two() {
        return Err(UsageError(format!(
            "--cont {}: must be a power-of-2 number of pages",
            largo_types::format_size(bytes)
        )));
    }
    let order = pages.trailing_zeros();
    if order < 1 {
        return Err(UsageError("--cont: must be at least 2 pages".into()));
    }
    if order > geo.pmd_order {
        return Err(UsageError("--cont: must be at most the PMD size".into()));
    }
    Ok(order)
}

/// The pids to scan, and whether a failure to read one is an error.
fn pids(args: &ThpmapsArgs) -> Result<(Vec<u32>, bool)> {
    if !args.pid.is_empty() {
        let unique: BTreeSet<u32> = args.pid.iter().copied().collect();
        return Ok((unique.into_iter().collect(), true));
    }
    let mut set = BTreeSet::new();
    if let Some(root) = &args.cgroup {
        if !root.is_dir() {
            return Err(UsageError(format!("--cgroup {}: not a cgroup directory", root.display())).into());
        }
        cgroup_pids(root, &mut set)?;
    } else {
        for e in std::fs::read_dir("/proc")?.flatten() {
            if let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() {
                set.insert(pid);
            }
        }
    }
    Ok((set.into_iter().collect(), false))
}

fn cgroup_pids(dir: &Path, set: &mut BTreeSet<u32>) -> Result<()> {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs"))
        .with_context(|| format!("reading {}", dir.join("cgroup.procs").display()))?;
    set.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    for e in std::fs::read_dir(dir)?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            cgroup_pids(&e.path(), set)?;
        }
    }
    Ok(())
}

/// Everything scanned so far: printed as it comes (or summed for
/// `--rollup`), as the tool does.
struct Report<'a> {
    args: &'a ThpmapsArgs,
    out: Box<dyn std::io::Write>,
    rollup: Vec<Stat>,
    rollup_anon: u64,
    rollup_file: u64,
}

impl Report<'_> {
    fn vma(&mut self, pid: u32, vma: &Vma, stats: Vec<Stat>, anon: u64, file: u64) -> std::io::Result<()> {
        use std::io::Write;
        if self.args.rollup {
            for s in stats {
                match self.rollup.iter_mut().find(|r| r.label == s.label) {
                    Some(r) => r.kb += s.kb,
                    None => self.rollup.push(s),
                }
            }
            self.rollup_anon += anon;
            self.rollup_file += file;
        } else if self.args.json {
            let j = serde_json::json!({
                "pid": pid, "start": vma.start, "end": vma.end, "prot": vma.prot,
                "pgoff": vma.pgoff, "dev": format!("{:02x}:{:02x}", vma.major, vma.minor),
                "inode": vma.inode.parse::<u64>().unwrap_or(0), "name": vma.name, "anon_kb": anon, "file_kb": file,
                "stats": stats_json(&stats),
            });
            writeln!(self.out, "{j}")?;
        } else {
            writeln!(self.out, "{}", vma.header(pid))?;
            for s in stats.iter().filter(|s| s.kb > 0 || self.args.inc_empty) {
                writeln!(self.out, "{}", format_stat(s, anon, file))?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        if self.args.rollup {
            if self.args.json {
                let j = serde_json::json!({"rollup": true, "anon_kb": self.rollup_anon, "file_kb": self.rollup_file,
                    "stats": stats_json(&self.rollup)});
                writeln!(self.out, "{j}")?;
            } else {
                for s in self.rollup.iter().filter(|s| s.kb > 0 || self.args.inc_empty) {
                    writeln!(self.out, "{}", format_stat(s, self.rollup_anon, self.rollup_file))?;
                }
            }
        }
        self.out.flush()
    }
}

/// Scans one process into `report`, VMA by VMA (what was scanned before
/// an error stays in the output, as with the tool).
fn scan_pid(pid: u32, kpageflags: &File, geo: Geometry, orders: &[u32], report: &mut Report) -> std::io::Result<()> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
    let pagemap = File::open(format!("/proc/{pid}/pagemap"))?;
    for vma in parse_smaps(&smaps) {
        let mapped = vma.prot.chars().take(3).any(|c| c != '-');
        let (mut stats, anon, file) = if mapped && vma.field("Rss") > 0 {
            vma_stats(&vma, &pagemap, kpageflags, geo, orders)?
        } else {
            (Vec::new(), 0, 0)
        };
        if report.args.inc_smaps {
            let mut fields: Vec<Stat> = ALL_SMAPS_FIELDS
                .iter()
                .filter(|f| vma.fields.iter().any(|(k, _)| k == *f))
                .map(|f| Stat {
                    label: f.to_string(),
                    kind: None,
                    kb: vma.field(f),
                })
                .collect();
            fields.append(&mut stats);
            stats = fields;
        }
        report.vma(pid, &vma, stats, anon, file)?;
    }
    Ok(())
}

fn stats_json(stats: &[Stat]) -> serde_json::Map<String, serde_json::Value> {
    stats
        .iter()
        .map(|s| (s.label.clone(), serde_json::json!(s.kb)))
        .collect()
}

pub fn run(args: &ThpmapsArgs) -> Result<()> {
    use std::io::Write;
    let geo = geometry()?;
    let mut orders: Vec<u32> = Vec::new();
    for &b in &args.cont {
        let o = cont_order(b, geo)?;
        // The tool keeps one set of statistics per size.
        if !orders.contains(&o) {
            orders.push(o);
        }
    }
    let kpageflags = File::open("/proc/kpageflags").context("opening /proc/kpageflags (root needed)")?;
    let (pids, strict) = pids(args)?;
    let mut report = Report {
        args,
        out: crate::output::stdout_writer(),
        rollup: Vec::new(),
        rollup_anon: 0,
        rollup_file: 0,
    };
    if !args.rollup && !args.json {
        writeln!(
            report.out,
            "       PID             START              END PROT   OFFSET   DEV    INODE OBJECT"
        )?;
    }
    for pid in pids {
        if let Err(e) = scan_pid(pid, &kpageflags, geo, &orders, &mut report) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Err(e.into());
            }
            if strict {
                report.out.flush()?;
                bail!("pid {pid}: {e}");
            }
        }
    }
    report.finish()?;
    Ok(())
}
