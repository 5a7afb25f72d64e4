//! Memory sections, 2 MiB subsections and memory blocks (mm/sparse.c,
//! drivers/base/memory.c).

use largo_types::Geometry;

use crate::layout::Layout;

/// One memory section (`struct mem_section`).
#[derive(Clone, Debug, Default)]
pub struct MemSection {
    /// Some RAM of the section exists (`SECTION_MARKED_PRESENT`).
    pub present: bool,
    /// The section's pages are managed by the allocator (`SECTION_IS_ONLINE`).
    pub online: bool,
    pub nid: usize,
    /// One bit per 2 MiB subsection whose memmap is valid
    /// (`mem_section_usage.subsection_map`).
    pub subsection_map: Vec<u64>,
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

/// A hotplug unit (`struct memory_block`).
#[derive(Clone, Debug)]
pub struct MemoryBlock {
    /// Block number: the first section's number / sections per block.
    pub id: u64,
    pub start_section: u64,
    pub nr_sections: u64,
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
                    }
                    ms.present = true;
                    ms.online = true;
                    ms.nid = node.nid;
                    let sub = ((pfn & (geo.pages_per_section() - 1)) / pages_per_subsection) as usize;
                    ms.subsection_map[sub / 64] |= 1 << (sub % 64);
                    pfn = (pfn / pages_per_subsection + 1) * pages_per_subsection;
                }
            }
        }
        let sections_per_block = (layout.memory_block_bytes / geo.section_size_bytes()).max(1);
        let mut blocks = Vec::new();
        for start in (0..nr_sections as u64).step_by(sections_per_block as usize) {
            let end = (start + sections_per_block).min(nr_sections as u64);
            let Some(first) = (start..end).find(|s| sections[*s as usize].present) else {
                continue;
            };
            blocks.push(MemoryBlock {
                id: start / sections_per_block,
                start_section: start,
                nr_sections: sections_per_block,
                nid: sections[first as usize].nid,
                state: MemoryBlockState::Online,
            });
        }
        Sparse {
            sections,
            blocks,
            memory_block_bytes: layout.memory_block_bytes,
            pfn_section_shift: shift,
            pages_per_subsection,
        }
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

    /// `pfn_to_online_page` succeeds: valid and in an online section.
    pub fn pfn_online(&self, pfn: u64) -> bool {
        self.pfn_valid(pfn) && self.sections[self.section_nr(pfn)].online
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
