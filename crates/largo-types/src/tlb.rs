//! TLB geometry and timing: how many translations the data TLBs hold,
//! which hardware contiguity lets one entry cover more than a base page,
//! and what a miss and the data access itself cost (the user-time model
//! of `largo-workloads/src/tlb/`).

use serde::{Deserialize, Serialize};

use crate::Preset;

/// The data-side TLBs of a machine and the latencies the user-time
/// estimate uses.
///
/// Invariant: `coalesce_pages` is 1 (none) or a power of two; entries and
/// ways are non-zero and `l2_entries` is a multiple of `l2_ways`; the
/// latency curves are sorted by working set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TlbGeometry {
    /// Where the figures come from.
    pub source: String,
    /// First-level data TLB entries (fully associative, any page size).
    pub l1_entries: u32,
    /// Second-level (shared) TLB entries, base and PMD translations alike.
    pub l2_entries: u32,
    pub l2_ways: u32,
    /// PTE coalescing (x86 AMD) or Hardware Page Aggregation (arm64 HPA):
    /// this many naturally aligned, virtually and physically contiguous
    /// 4K-page PTEs share one entry (1: none). Only with 4K base pages.
    pub coalesce_pages: u32,
    /// ns of a first-level miss that hits the second level.
    pub l2_hit_ns: f64,
    /// ns per page-table level a walk fetches, its entry in the data caches
    /// (with page-walk caches only the leaf level is fetched).
    pub walk_ns: f64,
    /// ns of a walk whose leaf entry shares a 64-byte line with the
    /// previous walk's (the line is still in the L1 data cache: an
    /// address-order stream walks 8 PTEs per line).
    pub walk_near_ns: f64,
    /// Page-walk caches hold the upper levels' entries (every x86 and
    /// arm64 core of the presets has them); without, a walk fetches every
    /// level from the leaf's up (4 for a 4K page with 4 levels, 3 for a
    /// PMD mapping).
    pub page_walk_caches: bool,
    /// ns a random-order walk adds per doubling of the leaf entries'
    /// working set above 128 KiB (entries falling out of the caches; on a
    /// guest, the nested walk of the host's tables). Address-order walks
    /// reuse each line of leaf entries and do not pay it.
    pub walk_ns_per_doubling: f64,
    /// Latency of a dependent load to a random line, by data working set:
    /// (bytes, ns), interpolated log-linearly.
    pub random_load_ns: Vec<(u64, f64)>,
    /// The same for one line per 4 KiB in address order (prefetchers help).
    pub stride_load_ns: Vec<(u64, f64)>,
    /// ns per line of a sequential pass (streaming).
    pub seq_line_ns: f64,
    /// Core clock, MHz, to state walk time in cycles.
    pub cpu_mhz: u32,
}

impl TlbGeometry {
    /// Checks the invariants.
    pub fn validate(&self) -> Result<(), String> {
        if self.l1_entries == 0 || self.l2_entries == 0 || self.l2_ways == 0 {
            return Err("TLB entries and ways must be positive".into());
        }
        if !self.l2_entries.is_multiple_of(self.l2_ways) {
            return Err(format!(
                "l2 entries {} not a multiple of its ways {}",
                self.l2_entries, self.l2_ways
            ));
        }
        if !self.coalesce_pages.is_power_of_two() {
            return Err(format!("coalesce {} is not a power of two", self.coalesce_pages));
        }
        let sorted = |c: &[(u64, f64)]| !c.is_empty() && c.windows(2).all(|w| w[0].0 < w[1].0);
        if !sorted(&self.random_load_ns) || !sorted(&self.stride_load_ns) {
            return Err("latency curves must be non-empty and sorted by working set".into());
        }
        Ok(())
    }

    /// Applies `KEY=VALUE,...` overrides (`--tlb`): l1, l2, ways,
    /// coalesce, l2_hit_ns, walk_ns, walk_near_ns, pwc (0/1), walk_ns_per_doubling,
    /// seq_line_ns.
    pub fn with_overrides(mut self, spec: &str) -> Result<TlbGeometry, String> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}': expected KEY=VALUE"))?;
            let int = || v.parse::<u32>().map_err(|_| format!("{k}={v}: expected an integer"));
            let float = || {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("{k}={v}: expected a non-negative number"))
            };
            match k {
                "l1" => self.l1_entries = int()?,
                "l2" => self.l2_entries = int()?,
                "ways" => self.l2_ways = int()?,
                "coalesce" => self.coalesce_pages = int()?,
                "l2_hit_ns" => self.l2_hit_ns = float()?,
                "walk_ns" => self.walk_ns = float()?,
                "walk_near_ns" => self.walk_near_ns = float()?,
                "pwc" => self.page_walk_caches = int()? != 0,
                "walk_ns_per_doubling" => self.walk_ns_per_doubling = float()?,
                "seq_line_ns" => self.seq_line_ns = float()?,
                _ => {
                    return Err(format!(
                        "unknown TLB parameter '{k}' (l1, l2, ways, coalesce, l2_hit_ns, walk_ns, walk_near_ns, pwc, walk_ns_per_doubling, seq_line_ns)"
                    ))
                }
            }
        }
        self.source = format!("{} with {spec}", self.source);
        self.validate()?;
        Ok(self)
    }
}

impl Preset {
    /// The preset machine's data TLBs.
    pub fn tlb(self) -> TlbGeometry {
        match self {
            Preset::X86_64 => x86_epyc(),
            Preset::Arm64_4k | Preset::Arm64_16k | Preset::Arm64_64k => arm64_n1(),
        }
    }
}

/// The development VM: AMD EPYC family 0x19 model 0x11 (Zen 4). Entries
/// from CPUID 0x80000005/0x80000006 (L1 DTLB 72, fully associative; L2
/// DTLB 3072, 8-way, 4K and 2M). Timings fitted to `largo bench tlb` on
/// it (2026-11-28, medians of four runs of 3 fresh mappings each, host
/// 6.18.44-fc-v595): load latencies are its 2M points (16M..4G ranges:
/// data working sets of 256 KiB..64 MiB; at 4 MiB the guest's share of
/// the L3 flips between about 40 and 170 ns from run to run, 170 in
/// these runs); walks from its 4K points: 17 ns at 64M (chase), 22 ns
/// more per doubling of the leaf PTEs above 128 KiB (256M, 1G, 4G), 11 ns
/// for a walk whose PTE shares a line with the previous walk's (stride
/// at 64M). Coalescing of 4 pages: 16K and 64K folios cut a 32M chase
/// from 34-46 to 23-33 ns (2048 entries, where 4K needs 8192) and a 64M
/// one from 43 to 32-41 ns, and neither helps at 1G or 4G. The 16K and
/// 64K points are the validation, not the fit.
fn x86_epyc() -> TlbGeometry {
    TlbGeometry {
        source: "AMD EPYC Zen 4 guest (CPUID; latencies from largo bench tlb on the development VM)".into(),
        l1_entries: 72,
        l2_entries: 3072,
        l2_ways: 8,
        coalesce_pages: 4,
        l2_hit_ns: 1.5,
        walk_ns: 17.0,
        walk_near_ns: 11.0,
        page_walk_caches: true,
        walk_ns_per_doubling: 22.0,
        random_load_ns: vec![
            (256 << 10, 12.3),
            (512 << 10, 23.0),
            (1 << 20, 28.1),
            (4 << 20, 171.1),
            (16 << 20, 253.0),
            (64 << 20, 297.0),
        ],
        stride_load_ns: vec![
            (256 << 10, 11.4),
            (512 << 10, 18.1),
            (1 << 20, 26.1),
            (4 << 20, 159.0),
            (16 << 20, 158.5),
            (64 << 20, 162.2),
        ],
        seq_line_ns: 0.3,
        // /proc/cpuinfo `cpu MHz` of the development VM.
        cpu_mhz: 2596,
    }
}

/// Arm Neoverse N1 (Technical Reference Manual: L1 DTLB 48 entries, L2
/// 1280 entries 5-way); contiguous-bit ranges come from the geometry's
/// `cont_pte_order`; Hardware Page Aggregation (HPA, a microarchitectural
/// feature) lets 4 aligned, physically contiguous 4K PTEs share an entry
/// without the contiguous bit (order-2 blocks, as the seed RFC states for
/// the Ampere Altra it measured on), so 16K and 32K folios gain on the
/// 4K granule. Latencies are the x86 machine's (no arm64 host to measure
/// them on).
fn arm64_n1() -> TlbGeometry {
    TlbGeometry {
        source: "Arm Neoverse N1 (TRM; HPA of 4 pages); latencies assumed equal to the x86 development VM's".into(),
        l1_entries: 48,
        l2_entries: 1280,
        l2_ways: 5,
        coalesce_pages: 4,
        ..x86_epyc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_overrides_apply() {
        for p in Preset::ALL {
            p.tlb().validate().unwrap();
        }
        let t = Preset::X86_64
            .tlb()
            .with_overrides("l2=1536,coalesce=4,walk_ns=30")
            .unwrap();
        assert_eq!((t.l2_entries, t.coalesce_pages, t.walk_ns), (1536, 4, 30.0));
        assert!(Preset::X86_64.tlb().with_overrides("l2=1000,ways=3").is_err());
        assert!(Preset::X86_64.tlb().with_overrides("coalesce=3").is_err());
        assert!(Preset::X86_64
            .tlb()
            .with_overrides("speed=3")
            .unwrap_err()
            .contains("unknown"));
    }
}

/// Memory write bandwidth, which zeroing and copying pages share between
/// CPUs (the lock model's `memory` station).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryBandwidth {
    /// GB/s one CPU writes alone.
    pub one_cpu_gbs: f64,
    /// GB/s all CPUs together write at most.
    pub all_cpus_gbs: f64,
    /// CPUs `all_cpus_gbs` was measured with.
    pub measured_cpus: usize,
}

impl Preset {
    /// The preset machine's memory write bandwidth: `largo bench
    /// contention`'s fill measurement on the development VM (one and two
    /// threads filling 256 MiB each, 2026-11-25: 28.0 and 53.2 GB/s);
    /// arm64 presets assume the same.
    pub fn memory_bandwidth(self) -> MemoryBandwidth {
        MemoryBandwidth {
            one_cpu_gbs: 28.0,
            all_cpus_gbs: 53.2,
            measured_cpus: 2,
        }
    }
}
