//! The machine geometry: base page size, MAX_PAGE_ORDER, pageblock order,
//! section and subsection sizes, page-table shape. Values per architecture
//! come from the presets (`preset.rs`); overrides are validated
//! against the constraints the kernel enforces at build time.

use crate::format_size;

/// `SUBSECTION_SHIFT` (include/linux/mmzone.h): 2 MiB on every architecture.
pub const SUBSECTION_SHIFT: u32 = 21;

/// Instruction-set family; decides the physical layout and page-table shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Arch {
    X86_64,
    Arm64,
}

/// Everything about a machine's memory that is fixed when its kernel is built.
///
/// Invariants (checked by [`Geometry::validate`], mirroring the kernel's
/// build-time checks):
/// - `pageblock_order <= pmd_order <= max_page_order` (`hugepage_init`'s
///   `HPAGE_PMD_ORDER > MAX_PAGE_ORDER` check; pageblocks are capped at the PMD order);
/// - `page_shift + max_page_order <= section_size_bits` (mmzone.h `#error`:
///   a buddy block never spans a section), unless `buddy_beyond_section`
///   is set: the seed thread's proposal, where the memmap is virtually
///   contiguous (SPARSEMEM_VMEMMAP) and buddies merge across section
///   boundaries inside one zone, so 1 GiB blocks come from the buddy
///   allocator with 128 MiB sections;
/// - `section_size_bits >= SUBSECTION_SHIFT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    pub arch: Arch,
    /// log2 of the base page size (`PAGE_SHIFT`).
    pub page_shift: u32,
    /// Largest buddy order, inclusive (`MAX_PAGE_ORDER`, the v6.8+ meaning).
    pub max_page_order: u32,
    /// Order of a pageblock, the unit of migratetype grouping.
    pub pageblock_order: u32,
    /// log2 of the memory section size (`SECTION_SIZE_BITS`).
    pub section_size_bits: u32,
    /// Order of a PMD mapping (`HPAGE_PMD_ORDER`).
    pub pmd_order: u32,
    /// Page-table levels in use (`CONFIG_PGTABLE_LEVELS` as run).
    pub pgtable_levels: u32,
    /// arm64 contiguous-PTE block order (`CONT_PTE_SHIFT - PAGE_SHIFT`), none on x86_64.
    pub cont_pte_order: Option<u32>,
    /// Largest physical address width (`MAX_PHYSMEM_BITS`).
    pub max_physmem_bits: u32,
    /// Buddy blocks may be larger than a section (not a mainline build).
    pub buddy_beyond_section: bool,
    /// `pageblock_order` may exceed the PMD order (the seed's 1 GiB pageblock).
    pub pageblock_beyond_pmd: bool,
}

/// Command-line overrides of a preset's geometry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GeometryOverrides {
    pub max_page_order: Option<u32>,
    pub pageblock_order: Option<u32>,
    pub section_bits: Option<u32>,
    /// Allow MAX_PAGE_ORDER beyond the section size (buddies merge across sections).
    pub buddy_beyond_section: bool,
    /// Allow a pageblock order above the PMD order (up to MAX_PAGE_ORDER):
    /// the 1 GiB pageblock the seed thread argued about. Mainline caps
    /// `pageblock_order` at the PMD (or hugetlb) order.
    pub pageblock_beyond_pmd: bool,
}

/// A geometry the model cannot represent (or the kernel would refuse to build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    #[error("MAX_PAGE_ORDER {max_page_order} is below the PMD order {pmd_order}: PMD THP must be buddy-allocatable (HPAGE_PMD_ORDER <= MAX_PAGE_ORDER)")]
    MaxOrderBelowPmd { max_page_order: u32, pmd_order: u32 },
    #[error("MAX_PAGE_ORDER {max_page_order} makes a buddy block ({block}) larger than a memory section ({section}): SECTION_SIZE_BITS must be at least {needed}, unless buddies may merge across sections")]
    MaxOrderExceedsSection {
        max_page_order: u32,
        block: String,
        section: String,
        needed: u32,
    },
    #[error("MAX_PAGE_ORDER {0} is out of range: the model supports 1..=30")]
    MaxOrderOutOfRange(u32),
    #[error("pageblock order {pageblock_order} is out of range: must be 1..={limit} (at most MAX_PAGE_ORDER and the PMD order)")]
    PageblockOrderOutOfRange { pageblock_order: u32, limit: u32 },
    #[error("SECTION_SIZE_BITS {section_bits} is out of range: must be {min}..={max} (at least the 2 MiB subsection and the largest buddy block, at most MAX_PHYSMEM_BITS)")]
    SectionBitsOutOfRange { section_bits: u32, min: u32, max: u32 },
}

impl Geometry {
    /// Base page size in bytes (`PAGE_SIZE`).
    #[inline]
    pub fn page_size(&self) -> u64 {
        1 << self.page_shift
    }

    /// Number of free-area orders (`NR_PAGE_ORDERS = MAX_PAGE_ORDER + 1`).
    #[inline]
    pub fn nr_page_orders(&self) -> usize {
        self.max_page_order as usize + 1
    }

    #[inline]
    pub fn pageblock_nr_pages(&self) -> u64 {
        1 << self.pageblock_order
    }

    /// Base pages per memory section (`PAGES_PER_SECTION`).
    #[inline]
    pub fn pages_per_section(&self) -> u64 {
        1 << (self.section_size_bits - self.page_shift)
    }

    #[inline]
    pub fn pfn_section_shift(&self) -> u32 {
        self.section_size_bits - self.page_shift
    }

    /// Base pages per 2 MiB subsection (`PAGES_PER_SUBSECTION`).
    #[inline]
    pub fn pages_per_subsection(&self) -> u64 {
        1 << (SUBSECTION_SHIFT - self.page_shift)
    }

    /// `SUBSECTIONS_PER_SECTION`.
    #[inline]
    pub fn subsections_per_section(&self) -> u64 {
        1 << (self.section_size_bits - SUBSECTION_SHIFT)
    }

    #[inline]
    pub fn section_size_bytes(&self) -> u64 {
        1 << self.section_size_bits
    }

    /// Bytes mapped by one PMD entry (`HPAGE_PMD_SIZE`).
    #[inline]
    pub fn pmd_size_bytes(&self) -> u64 {
        1 << (self.pmd_order + self.page_shift)
    }

    /// Bytes mapped by one PUD entry, if the PUD level exists.
    pub fn pud_size_bytes(&self) -> Option<u64> {
        let bits_per_level = self.page_shift - 3;
        let pud_shift = self.page_shift + 2 * bits_per_level;
        (self.pgtable_levels >= 4).then(|| 1u64 << pud_shift)
    }

    /// `MAX_FOLIO_ORDER`: the largest folio, buddy-allocated or gigantic
    /// (`alloc_contig_pages`): the PUD order where PUDs exist, else
    /// MAX_PAGE_ORDER.
    pub fn max_folio_order(&self) -> u32 {
        let pud_order = self
            .pud_size_bytes()
            .map_or(0, |b| b.trailing_zeros() - self.page_shift);
        self.max_page_order.max(pud_order)
    }

    /// The anonymous mTHP orders the kernel exposes in sysfs
    /// (`THP_ORDERS_ALL_ANON`: 2..=PMD order).
    pub fn anon_orders(&self) -> std::ops::RangeInclusive<u32> {
        2..=self.pmd_order
    }

    /// Applies command-line overrides and validates the result.
    pub fn with_overrides(mut self, ov: GeometryOverrides) -> Result<Geometry, GeometryError> {
        if let Some(order) = ov.max_page_order {
            self.max_page_order = order;
        }
        if let Some(bits) = ov.section_bits {
            self.section_size_bits = bits;
        }
        if let Some(order) = ov.pageblock_order {
            self.pageblock_order = order;
        }
        self.buddy_beyond_section |= ov.buddy_beyond_section;
        self.pageblock_beyond_pmd |= ov.pageblock_beyond_pmd;
        self.validate()?;
        Ok(self)
    }

    /// Checks the invariants listed on [`Geometry`].
    pub fn validate(&self) -> Result<(), GeometryError> {
        if !(1..=30).contains(&self.max_page_order) {
            return Err(GeometryError::MaxOrderOutOfRange(self.max_page_order));
        }
        if self.max_page_order < self.pmd_order {
            return Err(GeometryError::MaxOrderBelowPmd {
                max_page_order: self.max_page_order,
                pmd_order: self.pmd_order,
            });
        }
        let min_bits = SUBSECTION_SHIFT.max(self.page_shift + 1);
        if !(min_bits..=self.max_physmem_bits).contains(&self.section_size_bits) {
            return Err(GeometryError::SectionBitsOutOfRange {
                section_bits: self.section_size_bits,
                min: min_bits.max(self.page_shift + self.max_page_order),
                max: self.max_physmem_bits,
            });
        }
        let block_bits = self.page_shift + self.max_page_order;
        if block_bits > self.section_size_bits && !self.buddy_beyond_section {
            return Err(GeometryError::MaxOrderExceedsSection {
                max_page_order: self.max_page_order,
                block: format_size(1 << block_bits),
                section: format_size(1 << self.section_size_bits),
                needed: block_bits,
            });
        }
        let limit = if self.pageblock_beyond_pmd {
            self.max_page_order
        } else {
            self.max_page_order.min(self.pmd_order)
        };
        if !(1..=limit).contains(&self.pageblock_order) {
            return Err(GeometryError::PageblockOrderOutOfRange {
                pageblock_order: self.pageblock_order,
                limit,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Preset;

    fn x86() -> Geometry {
        Preset::X86_64.geometry()
    }

    #[test]
    fn presets_are_valid() {
        for preset in Preset::ALL {
            preset.geometry().validate().unwrap();
        }
    }

    #[test]
    fn overrides_are_validated() {
        let ok = GeometryOverrides {
            max_page_order: Some(12),
            section_bits: Some(30),
            ..Default::default()
        };
        let g = x86().with_overrides(ok).unwrap();
        assert_eq!((g.max_page_order, g.section_size_bits), (12, 30));

        let cases: [(&str, GeometryOverrides); 5] = [
            (
                "below pmd",
                GeometryOverrides {
                    max_page_order: Some(8),
                    ..Default::default()
                },
            ),
            (
                "block beyond section",
                GeometryOverrides {
                    max_page_order: Some(18),
                    ..Default::default()
                },
            ),
            (
                "pageblock above pmd",
                GeometryOverrides {
                    pageblock_order: Some(10),
                    ..Default::default()
                },
            ),
            (
                "pageblock zero",
                GeometryOverrides {
                    pageblock_order: Some(0),
                    ..Default::default()
                },
            ),
            (
                "section below subsection",
                GeometryOverrides {
                    section_bits: Some(20),
                    ..Default::default()
                },
            ),
        ];
        for (name, ov) in cases {
            assert!(x86().with_overrides(ov).is_err(), "{name} should be rejected");
        }
    }

    #[test]
    fn error_message_names_the_fix_in_the_kernels_terms() {
        let ov = GeometryOverrides {
            max_page_order: Some(18),
            ..Default::default()
        };
        let e = x86().with_overrides(ov).unwrap_err();
        assert!(
            matches!(e, GeometryError::MaxOrderExceedsSection { needed: 30, .. }),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("SECTION_SIZE_BITS must be at least 30"), "{msg}");
        assert!(!msg.contains("--"), "a library error names no command-line flag: {msg}");
    }

    #[test]
    fn buddy_beyond_section_allows_gigantic_orders() {
        let ov = GeometryOverrides {
            max_page_order: Some(18),
            buddy_beyond_section: true,
            ..Default::default()
        };
        let g = x86().with_overrides(ov).unwrap();
        assert_eq!((g.max_page_order, g.section_size_bits), (18, 27));
        assert!(g.buddy_beyond_section);
    }

    #[test]
    fn derived_sizes() {
        let g = x86();
        assert_eq!(g.pages_per_section(), 32768);
        assert_eq!(g.subsections_per_section(), 64);
        assert_eq!(g.pmd_size_bytes(), 2 << 20);
        assert_eq!(g.pud_size_bytes(), Some(1 << 30));
        let g64 = Preset::Arm64_64k.geometry();
        assert_eq!(g64.subsections_per_section(), 256);
        assert_eq!(g64.pmd_size_bytes(), 512 << 20);
        assert_eq!(g64.pud_size_bytes(), None);
    }
}
