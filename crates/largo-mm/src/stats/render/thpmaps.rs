//! `tools/mm/thpmaps --rollup --inc-empty` for the anonymous memory of
//! every task: mapped memory by folio size and alignment.

use std::fmt::Write;

use crate::Machine;

/// Label column width of thpmaps (`label_field`).
const LABEL_FIELD: usize = 32;

fn line(out: &mut String, label: &str, kb: u64, total_kb: u64) {
    let pad = LABEL_FIELD.saturating_sub(label.len() + 1);
    // Python's `{:3.0%}`: the percentage with its sign, right-aligned in 3.
    let percent = (kb * 100 + total_kb / 2)
        .checked_div(total_kb)
        .map_or_else(String::new, |p| format!(" ({:>3})", format!("{p}%")));
    let _ = writeln!(out, "{label}:{}{kb:>8} kB{percent}", " ".repeat(pad));
}

/// The rollup, anonymous lines only (the model has no file memory).
pub fn thpmaps(m: &Machine) -> String {
    let geo = m.geometry();
    let t = m.vm().thpmaps(m.page_alloc());
    let kb = |pages: u64| (pages << geo.page_shift) >> 10;
    let size_kb = |order: u32| (geo.page_size() << order) >> 10;
    let total = kb(t.anon_pages);
    let mut out = String::new();
    line(
        &mut out,
        &format!("anon-thp-pmd-aligned-{}kB", size_kb(geo.pmd_order)),
        kb(t.pmd_pages),
        total,
    );
    for (name, pages) in [("aligned", &t.pte_aligned), ("unaligned", &t.pte_unaligned)] {
        for order in geo.anon_orders() {
            let label = format!("anon-thp-pte-{name}-{}kB", size_kb(order));
            line(&mut out, &label, kb(pages[order as usize]), total);
        }
    }
    line(&mut out, "anon-thp-pte-partial", kb(t.partial_pages), total);
    out
}

/// Every per-size stat, as `grep . hugepages-*/stats/*` prints them
/// (relative to /sys/kernel/mm/transparent_hugepage).
pub fn mthp(m: &Machine) -> String {
    let geo = m.geometry();
    let mut out = String::new();
    for order in geo.anon_orders() {
        let dir = crate::knobs::size_dir(geo.page_shift, order);
        for &stat in crate::vm::stats::MthpStat::ALL {
            let _ = writeln!(out, "{dir}/stats/{}:{}", stat.name(), m.vm().mthp.get(order, stat));
        }
    }
    out
}
