//! Fragmentation indices (mm/vmstat.c `fill_contig_page_info`,
//! `__fragmentation_index`, `unusable_free_index`) and the debugfs files
//! `/sys/kernel/debug/extfrag/extfrag_index` and `unusable_index`.

use std::fmt::Write;

use crate::page_alloc::{PageAlloc, Zone};

/// `struct contig_page_info`.
#[derive(Clone, Copy, Debug, Default)]
struct ContigPageInfo {
    free_pages: u64,
    free_blocks_total: u64,
    free_blocks_suitable: u64,
}

/// `fill_contig_page_info`: free pages and blocks of `zone`, and the
/// blocks at least `suitable_order` large counted in that order's units.
fn fill_contig_page_info(zone: &Zone, suitable_order: u32) -> ContigPageInfo {
    let mut info = ContigPageInfo::default();
    for (order, area) in zone.free_area.iter().enumerate() {
        let blocks = area.nr_free;
        info.free_blocks_total += blocks;
        info.free_pages += blocks << order;
        if order as u32 >= suitable_order {
            info.free_blocks_suitable += blocks << (order as u32 - suitable_order);
        }
    }
    info
}

/// `fragmentation_index` in thousandths: -1000 if a block of `order` is
/// free, towards 0 when a failure would be lack of memory, towards 1000
/// when it would be fragmentation.
pub fn fragmentation_index(zone: &Zone, order: u32) -> i32 {
    let info = fill_contig_page_info(zone, order);
    if info.free_blocks_total == 0 {
        return 0;
    }
    if info.free_blocks_suitable > 0 {
        return -1000;
    }
    let requested = 1u64 << order;
    1000 - ((1000 + info.free_pages * 1000 / requested) / info.free_blocks_total) as i32
}

/// `extfrag_for_order`: percent of free memory in blocks below `order`.
pub fn extfrag_for_order(zone: &Zone, order: u32) -> u32 {
    let info = fill_contig_page_info(zone, order);
    if info.free_pages == 0 {
        return 0;
    }
    ((info.free_pages - (info.free_blocks_suitable << order)) * 100 / info.free_pages) as u32
}

/// `unusable_free_index` in thousandths: the share of free memory in
/// blocks too small for `order`.
pub fn unusable_free_index(zone: &Zone, order: u32) -> i32 {
    let info = fill_contig_page_info(zone, order);
    if info.free_pages == 0 {
        return 1000;
    }
    ((info.free_pages - (info.free_blocks_suitable << order)) * 1000 / info.free_pages) as i32
}

fn render(pa: &PageAlloc, index: fn(&Zone, u32) -> i32, width: bool) -> String {
    let mut out = String::new();
    for zone in pa.zones() {
        if !zone.populated() {
            continue;
        }
        let _ = write!(out, "Node {}, zone {:>8} ", zone.nid, zone.name());
        for order in 0..pa.geometry().nr_page_orders() as u32 {
            let i = index(zone, order);
            let (whole, frac) = (i / 1000, (i % 1000).abs());
            if width {
                let _ = write!(out, "{whole:2}.{frac:03} ");
            } else {
                let _ = write!(out, "{whole}.{frac:03} ");
            }
        }
        out.push('\n');
    }
    out
}

/// `/sys/kernel/debug/extfrag/extfrag_index`.
pub fn render_extfrag_index(pa: &PageAlloc) -> String {
    render(pa, fragmentation_index, true)
}

/// `/sys/kernel/debug/extfrag/unusable_index`.
pub fn render_unusable_index(pa: &PageAlloc) -> String {
    render(pa, unusable_free_index, false)
}
