//! The kernel-time cost model: the estimated kernel time of a run is a sum
//! over kinds of kernel work (faults taken, pages zeroed, PTEs written,
//! new folios, splits, address-space system calls, allocations through
//! the pcp lists or under the zone lock, ...) of the count of that work
//! times its cost in nanoseconds.
//!
//! Zeroing and copying are counted in 4 KiB units, so machines with 16K or
//! 64K base pages pay for the bytes they clear; every other term counts
//! events, whatever the page size. The costs come in a [`Profile`]. The
//! checked-in default was measured on this machine kind by `largo
//! calibrate`, which runs calibration workloads natively (page_fault1 at
//! every folio size, read faults on the zero page, mmap/munmap, CoW after
//! fork, partial munmap with drop_caches at 4K and 64K), measures the
//! kernel time with the CPU's cycle counter, runs the same workloads on
//! the model, and fits the costs they can tell apart ([`FIT_GROUPS`]) by
//! non-negative least squares on relative error. The other costs are
//! priors, marked as such in the profile.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::Counters;

/// What the terms count, read from a machine or from its counters: the
/// work counters, lock acquisitions and the few vmstat items terms use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TermInput {
    pub work: crate::report::Work,
    pub locks: crate::report::Locks,
    pub page_size: u64,
    pub pgfault: u64,
    pub drop_slab: u64,
    pub pgmigrate_success: u64,
    pub compact_migrate_scanned: u64,
    pub compact_free_scanned: u64,
    pub compact_daemon_migrate_scanned: u64,
    pub compact_daemon_free_scanned: u64,
    pub pswpin: u64,
    pub zswpin: u64,
}

impl TermInput {
    /// From a run's counters.
    pub fn from_counters(c: &Counters) -> TermInput {
        TermInput {
            work: c.work,
            locks: c.locks,
            page_size: c.page_size,
            pgfault: c.vmstat("pgfault"),
            drop_slab: c.vmstat("drop_slab"),
            pgmigrate_success: c.vmstat("pgmigrate_success"),
            compact_migrate_scanned: c.vmstat("compact_migrate_scanned"),
            compact_free_scanned: c.vmstat("compact_free_scanned"),
            compact_daemon_migrate_scanned: c.vmstat("compact_daemon_migrate_scanned"),
            compact_daemon_free_scanned: c.vmstat("compact_daemon_free_scanned"),
            pswpin: c.vmstat("pswpin"),
            zswpin: c.vmstat("zswpin"),
        }
    }

    /// From the machine now, without reading every counter.
    pub fn read(m: &largo_mm::Machine) -> TermInput {
        // Straight from the event counters: these are all VmEvents, and
        // the ledger reads them at every change of entry.
        let v = |e: largo_mm::stats::VmEvent| m.page_alloc().events.get(e);
        TermInput {
            work: crate::report::Work::read(m),
            locks: crate::report::Locks::read(m),
            page_size: m.geometry().page_size(),
            pgfault: v(largo_mm::stats::VmEvent::Pgfault),
            drop_slab: v(largo_mm::stats::VmEvent::DropSlab),
            pgmigrate_success: v(largo_mm::stats::VmEvent::PgmigrateSuccess),
            compact_migrate_scanned: v(largo_mm::stats::VmEvent::CompactMigrateScanned),
            compact_free_scanned: v(largo_mm::stats::VmEvent::CompactFreeScanned),
            compact_daemon_migrate_scanned: v(largo_mm::stats::VmEvent::CompactDaemonMigrateScanned),
            compact_daemon_free_scanned: v(largo_mm::stats::VmEvent::CompactDaemonFreeScanned),
            pswpin: v(largo_mm::stats::VmEvent::Pswpin),
            zswpin: v(largo_mm::stats::VmEvent::Zswpin),
        }
    }

    /// Each term's count, in [`TERMS`] order.
    pub fn counts(&self) -> [u64; N_TERMS] {
        std::array::from_fn(|i| (TERMS[i].count)(self))
    }
}

/// One kind of kernel work.
pub struct Term {
    pub name: &'static str,
    pub help: &'static str,
    pub count: fn(&TermInput) -> u64,
}

/// How many terms there are.
pub const N_TERMS: usize = TERMS.len();

/// Every term, in report order.
pub const TERMS: &[Term] = &[
    Term {
        name: "fault",
        help: "page faults (exception entry and exit, handle_mm_fault, VMA lookup)",
        count: |c| c.pgfault,
    },
    Term {
        name: "page_zero",
        help: "4 KiB units zeroed for new folios and page tables (a 64 KiB base page is 16)",
        count: |c| c.work.vm.pages_zeroed * (c.page_size / 4096).max(1),
    },
    Term {
        name: "page_copy",
        help: "4 KiB units copied by CoW",
        count: |c| c.work.vm.pages_copied * (c.page_size / 4096).max(1),
    },
    Term {
        name: "pte_set",
        help: "PTEs written (set_ptes, write-protect, young/dirty updates)",
        count: |c| c.work.pgtable.pte_set,
    },
    Term {
        name: "pte_clear",
        help: "PTEs cleared by zaps",
        count: |c| c.work.pgtable.pte_clear,
    },
    Term {
        name: "pmd",
        help: "PMD entries written or cleared",
        count: |c| c.work.pgtable.pmd_set + c.work.pgtable.pmd_clear,
    },
    Term {
        name: "rmap_call",
        help: "rmap calls on a folio (add, dup, remove)",
        count: |c| c.work.vm.rmap_calls,
    },
    Term {
        name: "rmap_page",
        help: "per-page mapcount updates in rmap calls",
        count: |c| c.work.vm.rmap_pages,
    },
    Term {
        name: "pcp_op",
        help: "allocations from and frees to a pcp list",
        count: |c| c.work.alloc.alloc_pcp + c.work.alloc.free_pcp,
    },
    Term {
        name: "buddy_op",
        help: "allocations from and frees to the buddy lists directly",
        count: |c| c.work.alloc.alloc_buddy + c.work.alloc.free_buddy,
    },
    Term {
        name: "buddy_level",
        help: "buddy merge and split levels walked (more with a larger MAX_PAGE_ORDER)",
        count: |c| c.work.alloc.buddy_levels,
    },
    Term {
        name: "zone_lock",
        help: "zone->lock acquisitions",
        count: |c| c.locks.zone_lock,
    },
    Term {
        name: "pcp_bulk_block",
        help: "blocks moved between pcp and buddy lists by bulk refills and drains",
        count: |c| c.work.alloc.pcp_bulk_blocks,
    },
    Term {
        name: "split_page",
        help: "base pages of split large folios",
        count: |c| c.work.vm.split_pages,
    },
    Term {
        name: "split_queue_lock",
        help: "deferred split queue lock acquisitions",
        count: |c| c.locks.split_queue_lock,
    },
    Term {
        name: "folio_new",
        help: "new anonymous folios mapped (memcg charge, LRU add, new anon rmap)",
        count: |c| c.work.vm.folios_new,
    },
    Term {
        name: "folio_split",
        help: "large folios split (unmapped, frozen, split and remapped, beyond the per-page work)",
        count: |c| c.work.vm.folios_split,
    },
    Term {
        name: "vma_op",
        help: "address-space system calls (mmap, munmap, mprotect, mremap, madvise, brk)",
        count: |c| c.work.vm.vma_ops,
    },
    Term {
        name: "drop_caches",
        help: "writes of 2 or 3 to drop_caches (slab shrinking beyond the deferred split queue)",
        count: |c| c.drop_slab,
    },
    Term {
        name: "pgtable",
        help: "page-table pages allocated or freed",
        count: |c| c.work.vm.pgtable_alloc + c.work.vm.pgtable_free,
    },
    Term {
        name: "page_migrate",
        help: "4 KiB units migrated: the copy of their data (folio_mc_copy)",
        count: |c| c.pgmigrate_success * (c.page_size / 4096).max(1),
    },
    Term {
        name: "migrate_folio",
        help: "folios migrated: the work around the copy (isolate from the LRU, lock, unmap and remap through the rmap, metadata moved, source freed)",
        count: |c| c.work.vm.migrate_folios,
    },
    Term {
        name: "migrate_flush",
        help: "TLB flushes of migration: one per batch of PTE-mapped folios, one per PMD-mapped THP",
        count: |c| c.work.vm.migrate_flushes,
    },
    Term {
        name: "compact_scan",
        help: "pages the compaction scanners looked at in direct compaction (kcompactd's are not the task's time)",
        count: |c| {
            (c.compact_migrate_scanned + c.compact_free_scanned)
                .saturating_sub(c.compact_daemon_migrate_scanned + c.compact_daemon_free_scanned)
        },
    },
    Term {
        name: "host_refault",
        help: "4 KiB units the host discarded after a free page report and backs again on the next touch",
        count: |c| c.work.reporting.host_refault_pages * (c.page_size / 4096).max(1),
    },
    Term {
        name: "report_call",
        help: "free page reporting calls to the device (isolate, queue, kick, put back 32 blocks)",
        count: |c| c.work.reporting.report_calls,
    },
    Term {
        name: "reclaim_folio",
        help: "folios the task's own reclaim (direct, memcg, MADV_PAGEOUT) took off an LRU list: isolation, the rmap walk, unmap and free",
        count: |c| c.work.vm.reclaim.folios,
    },
    Term {
        name: "swap_out",
        help: "4 KiB units the task's own reclaim wrote to swap or zswap (compressed for zram and zswap), with their swap slots",
        count: |c| c.work.vm.reclaim.swapout_pages * (c.page_size / 4096).max(1),
    },
    Term {
        name: "swap_in",
        help: "4 KiB units read back from swap or zswap by faults (decompressed for zram and zswap)",
        count: |c| (c.pswpin + c.zswpin) * (c.page_size / 4096).max(1),
    },
    Term {
        name: "kswapd_folio",
        help: "folios kswapd (and khugepaged's allocations) took off an LRU list: reclaim_folio's work in a kernel thread",
        count: |c| c.work.vm.reclaim_bg.folios,
    },
    Term {
        name: "kswapd_swap_out",
        help: "4 KiB units kswapd wrote to swap or zswap: swap_out's work in a kernel thread",
        count: |c| c.work.vm.reclaim_bg.swapout_pages * (c.page_size / 4096).max(1),
    },
    Term {
        name: "report_walk",
        help: "free-list entries a reporting pass looks at",
        count: |c| c.work.reporting.walked,
    },
];

/// The cost groups `largo calibrate` fits from its calibration workloads
/// (page_fault1 at each folio size, read faults, mmap/munmap, CoW,
/// partial munmap with drop_caches at 4K and 64K); the terms of a group
/// share one cost. Every other term keeps its prior.
pub const FIT_GROUPS: &[(&str, &[&str])] = &[
    ("fault", &["fault"]),
    ("page_zero", &["page_zero"]),
    ("page_copy", &["page_copy"]),
    ("pte", &["pte_set", "pte_clear", "rmap_page"]),
    ("buddy_op", &["buddy_op"]),
    ("folio_new", &["folio_new"]),
    ("folio_split", &["folio_split"]),
    ("vma_op", &["vma_op"]),
    ("drop_caches", &["drop_caches"]),
];

/// The reclaim costs `largo calibrate --reclaim` fits (swap-pressure
/// under a memcg limit, less the same unlimited); kswapd's work costs
/// what the task's own reclaim does.
pub const RECLAIM_FIT_GROUPS: &[(&str, &[&str])] = &[
    ("reclaim_folio", &["reclaim_folio", "kswapd_folio"]),
    ("swap_out", &["swap_out", "kswapd_swap_out"]),
    ("swap_in", &["swap_in"]),
];

/// The costs of faults taken with cold caches, fitted from page_fault1
/// with user work between faults; every other cost is the hot one.
pub const COLD_FIT_GROUPS: &[(&str, &[&str])] = &[("fault", &["fault"]), ("page_zero", &["page_zero"])];

/// How warm the CPU's private caches are when a fault comes. Tight loops
/// (the built-in workloads, hand-written scenarios) fault hot: the
/// kernel's fault path is still cached from the previous fault. Real
/// programs run their own code between faults, which refills the caches
/// with user data: their faults are cold and cost more, measured with
/// page_fault1 writing an L2-sized buffer between faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Faults {
    Hot,
    Cold,
}

/// One calibration point: the host's kernel time for one run of a
/// calibration workload under one configuration, and the model's
/// estimate for it with the fitted costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitPoint {
    /// `page_fault1:iterations=8 @ 64kB`: the workload and the folio size
    /// enabled (`4kB` for none).
    pub point: String,
    pub host_ns: f64,
    pub model_ns: f64,
}

/// Costs in nanoseconds per unit of work, with where they came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    /// The machine and kernel the costs were measured on.
    pub host: String,
    /// How: the command, the loop, the date.
    pub method: String,
    /// Cost per term, ns.
    pub costs: BTreeMap<String, f64>,
    /// Terms whose cost is a prior, not fitted.
    pub priors: Vec<String>,
    /// The calibration points and the fit.
    pub fit: Vec<FitPoint>,
    /// Costs that differ for cold faults ([`Faults::Cold`]).
    #[serde(default)]
    pub cold_costs: BTreeMap<String, f64>,
    /// The cold calibration points and their fit.
    #[serde(default)]
    pub cold_fit: Vec<FitPoint>,
    /// When the costs were measured (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_at: Option<String>,
    /// The boot of the host they were measured in
    /// (/proc/sys/kernel/random/boot_id): a profile cached for a boot is
    /// only reused in that boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// The profile measured on the development machines (2-vCPU AMD EPYC
/// Zen 5 VM, Linux 6.18), checked in by `largo calibrate --write`.
pub const DEFAULT_PROFILE_JSON: &str = include_str!("../profiles/default.json");

impl Profile {
    /// The checked-in default profile.
    pub fn default_profile() -> Profile {
        serde_json::from_str(DEFAULT_PROFILE_JSON).expect("the checked-in profile parses")
    }

    /// Where and when it was measured, for reports: `'name' (host,
    /// measured DATE)`.
    pub fn provenance(&self) -> String {
        match &self.measured_at {
            Some(at) => format!("'{}' ({}, measured {at})", self.name, self.host),
            None => format!("'{}' ({})", self.name, self.host),
        }
    }

    /// Reads a profile, checking every term has a cost.
    pub fn from_json(text: &str) -> Result<Profile, ProfileError> {
        let p: Profile = serde_json::from_str(text).map_err(ProfileError::NotAProfile)?;
        if let Some(t) = TERMS.iter().find(|t| !p.costs.contains_key(t.name)) {
            return Err(ProfileError::MissingCost {
                profile: p.name,
                term: t.name,
            });
        }
        Ok(p)
    }

    pub fn cost(&self, term: &str) -> f64 {
        self.costs.get(term).copied().unwrap_or(0.0)
    }

    /// A term's cost for faults taken `faults`.
    pub fn cost_at(&self, term: &str, faults: Faults) -> f64 {
        match (faults, self.cold_costs.get(term)) {
            (Faults::Cold, Some(&c)) => c,
            _ => self.cost(term),
        }
    }

    /// The estimate for a run's counters, faults hot.
    pub fn estimate(&self, c: &Counters) -> Estimate {
        self.estimate_at(c, Faults::Hot)
    }

    /// The estimate for a run's counters with faults taken `faults`.
    pub fn estimate_at(&self, c: &Counters, faults: Faults) -> Estimate {
        let input = TermInput::from_counters(c);
        let mut terms = BTreeMap::new();
        let mut kernel_ns = 0.0;
        for t in TERMS {
            let count = (t.count)(&input);
            let ns = count as f64 * self.cost_at(t.name, faults);
            kernel_ns += ns;
            terms.insert(t.name, TermCost { count, ns });
        }
        Estimate { kernel_ns, terms }
    }

    /// The estimate split by entry: each entry's term counts times the
    /// costs, in ns; the values sum to the run's estimate. Every entry is
    /// present (0 where the run never entered it).
    pub fn by_entry(&self, entries: &crate::entry::EntryCounts, faults: Faults) -> BTreeMap<&'static str, f64> {
        let mut out: BTreeMap<&'static str, f64> = crate::entry::Entry::ALL.iter().map(|e| (e.name(), 0.0)).collect();
        out.extend(entries.by_entry.iter().map(|(e, counts)| {
            let ns = TERMS
                .iter()
                .zip(counts)
                .map(|(t, &n)| n as f64 * self.cost_at(t.name, faults))
                .sum();
            (e.name(), ns)
        }));
        out
    }
}

/// One term of an estimate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TermCost {
    pub count: u64,
    pub ns: f64,
}

/// The estimated kernel time of a run and what it is made of.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub kernel_ns: f64,
    pub terms: BTreeMap<&'static str, TermCost>,
}

/// A cost profile that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not a cost profile: {0}")]
    NotAProfile(serde_json::Error),
    #[error("cost profile {profile} has no cost for '{term}'")]
    MissingCost { profile: String, term: &'static str },
}

/// Why costs cannot be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    #[error("{points} calibration points cannot fit {costs} costs")]
    TooFewPoints { points: usize, costs: usize },
    #[error("a calibration point has no kernel time")]
    NoKernelTime,
    #[error("the calibration points do not determine the costs")]
    Undetermined,
}

/// Fits the `groups` costs (e.g. [`FIT_GROUPS`]): `samples` pairs the
/// model's counters for a loop with the host's measured kernel ns for it;
/// `priors` gives every other term's cost. Minimises the sum of squared
/// relative errors with non-negative costs. Returns the full cost table.
pub fn fit(
    samples: &[(Counters, f64)],
    priors: &BTreeMap<String, f64>,
    groups: &[(&str, &[&str])],
) -> Result<BTreeMap<String, f64>, FitError> {
    if samples.len() < groups.len() {
        return Err(FitError::TooFewPoints {
            points: samples.len(),
            costs: groups.len(),
        });
    }
    // Rows: each group's count, and the target less the priors' share,
    // both divided by the target (relative error).
    let mut rows = Vec::new();
    for (counters, host_ns) in samples {
        if *host_ns <= 0.0 {
            return Err(FitError::NoKernelTime);
        }
        let fixed = unfitted_ns(counters, priors, groups);
        let c = &TermInput::from_counters(counters);
        let x: Vec<f64> = groups
            .iter()
            .map(|(_, terms)| {
                let n: u64 = TERMS
                    .iter()
                    .filter(|t| terms.contains(&t.name))
                    .map(|t| (t.count)(c))
                    .sum();
                n as f64 / host_ns
            })
            .collect();
        rows.push((x, (host_ns - fixed) / host_ns));
    }
    let solution = nnls(&rows).ok_or(FitError::Undetermined)?;
    let mut costs = priors.clone();
    for ((_, terms), value) in groups.iter().zip(solution) {
        for t in *terms {
            costs.insert(t.to_string(), value);
        }
    }
    Ok(costs)
}

/// The priors' share of a run's kernel time: every term but `groups'`
/// (those [`fit`] fits) at its cost in `priors`, ns.
pub fn unfitted_ns(c: &Counters, priors: &BTreeMap<String, f64>, groups: &[(&str, &[&str])]) -> f64 {
    let fitted = |name: &str| groups.iter().any(|(_, terms)| terms.contains(&name));
    let c = &TermInput::from_counters(c);
    TERMS
        .iter()
        .filter(|t| !fitted(t.name))
        .map(|t| (t.count)(c) as f64 * priors.get(t.name).copied().unwrap_or(0.0))
        .sum()
}

/// Non-negative least squares for a handful of unknowns: the best of the
/// unconstrained solutions over every subset of free variables whose
/// values are all non-negative (exact for the small sizes used here).
fn nnls(rows: &[(Vec<f64>, f64)]) -> Option<Vec<f64>> {
    let n = rows.first()?.0.len();
    let mut best: Option<(f64, Vec<f64>)> = None;
    for mask in 1u32..(1 << n) {
        let vars: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let Some(sol) = least_squares(rows, &vars) else {
            continue;
        };
        if sol.iter().any(|&v| v < 0.0) {
            continue;
        }
        let mut full = vec![0.0; n];
        for (&i, &v) in vars.iter().zip(&sol) {
            full[i] = v;
        }
        let residual: f64 = rows
            .iter()
            .map(|(x, y)| {
                let pred: f64 = x.iter().zip(&full).map(|(a, b)| a * b).sum();
                (pred - y).powi(2)
            })
            .sum();
        if best.as_ref().is_none_or(|(r, _)| residual < *r) {
            best = Some((residual, full));
        }
    }
    best.map(|(_, v)| v)
}

/// Least squares over the columns `vars` by the normal equations.
fn least_squares(rows: &[(Vec<f64>, f64)], vars: &[usize]) -> Option<Vec<f64>> {
    let k = vars.len();
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y) in rows {
        for (r, &i) in vars.iter().enumerate() {
            for (c, &j) in vars.iter().enumerate() {
                a[r][c] += x[i] * x[j];
            }
            a[r][k] += x[i] * y;
        }
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..k {
        let pivot = (col..k).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..k).map(|r| a[r][k] / a[r][r]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nnls_recovers_non_negative_costs() {
        // y = 2 a + 3 b with a, b the counts.
        let rows: Vec<(Vec<f64>, f64)> = [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (2.0, 1.0)]
            .iter()
            .map(|&(a, b)| (vec![a, b], 2.0 * a + 3.0 * b))
            .collect();
        let sol = nnls(&rows).unwrap();
        assert!((sol[0] - 2.0).abs() < 1e-9 && (sol[1] - 3.0).abs() < 1e-9, "{sol:?}");
        // A fit that would want a negative cost clamps it at zero.
        let rows = vec![(vec![1.0, 1.0], 1.0), (vec![1.0, 2.0], 0.5)];
        let sol = nnls(&rows).unwrap();
        assert!(sol.iter().all(|&v| v >= 0.0), "{sol:?}");
    }

    #[test]
    fn the_default_profile_has_every_cost() {
        let p = Profile::from_json(DEFAULT_PROFILE_JSON).unwrap();
        assert!(TERMS.iter().all(|t| p.cost(t.name) >= 0.0));
    }
}
