//! The statistics of tools/mm/thpmaps for one VMA, from its present
//! pages' virtual and physical frame numbers and kpageflags: THPs mapped
//! whole and contiguously, aligned or not, per size; pages of THPs mapped
//! partially; and contiguous blocks of a chosen size (`--cont`). The
//! arithmetic follows the tool's `thp_parse` and `cont_parse` exactly
//! (including its quirks: a folio's size is the distance to the next head
//! in the range, rounded down to a power of two).

/// kpageflags bits the tool reads.
pub const KPF_ANON: u64 = 1 << 12;
pub const KPF_COMPOUND_HEAD: u64 = 1 << 15;
pub const KPF_COMPOUND_TAIL: u64 = 1 << 16;
pub const KPF_THP: u64 = 1 << 22;

/// One present page of a VMA that belongs to a THP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThpPage {
    pub vfn: u64,
    pub pfn: u64,
    pub anon: bool,
    pub head: bool,
}

/// The smaps fields the statistics depend on, kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmaSmaps {
    pub rss_kb: u64,
    pub anonymous_kb: u64,
    pub anon_huge_pages_kb: u64,
    pub shmem_pmd_mapped_kb: u64,
    pub file_pmd_mapped_kb: u64,
}

/// A statistic: its label, whether it counts anonymous or file memory
/// (for the percentage), and its value in kB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub label: String,
    pub kind: Option<MemKind>,
    pub kb: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    Anon,
    File,
}

/// The page geometry: base page shift and PMD order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub page_shift: u32,
    pub pmd_order: u32,
}

impl Geometry {
    fn nrkb(&self, nr: u64) -> u64 {
        (nr << self.page_shift) >> 10
    }

    fn kbnr(&self, kb: u64) -> u64 {
        (kb << 10) >> self.page_shift
    }

    fn odkb(&self, order: u32) -> u64 {
        (1u64 << (order + self.page_shift)) >> 10
    }
}

/// A run of pages whose virtual and physical frame numbers both step by
/// one: indexes `[start, end)` into the page array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: usize,
    pub end: usize,
}

/// The tool's `cont_ranges_all([vfns, pfns], ...)`.
pub fn contiguous_ranges(pages: &[ThpPage]) -> Vec<Range> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=pages.len() {
        let breaks = i == pages.len() || pages[i].vfn != pages[i - 1].vfn + 1 || pages[i].pfn != pages[i - 1].pfn + 1;
        if breaks {
            if i > start {
                out.push(Range { start, end: i });
            }
            start = i;
        }
    }
    out
}

fn floor_log2(n: u64) -> u32 {
    63 - n.max(1).leading_zeros()
}

/// Per kind: pages mapped partially, and whole THPs per order, aligned and
/// unaligned (pages).
#[derive(Clone, Debug, Default)]
struct KindStats {
    partial: u64,
    aligned: Vec<u64>,
    unaligned: Vec<u64>,
}

/// `thp_parse`. `flags_of(pfn)` reads kpageflags (the page after a range,
/// to see whether the range ends inside a THP).
pub fn thp_stats(
    pages: &[ThpPage],
    ranges: &[Range],
    smaps: &VmaSmaps,
    geo: Geometry,
    flags_of: &mut dyn FnMut(u64) -> u64,
) -> Vec<Stat> {
    let n = geo.pmd_order as usize + 1;
    let mut st = [KindStats::default(), KindStats::default()];
    for s in st.iter_mut() {
        s.aligned = vec![0; n];
        s.unaligned = vec![0; n];
    }
    let slot = |anon: bool| if anon { 0 } else { 1 };
    for r in ranges {
        let (start, mut end) = (r.start, r.end);
        let pfn_end = pages[end - 1].pfn + 1;
        let mut folios: Vec<usize> = (start..end).filter(|&i| pages[i].head).collect();
        let front = folios.first().copied().unwrap_or(end) - start;
        st[slot(pages[start].anon)].partial += front as u64;
        if let Some(&last) = folios.last() {
            if flags_of(pfn_end) & KPF_COMPOUND_TAIL != 0 {
                let nr = end - last;
                folios.pop();
                end -= nr;
                // The tool reads `anons[index_end - 1]`: at index 0 that is
                // Python's last element.
                let i = end.checked_sub(1).unwrap_or(pages.len() - 1);
                st[slot(pages[i].anon)].partial += nr as u64;
            }
        }
        for (k, &index) in folios.iter().enumerate() {
            let next = folios.get(k + 1).copied().unwrap_or(end);
            let order = floor_log2((next - index) as u64).min(geo.pmd_order);
            let nr = 1u64 << order;
            let vfn = pages[index].vfn;
            let s = &mut st[slot(pages[index].anon)];
            if vfn.is_multiple_of(nr) {
                s.aligned[order as usize] += nr;
            } else {
                s.unaligned[order as usize] += nr;
            }
        }
    }
    let anon_pmd = smaps.anon_huge_pages_kb;
    let file_pmd = smaps.shmem_pmd_mapped_kb + smaps.file_pmd_mapped_kb;
    let pmd = geo.pmd_order as usize;
    st[0].aligned[pmd] = st[0].aligned[pmd].saturating_sub(geo.kbnr(anon_pmd));
    st[1].aligned[pmd] = st[1].aligned[pmd].saturating_sub(geo.kbnr(file_pmd));
    let pmd_kb = geo.odkb(geo.pmd_order);
    let mut out = vec![
        stat(format!("anon-thp-pmd-aligned-{pmd_kb}kB"), MemKind::Anon, anon_pmd),
        stat(format!("file-thp-pmd-aligned-{pmd_kb}kB"), MemKind::File, file_pmd),
    ];
    for (name, kind, s) in [("anon", MemKind::Anon, &st[0]), ("file", MemKind::File, &st[1])] {
        for (sub, v) in [("aligned", &s.aligned), ("unaligned", &s.unaligned)] {
            for order in 2..=geo.pmd_order {
                out.push(stat(
                    format!("{name}-thp-pte-{sub}-{}kB", geo.odkb(order)),
                    kind,
                    geo.nrkb(v[order as usize]),
                ));
            }
        }
        out.push(stat(format!("{name}-thp-pte-partial"), kind, geo.nrkb(s.partial)));
    }
    out
}

fn stat(label: String, kind: MemKind, kb: u64) -> Stat {
    Stat {
        label,
        kind: Some(kind),
        kb,
    }
}

/// `cont_parse` for blocks of `order`.
pub fn cont_stats(pages: &[ThpPage], ranges: &[Range], smaps: &VmaSmaps, geo: Geometry, order: u32) -> Vec<Stat> {
    let nr_cont = 1usize << order;
    let (mut nr_anon, mut nr_file) = (0u64, 0u64);
    for r in ranges {
        let (vfn_start, pfn_start) = (pages[r.start].vfn, pages[r.start].pfn);
        let mask = nr_cont as u64 - 1;
        if pfn_start & mask != vfn_start & mask {
            continue;
        }
        let off = (vfn_start.next_multiple_of(nr_cont as u64) - vfn_start) as usize;
        let mut i = r.start + off;
        while i + nr_cont <= r.end {
            let boundary = (i + 1..i + nr_cont).any(|j| pages[j].head);
            if !boundary {
                if pages[i].anon {
                    nr_anon += nr_cont as u64;
                } else {
                    nr_file += nr_cont as u64;
                }
            }
            i += nr_cont;
        }
    }
    let anon_pmd = smaps.anon_huge_pages_kb;
    let file_pmd = smaps.shmem_pmd_mapped_kb + smaps.file_pmd_mapped_kb;
    nr_anon = nr_anon.saturating_sub(geo.kbnr(anon_pmd));
    nr_file = nr_file.saturating_sub(geo.kbnr(file_pmd));
    let kb = geo.nrkb(nr_cont as u64);
    vec![
        stat(format!("anon-cont-pmd-aligned-{kb}kB"), MemKind::Anon, anon_pmd),
        stat(format!("file-cont-pmd-aligned-{kb}kB"), MemKind::File, file_pmd),
        stat(
            format!("anon-cont-pte-aligned-{kb}kB"),
            MemKind::Anon,
            geo.nrkb(nr_anon),
        ),
        stat(
            format!("file-cont-pte-aligned-{kb}kB"),
            MemKind::File,
            geo.nrkb(nr_file),
        ),
    ]
}

/// The tool's `stats_print` line: `label:` padded to 32, the value in 8
/// columns, ` kB`, and the share of the VMA's anon or file memory.
pub fn format_stat(s: &Stat, tot_anon_kb: u64, tot_file_kb: u64) -> String {
    let pad = 32usize.saturating_sub(s.label.len() + 1);
    // Python's `{:3.0%}`: the width counts the percent sign.
    let share = |tot: u64| format!(" ({:>3})", format!("{:.0}%", s.kb as f64 / tot as f64 * 100.0));
    let percent = match s.kind {
        Some(MemKind::Anon) if tot_anon_kb > 0 => share(tot_anon_kb),
        Some(MemKind::File) if tot_file_kb > 0 => share(tot_file_kb),
        _ => String::new(),
    };
    format!("{}:{}{:8} kB{percent}", s.label, " ".repeat(pad), s.kb)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEO: Geometry = Geometry {
        page_shift: 12,
        pmd_order: 9,
    };

    /// 64 MiB of 64K anonymous folios, virtually and physically
    /// contiguous from an aligned address, with the last `cut` pages
    /// unmapped.
    fn folios_64k(nr_pages: u64, cut: u64) -> Vec<ThpPage> {
        (0..nr_pages - cut)
            .map(|i| ThpPage {
                vfn: 0x10000 + i,
                pfn: 0x80000 + i,
                anon: true,
                head: i % 16 == 0,
            })
            .collect()
    }

    fn value(stats: &[Stat], label: &str) -> u64 {
        stats
            .iter()
            .find(|s| s.label == label)
            .unwrap_or_else(|| panic!("{label}"))
            .kb
    }

    #[test]
    fn whole_aligned_64k_folios_and_a_partial_one_after_a_munmap() {
        let pages = folios_64k(16384, 8);
        let ranges = contiguous_ranges(&pages);
        assert_eq!(ranges.len(), 1);
        let smaps = VmaSmaps {
            rss_kb: (16384 - 8) * 4,
            anonymous_kb: (16384 - 8) * 4,
            ..VmaSmaps::default()
        };
        // The page after the range is a tail of the last (cut) folio.
        let mut flags = |_pfn: u64| KPF_COMPOUND_TAIL | KPF_THP | KPF_ANON;
        let s = thp_stats(&pages, &ranges, &smaps, GEO, &mut flags);
        assert_eq!(value(&s, "anon-thp-pte-aligned-64kB"), 1023 * 64);
        assert_eq!(value(&s, "anon-thp-pte-partial"), 8 * 4);
        assert_eq!(value(&s, "anon-thp-pte-unaligned-64kB"), 0);
        let c = cont_stats(&pages, &ranges, &smaps, GEO, 4);
        assert_eq!(value(&c, "anon-cont-pte-aligned-64kB"), 1023 * 64);
        let c = cont_stats(&pages, &ranges, &smaps, GEO, 5);
        assert_eq!(
            value(&c, "anon-cont-pte-aligned-128kB"),
            0,
            "no 128K block inside one folio"
        );
        assert_eq!(
            format_stat(&s[2], 16376 * 4, 0),
            "anon-thp-pte-aligned-16kB:             0 kB ( 0%)"
        );
        let line = format_stat(
            s.iter().find(|x| x.label == "anon-thp-pte-aligned-64kB").unwrap(),
            16376 * 4,
            0,
        );
        assert_eq!(line, "anon-thp-pte-aligned-64kB:         65472 kB (100%)");
        let half = Stat {
            kb: 32736,
            ..s[0].clone()
        };
        assert!(format_stat(&half, 65472, 0).ends_with(" kB (50%)"));
    }

    #[test]
    fn a_range_starting_mid_folio_counts_its_front_as_partial_and_pmd_maps_are_subtracted() {
        // Pages 4..48 of three 16-page folios, then a 2M folio PMD-mapped.
        let mut pages: Vec<ThpPage> = (4..48)
            .map(|i| ThpPage {
                vfn: 0x200 + i,
                pfn: 0x1000 + i,
                anon: true,
                head: i % 16 == 0,
            })
            .collect();
        pages.extend((0..512).map(|i| ThpPage {
            vfn: 0x400 + i,
            pfn: 0x4000 + i,
            anon: true,
            head: i == 0,
        }));
        let ranges = contiguous_ranges(&pages);
        assert_eq!(ranges.len(), 2);
        let smaps = VmaSmaps {
            anon_huge_pages_kb: 2048,
            ..VmaSmaps::default()
        };
        let mut flags = |_pfn: u64| 0;
        let s = thp_stats(&pages, &ranges, &smaps, GEO, &mut flags);
        assert_eq!(value(&s, "anon-thp-pte-partial"), 12 * 4);
        assert_eq!(value(&s, "anon-thp-pte-aligned-64kB"), 2 * 64);
        assert_eq!(value(&s, "anon-thp-pmd-aligned-2048kB"), 2048);
        assert_eq!(
            value(&s, "anon-thp-pte-aligned-2048kB"),
            0,
            "the PMD mapping is not a PTE one"
        );
    }

    #[test]
    fn a_vma_that_starts_at_a_head_and_ends_inside_its_folio_does_not_panic() {
        // One 16-page folio, of which the VMA maps the first 8 pages.
        let pages: Vec<ThpPage> = (0..8)
            .map(|i| ThpPage {
                vfn: 0x100 + i,
                pfn: 0x800 + i,
                anon: true,
                head: i == 0,
            })
            .collect();
        let ranges = contiguous_ranges(&pages);
        let mut tail = |_pfn: u64| KPF_COMPOUND_TAIL;
        let s = thp_stats(&pages, &ranges, &VmaSmaps::default(), GEO, &mut tail);
        assert_eq!(value(&s, "anon-thp-pte-partial"), 8 * 4);
        assert_eq!(value(&s, "anon-thp-pte-aligned-64kB"), 0);
    }
}
