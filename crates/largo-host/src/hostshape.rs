//! `--machine host`: a machine configuration shaped like this host right
//! now, from /proc/zoneinfo (managed and present pages per zone),
//! /proc/pagetypeinfo (free blocks per order and migratetype, pageblocks
//! per migratetype), vm.min_free_kbytes and, if the host reports free
//! pages, its reporting order.

use largo_mm::machine::{Balloon, MachineShape};
use largo_mm::page_alloc::shape::ZoneShape;
use largo_mm::MachineConfig;
use largo_types::{MigrateType, ZoneType, MIGRATE_TYPES};

const REPORTING_PARAMS: &str = "/sys/module/page_reporting/parameters";

/// A zone as the host's files describe it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostZone {
    pub nid: usize,
    pub name: String,
    pub start_pfn: u64,
    pub spanned_pages: u64,
    pub present_pages: u64,
    pub managed_pages: u64,
    pub free: Vec<[u64; MIGRATE_TYPES]>,
    pub blocks: [u64; MIGRATE_TYPES],
    /// Pages on the per-cpu lists, every cpu (`count:` of the pagesets).
    pub pcp_pages: u64,
}

/// What a line of /proc/zoneinfo or /proc/pagetypeinfo failed to say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("cannot read {0}: {1}")]
    Read(String, String),
    #[error("{file} line {line}: {reason}")]
    Parse { file: String, line: usize, reason: String },
}

/// The type a shaped model gives a host's pageblocks: a CMA host's CMA
/// blocks count as Movable (the model has no CMA area to put them in;
/// like CMA, they hold only movable pages).
fn shaped_type(mt: MigrateType) -> MigrateType {
    if mt == MigrateType::Cma {
        MigrateType::Movable
    } else {
        mt
    }
}

fn zone_type(name: &str) -> Option<ZoneType> {
    ZoneType::ALL.into_iter().find(|z| z.name() == name)
}

/// `Node 0, zone   Normal` -> (0, "Normal").
fn node_zone(text: &str) -> Option<(usize, String)> {
    let rest = text.trim().strip_prefix("Node")?;
    let (nid, rest) = rest.split_once(',')?;
    let zone = rest.trim().strip_prefix("zone")?.trim();
    let zone = zone.split(|c: char| c == ',' || c.is_whitespace()).next()?;
    Some((nid.trim().parse().ok()?, zone.to_string()))
}

/// Span, present, managed and per-cpu pages of every zone in
/// /proc/zoneinfo text.
pub fn parse_zoneinfo(text: &str) -> Vec<HostZone> {
    let mut zones: Vec<HostZone> = Vec::new();
    for line in text.lines() {
        if line.starts_with("Node") {
            if let Some((nid, name)) = node_zone(line) {
                zones.push(HostZone {
                    nid,
                    name,
                    ..HostZone::default()
                });
            }
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(key), Some(value), None) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let (Some(z), Ok(v)) = (zones.last_mut(), value.parse::<u64>()) else {
            continue;
        };
        match key {
            "start_pfn:" => z.start_pfn = v,
            "spanned" => z.spanned_pages = v,
            "present" => z.present_pages = v,
            "managed" => z.managed_pages = v,
            "count:" => z.pcp_pages += v,
            _ => {}
        }
    }
    zones
}

/// Adds /proc/pagetypeinfo's free counts and pageblock counts to `zones`.
pub fn parse_pagetypeinfo(text: &str, zones: &mut [HostZone]) -> Result<(), ShapeError> {
    let err = |line: usize, reason: String| ShapeError::Parse {
        file: "/proc/pagetypeinfo".into(),
        line: line + 1,
        reason,
    };
    let mut block_types: Vec<MigrateType> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("Number of blocks type") {
            block_types = rest
                .split_whitespace()
                .map(|n| MigrateType::ALL.into_iter().find(|m| m.name() == n))
                .collect::<Option<_>>()
                .ok_or_else(|| err(i, format!("unknown migratetype in '{rest}'")))?;
            continue;
        }
        if !line.starts_with("Node") {
            continue;
        }
        let Some((nid, name)) = node_zone(line) else { continue };
        let Some(z) = zones.iter_mut().find(|z| z.nid == nid && z.name == name) else {
            continue;
        };
        if let Some((_, rest)) = line.split_once(", type") {
            let mut words = rest.split_whitespace();
            let mt_name = words.next().unwrap_or("");
            let Some(mt) = MigrateType::ALL
                .into_iter()
                .find(|m| m.name() == mt_name)
                .map(shaped_type)
            else {
                continue;
            };
            for (order, w) in words.enumerate() {
                let n: u64 = w
                    .trim_start_matches('>')
                    .parse()
                    .map_err(|_| err(i, format!("'{w}' is not a count")))?;
                if z.free.len() <= order {
                    z.free.resize(order + 1, [0; MIGRATE_TYPES]);
                }
                z.free[order][mt.index()] += n;
            }
        } else {
            let counts: Vec<&str> = line.split_whitespace().skip(4).collect();
            for (&mt, w) in block_types.iter().zip(counts) {
                z.blocks[shaped_type(mt).index()] +=
                    w.parse::<u64>().map_err(|_| err(i, format!("'{w}' is not a count")))?;
            }
        }
    }
    Ok(())
}

fn read(path: &str) -> Result<String, ShapeError> {
    std::fs::read_to_string(path).map_err(|e| ShapeError::Read(path.into(), e.to_string()))
}

/// The host's zones now.
pub fn host_zones() -> Result<Vec<HostZone>, ShapeError> {
    let mut zones = parse_zoneinfo(&read("/proc/zoneinfo")?);
    parse_pagetypeinfo(&read("/proc/pagetypeinfo")?, &mut zones)?;
    Ok(zones)
}

/// Whether this host reports free pages, and from which order.
pub fn host_reporting_order() -> Option<u32> {
    let text = std::fs::read_to_string(format!("{REPORTING_PARAMS}/page_reporting_order")).ok()?;
    text.trim().parse::<i64>().ok().and_then(|o| u32::try_from(o).ok())
}

/// The machine configuration of this host: x86_64 with the host's memory
/// (its zones' present pages, rounded up to a GiB), its min_free_kbytes,
/// its THP settings ([`host_thp_knobs`]), a reporting device at its
/// reporting order if it has one, and its zones shaped as they are now
/// (free blocks at the reporting order counted as reported: an idle host
/// has reported them).
pub fn host_config() -> Result<MachineConfig, ShapeError> {
    let mut c = config_from(
        host_zones()?,
        host_reporting_order(),
        read("/proc/sys/vm/min_free_kbytes")?.trim(),
    )?;
    c.knobs.extend(host_thp_knobs());
    c.page_cache_bytes = host_page_cache_bytes();
    Ok(c)
}

/// The host's resident file pages now (`Active(file)` + `Inactive(file)`
/// of /proc/meminfo), bytes; 0 if unreadable.
pub fn host_page_cache_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo_bytes(&text, "Active(file):") + meminfo_bytes(&text, "Inactive(file):")
}

/// Bytes of a /proc/meminfo line (`MemFree:` ...), 0 if absent.
pub fn meminfo_bytes(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        * 1024
}

/// The host's THP settings as knob writes for the model: the value of
/// every `transparent_hugepage/` knob the model has that the host has
/// too (top level, defrag, the zero page, every size, khugepaged).
pub fn host_thp_knobs() -> Vec<(String, String)> {
    let probe = MachineConfig {
        mem_bytes: 1 << 30,
        ..MachineConfig::default()
    };
    let Ok(m) = largo_mm::Machine::new(probe) else {
        return Vec::new();
    };
    m.knobs()
        .into_iter()
        .filter(|k| k.path.starts_with("transparent_hugepage/"))
        .filter_map(|k| crate::knobs::read_knob(&k.path).ok().map(|v| (k.path, v)))
        .collect()
}

/// [`host_config`] from already-read facts.
pub fn config_from(
    zones: Vec<HostZone>,
    reporting_order: Option<u32>,
    min_free_kbytes: &str,
) -> Result<MachineConfig, ShapeError> {
    let present: u64 = zones.iter().map(|z| z.present_pages).sum();
    let mem_bytes = (present * 4096).div_ceil(1 << 30) << 30;
    let shape_zones = zones
        .iter()
        .filter(|z| z.managed_pages > 0)
        .filter_map(|z| {
            Some(ZoneShape {
                nid: z.nid,
                zone_type: zone_type(&z.name)?,
                managed_pages: z.managed_pages,
                free: z.free.clone(),
                blocks: z.blocks,
            })
        })
        .collect();
    let mut knobs = vec![("vm/min_free_kbytes".to_string(), min_free_kbytes.to_string())];
    if let Some(order) = reporting_order {
        knobs.push(("page_reporting/page_reporting_order".into(), order.to_string()));
    }
    // The kernel image and its early allocations are what DMA32 holds
    // back (the vmemmap lies in the zone above it); this kernel build's,
    // not the default's.
    let kernel_reserved_bytes = zones
        .iter()
        .find(|z| z.nid == 0 && z.name == "DMA32" && z.managed_pages > 0)
        .map(|z| z.present_pages.saturating_sub(z.managed_pages) * 4096)
        .filter(|&b| b > 0)
        .unwrap_or(largo_mm::layout::DEFAULT_KERNEL_RESERVED_BYTES);
    Ok(MachineConfig {
        mem_bytes,
        kernel_reserved_bytes,
        nr_nodes: zones.iter().map(|z| z.nid + 1).max().unwrap_or(1),
        nr_cpus: std::thread::available_parallelism().map_or(2, |n| n.get()),
        knobs,
        balloon: reporting_order.map(|_| Balloon {
            order: 0,
            ack_latency_ns: 0,
        }),
        shape: Some(MachineShape {
            zones: shape_zones,
            reported_from_order: reporting_order,
        }),
        ..MachineConfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONEINFO: &str = "Node 0, zone      DMA\n  pages free     3840\n        min      7\n        spanned  4095\n        present  3998\n        managed  3840\nNode 0, zone   Normal\n  pages free     1181936\n        present  5505024\n        managed  1802240\n      nr_free_pages 1181936\n";
    const PAGETYPEINFO: &str = "Page block order: 9\nPages per block:  512\n\nFree pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \nNode    0, zone   Normal, type    Unmovable     51    257    610    407    259    181    130     99     48      0      0 \nNode    0, zone   Normal, type      Movable  15117  11741   6118   2383    482    127     85     36     14      4    982 \n\nNumber of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \nNode 0, zone   Normal          134         3320           66            0            0 \n";

    #[test]
    fn parses_the_hosts_files() {
        let mut zones = parse_zoneinfo(ZONEINFO);
        assert_eq!(zones.len(), 2);
        assert_eq!((zones[1].present_pages, zones[1].managed_pages), (5505024, 1802240));
        parse_pagetypeinfo(PAGETYPEINFO, &mut zones).unwrap();
        let n = &zones[1];
        assert_eq!(n.free[10][MigrateType::Movable.index()], 982);
        assert_eq!(n.free[0][MigrateType::Unmovable.index()], 51);
        assert_eq!(n.blocks[MigrateType::Movable.index()], 3320);
        let c = config_from(zones, Some(9), "19856").unwrap();
        assert_eq!(c.mem_bytes, 22 << 30, "present pages rounded up to a GiB");
        assert!(c.balloon.is_some());
        assert_eq!(c.shape.unwrap().zones.len(), 2);
    }

    #[test]
    fn a_bad_count_names_the_line() {
        let mut zones = parse_zoneinfo(ZONEINFO);
        let bad = PAGETYPEINFO.replace("15117", "x5117");
        let e = parse_pagetypeinfo(&bad, &mut zones).unwrap_err();
        assert!(e.to_string().contains("line 6"), "{e}");
    }
}
