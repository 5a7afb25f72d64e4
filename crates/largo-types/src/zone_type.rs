//! Zone types as x86_64 Linux configures them (ZONE_DMA, ZONE_DMA32,
//! ZONE_NORMAL, ZONE_MOVABLE, ZONE_DEVICE; no highmem).

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[repr(u8)]
pub enum ZoneType {
    Dma = 0,
    Dma32 = 1,
    Normal = 2,
    Movable = 3,
    Device = 4,
}

/// `MAX_NR_ZONES` with CONFIG_ZONE_DMA, CONFIG_ZONE_DMA32 and CONFIG_ZONE_DEVICE.
pub const MAX_NR_ZONES: usize = 5;

impl ZoneType {
    pub const ALL: [ZoneType; MAX_NR_ZONES] = [
        ZoneType::Dma,
        ZoneType::Dma32,
        ZoneType::Normal,
        ZoneType::Movable,
        ZoneType::Device,
    ];

    /// The name the kernel prints (`zone_names[]`).
    pub fn name(self) -> &'static str {
        match self {
            ZoneType::Dma => "DMA",
            ZoneType::Dma32 => "DMA32",
            ZoneType::Normal => "Normal",
            ZoneType::Movable => "Movable",
            ZoneType::Device => "Device",
        }
    }

    /// The vmstat suffix of per-zone events (`pgalloc_dma32`, ...).
    pub fn vmstat_suffix(self) -> &'static str {
        match self {
            ZoneType::Dma => "dma",
            ZoneType::Dma32 => "dma32",
            ZoneType::Normal => "normal",
            ZoneType::Movable => "movable",
            ZoneType::Device => "device",
        }
    }

    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    #[inline]
    pub fn from_index(index: usize) -> ZoneType {
        Self::ALL[index]
    }
}
