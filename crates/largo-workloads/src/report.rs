//! Counter snapshots of a machine, in the kernel's names: the sections of
//! `largo run --json` (`vmstat`, `mthp`, `meminfo`, `buddyinfo`) plus the
//! lock and work counts the cost model reads.

use std::collections::BTreeMap;

use largo_mm::knobs::size_dir;
use largo_mm::page_alloc::AllocWork;
use largo_mm::stats::names::{meminfo_items, vmstat_items};
use largo_mm::stats::render::{meminfo_kb, vmstat_value};
use largo_mm::vm::pgtable::PtWork;
use largo_mm::vm::stats::{MthpStat, VmWork};
use largo_mm::Machine;
use serde::Serialize;

/// One /proc/buddyinfo line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BuddyinfoLine {
    pub node: usize,
    pub zone: &'static str,
    /// Free blocks per order.
    pub free: Vec<u64>,
}

/// Lock acquisitions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Locks {
    /// `zone->lock`.
    pub zone_lock: u64,
    /// `split_queue_lock` of the deferred split queues.
    pub split_queue_lock: u64,
    /// lruvec `lru_lock` acquisitions, and the folios moved under it.
    pub lru_lock: u64,
    pub lru_folios: u64,
}

impl Locks {
    /// The machine's lock acquisitions now.
    pub fn read(m: &Machine) -> Locks {
        let l = &m.vm().locks;
        Locks {
            zone_lock: m.page_alloc().work.zone_lock,
            split_queue_lock: l.deferred_split,
            lru_lock: l.lru,
            lru_folios: l.lru_folios,
        }
    }
}

/// The work counters of every layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Work {
    pub alloc: AllocWork,
    pub pgtable: PtWork,
    pub vm: VmWork,
    pub reporting: ReportWork,
}

impl Work {
    /// The machine's work counters now.
    pub fn read(m: &Machine) -> Work {
        let s = &m.reporting().stats;
        Work {
            alloc: m.page_alloc().work,
            pgtable: m.vm().pt_work(),
            vm: m.vm().work,
            reporting: ReportWork {
                report_calls: s.report_calls,
                walked: s.walked,
                host_refault_pages: s.host_refault_pages,
            },
        }
    }
}

/// Free page reporting's work (zero without a reporting device).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportWork {
    /// `prdev->report` calls.
    pub report_calls: u64,
    /// Free-list entries the passes walked.
    pub walked: u64,
    /// Pages the host discarded that were allocated again.
    pub host_refault_pages: u64,
}

/// khugepaged's read-only sysfs counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KhugepagedCounts {
    /// PMD ranges khugepaged collapsed.
    pub pages_collapsed: u64,
    /// Passes over every registered mm.
    pub full_scans: u64,
}

/// The `swap` section: /proc/meminfo's swap lines and the swap events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SwapCounts {
    /// `SwapTotal` (kB).
    pub total_kb: u64,
    /// `SwapTotal - SwapFree` (kB).
    pub used_kb: u64,
    /// vmstat `pswpout`, `pswpin`: base pages written and read.
    pub pswpout: u64,
    pub pswpin: u64,
}

/// The `memcg` section: the workload's memory cgroup (cgroup v1 files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemcgCounts {
    /// `memory.limit_in_bytes` (kB).
    pub max_kb: u64,
    /// `memory.usage_in_bytes` and `memory.max_usage_in_bytes` (kB).
    pub usage_kb: u64,
    pub peak_kb: u64,
    /// `memory.kmem.usage_in_bytes` (kB): page tables and accounted slab.
    pub kmem_kb: u64,
    /// `memory.failcnt`: charge attempts over the limit.
    pub failcnt: u64,
    /// `oom_kill` of `memory.oom_control`.
    pub oom_kill: u64,
    /// `memory.stat` `swap` (kB) and events.
    pub swap_kb: u64,
    pub pgpgin: u64,
    pub pgpgout: u64,
    pub pgfault: u64,
    pub pgmajfault: u64,
}

impl MemcgCounts {
    /// The workload memcg's counters, if the machine has one.
    pub fn read(m: &Machine) -> Option<MemcgCounts> {
        let vm = m.vm();
        let id = vm.workload_memcg()?;
        let g = vm.memcg.get(id);
        let kb = m.geometry().page_size() >> 10;
        Some(MemcgCounts {
            max_kb: g.memory.max * kb,
            usage_kb: g.memory.usage * kb,
            peak_kb: g.memory.watermark * kb,
            kmem_kb: g.kmem_pages * kb,
            failcnt: g.memory.failcnt,
            oom_kill: g.oom_kill,
            swap_kb: vm.swap.cgroup_pages(id as u16) * kb,
            pgpgin: g.stat.pgpgin,
            pgpgout: g.stat.pgpgout,
            pgfault: g.stat.pgfault,
            pgmajfault: g.stat.pgmajfault,
        })
    }
}

/// Every counter of a machine at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Counters {
    /// /proc/vmstat, every item.
    pub vmstat: BTreeMap<&'static str, u64>,
    /// Per-size stats by size directory without the `hugepages-` prefix
    /// (`"64kB"`), for every anonymous mTHP size of the geometry.
    pub mthp: BTreeMap<String, BTreeMap<&'static str, i64>>,
    /// /proc/meminfo in kB (counts for the `HugePages_` lines).
    pub meminfo: BTreeMap<&'static str, u64>,
    /// `transparent_hugepage/khugepaged/{pages_collapsed,full_scans}`.
    pub khugepaged: KhugepagedCounts,
    pub swap: SwapCounts,
    /// The workload's memcg (`--memcg-max`), if any.
    pub memcg: Option<MemcgCounts>,
    pub buddyinfo: Vec<BuddyinfoLine>,
    /// Successful allocations by size (`"4kB"`, `"64kB"`, ...), every
    /// order up to MAX_PAGE_ORDER (zeros included: the same keys for every
    /// run of a geometry, so tables of many runs share their columns).
    pub allocs: BTreeMap<String, u64>,
    pub locks: Locks,
    #[serde(skip)]
    pub work: Work,
    /// Base page size of the machine, bytes.
    #[serde(skip)]
    pub page_size: u64,
}

impl Counters {
    pub fn read(m: &Machine) -> Counters {
        let cma = m.page_alloc().cma_configured();
        let vmstat = vmstat_items(cma).into_iter().map(|n| (n, vmstat_value(m, n))).collect();
        let meminfo = meminfo_items(cma).into_iter().map(|n| (n, meminfo_kb(m, n))).collect();
        let geo = m.geometry();
        let mthp = geo
            .anon_orders()
            .map(|order| {
                let dir = size_dir(geo.page_shift, order);
                let key = dir.trim_start_matches("hugepages-").to_string();
                let stats = MthpStat::ALL
                    .iter()
                    .map(|&s| (s.name(), m.vm().mthp.get(order, s)))
                    .collect();
                (key, stats)
            })
            .collect();
        let buddyinfo = m
            .page_alloc()
            .zones()
            .iter()
            .filter(|z| z.populated())
            .map(|z| BuddyinfoLine {
                node: z.nid,
                zone: z.name(),
                free: z.free_area.iter().map(|a| a.nr_free).collect(),
            })
            .collect();
        let allocs = m
            .page_alloc()
            .allocs_by_order
            .iter()
            .enumerate()
            .take(geo.max_page_order as usize + 1)
            .map(|(order, &n)| (format!("{}kB", (geo.page_size() << order) >> 10), n))
            .collect();
        let work = Work::read(m);
        let k = &m.vm().khugepaged;
        let swap = SwapCounts {
            total_kb: meminfo_kb(m, "SwapTotal"),
            used_kb: meminfo_kb(m, "SwapTotal") - meminfo_kb(m, "SwapFree"),
            pswpout: vmstat_value(m, "pswpout"),
            pswpin: vmstat_value(m, "pswpin"),
        };
        Counters {
            vmstat,
            mthp,
            meminfo,
            khugepaged: KhugepagedCounts {
                pages_collapsed: k.pages_collapsed,
                full_scans: k.full_scans,
            },
            swap,
            memcg: MemcgCounts::read(m),
            buddyinfo,
            allocs,
            locks: Locks::read(m),
            work,
            page_size: geo.page_size(),
        }
    }

    /// A vmstat item (0 if unknown).
    pub fn vmstat(&self, name: &str) -> u64 {
        self.vmstat.get(name).copied().unwrap_or(0)
    }

    /// A per-size stat of size `key` (`"64kB"`).
    pub fn mthp(&self, key: &str, stat: &str) -> i64 {
        self.mthp.get(key).and_then(|s| s.get(stat)).copied().unwrap_or(0)
    }

    /// The sum of a per-size stat over every size.
    pub fn mthp_total(&self, stat: &str) -> i64 {
        self.mthp.values().filter_map(|s| s.get(stat)).sum()
    }
}
