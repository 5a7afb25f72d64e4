//! Machine presets with the kernel's values per architecture and page
//! size (arch/arm64/Kconfig, arch/x86/include/asm/sparsemem.h,
//! include/linux/pageblock-flags.h).

use crate::{Arch, Geometry};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    X86_64,
    Arm64_4k,
    Arm64_16k,
    Arm64_64k,
}

impl Preset {
    pub const ALL: [Preset; 4] = [Preset::X86_64, Preset::Arm64_4k, Preset::Arm64_16k, Preset::Arm64_64k];

    pub fn name(self) -> &'static str {
        match self {
            Preset::X86_64 => "x86_64",
            Preset::Arm64_4k => "arm64-4k",
            Preset::Arm64_16k => "arm64-16k",
            Preset::Arm64_64k => "arm64-64k",
        }
    }

    pub fn from_name(name: &str) -> Option<Preset> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn geometry(self) -> Geometry {
        match self {
            Preset::X86_64 => Geometry {
                arch: Arch::X86_64,
                page_shift: 12,
                max_page_order: 10,
                pageblock_order: 9,
                section_size_bits: 27,
                pmd_order: 9,
                pgtable_levels: 4,
                cont_pte_order: None,
                max_physmem_bits: 46,
                buddy_beyond_section: false,
                pageblock_beyond_pmd: false,
            },
            Preset::Arm64_4k => Geometry {
                arch: Arch::Arm64,
                page_shift: 12,
                max_page_order: 10,
                pageblock_order: 9,
                section_size_bits: 27,
                pmd_order: 9,
                pgtable_levels: 4,
                cont_pte_order: Some(4),
                max_physmem_bits: 48,
                buddy_beyond_section: false,
                pageblock_beyond_pmd: false,
            },
            Preset::Arm64_16k => Geometry {
                arch: Arch::Arm64,
                page_shift: 14,
                max_page_order: 11,
                pageblock_order: 11,
                section_size_bits: 27,
                pmd_order: 11,
                pgtable_levels: 4,
                cont_pte_order: Some(7),
                max_physmem_bits: 48,
                buddy_beyond_section: false,
                pageblock_beyond_pmd: false,
            },
            Preset::Arm64_64k => Geometry {
                arch: Arch::Arm64,
                page_shift: 16,
                max_page_order: 13,
                pageblock_order: 13,
                section_size_bits: 29,
                pmd_order: 13,
                pgtable_levels: 3,
                cont_pte_order: Some(5),
                max_physmem_bits: 48,
                buddy_beyond_section: false,
                pageblock_beyond_pmd: false,
            },
        }
    }
}
