//! Allocation flags: the `gfp_t` bits of include/linux/gfp_types.h, the
//! common combinations, and the zone and migratetype they select
//! (`gfp_zone`, `gfp_migratetype`).

use bitflags::bitflags;
use largo_types::{MigrateType, ZoneType};

bitflags! {
    /// `gfp_t`. Each flag is the kernel's `__GFP_<NAME>`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Gfp: u32 {
        const DMA = 1 << 0;
        const HIGHMEM = 1 << 1;
        const DMA32 = 1 << 2;
        const MOVABLE = 1 << 3;
        const RECLAIMABLE = 1 << 4;
        const HIGH = 1 << 5;
        const IO = 1 << 6;
        const FS = 1 << 7;
        const ZERO = 1 << 8;
        const DIRECT_RECLAIM = 1 << 10;
        const KSWAPD_RECLAIM = 1 << 11;
        const WRITE = 1 << 12;
        const NOWARN = 1 << 13;
        const RETRY_MAYFAIL = 1 << 14;
        const NOFAIL = 1 << 15;
        const NORETRY = 1 << 16;
        const MEMALLOC = 1 << 17;
        const COMP = 1 << 18;
        const NOMEMALLOC = 1 << 19;
        const HARDWALL = 1 << 20;
        const THISNODE = 1 << 21;
        const ACCOUNT = 1 << 22;
    }
}

/// `__GFP_RECLAIM`.
pub const GFP_RECLAIM: Gfp = Gfp::DIRECT_RECLAIM.union(Gfp::KSWAPD_RECLAIM);
pub const GFP_ATOMIC: Gfp = Gfp::HIGH.union(Gfp::KSWAPD_RECLAIM);
pub const GFP_KERNEL: Gfp = GFP_RECLAIM.union(Gfp::IO).union(Gfp::FS);
pub const GFP_NOWAIT: Gfp = Gfp::KSWAPD_RECLAIM.union(Gfp::NOWARN);
pub const GFP_USER: Gfp = GFP_KERNEL.union(Gfp::HARDWALL);
pub const GFP_DMA32: Gfp = Gfp::DMA32;
pub const GFP_HIGHUSER: Gfp = GFP_USER.union(Gfp::HIGHMEM);
pub const GFP_HIGHUSER_MOVABLE: Gfp = GFP_HIGHUSER.union(Gfp::MOVABLE);
/// `GFP_TRANSHUGE_LIGHT`: no reclaim at all, fail fast.
pub const GFP_TRANSHUGE_LIGHT: Gfp = GFP_HIGHUSER_MOVABLE
    .union(Gfp::COMP)
    .union(Gfp::NOMEMALLOC)
    .union(Gfp::NOWARN)
    .difference(GFP_RECLAIM);
/// `GFP_TRANSHUGE`: light plus direct reclaim/compaction.
pub const GFP_TRANSHUGE: Gfp = GFP_TRANSHUGE_LIGHT.union(Gfp::DIRECT_RECLAIM);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GfpError {
    #[error("gfp {0:?} combines zone modifiers the kernel rejects (GFP_ZONE_BAD)")]
    TwoZones(Gfp),
    #[error("gfp {0:?} is both __GFP_MOVABLE and __GFP_RECLAIMABLE")]
    TwoMobilities(Gfp),
}

/// `GFP_ZONE_TABLE` for a 64-bit kernel without highmem, indexed by the
/// four zone modifier bits (DMA, HIGHMEM, DMA32, MOVABLE); `None` is
/// `GFP_ZONE_BAD`. `__GFP_HIGHMEM` alone means Normal; with `__GFP_MOVABLE`
/// it means Movable.
const GFP_ZONE_TABLE: [Option<ZoneType>; 16] = {
    use ZoneType::*;
    [
        Some(Normal),  // none
        Some(Dma),     // DMA
        Some(Normal),  // HIGHMEM
        None,          // DMA | HIGHMEM
        Some(Dma32),   // DMA32
        None,          // DMA | DMA32
        None,          // HIGHMEM | DMA32
        None,          // DMA | HIGHMEM | DMA32
        Some(Normal),  // MOVABLE
        Some(Dma),     // MOVABLE | DMA
        Some(Movable), // MOVABLE | HIGHMEM
        None,          // MOVABLE | DMA | HIGHMEM
        Some(Dma32),   // MOVABLE | DMA32
        None,
        None,
        None,
    ]
};

impl Gfp {
    /// `gfp_zone`: the highest zone the allocation may use.
    #[inline]
    pub fn zone(self) -> Result<ZoneType, GfpError> {
        GFP_ZONE_TABLE[(self.bits() & 0xf) as usize].ok_or(GfpError::TwoZones(self))
    }

    /// `gfp_migratetype` (before the mobility-grouping override): the
    /// MOVABLE and RECLAIMABLE bits shifted down are the migratetype.
    #[inline]
    pub fn migratetype(self) -> Result<MigrateType, GfpError> {
        match (self.bits() >> 3) & 3 {
            3 => Err(GfpError::TwoMobilities(self)),
            mt => Ok(MigrateType::from_index(mt as usize)),
        }
    }
}

bitflags! {
    /// `alloc_flags` of mm/internal.h. The low two bits select the
    /// watermark (`ALLOC_WMARK_MASK`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct AllocFlags: u32 {
        const WMARK_LOW = 0x01;
        const WMARK_HIGH = 0x02;
        const NO_WATERMARKS = 0x04;
        const OOM = 0x08;
        const NON_BLOCK = 0x10;
        const MIN_RESERVE = 0x20;
        const CPUSET = 0x40;
        const CMA = 0x80;
        const NOFRAGMENT = 0x100;
        const HIGHATOMIC = 0x200;
        const KSWAPD = 0x800;
    }
}

/// The watermarks of a zone (`enum zone_watermarks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wmark {
    Min = 0,
    Low = 1,
    High = 2,
    Promo = 3,
}

pub const NR_WMARK: usize = 4;

impl AllocFlags {
    /// `ALLOC_RESERVES`: any access below the min watermark.
    pub const RESERVES: AllocFlags = AllocFlags::NON_BLOCK
        .union(AllocFlags::MIN_RESERVE)
        .union(AllocFlags::HIGHATOMIC)
        .union(AllocFlags::OOM);

    /// `alloc_flags & ALLOC_WMARK_MASK`.
    pub fn wmark(self) -> Wmark {
        match self.bits() & 0x3 {
            0 => Wmark::Min,
            1 => Wmark::Low,
            2 => Wmark::High,
            _ => Wmark::Promo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_and_migratetypes_of_common_masks() {
        let cases = [
            ("GFP_KERNEL", GFP_KERNEL, ZoneType::Normal, MigrateType::Unmovable),
            (
                "GFP_HIGHUSER_MOVABLE",
                GFP_HIGHUSER_MOVABLE,
                ZoneType::Movable,
                MigrateType::Movable,
            ),
            ("GFP_TRANSHUGE", GFP_TRANSHUGE, ZoneType::Movable, MigrateType::Movable),
            (
                "GFP_DMA32",
                GFP_KERNEL | GFP_DMA32,
                ZoneType::Dma32,
                MigrateType::Unmovable,
            ),
            (
                "slab reclaimable",
                GFP_KERNEL | Gfp::RECLAIMABLE,
                ZoneType::Normal,
                MigrateType::Reclaimable,
            ),
            (
                "movable without highmem",
                GFP_KERNEL | Gfp::MOVABLE,
                ZoneType::Normal,
                MigrateType::Movable,
            ),
        ];
        for (name, gfp, zone, mt) in cases {
            assert_eq!(gfp.zone().unwrap(), zone, "{name}");
            assert_eq!(gfp.migratetype().unwrap(), mt, "{name}");
        }
        assert!((Gfp::DMA | Gfp::DMA32).zone().is_err());
        assert!((Gfp::DMA | Gfp::HIGHMEM).zone().is_err());
        assert!((Gfp::MOVABLE | Gfp::RECLAIMABLE).migratetype().is_err());
        assert!(!GFP_TRANSHUGE_LIGHT.intersects(GFP_RECLAIM));
    }
}
