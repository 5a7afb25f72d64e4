//! mmtests / LKP style comparison tables: one column per configuration,
//! the first the baseline, each cell `value (+x.x%)` against it.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};

use super::run::Record;

/// A row: its label and how to read its value from a record.
struct Row {
    label: String,
    value: Box<dyn Fn(&Record) -> f64>,
    decimals: usize,
    /// Shown even when zero everywhere.
    always: bool,
}

fn row(label: &str, decimals: usize, always: bool, value: impl Fn(&Record) -> f64 + 'static) -> Row {
    Row {
        label: label.to_string(),
        value: Box::new(value),
        decimals,
        always,
    }
}

/// A row showing one /proc/vmstat item, hidden when zero everywhere.
fn vmstat_row(label: &str, item: &'static str) -> Row {
    row(label, 0, false, move |r| r.outcome.counters.vmstat(item) as f64)
}

/// The rows of a workload's table.
fn rows(records: &[&Record]) -> Vec<Row> {
    let mut rows = vec![
        row("page faults", 0, true, |r| r.outcome.counters.vmstat("pgfault") as f64),
        row("kernel time est. (ms)", 1, true, |r| r.estimate.kernel_ns / 1e6),
        row("peak anon memory (MiB)", 1, true, |r| {
            r.outcome.peak.anon_kb as f64 / 1024.0
        }),
        row("peak page tables (KiB)", 0, true, |r| {
            r.outcome.peak.pagetables_kb as f64
        }),
    ];
    // Allocations by size, every size any configuration used.
    let mut sizes: Vec<(u64, String)> = records
        .iter()
        .flat_map(|r| r.outcome.counters.allocs.keys().cloned())
        .map(|k| (k.trim_end_matches("kB").parse::<u64>().unwrap_or(0), k))
        .collect();
    sizes.sort();
    sizes.dedup();
    for (_, key) in sizes {
        let k = key.clone();
        rows.push(row(&format!("allocations {key}"), 0, false, move |r| {
            r.outcome.counters.allocs.get(&k).copied().unwrap_or(0) as f64
        }));
    }
    rows.extend([
        vmstat_row("thp_fault_alloc", "thp_fault_alloc"),
        row("mTHP fault fallbacks", 0, false, |r| {
            r.outcome.counters.mthp_total("anon_fault_fallback") as f64
        }),
        row("THP splits", 0, false, |r| {
            r.outcome.counters.mthp_total("split") as f64
        }),
        row("deferred splits", 0, false, |r| {
            r.outcome.counters.mthp_total("split_deferred") as f64
        }),
        vmstat_row("PMD splits", "thp_split_pmd"),
        row("CoW page copies", 0, false, |r| {
            r.outcome.counters.work.vm.pages_copied as f64
        }),
        vmstat_row("pgreuse", "pgreuse"),
        row("zone lock acquisitions", 0, true, |r| {
            r.outcome.counters.locks.zone_lock as f64
        }),
        row("split queue lock acquisitions", 0, false, |r| {
            r.outcome.counters.locks.split_queue_lock as f64
        }),
        vmstat_row("OOM kills", "oom_kill"),
        vmstat_row("pages migrated", "pgmigrate_success"),
        vmstat_row("pages not migrated", "pgmigrate_fail"),
        vmstat_row("compaction stalls", "compact_stall"),
        vmstat_row("compaction successes", "compact_success"),
        vmstat_row("kcompactd pages scanned", "compact_daemon_migrate_scanned"),
        row("reporting passes", 0, false, |r| {
            r.outcome.reporting.as_ref().map_or(0.0, |p| p.passes as f64)
        }),
        row("reported to the host (MiB)", 1, false, |r| {
            r.outcome
                .reporting
                .as_ref()
                .map_or(0.0, |p| p.reported_kib as f64 / 1024.0)
        }),
        row("host refaults (pages)", 0, false, |r| {
            r.outcome
                .reporting
                .as_ref()
                .map_or(0.0, |p| p.host_refault_pages as f64)
        }),
    ]);
    rows
}

/// A table in the house style with this header.
pub fn new_table<T: ToString>(header: impl IntoIterator<Item = T>) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.into_iter().map(|h| h.to_string()).collect::<Vec<_>>());
    t
}

/// Numbers right-aligned in columns `cols`.
pub fn align_right(t: &mut Table, cols: std::ops::RangeInclusive<usize>) {
    for col in cols {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// `value (+x.x%)` against `base`.
pub(crate) fn cell(value: f64, base: f64, decimals: usize, is_base: bool) -> String {
    let v = format!("{value:.decimals$}");
    if is_base {
        return v;
    }
    if base == 0.0 {
        return if value == 0.0 {
            format!("{v} (+0.0%)")
        } else {
            format!("{v} (new)")
        };
    }
    format!("{v} ({:+.1}%)", (value - base) / base * 100.0)
}

/// The table of one workload; `records` are in configuration order.
pub fn comparison(names: &[&str], records: &[&Record]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec![String::new()];
    header.extend(names.iter().map(|n| n.to_string()));
    t.set_header(header);
    for r in rows(records) {
        let values: Vec<f64> = records.iter().map(|rec| (r.value)(rec)).collect();
        if !r.always && values.iter().all(|&v| v == 0.0) {
            continue;
        }
        let base = values.first().copied().unwrap_or(0.0);
        let mut cells = vec![r.label.clone()];
        cells.extend(
            values
                .iter()
                .enumerate()
                .map(|(i, &v)| cell(v, base, r.decimals, i == 0)),
        );
        t.add_row(cells);
    }
    for col in 1..=names.len() {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!("{t}\n")
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn cells_show_the_change_against_the_baseline() {
        assert_eq!(cell(65536.0, 65536.0, 0, true), "65536");
        assert_eq!(cell(4096.0, 65536.0, 0, false), "4096 (-93.8%)");
        assert_eq!(cell(12.25, 10.0, 1, false), "12.2 (+22.5%)");
        assert_eq!(cell(3.0, 0.0, 0, false), "3 (new)");
        assert_eq!(cell(0.0, 0.0, 0, false), "0 (+0.0%)");
    }
}
