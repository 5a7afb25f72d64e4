//! The folio layout of a process's anonymous memory, as tools/mm/thpmaps
//! reads it: pages in fully mapped large folios by order, naturally
//! aligned or not, pages of large folios mapped only in part, and
//! PMD-mapped pages. On the host it comes from /proc/PID/pagemap (pfns,
//! needs root) of a stopped child, /proc/kpageflags (head/tail/anon/THP
//! bits) and /proc/PID/smaps (AnonHugePages); on the model from its page
//! tables.
//! Other processes cannot disturb it, unlike the global counters.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use largo_mm::vm::ThpMaps;
use serde::Serialize;

/// Pages by how they are mapped (4 KiB pages on the host).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FolioLayout {
    /// Present anonymous pages (the zero page excluded).
    pub anon_pages: u64,
    /// Pages of PMD-mapped THPs.
    pub pmd_pages: u64,
    /// Order -> pages of fully PTE-mapped, naturally aligned folios.
    pub aligned: BTreeMap<u32, u64>,
    /// Order -> pages of fully PTE-mapped folios not aligned in the address space.
    pub unaligned: BTreeMap<u32, u64>,
    /// Pages of large folios mapped only in part.
    pub partial_pages: u64,
}

const PM_PRESENT: u64 = 1 << 63;
const PM_PFN_MASK: u64 = (1 << 55) - 1;
const KPF_ANON: u64 = 1 << 12;
const KPF_COMPOUND_HEAD: u64 = 1 << 15;
const KPF_COMPOUND_TAIL: u64 = 1 << 16;
const KPF_ZERO_PAGE: u64 = 1 << 24;
const PAGE: u64 = 4096;

impl FolioLayout {
    /// The model's layout (its thpmaps breakdown).
    pub fn from_model(t: &ThpMaps) -> FolioLayout {
        let by_order = |v: &[u64]| -> BTreeMap<u32, u64> {
            v.iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(o, &n)| (o as u32, n))
                .collect()
        };
        FolioLayout {
            anon_pages: t.anon_pages,
            pmd_pages: t.pmd_pages,
            aligned: by_order(&t.pte_aligned),
            unaligned: by_order(&t.pte_unaligned),
            partial_pages: t.partial_pages,
        }
    }
}

/// Why a layout could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("{path}: {source} (reading another process's pagemap needs root)")]
    Read { path: String, source: std::io::Error },
}

fn read_err(path: &str) -> impl FnOnce(std::io::Error) -> LayoutError + '_ {
    move |source| LayoutError::Read {
        path: path.to_string(),
        source,
    }
}

fn read_u64s(f: &File, path: &str, index: u64, n: u64) -> Result<Vec<u64>, LayoutError> {
    let mut buf = vec![0u8; (n * 8) as usize];
    f.read_exact_at(&mut buf, index * 8).map_err(read_err(path))?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// AnonHugePages of the VMAs of process `pid` inside `ranges`, in pages.
fn smaps_pmd_pages(pid: u32, ranges: &[(u64, u64)]) -> Result<u64, LayoutError> {
    let path = format!("/proc/{pid}/smaps");
    let text = std::fs::read_to_string(&path).map_err(read_err(&path))?;
    let mut inside = false;
    let mut kb = 0;
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((s, e)) = first.split_once('-') {
            if let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) {
                inside = ranges.iter().any(|&(a, b)| s >= a && e <= b);
                continue;
            }
        }
        if inside {
            if let Some(v) = line.strip_prefix("AnonHugePages:") {
                kb += v.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Ok(kb / 4)
}

/// The accessible VMAs of process `pid` inside `[lo, hi)` (/proc/PID/maps).
fn vmas_within(pid: u32, lo: u64, hi: u64) -> Result<Vec<(u64, u64)>, LayoutError> {
    let path = format!("/proc/{pid}/maps");
    let text = std::fs::read_to_string(&path).map_err(read_err(&path))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let mut t = line.split_whitespace();
        let (Some(range), Some(perms)) = (t.next(), t.next()) else {
            continue;
        };
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        if s >= lo && e <= hi && !perms.starts_with("---") {
            out.push((s, e));
        }
    }
    Ok(out)
}

/// The layout of process `pid` (a stopped child) over its VMAs inside
/// `[lo, hi)` (a window), per VMA as thpmaps does.
pub fn host_layout(pid: u32, lo: u64, hi: u64) -> Result<FolioLayout, LayoutError> {
    let ranges = vmas_within(pid, lo, hi)?;
    let ranges = ranges.as_slice();
    let pagemap_path = format!("/proc/{pid}/pagemap");
    let pagemap = File::open(&pagemap_path).map_err(read_err(&pagemap_path))?;
    let kflags_path = "/proc/kpageflags";
    let kflags = File::open(kflags_path).map_err(read_err(kflags_path))?;
    let flags_of = |pfn: u64| read_u64s(&kflags, kflags_path, pfn, 1).map(|v| v[0]);
    let mut l = FolioLayout::default();
    for &(start, end) in ranges {
        let first = start / PAGE;
        let n = (end - start) / PAGE;
        let entries = read_u64s(&pagemap, &pagemap_path, first, n)?;
        // (vfn, pfn, flags) of present anonymous pages.
        let mut pages = Vec::new();
        for (i, &pm) in entries.iter().enumerate() {
            if pm & PM_PRESENT == 0 {
                continue;
            }
            let pfn = pm & PM_PFN_MASK;
            let f = flags_of(pfn)?;
            if f & KPF_ZERO_PAGE != 0 || f & KPF_ANON == 0 {
                continue;
            }
            pages.push((first + i as u64, pfn, f));
        }
        l.anon_pages += pages.len() as u64;
        count_folios(&pages, &flags_of, &mut l)?;
    }
    let pmd = smaps_pmd_pages(pid, ranges)?;
    l.pmd_pages = pmd;
    // Fully mapped PMD-sized folios that are PMD-mapped count there only.
    if let Some(n) = l.aligned.get_mut(&9) {
        *n -= pmd.min(*n);
        if *n == 0 {
            l.aligned.remove(&9);
        }
    }
    Ok(l)
}

/// Splits runs of pages contiguous in both address and pfn into folios:
/// a head followed by its tails is a whole folio when the page after it
/// is not a tail of the same folio; pages of a folio cut by the run's
/// start or end are partial.
fn count_folios(
    pages: &[(u64, u64, u64)],
    flags_of: &dyn Fn(u64) -> Result<u64, LayoutError>,
    l: &mut FolioLayout,
) -> Result<(), LayoutError> {
    let mut i = 0;
    while i < pages.len() {
        let (vfn, pfn, f) = pages[i];
        let large = f & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL) != 0;
        if !large {
            i += 1;
            continue;
        }
        if f & KPF_COMPOUND_TAIL != 0 {
            // Mapped from the middle of a folio.
            l.partial_pages += 1;
            i += 1;
            continue;
        }
        let mut n = 1;
        while i + n < pages.len() {
            let (v2, p2, f2) = pages[i + n];
            if v2 != vfn + n as u64 || p2 != pfn + n as u64 || f2 & KPF_COMPOUND_TAIL == 0 {
                break;
            }
            n += 1;
        }
        let continues = flags_of(pfn + n as u64)? & KPF_COMPOUND_TAIL != 0;
        if continues || !n.is_power_of_two() || n < 4 {
            l.partial_pages += n as u64;
        } else {
            let order = n.trailing_zeros();
            let map = if vfn % n as u64 == 0 {
                &mut l.aligned
            } else {
                &mut l.unaligned
            };
            *map.entry(order).or_default() += n as u64;
        }
        i += n;
    }
    Ok(())
}
