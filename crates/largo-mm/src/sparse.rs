//! Memory sections, 2 MiB subsections and memory blocks (mm/sparse.c,
//! drivers/base/memory.c).

use largo_types::Geometry;

use crate::layout::Layout;

/// One memory section (`struct mem_section`).
#[derive(Clone, Debug, Default)]
pub struct MemSection {
    /// Some RAM of the section exists (`SECTION_MARKED_PRESENT`).
    pub present: bool,
    pub nid: usize,
    /// One bit per 2 MiB subsection whose memmap is valid
    /// (`mem_section_usage.subsection_map`).
    pub subsection_map: Vec<u64>,
    /// One bit per 2 MiB subsection whose pages the allocator manages
    /// (the seed's subsection-granular onlining).
    pub online_map: Vec<u64>,
}

impl MemSection {
    /// `SECTION_IS_ONLINE`: some subsection's pages are managed.
    pub fn is_online(&self) -> bool {
        self.online_map.iter().any(|w| *w != 0)
    }
}

/// State of a memory block as sysfs prints it (`/sys/devices/system/memory/memoryN/state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryBlockState {
    Online,
    Offline,
}

impl MemoryBlockState {
    pub fn name(self) -> &'static str {
        match self {
            MemoryBlockState::Online => "online",
            MemoryBlockState::Offline => "offline",
        }
    }
}

/// A hotplug unit (`struct memory_block`): one or more sections in
/// mainline; with the seed's decoupling, as small as one 2 MiB subsection.
#[derive(Clone, Debug)]
pub struct MemoryBlock {
    /// Block number: start pfn / pages per block (`memoryN` in sysfs).
    pub id: u64,
    pub start_pfn: u64,
    pub nr_pages: u64,
    pub nid: usize,
    pub state: MemoryBlockState,
}

/// Sections and memory blocks of the machine.
#[derive(Clone, Debug)]
pub struct Sparse {
    pub sections: Vec<MemSection>,
    pub blocks: Vec<MemoryBlock>,
    pub memory_block_bytes: u64,
    pfn_section_shift: u32,
    pages_per_subsection: u64,
}

impl Sparse {
    /// Marks the sections and subsections boot finds RAM in; all online.
    pub fn build(geo: &Geometry, layout: &Layout) -> Sparse {
        let shift = geo.pfn_section_shift();
        let nr_sections = layout.max_pfn.div_ceil(geo.pages_per_section()) as usize;
        let words = (geo.subsections_per_section() as usize).div_ceil(64);
        let mut sections = vec![MemSection::default(); nr_sections];
        let pages_per_subsection = geo.pages_per_subsection().max(1);
        for node in &layout.nodes {
            for r in &layout.ram {
                let r = r.intersect(crate::layout::PfnRange::new(node.start_pfn, node.end_pfn));
                let mut pfn = r.start;
                while pfn < r.end {
                    let ms = &mut sections[(pfn >> shift) as usize];
                    if ms.subsection_map.is_empty() {
                        ms.subsection_map = vec![0; words];
                        ms.online_map = vec![0; words];
                    }
                    ms.present = true;
                    ms.nid = node.nid;
                    let sub = ((pfn & (geo.pages_per_section() - 1)) / pages_per_subsection) as usize;
                    ms.subsection_map[sub / 64] |= 1 << (sub % 64);
                    ms.online_map[sub / 64] |= 1 << (sub % 64);
                    pfn = (pfn / pages_per_subsection + 1) * pages_per_subsection;
                }
            }
        }
        let block_pages = layout.memory_block_bytes >> geo.page_shift;
        let mut blocks = Vec::new();
        let mut start = 0;
        while start < layout.max_pfn {
            let end = (start + block_pages).min(layout.max_pfn);
            let present = (start..end)
                .step_by(pages_per_subsection as usize)
                .find(|&p| Self::subsection_bit(&sections, shift, pages_per_subsection, p, false));
            if let Some(first) = present {
                blocks.push(MemoryBlock {
                    id: start / block_pages,
                    start_pfn: start,
                    nr_pages: block_pages,
                    nid: sections[(first >> shift) as usize].nid,
                    state: MemoryBlockState::Online,
                });
            }
            start += block_pages;
        }
        Sparse {
            sections,
            blocks,
            memory_block_bytes: layout.memory_block_bytes,
            pfn_section_shift: shift,
            pages_per_subsection,
        }
    }

    /// The subsection bit of `pfn` in the present (`online == false`) or
    /// online map.
    fn subsection_bit(sections: &[MemSection], shift: u32, per_sub: u64, pfn: u64, online: bool) -> bool {
        let Some(ms) = sections.get((pfn >> shift) as usize) else {
            return false;
        };
        let map = if online { &ms.online_map } else { &ms.subsection_map };
        if map.is_empty() {
            return false;
        }
        let sub = ((pfn & ((1 << shift) - 1)) / per_sub) as usize;
        map[sub / 64] & (1 << (sub % 64)) != 0
    }

    /// Marks the subsections of `[start, end)` online or offline.
    pub fn set_online(&mut self, start: u64, end: u64, online: bool) {
        let mut pfn = start;
        while pfn < end {
            let nr = self.section_nr(pfn);
            let offset = pfn & ((1 << self.pfn_section_shift) - 1);
            let sub = (offset / self.pages_per_subsection) as usize;
            let ms = &mut self.sections[nr];
            if online {
                ms.online_map[sub / 64] |= 1 << (sub % 64);
            } else {
                ms.online_map[sub / 64] &= !(1 << (sub % 64));
            }
            pfn += self.pages_per_subsection;
        }
    }

    /// `section_activate` over `[start, end)`: the subsections become
    /// present (offline), their sections present on node `nid`.
    pub fn add_section_range(&mut self, start: u64, end: u64, nid: usize) {
        self.set_subsections(start, end, true, nid);
    }

    /// `section_deactivate` over `[start, end)`: the subsections (already
    /// offline) lose their memmap; a section without any is not present.
    pub fn remove_section_range(&mut self, start: u64, end: u64) {
        self.set_subsections(start, end, false, 0);
    }

    fn set_subsections(&mut self, start: u64, end: u64, present: bool, nid: usize) {
        let words = (((1u64 << self.pfn_section_shift) / self.pages_per_subsection) as usize).div_ceil(64);
        let mut pfn = start;
        while pfn < end {
            let nr = self.section_nr(pfn);
            let sub = ((pfn & ((1 << self.pfn_section_shift) - 1)) / self.pages_per_subsection) as usize;
            let ms = &mut self.sections[nr];
            if ms.subsection_map.is_empty() {
                ms.subsection_map = vec![0; words];
                ms.online_map = vec![0; words];
            }
            if present {
                ms.subsection_map[sub / 64] |= 1 << (sub % 64);
                ms.nid = nid;
            } else {
                ms.subsection_map[sub / 64] &= !(1 << (sub % 64));
                ms.online_map[sub / 64] &= !(1 << (sub % 64));
            }
            ms.present = ms.subsection_map.iter().any(|w| *w != 0);
            pfn += self.pages_per_subsection;
        }
    }

    /// The memory block with sysfs number `id`.
    pub fn block(&self, id: u64) -> Option<&MemoryBlock> {
        self.blocks.iter().find(|b| b.id == id)
    }

    pub fn block_mut(&mut self, id: u64) -> Option<&mut MemoryBlock> {
        self.blocks.iter_mut().find(|b| b.id == id)
    }

    pub fn pages_per_subsection(&self) -> u64 {
        self.pages_per_subsection
    }

    #[inline]
    pub fn section_nr(&self, pfn: u64) -> usize {
        (pfn >> self.pfn_section_shift) as usize
    }

    /// `pfn_valid`: the pfn's subsection has a memmap.
    pub fn pfn_valid(&self, pfn: u64) -> bool {
        let Some(ms) = self.sections.get(self.section_nr(pfn)) else {
            return false;
        };
        if !ms.present {
            return false;
        }
        let offset = pfn & ((1 << self.pfn_section_shift) - 1);
        let sub = (offset / self.pages_per_subsection) as usize;
        ms.subsection_map[sub / 64] & (1 << (sub % 64)) != 0
    }

    /// `pfn_to_online_page` succeeds: valid and in an online subsection.
    pub fn pfn_online(&self, pfn: u64) -> bool {
        Self::subsection_bit(
            &self.sections,
            self.pfn_section_shift,
            self.pages_per_subsection,
            pfn,
            true,
        )
    }

    pub fn nr_present_sections(&self) -> usize {
        self.sections.iter().filter(|s| s.present).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LayoutSpec;
    use largo_types::Preset;

    #[test]
    fn host_sized_machine_has_192_blocks_and_a_pci_hole() {
        let geo = Preset::X86_64.geometry();
        let layout = Layout::build(&geo, &LayoutSpec::new(24 << 30, 2)).unwrap();
        let sparse = Sparse::build(&geo, &layout);
        assert_eq!(sparse.blocks.len(), 192, "the host has 192 memory blocks");
        assert_eq!(sparse.nr_present_sections(), 192);
        let three_g = (3u64 << 30) >> 12;
        assert!(sparse.pfn_valid(three_g - 1));
        assert!(!sparse.pfn_valid(three_g), "3G..4G is the PCI hole");
        assert!(
            sparse.pfn_valid(160),
            "the BIOS hole still has a memmap (same subsection as RAM)"
        );
    }
}
