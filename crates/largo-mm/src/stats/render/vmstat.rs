use std::fmt::Write;

use crate::stats::names::vmstat_items;
use crate::stats::VmEvent;
use crate::Machine;

/// /proc/vmstat: every item of the host kernel's list, in order.
pub fn vmstat(m: &Machine) -> String {
    let items = vmstat_items(m.page_alloc().cma_configured());
    let mut out = String::with_capacity(items.len() * 32);
    for name in items {
        let _ = writeln!(out, "{name} {}", vmstat_value(m, name));
    }
    out
}

/// The value of one /proc/vmstat item; 0 for items the model does not keep.
pub fn vmstat_value(m: &Machine, name: &str) -> u64 {
    let pa = m.page_alloc();
    let zones = pa.zones();
    let sum = |f: fn(&crate::page_alloc::Zone) -> u64| zones.iter().map(f).sum::<u64>();
    match name {
        "nr_free_pages" => pa.nr_free_pages(),
        "nr_free_pages_blocks" => sum(|z| z.stat.nr_free_pages_blocks.max(0) as u64),
        "nr_free_cma" => sum(|z| z.stat.nr_free_cma.max(0) as u64),
        "numa_hit" => sum(|z| z.stat.numa_hit),
        "numa_miss" => sum(|z| z.stat.numa_miss),
        "numa_foreign" => sum(|z| z.stat.numa_foreign),
        "numa_interleave" => sum(|z| z.stat.numa_interleave),
        "numa_local" => sum(|z| z.stat.numa_local),
        "numa_other" => sum(|z| z.stat.numa_other),
        "nr_dirty_threshold" => dirty_limits(m).0,
        "nr_dirty_background_threshold" => dirty_limits(m).1,
        "nr_memmap_boot_pages" => m.layout().memmap_boot_pages,
        "nr_zone_inactive_anon" => super::global_node_item(m, "nr_inactive_anon").unwrap_or(0),
        "nr_zone_active_anon" => super::global_node_item(m, "nr_active_anon").unwrap_or(0),
        "nr_zone_inactive_file" => super::global_node_item(m, "nr_inactive_file").unwrap_or(0),
        "nr_zone_active_file" => super::global_node_item(m, "nr_active_file").unwrap_or(0),
        _ => super::global_node_item(m, name)
            .or_else(|| VmEvent::from_name(name).map(|e| pa.events.get(e)))
            .unwrap_or(0),
    }
}

/// `global_dirty_limits` with the default `vm.dirty_ratio` 20 and
/// `vm.dirty_background_ratio` 10, applied per page as the kernel does.
fn dirty_limits(m: &Machine) -> (u64, u64) {
    let pa = m.page_alloc();
    let page_size = m.geometry().page_size();
    let free = pa.nr_free_pages();
    let dirtyable = free - free.min(pa.totalreserve_pages());
    let ratio = 20 * page_size / 100;
    let bg_ratio = 10 * page_size / 100;
    let thresh = ratio * dirtyable / page_size;
    let mut bg_thresh = bg_ratio * dirtyable / page_size;
    if bg_thresh >= thresh {
        bg_thresh = thresh / 2;
    }
    (thresh, bg_thresh)
}
