//! Every knob, defined once: its path, what it means, how the kernel
//! prints it and which values it accepts. `Machine::set_knob`, the
//! per-machine knob list (`largo list knobs`) and the validation of
//! `--set` come from this table: adding a knob is one entry.

use super::{
    parse_choice, parse_int, size_dir, sysfs_choice, KnobError, KnobInfo, ShmemEnabled, ShmemSizeEnabled,
    SHMEM_ENABLED_CHOICES, SHMEM_SIZE_CHOICES, THP_DEFRAG_CHOICES, THP_ENABLED_CHOICES, THP_SIZE_CHOICES,
};
use crate::machine::Machine;
use crate::page_alloc::pcp::MIN_PERCPU_PAGELIST_HIGH_FRACTION;
use crate::reporting::Trigger;
use largo_types::MAX_NR_ZONES;

/// Where a knob lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobPath {
    /// One path (relative to /sys/kernel/mm or /proc/sys).
    Fixed(&'static str),
    /// `transparent_hugepage/hugepages-<size>kB/enabled`, one per
    /// anonymous mTHP order of the machine (2..=PMD order).
    PerAnonSize,
    /// `transparent_hugepage/hugepages-<size>kB/shmem_enabled`, one per
    /// file THP order of the machine (1..=PMD order).
    PerShmemSize,
}

/// Reads a knob as the kernel prints it (`order` for per-size knobs).
type Getter = fn(&Machine, u32) -> String;
/// Parses `value` as the kernel accepts it for `path` and applies it.
type Setter = fn(&mut Machine, u32, &str, &str) -> Result<(), KnobError>;

/// One knob.
pub struct KnobDef {
    pub path: KnobPath,
    pub help: &'static str,
    get: Getter,
    set: Setter,
}

const fn knob(path: &'static str, help: &'static str, get: Getter, set: Setter) -> KnobDef {
    KnobDef {
        path: KnobPath::Fixed(path),
        help,
        get,
        set,
    }
}

/// A 0/1 switch.
fn bit(on: bool) -> String {
    (on as u8).to_string()
}

fn parse_bool(path: &str, value: &str) -> Result<bool, KnobError> {
    Ok(parse_int(path, value, 0, 1)? == 1)
}

/// A kernel boolean parameter (`kstrtobool`: y/n, 1/0, on/off, true/false).
fn parse_kernel_bool(path: &str, value: &str) -> Result<bool, KnobError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "1" | "on" | "true" => Ok(true),
        "n" | "no" | "0" | "off" | "false" => Ok(false),
        _ => Err(KnobError::BadValue {
            path: path.into(),
            value: value.into(),
            expected: "Y or N (also 1/0, on/off, true/false)".into(),
        }),
    }
}

/// `page_reporting/trigger` values.
pub const TRIGGER_CHOICES: [(&str, Trigger); 2] = [("mainline", Trigger::Mainline), ("seed", Trigger::Seed)];

/// Every knob, in the order `largo list knobs` shows them.
pub const REGISTRY: &[KnobDef] = &[
    knob(
        "largo/gigapageblocks",
        "steer unmovable fallbacks into 1 GiB blocks already holding unmovable pageblocks (seed alternative; not a kernel knob)",
        |m, _| bit(m.page_alloc().gigapageblocks()),
        |m, _, p, v| {
            let on = parse_bool(p, v)?;
            m.page_alloc_mut().set_gigapageblocks(on);
            Ok(())
        },
    ),
    knob(
        "largo/movable_min_kb",
        "ZONE_MOVABLE serves only allocations of this many KiB or more (a power of two, at least a page): a TAO-style zone for large folios (0 off; not a kernel knob)",
        |m, _| {
            let order = m.page_alloc().tunables().movable_min_order;
            if order == 0 {
                "0".into()
            } else {
                ((m.geometry().page_size() << order) >> 10).to_string()
            }
        },
        |m, _, p, v| {
            let kb = parse_int(p, v, 0, 1 << 30)?;
            let page_kb = m.geometry().page_size() >> 10;
            let order = if kb == 0 {
                0
            } else if kb.is_power_of_two() && kb >= page_kb {
                (kb / page_kb).trailing_zeros()
            } else {
                return Err(KnobError::BadValue {
                    path: p.into(),
                    value: v.into(),
                    expected: format!("0, or a power of two of at least the page ({page_kb} KiB)"),
                });
            };
            m.page_alloc_mut().tunables_mut().movable_min_order = order;
            Ok(())
        },
    ),
    knob(
        "vm/compaction_proactiveness",
        "how hard kcompactd compacts on its own (0 off; fragmentation score kept under 100 minus this)",
        |m, _| m.page_alloc().tunables().compaction_proactiveness.to_string(),
        |m, _, p, v| {
            m.page_alloc_mut().tunables_mut().compaction_proactiveness = parse_int(p, v, 0, 100)?;
            Ok(())
        },
    ),
    knob(
        "vm/extfrag_threshold",
        "fragmentation index at or below which a costly allocation failure is lack of memory (no compaction)",
        |m, _| m.page_alloc().tunables().extfrag_threshold.to_string(),
        |m, _, p, v| {
            m.page_alloc_mut().tunables_mut().extfrag_threshold = parse_int(p, v, 0, 1000)?;
            Ok(())
        },
    ),
    knob(
        "vm/min_free_kbytes",
        "free memory the kernel keeps (raised for THP when PMD THP is enabled)",
        |m, _| m.page_alloc().tunables().min_free_kbytes.to_string(),
        |m, _, p, v| {
            let kbytes = parse_int(p, v, 0, i32::MAX as u64)?;
            m.page_alloc_mut().set_min_free_kbytes(kbytes);
            Ok(())
        },
    ),
    knob(
        "vm/watermark_scale_factor",
        "distance between watermarks, in 1/10000 of the zone",
        |m, _| m.page_alloc().tunables().watermark_scale_factor.to_string(),
        |m, _, p, v| {
            let factor = parse_int(p, v, 1, 3000)?;
            m.page_alloc_mut().set_watermark_scale_factor(factor);
            Ok(())
        },
    ),
    knob(
        "vm/watermark_boost_factor",
        "watermark boost after a fragmenting fallback, in 1/10000 of the high watermark",
        |m, _| m.page_alloc().tunables().watermark_boost_factor.to_string(),
        |m, _, p, v| {
            let factor = parse_int(p, v, 0, i32::MAX as u64)?;
            m.page_alloc_mut().set_watermark_boost_factor(factor);
            Ok(())
        },
    ),
    knob(
        "vm/percpu_pagelist_high_fraction",
        "0: auto-tuned pcp high limits; N >= 8: managed/N split over cpus",
        |m, _| m.page_alloc().tunables().percpu_pagelist_high_fraction.to_string(),
        |m, _, p, v| {
            let fraction = parse_int(p, v, 0, i32::MAX as u64)?;
            if fraction != 0 && fraction < MIN_PERCPU_PAGELIST_HIGH_FRACTION {
                return Err(KnobError::BadValue {
                    path: p.into(),
                    value: v.into(),
                    expected: "0 or at least 8".into(),
                });
            }
            m.page_alloc_mut().set_percpu_pagelist_high_fraction(fraction);
            Ok(())
        },
    ),
    knob(
        "vm/lowmem_reserve_ratio",
        "per-zone divisor of the memory lower zones keep back",
        |m, _| {
            let r = m.page_alloc().tunables().lowmem_reserve_ratio;
            r.iter().map(u64::to_string).collect::<Vec<_>>().join("\t")
        },
        |m, _, p, v| {
            let ratios = parse_ratios(p, v)?;
            m.page_alloc_mut().set_lowmem_reserve_ratio(ratios);
            Ok(())
        },
    ),
    knob(
        "vm/swappiness",
        "how readily reclaim swaps anonymous memory rather than dropping file pages (0..200; memcgs copy it when created)",
        |m, _| m.vm.swappiness.to_string(),
        |m, _, p, v| {
            m.vm.swappiness = parse_int(p, v, 0, 200)?;
            Ok(())
        },
    ),
    knob(
        "vm/page-cluster",
        "swap readahead: up to 2^N pages around a swap-in fault",
        |m, _| m.vm.swap.page_cluster.to_string(),
        |m, _, p, v| {
            m.vm.swap.page_cluster = parse_int(p, v, 0, 31)? as u32;
            Ok(())
        },
    ),
    knob(
        "swap/vma_ra_enabled",
        "swap readahead by virtual address (else by swap offset; any rotational swap device forces the latter)",
        |m, _| m.vm.swap.vma_ra_enabled.to_string(),
        |m, _, p, v| {
            m.vm.swap.vma_ra_enabled = parse_kernel_bool(p, v)?;
            Ok(())
        },
    ),
    knob(
        "zswap/enabled",
        "compressed swap cache in front of the swap devices (/sys/module/zswap/parameters); any write sets zswap up, which stops large folios swapping in whole",
        |m, _| if m.vm.swap.zswap.enabled { "Y" } else { "N" }.to_string(),
        |m, _, p, v| {
            let on = parse_kernel_bool(p, v)?;
            m.vm.swap.zswap.set_enabled(on);
            Ok(())
        },
    ),
    knob(
        "zswap/max_pool_percent",
        "the compressed pool's limit, in percent of RAM",
        |m, _| m.vm.swap.zswap.max_pool_percent.to_string(),
        |m, _, p, v| {
            m.vm.swap.zswap.max_pool_percent = parse_int(p, v, 0, 100)? as u32;
            Ok(())
        },
    ),
    knob(
        "zswap/accept_threshold_percent",
        "a full pool accepts again below this percent of its limit",
        |m, _| m.vm.swap.zswap.accept_threshold_percent.to_string(),
        |m, _, p, v| {
            m.vm.swap.zswap.accept_threshold_percent = parse_int(p, v, 0, 100)? as u32;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/enabled",
        "top-level THP mode; `inherit` sizes follow it",
        |m, _| sysfs_choice(&THP_ENABLED_CHOICES, m.thp().enabled),
        |m, _, p, v| {
            m.thp_mut().enabled = parse_choice(p, v, &THP_ENABLED_CHOICES)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/defrag",
        "how hard THP/mTHP faults may reclaim and compact",
        |m, _| sysfs_choice(&THP_DEFRAG_CHOICES, m.thp().defrag),
        |m, _, p, v| {
            m.thp_mut().defrag = parse_choice(p, v, &THP_DEFRAG_CHOICES)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/use_zero_page",
        "read faults in THP-enabled VMAs map the huge zero page",
        |m, _| bit(m.thp().use_zero_page),
        |m, _, p, v| {
            m.thp_mut().use_zero_page = parse_bool(p, v)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/shrink_underused",
        "queue new PMD THPs so the shrinker can split underused ones",
        |m, _| bit(m.thp().shrink_underused),
        |m, _, p, v| {
            m.thp_mut().shrink_underused = parse_bool(p, v)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/max_ptes_none",
        "empty or zero entries a range may hold for khugepaged to collapse it; zero-filled pages a THP may hold before the shrinker splits it",
        |m, _| m.thp().max_ptes_none.to_string(),
        |m, _, p, v| {
            let max = (1u64 << m.geometry().pmd_order) - 1;
            m.thp_mut().max_ptes_none = parse_int(p, v, 0, max)? as u32;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/scan_sleep_millisecs",
        "khugepaged's pause between scans, ms",
        |m, _| m.thp().khugepaged.scan_sleep_ms.to_string(),
        |m, _, p, v| {
            m.thp_mut().khugepaged.scan_sleep_ms = parse_int(p, v, 0, u32::MAX as u64)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
        "khugepaged's pause after a failed THP allocation, ms",
        |m, _| m.thp().khugepaged.alloc_sleep_ms.to_string(),
        |m, _, p, v| {
            m.thp_mut().khugepaged.alloc_sleep_ms = parse_int(p, v, 0, u32::MAX as u64)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/pages_to_scan",
        "pages khugepaged scans per wake (a PMD range counts its pages)",
        |m, _| m.thp().khugepaged.pages_to_scan.to_string(),
        |m, _, p, v| {
            m.thp_mut().khugepaged.pages_to_scan = parse_int(p, v, 1, u32::MAX as u64)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/max_ptes_swap",
        "swap entries a range may hold and still be collapsed by khugepaged",
        |m, _| m.thp().khugepaged.max_ptes_swap.to_string(),
        |m, _, p, v| {
            let max = (1u64 << m.geometry().pmd_order) - 1;
            m.thp_mut().khugepaged.max_ptes_swap = parse_int(p, v, 0, max)? as u32;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/max_ptes_shared",
        "pages mapped by other processes a range may hold and still be collapsed",
        |m, _| m.thp().khugepaged.max_ptes_shared.to_string(),
        |m, _, p, v| {
            let max = (1u64 << m.geometry().pmd_order) - 1;
            m.thp_mut().khugepaged.max_ptes_shared = parse_int(p, v, 0, max)? as u32;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/khugepaged/defrag",
        "khugepaged's THP allocations may reclaim and compact",
        |m, _| bit(m.thp().khugepaged.defrag),
        |m, _, p, v| {
            m.thp_mut().khugepaged.defrag = parse_bool(p, v)?;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/anon_beside_full",
        "host kernel build: use an mTHP order only beside a full block of that size",
        |m, _| bit(m.thp().anon_beside_full),
        |m, _, p, v| {
            m.thp_mut().anon_beside_full = parse_bool(p, v)?;
            Ok(())
        },
    ),
    knob(
        "largo/memcg_thp_charge_batch",
        "host kernel build: memcg charges without reclaim bits (mTHP faults) try the 64-page batch first (1, the 6.18.44-fc-v769 build) or charge exactly their pages (0, 6.18's source; not a kernel knob)",
        |m, _| bit(m.thp().memcg_thp_charge_batch),
        |m, _, p, v| {
            m.thp_mut().memcg_thp_charge_batch = parse_bool(p, v)?;
            Ok(())
        },
    ),
    knob(
        "largo/thp_policy",
        "order policy of anonymous write faults: static (the kernel), adaptive[:grow=N,small=PAGES], ingens[:util=PERCENT] (not a kernel knob)",
        |m, _| m.thp().policy.spec(),
        |m, _, p, v| {
            m.thp_mut().policy = crate::vm::policy::ThpPolicy::parse(v).map_err(|e| KnobError::BadValue {
                path: p.into(),
                value: v.into(),
                expected: e.to_string(),
            })?;
            Ok(())
        },
    ),
    knob(
        "page_reporting/page_reporting_order",
        "smallest free block order reported to the host (-1: the device's order once one registers)",
        |m, _| m.reporting().order_param.map_or("-1".to_string(), |o| o.to_string()),
        |m, _, p, v| {
            let max_order = m.geometry().max_page_order as u64;
            m.page_alloc_mut().reporting_mut().order_param = Some(parse_int(p, v, 0, max_order)? as u32);
            Ok(())
        },
    ),
    knob(
        "page_reporting/trigger",
        "largo: mainline (any free at the order) or seed (32 unreported blocks of an order)",
        |m, _| sysfs_choice(&TRIGGER_CHOICES, m.reporting().trigger),
        |m, _, p, v| {
            m.page_alloc_mut().reporting_mut().trigger = parse_choice(p, v, &TRIGGER_CHOICES)?;
            Ok(())
        },
    ),
    knob(
        "page_reporting/retain_kbytes",
        "largo: free memory reporting leaves unreported for reuse (0: off; not in Linux)",
        |m, _| (m.reporting().retain_pages * (m.geometry().page_size() >> 10)).to_string(),
        |m, _, p, v| {
            let page_kib = m.geometry().page_size() >> 10;
            m.page_alloc_mut().reporting_mut().retain_pages = parse_int(p, v, 0, u64::MAX >> 12)? / page_kib;
            Ok(())
        },
    ),
    knob(
        "transparent_hugepage/shmem_enabled",
        "shmem THP policy of the internal mount (memfd, shared anonymous memory); `inherit` shmem sizes follow it",
        |m, _| sysfs_choice(&SHMEM_ENABLED_CHOICES, m.thp().shmem.enabled),
        |m, _, p, v| {
            let huge = parse_choice(p, v, &SHMEM_ENABLED_CHOICES)?;
            // shmem_parse_huge: `force` may not override non-PMD inherit sizes.
            let pmd = 1u64 << m.geometry().pmd_order;
            if huge == ShmemEnabled::Force && m.thp().shmem.orders(ShmemSizeEnabled::Inherit) != pmd {
                return Err(KnobError::BadValue {
                    path: p.into(),
                    value: v.into(),
                    expected: "a value other than force while a non-PMD size is inherit".into(),
                });
            }
            m.thp_mut().shmem.enabled = huge;
            Ok(())
        },
    ),
    KnobDef {
        path: KnobPath::PerShmemSize,
        help: "anonymous shmem mTHP size mode",
        get: |m, order| sysfs_choice(&SHMEM_SIZE_CHOICES, m.thp().shmem.per_size()[&order]),
        set: |m, order, p, v| {
            let mode = parse_choice(p, v, &SHMEM_SIZE_CHOICES)?;
            // thpsize_shmem_enabled_store: only the PMD size may inherit `force`.
            let forced = m.thp().shmem.enabled == ShmemEnabled::Force;
            if mode == ShmemSizeEnabled::Inherit && forced && order != m.geometry().pmd_order {
                return Err(KnobError::BadValue {
                    path: p.into(),
                    value: v.into(),
                    expected: "a value other than inherit while shmem_enabled is force".into(),
                });
            }
            m.thp_mut().shmem.set_size(order, mode);
            Ok(())
        },
    },
    KnobDef {
        path: KnobPath::PerAnonSize,
        help: "anonymous mTHP size mode",
        get: |m, order| sysfs_choice(&THP_SIZE_CHOICES, m.thp().per_size()[&order]),
        set: |m, order, p, v| {
            let mode = parse_choice(p, v, &THP_SIZE_CHOICES)?;
            m.thp_mut().set_size(order, mode);
            Ok(())
        },
    },
];

fn parse_ratios(path: &str, value: &str) -> Result<[u64; MAX_NR_ZONES], KnobError> {
    let bad = || KnobError::BadValue {
        path: path.into(),
        value: value.into(),
        expected: format!("{MAX_NR_ZONES} non-negative integers"),
    };
    let nums: Vec<u64> = value
        .split_whitespace()
        .map(|s| s.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    nums.try_into().map_err(|_| bad())
}

impl Machine {
    /// The order of a `transparent_hugepage/hugepages-<size>kB/enabled`
    /// path of this machine.
    fn thp_size_order(&self, path: &str) -> Option<u32> {
        let dir = path.strip_prefix("transparent_hugepage/")?.strip_suffix("/enabled")?;
        let geo = self.geometry();
        geo.anon_orders().find(|&order| size_dir(geo.page_shift, order) == dir)
    }

    /// The order of a `transparent_hugepage/hugepages-<size>kB/shmem_enabled` path.
    fn shmem_size_order(&self, path: &str) -> Option<u32> {
        let dir = path
            .strip_prefix("transparent_hugepage/")?
            .strip_suffix("/shmem_enabled")?;
        let geo = self.geometry();
        (1..=geo.pmd_order).find(|&order| size_dir(geo.page_shift, order) == dir)
    }

    /// The definition of the knob at `path` (and its order, for a
    /// per-size knob).
    fn knob_def(&self, path: &str) -> Option<(&'static KnobDef, u32)> {
        REGISTRY.iter().find_map(|k| match k.path {
            KnobPath::Fixed(p) => (p == path).then_some((k, 0)),
            KnobPath::PerAnonSize => self.thp_size_order(path).map(|order| (k, order)),
            KnobPath::PerShmemSize => self.shmem_size_order(path).map(|order| (k, order)),
        })
    }

    /// Writes a knob by its kernel path with a value the kernel would
    /// accept, as a sysfs or sysctl write does after boot. Enabling or
    /// disabling PMD THP reruns `set_recommended_min_free_kbytes`.
    pub fn set_knob(&mut self, path: &str, value: &str) -> Result<(), KnobError> {
        let (def, order) = self
            .knob_def(path)
            .ok_or_else(|| KnobError::Unknown { path: path.into() })?;
        (def.set)(self, order, path, value)?;
        let pmd_enabled = self.thp().pmd_enabled();
        self.page_alloc_mut().set_thp_pmd_enabled(pmd_enabled);
        Ok(())
    }

    /// Every knob with its current value, as the kernel would print it.
    pub fn knobs(&self) -> Vec<KnobInfo> {
        let geo = self.geometry();
        REGISTRY
            .iter()
            .flat_map(|k| {
                let instances: Vec<(String, u32)> = match k.path {
                    KnobPath::Fixed(p) => vec![(p.to_string(), 0)],
                    KnobPath::PerAnonSize => self
                        .thp()
                        .per_size()
                        .keys()
                        .map(|&o| {
                            (
                                format!("transparent_hugepage/{}/enabled", size_dir(geo.page_shift, o)),
                                o,
                            )
                        })
                        .collect(),
                    KnobPath::PerShmemSize => self
                        .thp()
                        .shmem
                        .per_size()
                        .keys()
                        .map(|&o| {
                            (
                                format!("transparent_hugepage/{}/shmem_enabled", size_dir(geo.page_shift, o)),
                                o,
                            )
                        })
                        .collect(),
                };
                instances.into_iter().map(move |(path, order)| KnobInfo {
                    value: (k.get)(self, order),
                    path,
                    help: k.help,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Balloon, MachineConfig};
    use largo_types::Preset;

    /// The value a sysfs read shows, as a write takes it back.
    fn written_form(shown: &str) -> String {
        match (shown.find('['), shown.find(']')) {
            (Some(a), Some(b)) => shown[a + 1..b].to_string(),
            _ => shown.to_string(),
        }
    }

    #[test]
    fn every_listed_knob_takes_back_the_value_it_shows() {
        for preset in Preset::ALL {
            let mut m = Machine::new(MachineConfig {
                preset,
                mem_bytes: 256 << 20,
                balloon: Some(Balloon::virtio(preset, 0)),
                ..MachineConfig::default()
            })
            .unwrap();
            let before = m.knobs();
            assert!(before.len() > REGISTRY.len(), "per-size knobs are listed one by one");
            for k in &before {
                // page_reporting_order -1 means unset: it has no written form.
                if k.value == "-1" {
                    continue;
                }
                m.set_knob(&k.path, &written_form(&k.value))
                    .unwrap_or_else(|e| panic!("{}: {e}", k.path));
            }
            let after: Vec<(String, String)> = m.knobs().into_iter().map(|k| (k.path, k.value)).collect();
            let before: Vec<(String, String)> = before.into_iter().map(|k| (k.path, k.value)).collect();
            assert_eq!(after, before, "{preset:?}");
            assert!(matches!(m.set_knob("vm/nonsense", "1"), Err(KnobError::Unknown { .. })));
            assert!(matches!(
                m.set_knob("transparent_hugepage/hugepages-3kB/enabled", "always"),
                Err(KnobError::Unknown { .. })
            ));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// What the knob fuzz target checks: any `KNOB=VALUE` text is
        /// applied or refused, never a panic, and an accepted write keeps
        /// the machine consistent.
        #[test]
        fn any_knob_write_is_applied_or_refused(
            path in proptest::sample::select(REGISTRY.iter().filter_map(|k| match k.path {
                KnobPath::Fixed(p) => Some(p.to_string()),
                KnobPath::PerAnonSize | KnobPath::PerShmemSize => None,
            }).chain(["transparent_hugepage/hugepages-64kB/enabled".to_string(), "vm/x".to_string()]).collect::<Vec<_>>()),
            value in "-?[0-9]{1,12}|always|never|madvise|inherit|defer\\+madvise|seed|\\PC{0,8}",
        ) {
            let mut m = Machine::new(MachineConfig {
                mem_bytes: 64 << 20,
                kernel_reserved_bytes: 1 << 20,
                balloon: Some(Balloon::virtio(Preset::X86_64, 0)),
                ..MachineConfig::default()
            })
            .unwrap();
            if m.set_knob(&path, &value).is_ok() {
                m.check().unwrap();
            }
        }
    }
}
