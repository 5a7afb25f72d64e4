//! The VM's per-node and per-zone counters by their /proc names
//! (`enum node_stat_item`, `enum zone_stat_item` LRU entries).

use crate::Machine;

/// One per-node item of node `nid` (`node_page_state`); `None` for items
/// the model does not keep. `nr_anon_transparent_hugepages`,
/// `nr_shmem_hugepages` and `nr_shmem_pmdmapped` are in units of PMD-sized
/// pages, as /proc prints them.
pub fn node_item(m: &Machine, nid: usize, name: &str) -> Option<u64> {
    let vm = m.vm();
    let s = vm.node_stats()[nid];
    let lru = |f: fn(crate::vm::stats::LruStat) -> i64| {
        let zones = m.page_alloc().zones().iter().enumerate();
        zones
            .filter(|(_, z)| z.nid == nid)
            .map(|(zi, _)| f(vm.zone_lru(zi)))
            .sum::<i64>()
    };
    let value = match name {
        "nr_inactive_anon" => lru(|l| l.inactive_anon),
        "nr_active_anon" => lru(|l| l.active_anon),
        "nr_inactive_file" => lru(|l| l.inactive_file),
        "nr_active_file" => lru(|l| l.active_file),
        "nr_isolated_anon" => s.isolated_anon,
        "nr_swapcached" => s.swapcache,
        "nr_vmscan_write" => s.vmscan_write,
        "nr_written" => s.written,
        "nr_anon_pages" => s.anon_mapped,
        "nr_anon_transparent_hugepages" => s.anon_thps >> m.geometry().pmd_order,
        "nr_page_table_pages" => s.pagetable,
        "nr_shmem" => s.shmem,
        "nr_file_pages" => s.shmem + s.swapcache,
        "nr_shmem_hugepages" => s.shmem_thps >> m.geometry().pmd_order,
        "nr_shmem_pmdmapped" => s.shmem_pmdmapped >> m.geometry().pmd_order,
        "nr_mapped" => s.file_mapped,
        _ => return None,
    };
    Some(value.max(0) as u64)
}

/// The same item summed over every node (`global_node_page_state`).
pub fn global_node_item(m: &Machine, name: &str) -> Option<u64> {
    (0..m.vm().node_stats().len()).map(|nid| node_item(m, nid, name)).sum()
}

/// An LRU item of zone index `zi` (`zone_page_state`).
pub fn zone_lru_item(m: &Machine, zi: usize, name: &str) -> Option<u64> {
    let l = m.vm().zone_lru(zi);
    let value = match name {
        "nr_zone_inactive_anon" => l.inactive_anon,
        "nr_zone_active_anon" => l.active_anon,
        "nr_zone_inactive_file" => l.inactive_file,
        "nr_zone_active_file" => l.active_file,
        _ => return None,
    };
    Some(value.max(0) as u64)
}
