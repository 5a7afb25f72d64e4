//! Snapshots of the host kernel's counters: /proc/vmstat and every
//! per-size stat under /sys/kernel/mm/transparent_hugepage/hugepages-*/stats.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use largo_physmem::native::FileSnapshot;

const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

/// The host's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    pub vmstat: BTreeMap<String, i64>,
    /// Keyed by size without the `hugepages-` prefix (`"64kB"`).
    pub mthp: BTreeMap<String, BTreeMap<String, i64>>,
    /// The workload's memory cgroup, when it ran in one: `failcnt`,
    /// `max_usage_in_bytes`, `usage_in_bytes`, `memsw.max_usage_in_bytes`,
    /// `oom_kill` and `stat/<field>` of `memory.stat`.
    pub memcg: BTreeMap<String, i64>,
}

impl HostCounters {
    /// Reads every counter. Missing files read as absent.
    pub fn read() -> HostCounters {
        HostCounters {
            vmstat: read_vmstat(),
            mthp: read_mthp(),
            memcg: BTreeMap::new(),
        }
    }

    /// `self - before`, counter by counter.
    pub fn minus(&self, before: &HostCounters) -> HostCounters {
        let sub = |a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>| -> BTreeMap<String, i64> {
            a.iter()
                .map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0)))
                .collect()
        };
        HostCounters {
            vmstat: sub(&self.vmstat, &before.vmstat),
            // A fresh cgroup per run: its counters are the run's.
            memcg: self.memcg.clone(),
            mthp: self
                .mthp
                .iter()
                .map(|(size, stats)| {
                    (
                        size.clone(),
                        sub(stats, before.mthp.get(size).unwrap_or(&BTreeMap::new())),
                    )
                })
                .collect(),
        }
    }

    /// One `vmstat NAME V` / `mthp SIZE STAT V` per line (how a forked
    /// child hands counters back).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.vmstat {
            s.push_str(&format!("vmstat {k} {v}\n"));
        }
        for (size, stats) in &self.mthp {
            for (k, v) in stats {
                s.push_str(&format!("mthp {size} {k} {v}\n"));
            }
        }
        s
    }

    /// Reads the lines `to_text` writes, ignoring any others.
    pub fn from_text(text: &str) -> HostCounters {
        let mut c = HostCounters::default();
        for line in text.lines() {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["vmstat", k, v] => {
                    if let Ok(v) = v.parse() {
                        c.vmstat.insert(k.to_string(), v);
                    }
                }
                ["mthp", size, k, v] => {
                    if let Ok(v) = v.parse() {
                        c.mthp.entry(size.to_string()).or_default().insert(k.to_string(), v);
                    }
                }
                _ => {}
            }
        }
        c
    }

    pub fn vmstat(&self, name: &str) -> i64 {
        self.vmstat.get(name).copied().unwrap_or(0)
    }

    pub fn mthp(&self, size: &str, stat: &str) -> i64 {
        self.mthp.get(size).and_then(|s| s.get(stat)).copied().unwrap_or(0)
    }
}

/// A capture of the counter files that allocates nothing (a
/// [`FileSnapshot`] of /proc/vmstat and every per-size stat file), so a
/// process can read the counters right before a fork, and a forked child
/// right after its work, without faulting in new heap memory that the
/// counters themselves would then count.
pub struct RawCapture {
    /// `vmstat` or `SIZE STAT` of each file of the snapshot.
    keys: Vec<String>,
    pub snapshot: FileSnapshot,
}

const CAPTURE_BYTES: usize = 1 << 20;

/// `/proc/sys/vm/stat_refresh` (Documentation/admin-guide/sysctl/vm.rst).
const STAT_REFRESH: &str = "/proc/sys/vm/stat_refresh";

impl RawCapture {
    /// Lists the files and prepares the buffers.
    pub fn prepare() -> RawCapture {
        Self::prepare_with(false)
    }

    /// With `exact_gauges`, the capture reads stat_refresh first (root):
    /// it folds every cpu's pending vmstat deltas into the totals, so
    /// gauges such as nr_shmem are exact rather than off by the per-cpu
    /// thresholds. It waits for work on every cpu, which gives a woken
    /// khugepaged milliseconds to run before the counters are read, so
    /// it is asked for only where gauges are compared (shmem).
    pub fn prepare_with(exact_gauges: bool) -> RawCapture {
        let mut files = Vec::new();
        if exact_gauges {
            files.push((std::path::PathBuf::from(STAT_REFRESH), "stat_refresh".to_string()));
        }
        files.push((std::path::PathBuf::from("/proc/vmstat"), "vmstat".to_string()));
        for name in ["pages_collapsed", "full_scans"] {
            let path = std::path::Path::new(THP_DIR).join("khugepaged").join(name);
            files.push((path, format!("khugepaged {name}")));
        }
        if let Ok(dirs) = fs::read_dir(THP_DIR) {
            for d in dirs.flatten() {
                let name = d.file_name().to_string_lossy().to_string();
                let Some(size) = name.strip_prefix("hugepages-") else {
                    continue;
                };
                if let Ok(stats) = fs::read_dir(d.path().join("stats")) {
                    for f in stats.flatten() {
                        files.push((f.path(), format!("{size} {}", f.file_name().to_string_lossy())));
                    }
                }
            }
        }
        let (paths, keys) = files.into_iter().unzip();
        RawCapture {
            keys,
            snapshot: FileSnapshot::new(paths, CAPTURE_BYTES),
        }
    }

    /// Reads every file into the buffer (no allocation).
    pub fn capture(&mut self) {
        self.snapshot.capture();
    }

    /// Parses the last capture.
    pub fn counters(&self) -> HostCounters {
        self.parse(self.snapshot.contents())
    }

    /// Parses what a child's capture of these files wrote.
    pub fn parse<B: AsRef<[u8]>>(&self, contents: impl IntoIterator<Item = B>) -> HostCounters {
        let mut c = HostCounters::default();
        for (key, bytes) in self.keys.iter().zip(contents) {
            let text = String::from_utf8_lossy(bytes.as_ref());
            if key == "vmstat" {
                c.vmstat.extend(parse_vmstat(&text));
            } else if let Some(name) = key.strip_prefix("khugepaged ") {
                // Kept beside the vmstat items as `khugepaged/NAME`.
                if let Ok(v) = text.trim().parse() {
                    c.vmstat.insert(format!("khugepaged/{name}"), v);
                }
            } else if let Some((size, stat)) = key.split_once(' ') {
                if let Ok(v) = text.trim().parse() {
                    c.mthp.entry(size.to_string()).or_default().insert(stat.to_string(), v);
                }
            }
        }
        c
    }
}

/// The cgroup v1 memory files a capture reads.
const MEMCG_FILES: &[&str] = &[
    "memory.failcnt",
    "memory.max_usage_in_bytes",
    "memory.usage_in_bytes",
    "memory.memsw.max_usage_in_bytes",
    "memory.kmem.usage_in_bytes",
    "memory.oom_control",
    "memory.stat",
];

/// The counters of memory cgroup `dir` (missing files are left out),
/// keyed as [`HostCounters::memcg`] says.
pub fn read_memcg(dir: &Path) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for f in MEMCG_FILES {
        if let Ok(text) = std::fs::read_to_string(dir.join(f)) {
            parse_memcg(f, &text, &mut out);
        }
    }
    out
}

/// One memcg file into `out` under the keys [`HostCounters::memcg`] names.
fn parse_memcg(file: &str, text: &str, out: &mut BTreeMap<String, i64>) {
    let name = file.trim_start_matches("memory.");
    match name {
        "stat" => {
            for (k, v) in parse_vmstat(text) {
                out.insert(format!("stat/{k}"), v);
            }
        }
        "oom_control" => {
            if let Some(v) = parse_vmstat(text).get("oom_kill") {
                out.insert("oom_kill".into(), *v);
            }
        }
        _ => {
            if let Ok(v) = text.trim().parse() {
                out.insert(name.to_string(), v);
            }
        }
    }
}

fn parse_vmstat(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The events only khugepaged's work counts (the `thp_collapse_*` and
/// `thp_scan_exceed_*` items, `khugepaged/pages_collapsed`): two readings
/// that differ mean a khugepaged pass worked between them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KhugepagedEvents(BTreeMap<String, i64>);

/// Counted by khugepaged's scans and collapses (MADV_COLLAPSE counts them
/// too, but only inside a trace's step).
const KHUGEPAGED_EVENTS: &[&str] = &[
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_scan_exceed_none_pte",
    "thp_scan_exceed_swap_pte",
    "thp_scan_exceed_share_pte",
    "khugepaged/pages_collapsed",
];

impl KhugepagedEvents {
    /// Reads them now.
    pub fn read() -> KhugepagedEvents {
        let mut vmstat = read_vmstat();
        let path = std::path::Path::new(THP_DIR).join("khugepaged/pages_collapsed");
        if let Some(v) = fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()) {
            vmstat.insert("khugepaged/pages_collapsed".to_string(), v);
        }
        Self::of(&HostCounters {
            vmstat,
            ..HostCounters::default()
        })
    }

    /// Their values in a reading of every counter.
    pub fn of(c: &HostCounters) -> KhugepagedEvents {
        KhugepagedEvents(
            KHUGEPAGED_EVENTS
                .iter()
                .filter_map(|&k| c.vmstat.get(k).map(|&v| (k.to_string(), v)))
                .collect(),
        )
    }
}

fn read_vmstat() -> BTreeMap<String, i64> {
    let text = fs::read_to_string("/proc/vmstat").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

fn read_mthp() -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    let Ok(dirs) = fs::read_dir(THP_DIR) else {
        return out;
    };
    for entry in dirs.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(size) = name.strip_prefix("hugepages-") else {
            continue;
        };
        out.insert(size.to_string(), read_stats(&entry.path().join("stats")));
    }
    out
}

fn read_stats(dir: &Path) -> BTreeMap<String, i64> {
    let mut stats = BTreeMap::new();
    let Ok(files) = fs::read_dir(dir) else {
        return stats;
    };
    for f in files.flatten() {
        if let Some(v) = fs::read_to_string(f.path()).ok().and_then(|t| t.trim().parse().ok()) {
            stats.insert(f.file_name().to_string_lossy().to_string(), v);
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn khugepaged_events_are_its_collapse_and_scan_items_only() {
        let mut c = HostCounters::default();
        for (k, v) in [
            ("thp_collapse_alloc", 3),
            ("khugepaged/pages_collapsed", 2),
            ("pgfault", 9),
        ] {
            c.vmstat.insert(k.to_string(), v);
        }
        let a = KhugepagedEvents::of(&c);
        c.vmstat.insert("pgfault".into(), 1000);
        assert_eq!(
            KhugepagedEvents::of(&c),
            a,
            "another process's faults are not khugepaged's work"
        );
        c.vmstat.insert("thp_collapse_alloc".into(), 4);
        assert_ne!(KhugepagedEvents::of(&c), a, "a collapse is");
    }
}
