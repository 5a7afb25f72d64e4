use std::fmt::Write;

use largo_types::MigrateType;

use crate::Machine;

/// The kernel stops counting a free list at this length (and prints `>`).
const FREECOUNT_CAP: u32 = 100_000;

/// /proc/pagetypeinfo (mm/vmstat.c `pagetypeinfo_show`): free blocks per
/// order and migratetype, and pageblocks per migratetype, node by node.
pub fn pagetypeinfo(m: &Machine) -> String {
    let pa = m.page_alloc();
    let geo = m.geometry();
    // A CONFIG_CMA kernel prints a CMA row and column; the host's does not.
    let types: Vec<MigrateType> = MigrateType::ALL
        .into_iter()
        .filter(|&mt| mt != MigrateType::Cma || pa.cma_configured())
        .collect();
    let mut out = String::new();
    for node in pa.nodes() {
        let zones: Vec<_> = pa
            .zones()
            .iter()
            .filter(|z| z.nid == node.nid && z.populated())
            .collect();
        if zones.is_empty() {
            continue;
        }
        let _ = writeln!(out, "Page block order: {}", geo.pageblock_order);
        let _ = writeln!(out, "Pages per block:  {}", geo.pageblock_nr_pages());
        out.push('\n');
        let _ = write!(out, "{:<43} ", "Free pages count per migrate type at order");
        for order in 0..geo.nr_page_orders() {
            let _ = write!(out, "{order:>6} ");
        }
        out.push('\n');
        for zone in &zones {
            for &mt in &types {
                let _ = write!(
                    out,
                    "Node {:>4}, zone {:>8}, type {:>12} ",
                    zone.nid,
                    zone.name(),
                    mt.name()
                );
                for area in &zone.free_area {
                    let nr = area.list(mt).nr;
                    if nr >= FREECOUNT_CAP {
                        let _ = write!(out, ">{FREECOUNT_CAP:>6} ");
                    } else {
                        let _ = write!(out, "{nr:>6} ");
                    }
                }
                out.push('\n');
            }
        }
        let _ = write!(out, "\n{:<23}", "Number of blocks type ");
        for &mt in &types {
            let _ = write!(out, "{:>12} ", mt.name());
        }
        out.push('\n');
        for zone in &zones {
            let mut count = [0u64; largo_types::MIGRATE_TYPES];
            let mut pfn = zone.zone_start_pfn;
            while pfn < zone.zone_end_pfn() {
                let zi = crate::page_alloc::zone_index(zone.nid, zone.zone_type);
                if m.sparse().pfn_online(pfn) && pa.page_zone_index(pfn) == Some(zi) {
                    count[pa.pageblock_migratetype(pfn).index()] += 1;
                }
                pfn += geo.pageblock_nr_pages();
            }
            let _ = write!(out, "Node {}, zone {:>8} ", zone.nid, zone.name());
            for &mt in &types {
                let c = count[mt.index()];
                let _ = write!(out, "{c:>12} ");
            }
            out.push('\n');
        }
    }
    out
}
