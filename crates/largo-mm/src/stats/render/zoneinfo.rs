use std::fmt::Write;

use crate::page_alloc::{Wmark, Zone};
use crate::stats::names::{NODE_STAT_ITEMS, NUMA_EVENT_ITEMS, ZONE_STAT_ITEMS};
use crate::Machine;

/// /proc/zoneinfo (mm/vmstat.c `zoneinfo_show_print`): every zone of every
/// node; per-node counters under the first populated zone.
pub fn zoneinfo(m: &Machine) -> String {
    let pa = m.page_alloc();
    let mut out = String::new();
    for node in pa.nodes() {
        let zones: Vec<&Zone> = pa.zones().iter().filter(|z| z.nid == node.nid).collect();
        let first_populated = zones.iter().position(|z| z.populated());
        for (i, zone) in zones.iter().enumerate() {
            let _ = write!(out, "Node {}, zone {:>8}", zone.nid, zone.name());
            if Some(i) == first_populated {
                out.push_str("\n  per-node stats");
                for name in NODE_STAT_ITEMS {
                    let value = super::node_item(m, node.nid, name).unwrap_or(0);
                    let _ = write!(out, "\n      {name:<12} {value}");
                }
            }
            zone_header(&mut out, zone);
            if !zone.populated() {
                out.push('\n');
                continue;
            }
            let zi = crate::page_alloc::zone_index(zone.nid, zone.zone_type);
            for name in ZONE_STAT_ITEMS.iter().chain(NUMA_EVENT_ITEMS) {
                let value = super::zone_lru_item(m, zi, name).unwrap_or_else(|| zone_stat(zone, name));
                let _ = write!(out, "\n      {name:<12} {value}");
            }
            out.push_str("\n  pagesets");
            for cpu in 0..pa.nr_cpus() {
                let pcp = pa.pcp(zi, cpu);
                let _ = write!(
                    out,
                    "\n    cpu: {cpu}\n              count:    {}\n              high:     {}\n              batch:    {}\n              high_min: {}\n              high_max: {}",
                    pcp.count, pcp.high, pcp.batch, pcp.high_min, pcp.high_max
                );
                let _ = write!(out, "\n  vm stats threshold: {}", zone.stat_threshold);
            }
            let unreclaimable = (node.kswapd_failures >= 16) as u32;
            let _ = write!(
                out,
                "\n  node_unreclaimable:  {unreclaimable}\n  start_pfn:           {}\n",
                zone.zone_start_pfn
            );
        }
    }
    out
}

fn zone_header(out: &mut String, zone: &Zone) {
    let _ = write!(
        out,
        "\n  pages free     {}\n        boost    {}\n        min      {}\n        low      {}\n        high     {}\n        promo    {}\n        spanned  {}\n        present  {}\n        managed  {}\n        cma      {}",
        zone.stat.nr_free_pages.max(0),
        zone.watermark_boost,
        zone.min_wmark_pages(),
        zone.low_wmark_pages(),
        zone.high_wmark_pages(),
        zone.wmark_pages(Wmark::Promo),
        zone.spanned_pages,
        zone.present_pages,
        zone.managed_pages,
        zone.cma_pages,
    );
    let protection: Vec<String> = zone.lowmem_reserve.iter().map(u64::to_string).collect();
    let _ = write!(out, "\n        protection: ({})", protection.join(", "));
}

fn zone_stat(zone: &Zone, name: &str) -> u64 {
    let s = &zone.stat;
    match name {
        "nr_free_pages" => s.nr_free_pages.max(0) as u64,
        "nr_free_pages_blocks" => s.nr_free_pages_blocks.max(0) as u64,
        "nr_free_cma" => s.nr_free_cma.max(0) as u64,
        "numa_hit" => s.numa_hit,
        "numa_miss" => s.numa_miss,
        "numa_foreign" => s.numa_foreign,
        "numa_interleave" => s.numa_interleave,
        "numa_local" => s.numa_local,
        "numa_other" => s.numa_other,
        _ => 0,
    }
}
