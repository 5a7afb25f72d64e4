//! A breakdown of mapped anonymous memory by folio size, as
//! tools/mm/thpmaps reports it: PMD-mapped THPs; large folios mapped
//! entirely by consecutive PTEs of one VMA, naturally aligned in the
//! address space or not; and pages of large folios mapped only in part
//! (`partial`). Order-0 pages are in the total only.

use std::collections::HashMap;

use super::pgtable::Pte;
use super::Vm;
use crate::page_alloc::PageAlloc;

/// Pages of anonymous memory by how they are mapped, summed over VMAs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThpMaps {
    /// Pages mapped anonymously (`Anonymous` of smaps).
    pub anon_pages: u64,
    /// Pages of PMD-mapped THPs (`anon-thp-pmd-aligned-<PMD size>kB`).
    pub pmd_pages: u64,
    /// By order: pages of fully PTE-mapped folios whose start address is
    /// a multiple of their size (`anon-thp-pte-aligned-<size>kB`).
    pub pte_aligned: Vec<u64>,
    /// The same, not aligned (`anon-thp-pte-unaligned-<size>kB`).
    pub pte_unaligned: Vec<u64>,
    /// Pages of large folios mapped only in part in a VMA (`anon-thp-pte-partial`).
    pub partial_pages: u64,
}

/// A large folio's pages seen in one VMA.
struct Seen {
    first_addr: u64,
    first_page: u64,
    pages: u64,
    /// Every page at the address of its offset from the first one.
    contiguous: bool,
}

impl Vm {
    /// The breakdown over every VMA of every address space.
    pub fn thpmaps(&self, pa: &PageAlloc) -> ThpMaps {
        let pmd_order = self.pmd_order() as usize;
        let mut out = ThpMaps {
            pte_aligned: vec![0; pmd_order + 1],
            pte_unaligned: vec![0; pmd_order + 1],
            ..ThpMaps::default()
        };
        for (_, vma) in self.vmas.iter() {
            if !vma.is_anonymous() {
                continue;
            }
            let root = self.mms[vma.mm].pgd;
            let mut seen: HashMap<usize, Seen> = HashMap::new();
            let mut addr = vma.start;
            while addr < vma.end {
                let Some((table, index, level)) = self.pt.leaf(root, addr) else {
                    addr = self.next_table_boundary(addr, 0);
                    continue;
                };
                let e: Pte = self.pt.get(table, index);
                if level == 1 {
                    if e.present() && !e.is_special() {
                        let nr = 1u64 << pmd_order;
                        out.anon_pages += nr;
                        out.pmd_pages += nr;
                    }
                    addr = self.next_table_boundary(addr, 0);
                    continue;
                }
                if e.present() && !e.is_special() {
                    out.anon_pages += 1;
                    if let Some(key) = self.folio_key_of_pfn(pa, e.pfn()) {
                        let meta = &self.folios[key];
                        if meta.is_large() {
                            let page = e.pfn() - meta.pfn;
                            let s = seen.entry(key).or_insert(Seen {
                                first_addr: addr,
                                first_page: page,
                                pages: 0,
                                contiguous: true,
                            });
                            let expect = s.first_addr + ((page.wrapping_sub(s.first_page)) << self.page_shift());
                            s.contiguous &= page >= s.first_page && expect == addr;
                            s.pages += 1;
                        }
                    }
                }
                addr += self.page_size();
            }
            for (key, s) in seen {
                let meta = &self.folios[key];
                let nr = meta.nr_pages();
                if s.pages == nr && s.contiguous && s.first_page == 0 {
                    let aligned = s.first_addr & ((nr << self.page_shift()) - 1) == 0;
                    let bucket = if aligned {
                        &mut out.pte_aligned
                    } else {
                        &mut out.pte_unaligned
                    };
                    bucket[meta.order as usize] += nr;
                } else {
                    out.partial_pages += s.pages;
                }
            }
        }
        out
    }

    /// The first address past the entry of `level` + 1 covering `addr`
    /// (level 0: the next PMD boundary, past an absent PTE table or a PMD
    /// leaf).
    fn next_table_boundary(&self, addr: u64, level: u32) -> u64 {
        let span = 1u64 << self.pt.shape.level_shift(level + 1);
        (addr & !(span - 1)) + span
    }
}
