//! Host memory a large machine's boot costs. Its own test binary: the
//! process's resident set is the measurement, nothing else may run in it.

use largo_mm::{Machine, MachineConfig};

/// `VmRSS` of this process, in kB.
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// A 4 TiB machine's memmap spans 16 GiB of records, boot writes one free
/// block head per 4 MiB and reads a buddy per pageblock: stored apart
/// (`PageArray`) those records fault in ~32 MiB of host memory; in one
/// array they cost 4.4 GB. The memmap's own reserved pages (64 GiB of
/// vmemmap, PG_reserved) add 256 MiB.
#[test]
fn a_4tib_machine_boots_in_a_small_footprint() {
    let before = rss_kb();
    let m = Machine::new(MachineConfig {
        mem_bytes: 4 << 40,
        ..MachineConfig::default()
    })
    .unwrap();
    let grown_kb = rss_kb().saturating_sub(before);
    let free_kb = largo_mm::stats::render::meminfo_kb(&m, "MemFree");
    assert!(free_kb > (4u64 << 30) * 9 / 10, "MemFree {free_kb} kB");
    assert!(
        grown_kb < 600 << 10,
        "booting 4 TiB grew the resident set by {grown_kb} kB"
    );
    println!("4 TiB boot: resident set grew by {} MiB", grown_kb >> 10);
}
