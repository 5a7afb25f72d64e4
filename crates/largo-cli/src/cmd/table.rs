//! mmtests / LKP style comparison tables: one column per configuration,
//! the first the baseline, each cell the value and its change against it.
//! Rows are named as the JSON output names them, which is the kernel's
//! name wherever the kernel counts it (`pgfault`, `thp_fault_alloc`,
//! `mthp.split`: the per-size stat summed over sizes); a legend says what
//! each means.

use largo_workloads::Workload;

use super::run::Record;
use crate::config::NamedConfig;
use crate::output::{Cell, Grid};

/// A row: its label (the JSON name), what it means, how to read its
/// value from a record.
struct Row {
    label: String,
    meaning: &'static str,
    value: Box<dyn Fn(&Record) -> f64>,
    decimals: usize,
    /// Shown even when zero everywhere.
    always: bool,
    /// Below this baseline a change is a difference, not a percentage.
    floor: f64,
}

fn row(
    label: &str,
    meaning: &'static str,
    decimals: usize,
    always: bool,
    value: impl Fn(&Record) -> f64 + 'static,
) -> Row {
    Row {
        label: label.to_string(),
        meaning,
        value: Box::new(value),
        decimals,
        always,
        floor: PERCENT_FROM,
    }
}

/// A row of one /proc/vmstat item, hidden when zero everywhere.
fn vmstat_row(item: &'static str, meaning: &'static str) -> Row {
    row(item, meaning, 0, false, move |r| r.outcome.counters.vmstat(item) as f64)
}

/// A row of one per-size mTHP stat summed over the sizes.
fn mthp_row(stat: &'static str, meaning: &'static str) -> Row {
    row(&format!("mthp.{stat}"), meaning, 0, false, move |r| {
        r.outcome.counters.mthp_total(stat) as f64
    })
}

fn reporting_row(
    label: &str,
    meaning: &'static str,
    value: fn(&largo_workloads::reporting::ReportingReport) -> f64,
) -> Row {
    row(label, meaning, 0, false, move |r| {
        r.outcome.reporting.as_ref().map_or(0.0, value)
    })
}

/// The rows of a workload's table.
fn rows(records: &[&Record]) -> Vec<Row> {
    let mut rows = vec![
        vmstat_row("pgfault", "page faults (/proc/vmstat)"),
        Row {
            floor: 0.01,
            ..row(
                "kernel_ms",
                "estimated kernel time of the anonymous-memory work, ms (JSON cost.kernel_ns)",
                1,
                true,
                |r| r.estimate.kernel_ns / 1e6,
            )
        },
        row(
            "peak.anon_kb",
            "peak anonymous memory mapped (NR_ANON_MAPPED), kB",
            0,
            true,
            |r| r.outcome.peak.anon_kb as f64,
        ),
        row(
            "peak.pagetables_kb",
            "peak page-table memory (NR_PAGETABLE), kB",
            0,
            true,
            |r| r.outcome.peak.pagetables_kb as f64,
        ),
        row(
            "tlb.reach_kb",
            "what the second-level TLB covers of the peak anonymous footprint (PMD, contpte, coalesced and base translations), kB",
            0,
            true,
            |r| r.outcome.tlb.reach_kb as f64,
        ),
        row(
            "tlb.entries_needed",
            "TLB entries the peak anonymous footprint needs",
            0,
            true,
            |r| r.outcome.tlb.entries_needed as f64,
        ),
    ];
    rows[0].always = true;
    // Allocations by size, every size any configuration used.
    let mut sizes: Vec<(u64, String)> = records
        .iter()
        .flat_map(|r| {
            r.outcome
                .counters
                .allocs
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(k, _)| k.clone())
        })
        .map(|k| (k.trim_end_matches("kB").parse::<u64>().unwrap_or(0), k))
        .collect();
    sizes.sort();
    sizes.dedup();
    for (_, key) in sizes {
        let k = key.clone();
        rows.push(row(
            &format!("allocs.{key}"),
            "page allocations of that size (every user: folios, page tables, ...)",
            0,
            false,
            move |r| r.outcome.counters.allocs.get(&k).copied().unwrap_or(0) as f64,
        ));
    }
    rows.extend([
        vmstat_row("thp_fault_alloc", "PMD THPs allocated at fault"),
        mthp_row(
            "anon_fault_fallback",
            "mTHP fault allocations that fell back to a smaller size",
        ),
        mthp_row("shmem_alloc", "large shmem folios allocated (every size)"),
        mthp_row(
            "shmem_fallback",
            "large shmem allocations that fell back to a smaller size",
        ),
        vmstat_row("thp_file_alloc", "PMD-sized shmem folios allocated"),
        vmstat_row("thp_file_mapped", "shmem folios mapped by a PMD"),
        vmstat_row("nr_shmem", "pages in shmem page caches at the end (NR_SHMEM)"),
        mthp_row(
            "anon_fault_fallback_charge",
            "mTHP fault allocations that fell back because the memcg charge failed",
        ),
        mthp_row(
            "shmem_fallback_charge",
            "large shmem allocations that fell back because the memcg charge failed",
        ),
        mthp_row("swpout", "large folios swapped out whole (every size)"),
        mthp_row(
            "swpout_fallback",
            "large folios split before swap-out (no contiguous swap slots)",
        ),
        mthp_row("zswpout", "large folios written to zswap (every size)"),
        mthp_row("swpin", "large folios swapped in whole (every size)"),
        mthp_row("swpin_fallback", "large swap-ins that fell back to a smaller size"),
        vmstat_row("pswpout", "pages written to swap"),
        vmstat_row("pswpin", "pages read from swap"),
        vmstat_row("zswpout", "pages stored in zswap"),
        vmstat_row("zswpin", "pages loaded from zswap"),
        vmstat_row("swap_ra", "pages swapped in by readahead"),
        vmstat_row("pgsteal_anon", "anonymous pages reclaimed"),
        vmstat_row(
            "workingset_refault_anon",
            "reclaimed anonymous pages faulted back (refaults)",
        ),
        row(
            "memcg.failcnt",
            "charges over the memcg limit (memory.failcnt)",
            0,
            false,
            |r| r.outcome.counters.memcg.map_or(0.0, |m| m.failcnt as f64),
        ),
        row(
            "memcg.peak_kb",
            "peak memcg usage (memory.max_usage_in_bytes), kB",
            0,
            false,
            |r| r.outcome.counters.memcg.map_or(0.0, |m| m.peak_kb as f64),
        ),
        vmstat_row(
            "thp_collapse_alloc",
            "PMD folios allocated for collapse (khugepaged and MADV_COLLAPSE)",
        ),
        vmstat_row("thp_collapse_alloc_failed", "collapse allocations that failed"),
        row(
            "khugepaged.pages_collapsed",
            "PMD ranges khugepaged collapsed",
            0,
            false,
            |r| r.outcome.counters.khugepaged.pages_collapsed as f64,
        ),
        row(
            "khugepaged.full_scans",
            "khugepaged passes over every registered mm",
            0,
            false,
            |r| r.outcome.counters.khugepaged.full_scans as f64,
        ),
        mthp_row("split", "large folios split"),
        mthp_row("split_deferred", "large folios queued for deferred split"),
        vmstat_row("thp_split_pmd", "PMD mappings split"),
        row(
            "work.pages_copied",
            "pages copied by copy-on-write faults",
            0,
            false,
            |r| r.outcome.counters.work.vm.pages_copied as f64,
        ),
        vmstat_row("pgreuse", "write faults that reused the page in place"),
        row("locks.zone_lock", "zone->lock acquisitions", 0, true, |r| {
            r.outcome.counters.locks.zone_lock as f64
        }),
        row(
            "locks.split_queue_lock",
            "deferred split queue lock acquisitions",
            0,
            false,
            |r| r.outcome.counters.locks.split_queue_lock as f64,
        ),
        vmstat_row("oom_kill", "tasks the OOM killer killed"),
        vmstat_row("pgmigrate_success", "pages migrated"),
        vmstat_row("pgmigrate_fail", "pages that failed to migrate"),
        vmstat_row("compact_stall", "direct compaction runs"),
        vmstat_row(
            "compact_success",
            "direct compaction runs that made the allocation possible",
        ),
        vmstat_row(
            "compact_daemon_migrate_scanned",
            "pages kcompactd's migrate scanner looked at",
        ),
        reporting_row("page_reporting.passes", "free page reporting passes", |p| {
            p.passes as f64
        }),
        reporting_row(
            "page_reporting.reported_kib",
            "memory reported free to the host, KiB",
            |p| p.reported_kib as f64,
        ),
        reporting_row(
            "page_reporting.host_refault_pages",
            "reported pages allocated again (the host faults them back in)",
            |p| p.host_refault_pages as f64,
        ),
    ]);
    rows
}

/// Below this baseline a count's change is shown as a difference (`+3`):
/// a percentage of a near-zero count says nothing. (Estimated times use
/// a floor of 10 µs.)
pub const PERCENT_FROM: f64 = 10.0;
/// From this ratio on a change is shown as a factor (`x12.5`).
pub const FACTOR_FROM: f64 = 3.0;

/// `value (change)` against `base`: `+x.x%`, `+N` below `floor`, `xF`
/// from [`FACTOR_FROM`] times the baseline.
pub(crate) fn cell_with(value: f64, base: f64, decimals: usize, is_base: bool, floor: f64) -> String {
    let v = format!("{value:.decimals$}");
    if is_base {
        return v;
    }
    if base.abs() < floor {
        return format!("{v} ({:+.decimals$})", value - base);
    }
    let ratio = value / base;
    if ratio >= FACTOR_FROM {
        let digits = if ratio >= 100.0 { 0 } else { 1 };
        return format!("{v} (x{ratio:.digits$})");
    }
    format!("{v} ({:+.1}%)", (ratio - 1.0) * 100.0)
}

/// [`cell_with`] for counts: the floor is [`PERCENT_FROM`].
pub(crate) fn cell(value: f64, base: f64, decimals: usize, is_base: bool) -> String {
    cell_with(value, base, decimals, is_base, PERCENT_FROM)
}

/// The table of one workload (`records` in configuration order) and the
/// labels of the rows it shows.
pub fn comparison(names: &[&str], records: &[&Record]) -> (Grid, Vec<(String, &'static str)>) {
    let mut header = vec![String::new()];
    header.extend(names.iter().map(|n| n.to_string()));
    let mut g = Grid::new(header).right_from(1);
    let mut used = Vec::new();
    for r in rows(records) {
        let values: Vec<f64> = records.iter().map(|rec| (r.value)(rec)).collect();
        if !r.always && values.iter().all(|&v| v == 0.0) {
            continue;
        }
        let base = values.first().copied().unwrap_or(0.0);
        let mut cells = vec![Cell::text(r.label.clone())];
        cells.extend(values.iter().enumerate().map(|(i, &v)| {
            Cell::new(
                cell_with(v, base, r.decimals, i == 0, r.floor),
                Cell::num(v, r.decimals).raw,
            )
        }));
        g.row(cells);
        used.push((r.label, r.meaning));
    }
    (g, used)
}

/// Each label once, with its meaning, in first-seen order.
pub fn legend(labels: &[(String, &'static str)]) -> Vec<(String, &'static str)> {
    let mut seen = std::collections::HashSet::new();
    labels.iter().filter(|(l, _)| seen.insert(l.clone())).cloned().collect()
}

/// Every row of every table as one long CSV table: workload,
/// configuration, row, value.
pub fn long_form(configs: &[NamedConfig], workloads: &[Workload], records: &[Record]) -> Grid {
    let mut g = Grid::new(["workload", "config", "row", "value"]);
    for (w, workload) in workloads.iter().enumerate() {
        let recs: Vec<&Record> = records.iter().filter(|r| r.workload == w).collect();
        for r in rows(&recs) {
            for rec in &recs {
                let v = (r.value)(rec);
                g.row([
                    Cell::text(workload.describe()),
                    Cell::text(configs[rec.config].name.clone()),
                    Cell::text(r.label.clone()),
                    Cell::num(v, r.decimals),
                ]);
            }
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::{cell, cell_with};

    #[test]
    fn cells_show_the_change_against_the_baseline() {
        assert_eq!(cell(65536.0, 65536.0, 0, true), "65536");
        assert_eq!(cell(4096.0, 65536.0, 0, false), "4096 (-93.8%)");
        assert_eq!(cell(12.25, 10.0, 1, false), "12.2 (+22.5%)");
        assert_eq!(cell(65536.0, 65536.0, 0, false), "65536 (+0.0%)");
        // A near-zero baseline: the difference, not a percentage.
        assert_eq!(cell(3.0, 0.0, 0, false), "3 (+3)");
        assert_eq!(cell(45.0, 1.0, 0, false), "45 (+44)");
        assert_eq!(cell(0.0, 0.0, 0, false), "0 (+0)");
        assert_eq!(cell(0.4, 0.9, 1, false), "0.4 (-0.5)");
        // Many times the baseline: a factor.
        assert_eq!(cell(118.0, 10.0, 0, false), "118 (x11.8)");
        assert_eq!(cell(65536.0, 128.0, 0, false), "65536 (x512)");
        assert_eq!(cell(29.0, 10.0, 0, false), "29 (+190.0%)");
        assert_eq!(cell_with(1.7, 4.6, 1, false, 0.01), "1.7 (-63.0%)");
    }
}
