//! Snapshots of the host kernel's counters: /proc/vmstat and every
//! per-size stat under /sys/kernel/mm/transparent_hugepage/hugepages-*/stats.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

/// The host's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    pub vmstat: BTreeMap<String, i64>,
    /// Keyed by size without the `hugepages-` prefix (`"64kB"`).
    pub mthp: BTreeMap<String, BTreeMap<String, i64>>,
}

impl HostCounters {
    /// Reads every counter. Missing files read as absent.
    pub fn read() -> HostCounters {
        HostCounters {
            vmstat: read_vmstat(),
            mthp: read_mthp(),
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

    pub fn vmstat(&self, name: &str) -> i64 {
        self.vmstat.get(name).copied().unwrap_or(0)
    }

    pub fn mthp(&self, size: &str, stat: &str) -> i64 {
        self.mthp.get(size).and_then(|s| s.get(stat)).copied().unwrap_or(0)
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
