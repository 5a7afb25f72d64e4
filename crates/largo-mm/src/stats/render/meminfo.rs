use std::fmt::Write;

use largo_types::Arch;

use crate::stats::names::meminfo_items;
use crate::Machine;

/// `VMALLOC_TOTAL` of x86_64 with 4-level paging, in kB (as the host prints).
const X86_64_VMALLOC_TOTAL_KB: u64 = 34359738367;
/// `vm.overcommit_ratio` default.
const OVERCOMMIT_RATIO: u64 = 50;

/// /proc/meminfo (fs/proc/meminfo.c `meminfo_proc_show`).
pub fn meminfo(m: &Machine) -> String {
    let mut out = String::new();
    for label in meminfo_items(m.page_alloc().cma_configured()) {
        let value = meminfo_kb(m, label);
        let head = format!("{label}:");
        if label.starts_with("HugePages_") {
            let _ = writeln!(out, "{head:<16}{value:>8}");
        } else {
            let _ = writeln!(out, "{head:<16}{value:>8} kB");
        }
    }
    out
}

/// One /proc/meminfo value in kB (a count for the `HugePages_` lines).
pub fn meminfo_kb(m: &Machine, label: &str) -> u64 {
    let pa = m.page_alloc();
    let kb = |pages: u64| pages << (m.geometry().page_shift - 10);
    let totalram = pa.managed_pages();
    let node = |name: &str| super::global_node_item(m, name).unwrap_or(0);
    match label {
        "Active" => kb(node("nr_active_anon") + node("nr_active_file")),
        "Inactive" => kb(node("nr_inactive_anon") + node("nr_inactive_file")),
        "Active(anon)" => kb(node("nr_active_anon")),
        "Inactive(anon)" => kb(node("nr_inactive_anon")),
        "Active(file)" => kb(node("nr_active_file")),
        "Inactive(file)" => kb(node("nr_inactive_file")),
        "SwapCached" => kb(node("nr_swapcached")),
        "SwapTotal" => kb(m.vm().swap.total_pages()),
        "SwapFree" => kb(m.vm().swap.free_pages()),
        "Zswap" => kb(m.vm().swap.zswap.pool_pages()),
        "Zswapped" => kb(m.vm().swap.zswap.stored_pages()),
        "AnonPages" => kb(node("nr_anon_pages")),
        "PageTables" => kb(node("nr_page_table_pages")),
        "AnonHugePages" => kb(node("nr_anon_transparent_hugepages") << m.geometry().pmd_order),
        "Cached" => kb(node("nr_file_pages") - node("nr_swapcached")),
        "Mapped" => kb(node("nr_mapped")),
        "Shmem" => kb(node("nr_shmem")),
        "ShmemHugePages" => kb(node("nr_shmem_hugepages") << m.geometry().pmd_order),
        "ShmemPmdMapped" => kb(node("nr_shmem_pmdmapped") << m.geometry().pmd_order),
        "Committed_AS" => kb(m.vm().committed_pages().max(0) as u64),
        "MemTotal" => kb(totalram),
        "MemFree" => kb(pa.nr_free_pages()),
        "CmaTotal" => kb(pa.totalcma_pages()),
        "CmaFree" => kb(pa.zones().iter().map(|z| z.stat.nr_free_cma.max(0) as u64).sum()),
        "MemAvailable" => kb(mem_available(m)),
        "CommitLimit" => kb(totalram * OVERCOMMIT_RATIO / 100),
        "VmallocTotal" if m.geometry().arch == Arch::X86_64 => X86_64_VMALLOC_TOTAL_KB,
        "Hugepagesize" => m.geometry().pmd_size_bytes() >> 10,
        _ => 0,
    }
}

/// `si_mem_available`: free pages above the reserves, plus the file LRU
/// (here only lazyfree anon folios) less what the low watermarks keep.
/// Reclaimable slab is not modelled.
fn mem_available(m: &Machine) -> u64 {
    let pa = m.page_alloc();
    let available = pa.nr_free_pages() as i64 - pa.totalreserve_pages() as i64;
    let wmark_low: u64 = pa.zones().iter().map(|z| z.low_wmark_pages()).sum();
    let file = |name: &str| super::global_node_item(m, name).unwrap_or(0);
    let pagecache = file("nr_active_file") + file("nr_inactive_file");
    let pagecache = pagecache - (pagecache / 2).min(wmark_low);
    (available + pagecache as i64).max(0) as u64
}
