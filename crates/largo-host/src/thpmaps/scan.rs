//! `largo host thpmaps` (root): the live host's mTHP layout per process
//! and VMA with tools/mm/thpmaps' semantics, without Python: VMAs and
//! their smaps fields from /proc/PID/smaps, present pages from
//! /proc/PID/pagemap, their flags from /proc/kpageflags
//! ([`super::stats`] does the arithmetic).

use std::fs::File;

use super::stats::{
    cont_stats, contiguous_ranges, thp_stats, Geometry, Stat, ThpPage, VmaSmaps, KPF_ANON, KPF_COMPOUND_HEAD, KPF_THP,
};

const PM_PAGE_PRESENT: u64 = 1 << 63;
const PM_PFN_MASK: u64 = (1 << 55) - 1;

/// The smaps fields the tool reads by default (`vma_min_stats`) and all
/// the additive ones (`--inc-smaps`, `vma_all_stats`), in the tool's order.
pub const ALL_SMAPS_FIELDS: [&str; 20] = [
    "Size",
    "Rss",
    "Pss",
    "Pss_Dirty",
    "Shared_Clean",
    "Shared_Dirty",
    "Private_Clean",
    "Private_Dirty",
    "Referenced",
    "Anonymous",
    "KSM",
    "LazyFree",
    "AnonHugePages",
    "ShmemPmdMapped",
    "FilePmdMapped",
    "Shared_Hugetlb",
    "Private_Hugetlb",
    "Swap",
    "SwapPss",
    "Locked",
];

/// A VMA of /proc/PID/smaps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// `rwxp`.
    pub prot: String,
    pub pgoff: u64,
    pub major: u64,
    pub minor: u64,
    /// The inode number as smaps prints it (decimal).
    pub inode: String,
    pub name: String,
    /// Every numeric smaps field of the VMA, kB, in file order.
    pub fields: Vec<(String, u64)>,
}

impl Vma {
    pub fn field(&self, name: &str) -> u64 {
        self.fields.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v)
    }

    pub fn smaps(&self) -> VmaSmaps {
        VmaSmaps {
            rss_kb: self.field("Rss"),
            anonymous_kb: self.field("Anonymous"),
            anon_huge_pages_kb: self.field("AnonHugePages"),
            shmem_pmd_mapped_kb: self.field("ShmemPmdMapped"),
            file_pmd_mapped_kb: self.field("FilePmdMapped"),
        }
    }

    /// The tool's `vma_print` line. The tool parses the decimal inode as
    /// hex and prints it as hex: its digits, zero-padded to 8.
    pub fn header(&self, pid: u32) -> String {
        format!(
            "{pid:010}: {:016x}-{:016x} {} {:08x} {:02x}:{:02x} {:0>8} {}",
            self.start, self.end, self.prot, self.pgoff, self.major, self.minor, self.inode, self.name
        )
    }
}

/// Parses /proc/PID/smaps text. As the tool, a name with spaces in it is
/// left out (the tool keeps the sixth word only when there are six).
pub fn parse_smaps(text: &str) -> Vec<Vma> {
    let mut out: Vec<Vma> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = words.first() else { continue };
        if first.contains('-') && words.len() >= 5 {
            let (Some((s, e)), Some((maj, min))) = (first.split_once('-'), words[3].split_once(':')) else {
                continue;
            };
            let hex = |t: &str| u64::from_str_radix(t, 16).unwrap_or(0);
            out.push(Vma {
                start: hex(s),
                end: hex(e),
                prot: words[1].to_string(),
                pgoff: hex(words[2]),
                major: hex(maj),
                minor: hex(min),
                inode: words[4].to_string(),
                name: if words.len() == 6 {
                    words[5].to_string()
                } else {
                    String::new()
                },
                fields: Vec::new(),
            });
        } else if let (Some(vma), Some(key), Some(v)) = (out.last_mut(), first.strip_suffix(':'), words.get(1)) {
            if let Ok(v) = v.parse::<u64>() {
                vma.fields.push((key.to_string(), v));
            }
        }
    }
    out
}

/// Exactly `nr` entries (the tool fails on a short read).
fn read_u64s(f: &File, index: u64, nr: usize) -> std::io::Result<Vec<u64>> {
    let v = crate::kpage::read_u64s_at(f, index, nr)?;
    if v.len() != nr {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short read"));
    }
    Ok(v)
}

/// The THP pages of a VMA: present pages whose flags have KPF_THP, in
/// address order.
pub fn thp_pages(vma: &Vma, pagemap: &File, kpageflags: &File, page_shift: u32) -> std::io::Result<Vec<ThpPage>> {
    let (start, end) = (vma.start >> page_shift, vma.end >> page_shift);
    let mut out = Vec::new();
    let chunk = 1u64 << 16;
    let mut at = start;
    while at < end {
        let n = chunk.min(end - at) as usize;
        let pmes = read_u64s(pagemap, at, n)?;
        for (i, pme) in pmes.into_iter().enumerate() {
            if pme & PM_PAGE_PRESENT == 0 {
                continue;
            }
            let pfn = pme & PM_PFN_MASK;
            let flags = read_u64s(kpageflags, pfn, 1)?[0];
            if flags & KPF_THP == 0 {
                continue;
            }
            out.push(ThpPage {
                vfn: at + i as u64,
                pfn,
                anon: flags & KPF_ANON != 0,
                head: flags & KPF_COMPOUND_HEAD != 0,
            });
        }
        at += n as u64;
    }
    Ok(out)
}

/// The statistics of one VMA (`vma_parse`): THP stats, then one set per
/// `--cont` order; and its anonymous and file kB for the percentages.
pub fn vma_stats(
    vma: &Vma,
    pagemap: &File,
    kpageflags: &File,
    geo: Geometry,
    cont_orders: &[u32],
) -> std::io::Result<(Vec<Stat>, u64, u64)> {
    let pages = thp_pages(vma, pagemap, kpageflags, geo.page_shift)?;
    let ranges = contiguous_ranges(&pages);
    let smaps = vma.smaps();
    let mut read_error = None;
    let mut flags_of = |pfn: u64| match read_u64s(kpageflags, pfn, 1) {
        Ok(v) => v[0],
        Err(e) => {
            read_error.get_or_insert(e);
            0
        }
    };
    let mut stats = thp_stats(&pages, &ranges, &smaps, geo, &mut flags_of);
    if let Some(e) = read_error {
        return Err(e);
    }
    for &order in cont_orders {
        stats.extend(cont_stats(&pages, &ranges, &smaps, geo, order));
    }
    let tot_anon = smaps.anonymous_kb;
    let tot_file = smaps.rss_kb.saturating_sub(tot_anon);
    Ok((stats, tot_anon, tot_file))
}
