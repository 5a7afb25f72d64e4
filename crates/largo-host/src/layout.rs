//! The folio layout of a process's anonymous memory, as tools/mm/thpmaps
//! reads it: pages in fully mapped large folios by order, naturally
//! aligned or not, pages of large folios mapped only in part, and
//! PMD-mapped pages. On the host it comes from /proc/self/pagemap (pfns,
//! needs root), /proc/kpageflags (head/tail/anon/THP bits) and
//! /proc/self/smaps (AnonHugePages); on the model from its page tables.
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

    /// One `key value` per line (how a forked child hands it back).
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "anon {}\npmd {}\npartial {}\n",
            self.anon_pages, self.pmd_pages, self.partial_pages
        );
        for (o, n) in &self.aligned {
            s.push_str(&format!("aligned {o} {n}\n"));
        }
        for (o, n) in &self.unaligned {
            s.push_str(&format!("unaligned {o} {n}\n"));
        }
        s
    }

    pub fn from_text(text: &str) -> Result<FolioLayout, String> {
        let mut l = FolioLayout::default();
        for line in text.lines() {
            let t: Vec<&str> = line.split_whitespace().collect();
            let num = |s: &str| s.parse::<u64>().map_err(|_| format!("bad layout line '{line}'"));
            match t.as_slice() {
                ["vmstat", ..] | ["mthp", ..] => {}
                ["anon", n] => l.anon_pages = num(n)?,
                ["pmd", n] => l.pmd_pages = num(n)?,
                ["partial", n] => l.partial_pages = num(n)?,
                ["aligned", o, n] => {
                    l.aligned.insert(num(o)? as u32, num(n)?);
                }
                ["unaligned", o, n] => {
                    l.unaligned.insert(num(o)? as u32, num(n)?);
                }
                _ => return Err(format!("bad layout line '{line}'")),
            }
        }
        Ok(l)
    }
}

fn read_u64s(f: &File, index: u64, n: u64) -> Result<Vec<u64>, String> {
    let mut buf = vec![0u8; (n * 8) as usize];
    f.read_exact_at(&mut buf, index * 8).map_err(|e| e.to_string())?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// AnonHugePages of the VMAs of this process inside `ranges`, in pages.
fn smaps_pmd_pages(ranges: &[(u64, u64)]) -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/self/smaps").map_err(|e| e.to_string())?;
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

/// This process's accessible VMAs inside `[lo, hi)` (/proc/self/maps).
fn vmas_within(lo: u64, hi: u64) -> Result<Vec<(u64, u64)>, String> {
    let text = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
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

/// This process's layout over its VMAs inside `[lo, hi)` (a window),
/// per VMA as thpmaps does.
pub fn host_layout(lo: u64, hi: u64) -> Result<FolioLayout, String> {
    let ranges = vmas_within(lo, hi)?;
    let ranges = ranges.as_slice();
    let pagemap = File::open("/proc/self/pagemap").map_err(|e| format!("/proc/self/pagemap: {e}"))?;
    let kflags = File::open("/proc/kpageflags").map_err(|e| format!("/proc/kpageflags: {e}"))?;
    let flags_of = |pfn: u64| read_u64s(&kflags, pfn, 1).map(|v| v[0]);
    let mut l = FolioLayout::default();
    for &(start, end) in ranges {
        let first = start / PAGE;
        let n = (end - start) / PAGE;
        let entries = read_u64s(&pagemap, first, n)?;
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
    let pmd = smaps_pmd_pages(ranges)?;
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
    flags_of: &dyn Fn(u64) -> Result<u64, String>,
    l: &mut FolioLayout,
) -> Result<(), String> {
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
