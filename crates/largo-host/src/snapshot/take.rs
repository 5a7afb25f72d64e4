//! Taking a snapshot of this host (`largo host snapshot`, root): every
//! pfn of its RAM from /proc/kpageflags and /proc/kpagecount, its zones
//! from /proc/zoneinfo and /proc/pagetypeinfo, RAM ranges from
//! /proc/iomem, its THP, vm and reporting knobs.
//!
//! What each frame is comes from the flags (`fs/proc/page.c`
//! `stable_page_flags`, 6.18): every page of a free buddy block carries
//! `KPF_BUDDY` (`snapshot_page` checks the enclosing free block), so free
//! runs are exact; `KPF_RESERVED`, `KPF_SLAB`, `KPF_PGTABLE`, `KPF_HUGE`,
//! `KPF_OFFLINE` name themselves; anonymous memory has `KPF_ANON`; page
//! cache is on the LRU or mapped (kpagecount is the mapcount). A frame
//! with no flag and no mapping is kernel memory (vmalloc, stacks, pages on
//! the pcp lists) or a struct page deferred init has not reached: a
//! kernel booted with lazy deferred init leaves the top of its Normal
//! zone uninitialised, sections of flagless frames, as many as the zone's
//! present pages exceed its managed and reserved ones. Pfns outside
//! /proc/iomem's System RAM are holes (kpageflags reads 0 for a pfn
//! without an online memmap, PG_reserved for a hole inside one).

use std::fs::File;

use largo_mm::snapshot::{HostSnapshot, PfnKind, SnapshotHeader, SnapshotZone};

use crate::hostshape::{self, HostZone, ShapeError};

const KPF_SLAB: u64 = 1 << 7;
const KPF_LRU: u64 = 1 << 5;
const KPF_BUDDY: u64 = 1 << 10;
const KPF_MMAP: u64 = 1 << 11;
const KPF_ANON: u64 = 1 << 12;
const KPF_HUGE: u64 = 1 << 17;
const KPF_NOPAGE: u64 = 1 << 20;
const KPF_OFFLINE: u64 = 1 << 23;
const KPF_PGTABLE: u64 = 1 << 26;
const KPF_RESERVED: u64 = 1 << 32;

/// Pfns read per system call.
const CHUNK_PFNS: usize = 1 << 16;

#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    #[error("{0}")]
    Shape(#[from] ShapeError),
    #[error("reading {path}: {source} (a snapshot needs root)")]
    Read { path: String, source: std::io::Error },
    #[error("/proc/iomem lists no System RAM with addresses (a snapshot needs root)")]
    NoRam,
}

/// What a frame is, from its flags and mapcount.
pub fn classify(flags: u64, mapcount: u64) -> PfnKind {
    if flags & KPF_NOPAGE != 0 {
        PfnKind::Hole
    } else if flags & KPF_BUDDY != 0 {
        PfnKind::Free
    } else if flags & KPF_OFFLINE != 0 {
        PfnKind::Offline
    } else if flags & KPF_HUGE != 0 {
        PfnKind::Huge
    } else if flags & KPF_RESERVED != 0 {
        PfnKind::Reserved
    } else if flags & KPF_SLAB != 0 {
        PfnKind::Slab
    } else if flags & KPF_PGTABLE != 0 {
        PfnKind::PageTable
    } else if flags & KPF_ANON != 0 {
        PfnKind::Anon
    } else if flags & (KPF_LRU | KPF_MMAP) != 0 || mapcount > 0 {
        PfnKind::File
    } else {
        PfnKind::Kernel
    }
}

/// System RAM ranges of /proc/iomem text, as pfn ranges `[start, end)`.
pub fn parse_iomem_ram(text: &str, page_size: u64) -> Vec<(u64, u64)> {
    text.lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(": System RAM"))
        .filter_map(|l| {
            let (range, _) = l.split_once(" : ")?;
            let (a, b) = range.split_once('-')?;
            let (a, b) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?);
            (b > a).then(|| (a.div_ceil(page_size), (b + 1) / page_size))
        })
        .filter(|&(s, e)| e > s)
        .collect()
}

/// Reads a /proc/kpage* file's little-endian u64 entries into `out`
/// (already allocated and written, so reading allocates no more memory
/// than a chunk); entries past what the kernel returns stay as they are.
fn read_u64s(path: &str, out: &mut [u64], progress: &mut dyn FnMut(u64, u64)) -> Result<(), TakeError> {
    let err = |source| TakeError::Read {
        path: path.into(),
        source,
    };
    let f = File::open(path).map_err(err)?;
    let nr = out.len();
    let mut at = 0;
    while at < nr {
        let want = (nr - at).min(CHUNK_PFNS);
        let chunk = crate::kpage::read_u64s_at(&f, at as u64, want).map_err(err)?;
        out[at..at + chunk.len()].copy_from_slice(&chunk);
        at += chunk.len();
        progress(at as u64, nr as u64);
        if chunk.len() < want {
            break;
        }
    }
    Ok(())
}

/// Flagless sections at the top of each zone become [`PfnKind::Uninit`],
/// from the top down while every frame of a section is flagless, at most
/// as many frames as the zone's present pages exceed its managed and
/// reserved ones (the last section taken may be taken in part): deferred
/// init fills a zone from the bottom, a section at a time.
pub fn mark_uninit(kinds: &mut [u8], flags: &[u64], zones: &[SnapshotZone], pages_per_section: u64) {
    for z in zones {
        let (start, end) = (z.start_pfn, (z.start_pfn + z.spanned_pages).min(kinds.len() as u64));
        let reserved = (start..end)
            .filter(|&p| kinds[p as usize] == PfnKind::Reserved as u8)
            .count() as u64;
        let mut budget = z.present_pages.saturating_sub(z.managed_pages + reserved);
        let mut sec_end = end;
        while budget > 0 && sec_end > start {
            let sec_start = ((sec_end - 1) / pages_per_section * pages_per_section).max(start);
            let range = sec_start as usize..sec_end as usize;
            let flagless = range.clone().all(|p| flags[p] == 0 && kinds[p] != PfnKind::Hole as u8);
            if !flagless {
                break;
            }
            let n = (sec_end - sec_start).min(budget);
            kinds[(sec_end - n) as usize..sec_end as usize].fill(PfnKind::Uninit as u8);
            budget -= n;
            sec_end = sec_start;
        }
    }
}

/// Whole naturally aligned blocks of `pmd_pages` flagless, unmapped
/// frames ([`PfnKind::Kernel`] throughout) become [`PfnKind::PcpFree`],
/// lowest first, as many per zone as its per-cpu lists hold pages for:
/// the pcp THP list keeps freed THPs whole and kpageflags shows them as
/// nothing, yet the next THP allocation takes them. (A flagless kernel
/// allocation of exactly that shape would be taken for one.)
pub fn mark_pcp_thp(kinds: &mut [u8], counts: &[u64], zones: &[SnapshotZone], pmd_pages: u64) {
    let kernel = PfnKind::Kernel as u8;
    for z in zones {
        let mut budget = z.pcp_pages / pmd_pages;
        let start = z.start_pfn.next_multiple_of(pmd_pages);
        let end = (z.start_pfn + z.spanned_pages).min(kinds.len() as u64);
        let mut p = start;
        while budget > 0 && p + pmd_pages <= end {
            let range = p as usize..(p + pmd_pages) as usize;
            if kinds[range.clone()].iter().all(|&k| k == kernel) && counts[range.clone()].iter().all(|&c| c == 0) {
                kinds[range].fill(PfnKind::PcpFree as u8);
                budget -= 1;
            }
            p += pmd_pages;
        }
    }
}

fn snapshot_zone(z: &HostZone) -> SnapshotZone {
    SnapshotZone {
        nid: z.nid,
        name: z.name.clone(),
        start_pfn: z.start_pfn,
        spanned_pages: z.spanned_pages,
        present_pages: z.present_pages,
        managed_pages: z.managed_pages,
        free: z.free.iter().map(|f| f.to_vec()).collect(),
        blocks: z.blocks.to_vec(),
        pcp_pages: z.pcp_pages,
    }
}

fn read_text(path: &str) -> Result<String, TakeError> {
    std::fs::read_to_string(path).map_err(|source| TakeError::Read {
        path: path.into(),
        source,
    })
}

/// This host's memory now. `progress(done, total)` follows the reading.
pub fn take(progress: &mut dyn FnMut(u64, u64)) -> Result<HostSnapshot, TakeError> {
    let page_size = largo_physmem::host::host_page_size();
    let ram = parse_iomem_ram(&read_text("/proc/iomem")?, page_size);
    if ram.is_empty() {
        return Err(TakeError::NoRam);
    }
    let nr_pfns = ram.iter().map(|&(_, e)| e).max().unwrap_or(0);
    // Flags first, then mapcounts: the two passes see nearly the same
    // moment (a second or two apart on 24 GiB).
    let mut flags_progress = |d: u64, t: u64| progress(d, 2 * t);
    // Every buffer is allocated and touched before the first read: this
    // process's own page faults must not move the free lists between the
    // kpageflags read and the pagetypeinfo read.
    let mut flags = vec![KPF_NOPAGE; nr_pfns as usize];
    let mut counts = vec![KPF_NOPAGE; nr_pfns as usize];
    let mut kinds = vec![u8::MAX; nr_pfns as usize];
    kinds.fill(PfnKind::Hole as u8);
    read_u64s("/proc/kpageflags", &mut flags, &mut flags_progress)?;
    let mut count_progress = |d: u64, t: u64| progress(t + d, 2 * t);
    read_u64s("/proc/kpagecount", &mut counts, &mut count_progress)?;
    let host_zones = hostshape::host_zones()?;
    let zones: Vec<SnapshotZone> = host_zones
        .iter()
        .filter(|z| z.spanned_pages > 0)
        .map(snapshot_zone)
        .collect();
    for &(s, e) in &ram {
        for p in s as usize..e as usize {
            kinds[p] = classify(flags[p], counts[p]) as u8;
        }
    }
    let pages_per_section = (128u64 << 20) / page_size;
    mark_uninit(&mut kinds, &flags, &zones, pages_per_section);
    // A PMD maps one page-table page of 8-byte entries: PTRS_PER_PTE pages.
    mark_pcp_thp(&mut kinds, &counts, &zones, page_size / 8);
    let pageblock_order = pageblock_order(&read_text("/proc/pagetypeinfo")?).unwrap_or(9);
    let inferred = super::infer::infer_migratetypes(&kinds, &zones, pageblock_order);
    let mut knobs = hostshape::host_thp_knobs();
    knobs.push((
        "vm/min_free_kbytes".into(),
        read_text("/proc/sys/vm/min_free_kbytes")?.trim().to_string(),
    ));
    let reporting_order = hostshape::host_reporting_order();
    if let Some(order) = reporting_order {
        knobs.push(("page_reporting/page_reporting_order".into(), order.to_string()));
    }
    Ok(HostSnapshot {
        header: SnapshotHeader {
            taken_at: crate::hostid::now_rfc3339(),
            host: crate::hostid::describe_host(),
            page_size,
            pageblock_order,
            nr_pfns,
            zones,
            knobs,
            reporting_order,
            migratetype_method: super::infer::METHOD.into(),
            migratetype_misplaced_pages: inferred.misplaced_pages,
        },
        kinds,
        pageblock_mt: inferred.pageblock_mt,
    })
}

/// `Page block order: 9` of /proc/pagetypeinfo.
fn pageblock_order(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Page block order:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_classified_by_their_flags() {
        assert_eq!(classify(KPF_BUDDY, 0), PfnKind::Free);
        assert_eq!(classify(KPF_ANON | KPF_LRU | KPF_MMAP, 1), PfnKind::Anon);
        assert_eq!(classify(KPF_LRU, 0), PfnKind::File);
        assert_eq!(classify(0, 2), PfnKind::File);
        assert_eq!(classify(KPF_SLAB, 0), PfnKind::Slab);
        assert_eq!(classify(KPF_PGTABLE, 0), PfnKind::PageTable);
        assert_eq!(classify(KPF_RESERVED | KPF_SLAB, 0), PfnKind::Reserved);
        assert_eq!(classify(0, 0), PfnKind::Kernel);
        assert_eq!(classify(KPF_NOPAGE, 0), PfnKind::Hole);
    }

    #[test]
    fn iomem_ram_ranges_become_pfns() {
        let text = "00000000-00000fff : Reserved\n00001000-0009fbff : System RAM\n00100000-bfffffff : System RAM\n  01000000-01ffffff : Kernel code\n100000000-63fffffff : System RAM\n";
        assert_eq!(
            parse_iomem_ram(text, 4096),
            vec![(1, 159), (256, 786432), (1048576, 6553600)]
        );
    }

    /// A 32-frame Normal zone.
    fn zone32(managed_pages: u64, pcp_pages: u64) -> SnapshotZone {
        SnapshotZone {
            nid: 0,
            name: "Normal".into(),
            start_pfn: 0,
            spanned_pages: 32,
            present_pages: 32,
            managed_pages,
            free: Vec::new(),
            blocks: Vec::new(),
            pcp_pages,
        }
    }

    #[test]
    fn whole_flagless_unmapped_thp_blocks_are_pcp_free_up_to_the_pcp_count() {
        let zone = zone32(32, 9);
        // Four 8-frame "THP" blocks: the first holds an anon frame, the
        // second a mapped frame, the last two are candidates; the pcp
        // count (9 pages) allows one.
        let mut kinds = vec![PfnKind::Kernel as u8; 32];
        kinds[3] = PfnKind::Anon as u8;
        let mut counts = vec![0u64; 32];
        counts[12] = 1;
        mark_pcp_thp(&mut kinds, &counts, &[zone], 8);
        let pcp: Vec<usize> = (0..32).filter(|&p| kinds[p] == PfnKind::PcpFree as u8).collect();
        assert_eq!(pcp, (16..24).collect::<Vec<_>>());
    }

    #[test]
    fn only_whole_flagless_sections_within_the_budget_are_uninitialised() {
        let zone = zone32(20, 0);
        let mut kinds = vec![PfnKind::Kernel as u8; 32];
        let mut flags = vec![0u64; 32];
        flags[5] = KPF_LRU;
        kinds[5] = PfnKind::File as u8;
        mark_uninit(&mut kinds, &flags, &[zone], 8);
        let uninit = kinds.iter().filter(|&&k| k == PfnKind::Uninit as u8).count();
        assert_eq!(uninit, 12, "present - managed");
        assert!(kinds[20..].iter().all(|&k| k == PfnKind::Uninit as u8));
        assert_eq!(kinds[19], PfnKind::Kernel as u8);
    }
}
