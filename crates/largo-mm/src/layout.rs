//! The physical memory map of a modelled machine: which pfns are RAM, how
//! they split into nodes and zones, and what boot reserves before the buddy
//! allocator sees any memory.
//!
//! x86_64 follows what the host (a Firecracker guest) shows: the BIOS page
//! and the 636 KiB..1 MiB hole, RAM up to 3 GiB, the 32-bit PCI hole, the
//! rest from 4 GiB. arm64 presets get one contiguous RAM range from 0. Zones
//! use the x86_64 boundaries everywhere: DMA below 16 MiB, DMA32 below 4 GiB,
//! Normal above, an optional Movable zone at the top of each node
//! (`movablecore=`), an always-empty Device zone.

use largo_types::{format_size, Arch, Geometry, ZoneType, MAX_NR_ZONES};

use crate::memmap::NIL;

/// `sizeof(struct page)` on 64-bit Linux: the vmemmap boot reserves this
/// much per base page of every present section.
pub const STRUCT_PAGE_BYTES: u64 = 64;

/// Kernel image and early boot allocations reserved at `PHYSICAL_START`
/// (16 MiB), measured on the host: DMA32 present - managed = 9528 pages.
pub const DEFAULT_KERNEL_RESERVED_BYTES: u64 = 9528 * 4096;

const KERNEL_PHYSICAL_START: u64 = 16 << 20;
const MAX_DMA_BYTES: u64 = 16 << 20;
const MAX_DMA32_BYTES: u64 = 4 << 30;
/// x86_64 RAM below 4 GiB ends here; the 32-bit PCI hole follows.
const X86_LOW_RAM_END: u64 = 3 << 30;
/// x86_64 `MIN_MEMORY_BLOCK_SIZE` .. `MAX_BLOCK_SIZE`, and the RAM size from
/// which large blocks are used (arch/x86/mm/init_64.c).
const X86_MAX_BLOCK_BYTES: u64 = 2 << 30;
const X86_LARGE_BLOCK_MEM: u64 = 64 << 30;
const MIN_MEM_BYTES: u64 = 32 << 20;

/// A half-open pfn range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfnRange {
    pub start: u64,
    pub end: u64,
}

impl PfnRange {
    pub fn new(start: u64, end: u64) -> PfnRange {
        PfnRange { start, end }
    }

    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    pub fn intersect(&self, other: PfnRange) -> PfnRange {
        PfnRange::new(self.start.max(other.start), self.end.min(other.end))
    }
}

/// Why boot reserved a range (`memblock.reserved`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReservedKind {
    /// x86_64 reserves the first 1 MiB (BIOS, real-mode trampoline).
    Firmware,
    /// Kernel image and early allocations.
    Kernel,
    /// The kernel's own struct page array (vmemmap), allocated top-down per node.
    Memmap,
    /// A CMA area (`--cma`), handed to the buddy allocator as MIGRATE_CMA
    /// pageblocks when it is activated.
    Cma,
}

#[derive(Clone, Debug)]
pub struct NodeLayout {
    pub nid: usize,
    /// First and one-past-last RAM pfn of the node (`node_start_pfn`, `node_end_pfn`).
    pub start_pfn: u64,
    pub end_pfn: u64,
    pub present_pages: u64,
    pub cpus: Vec<usize>,
    /// Where ZONE_MOVABLE starts in this node, if it has one.
    pub movable_start_pfn: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
pub struct ZoneLayout {
    pub nid: usize,
    pub zone_type: ZoneType,
    pub start_pfn: u64,
    pub spanned_pages: u64,
    pub present_pages: u64,
}

impl ZoneLayout {
    pub fn span(&self) -> PfnRange {
        PfnRange::new(self.start_pfn, self.start_pfn + self.spanned_pages)
    }
}

/// What the caller asks for.
#[derive(Clone, Debug)]
pub struct LayoutSpec {
    pub mem_bytes: u64,
    pub nr_nodes: usize,
    /// Relative node sizes (`--node-mem`); empty: even.
    pub node_weights: Vec<u64>,
    pub nr_cpus: usize,
    pub movable_bytes: u64,
    pub kernel_reserved_bytes: u64,
    /// CMA areas to reserve (`--cma`), in order.
    pub cma: Vec<crate::cma::CmaSpec>,
}

impl LayoutSpec {
    /// One node, `nr_cpus` cpus, no Movable zone, the default kernel reservation.
    pub fn new(mem_bytes: u64, nr_cpus: usize) -> LayoutSpec {
        LayoutSpec {
            mem_bytes,
            nr_nodes: 1,
            node_weights: Vec::new(),
            nr_cpus,
            movable_bytes: 0,
            kernel_reserved_bytes: DEFAULT_KERNEL_RESERVED_BYTES,
            cma: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("memory size {0} is too small: the model needs at least 32M")]
    MemTooSmall(String),
    #[error("memory size {0} is not a multiple of 2M (the subsection size)")]
    MemNotAligned(String),
    #[error("memory size {mem} needs {nr_pfns} page frames; the model addresses at most {max} (u32 pfn links)")]
    TooManyPages { mem: String, nr_pfns: u64, max: u64 },
    #[error("{nodes} nodes: must be 1..={max} for this much memory (each node needs a memory section)")]
    BadNodes { nodes: usize, max: usize },
    #[error("{0} CPUs: must be 1..=1024")]
    BadCpus(usize),
    #[error(
        "ZONE_MOVABLE of {movable}: each node's Normal memory is only {normal}; ZONE_MOVABLE is carved from ZONE_NORMAL"
    )]
    MovableTooLarge { movable: String, normal: String },
    #[error("the kernel reservation ({kernel}) does not fit in RAM above 16M")]
    KernelDoesNotFit { kernel: String },
    #[error("no room left for the memmap of node {0}")]
    MemmapDoesNotFit(usize),
    #[error(transparent)]
    Cma(#[from] crate::cma::CmaDeclareError),
}

/// The machine's physical memory map.
#[derive(Clone, Debug)]
pub struct Layout {
    /// RAM (`memblock.memory`), sorted, disjoint.
    pub ram: Vec<PfnRange>,
    /// Boot reservations (`memblock.reserved`), sorted, disjoint, inside RAM.
    pub reserved: Vec<(PfnRange, ReservedKind)>,
    /// One past the highest pfn with a memmap: boot RAM, or the end of
    /// the hot-add region when there is one.
    pub max_pfn: u64,
    /// Physical address space reserved for hot-added memory above boot
    /// RAM (QEMU's `maxmem`, ACPI's hotpluggable ranges): no RAM at boot.
    pub hotplug_region: Option<PfnRange>,
    pub nodes: Vec<NodeLayout>,
    /// Every zone of every node, `nid * MAX_NR_ZONES + zone_type`.
    pub zones: Vec<ZoneLayout>,
    pub memory_block_bytes: u64,
    /// Pages the kernel's vmemmap took at boot (`nr_memmap_boot_pages`).
    pub memmap_boot_pages: u64,
    /// The CMA areas reserved at boot (also in `reserved`, as `Cma`).
    pub cma: Vec<crate::cma::CmaReservation>,
}

impl Layout {
    pub fn build(geo: &Geometry, spec: &LayoutSpec) -> Result<Layout, LayoutError> {
        let mem = spec.mem_bytes;
        if mem < MIN_MEM_BYTES {
            return Err(LayoutError::MemTooSmall(format_size(mem)));
        }
        if !mem.is_multiple_of(2 << 20) {
            return Err(LayoutError::MemNotAligned(format_size(mem)));
        }
        if !(1..=1024).contains(&spec.nr_cpus) {
            return Err(LayoutError::BadCpus(spec.nr_cpus));
        }
        let ram = ram_ranges(geo, mem);
        let max_pfn = ram.last().map_or(0, |r| r.end);
        if max_pfn >= NIL as u64 {
            return Err(LayoutError::TooManyPages {
                mem: format_size(mem),
                nr_pfns: max_pfn,
                max: NIL as u64 - 1,
            });
        }
        let mut nodes = split_nodes(geo, &ram, spec.nr_nodes, &spec.node_weights)?;
        assign_cpus(&mut nodes, spec.nr_cpus);
        place_movable(geo, &mut nodes, spec.movable_bytes)?;
        let zones = zone_layouts(geo, &ram, &nodes);
        let (reserved, memmap_boot_pages, cma) = reserve_boot_memory(geo, &ram, &nodes, spec)?;
        Ok(Layout {
            memory_block_bytes: memory_block_bytes(geo, max_pfn),
            ram,
            reserved,
            max_pfn,
            hotplug_region: None,
            nodes,
            zones,
            memmap_boot_pages,
            cma,
        })
    }

    pub fn zone(&self, nid: usize, zone_type: ZoneType) -> &ZoneLayout {
        &self.zones[nid * MAX_NR_ZONES + zone_type.index()]
    }

    pub fn present_pages(&self) -> u64 {
        self.ram.iter().map(PfnRange::len).sum()
    }

    pub fn reserved_pages_in(&self, range: PfnRange) -> u64 {
        self.reserved.iter().map(|(r, _)| r.intersect(range).len()).sum()
    }

    /// RAM that boot hands to the buddy allocator: RAM minus reservations,
    /// sorted.
    pub fn free_ranges(&self) -> Vec<PfnRange> {
        subtract(&self.ram, self.reserved.iter().map(|(r, _)| *r))
    }
}

/// RAM in pfns: whole pages only, as memblock keeps them.
fn ram_ranges(geo: &Geometry, mem: u64) -> Vec<PfnRange> {
    let bytes: Vec<(u64, u64)> = match geo.arch {
        Arch::X86_64 => {
            // e820 as the host shows it: page 0 is BIOS-owned, 0x9fc00..1M is
            // reserved by firmware; the RAM inside 0..1M still counts as --mem.
            let below_4g = mem.min(X86_LOW_RAM_END);
            let mut v = vec![(0x1000, 0x9fc00), (1 << 20, below_4g)];
            if mem > below_4g {
                v.push((MAX_DMA32_BYTES, MAX_DMA32_BYTES + mem - below_4g));
            }
            v
        }
        Arch::Arm64 => vec![(0, mem)],
    };
    bytes
        .into_iter()
        .map(|(start, end)| {
            let start_pfn = start.div_ceil(geo.page_size());
            let end_pfn = end / geo.page_size();
            PfnRange::new(start_pfn, end_pfn)
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// Splits RAM by page count, evenly or in proportion to `weights`;
/// boundaries are rounded up to a section.
fn split_nodes(
    geo: &Geometry,
    ram: &[PfnRange],
    nr_nodes: usize,
    weights: &[u64],
) -> Result<Vec<NodeLayout>, LayoutError> {
    let total: u64 = ram.iter().map(PfnRange::len).sum();
    let sections_with_ram = count_sections(geo, ram);
    if nr_nodes == 0 || nr_nodes > sections_with_ram {
        return Err(LayoutError::BadNodes {
            nodes: nr_nodes,
            max: sections_with_ram,
        });
    }
    let pps = geo.pages_per_section();
    let mut boundaries = vec![0u64];
    let weight_sum: u64 = weights.iter().sum();
    for k in 1..nr_nodes {
        let target = if weights.len() == nr_nodes && weight_sum > 0 {
            (total as u128 * weights[..k].iter().sum::<u64>() as u128 / weight_sum as u128) as u64
        } else {
            total * k as u64 / nr_nodes as u64
        };
        let pfn = pfn_at_cumulative(ram, target);
        boundaries.push(pfn.div_ceil(pps) * pps);
    }
    boundaries.push(u64::MAX);
    let mut nodes = Vec::with_capacity(nr_nodes);
    for nid in 0..nr_nodes {
        let span = PfnRange::new(boundaries[nid], boundaries[nid + 1]);
        let parts: Vec<PfnRange> = ram
            .iter()
            .map(|r| r.intersect(span))
            .filter(|r| !r.is_empty())
            .collect();
        let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
            return Err(LayoutError::BadNodes {
                nodes: nr_nodes,
                max: sections_with_ram,
            });
        };
        nodes.push(NodeLayout {
            nid,
            start_pfn: first.start,
            end_pfn: last.end,
            present_pages: parts.iter().map(PfnRange::len).sum(),
            cpus: Vec::new(),
            movable_start_pfn: None,
        });
    }
    Ok(nodes)
}

fn count_sections(geo: &Geometry, ram: &[PfnRange]) -> usize {
    let shift = geo.pfn_section_shift();
    let mut sections: Vec<u64> = ram
        .iter()
        .flat_map(|r| (r.start >> shift)..=((r.end - 1) >> shift))
        .collect();
    sections.dedup();
    sections.len()
}

/// The pfn below which `target` RAM pages lie.
fn pfn_at_cumulative(ram: &[PfnRange], target: u64) -> u64 {
    let mut seen = 0;
    for r in ram {
        if seen + r.len() >= target {
            return r.start + (target - seen);
        }
        seen += r.len();
    }
    ram.last().map_or(0, |r| r.end)
}

/// CPUs are numbered node by node, as firmware usually enumerates them.
fn assign_cpus(nodes: &mut [NodeLayout], nr_cpus: usize) {
    let nr_nodes = nodes.len();
    for cpu in 0..nr_cpus {
        nodes[cpu * nr_nodes / nr_cpus].cpus.push(cpu);
    }
}

/// `movablecore=`: each node gives an equal share of its top memory to
/// ZONE_MOVABLE, starting on a MAX_PAGE_ORDER boundary
/// (`find_zone_movable_pfns_for_nodes` rounds `zone_movable_pfn` up).
fn place_movable(geo: &Geometry, nodes: &mut [NodeLayout], movable_bytes: u64) -> Result<(), LayoutError> {
    if movable_bytes == 0 {
        return Ok(());
    }
    let per_node_pages = (movable_bytes / nodes.len() as u64) >> geo.page_shift;
    let normal_start = MAX_DMA32_BYTES >> geo.page_shift;
    let max_order_pages = 1u64 << geo.max_page_order;
    for node in nodes.iter_mut() {
        let want = node.end_pfn.saturating_sub(per_node_pages);
        let start = want.div_ceil(max_order_pages) * max_order_pages;
        let normal_pages = node.end_pfn.saturating_sub(normal_start.max(node.start_pfn));
        if per_node_pages > normal_pages || start < normal_start.max(node.start_pfn) {
            return Err(LayoutError::MovableTooLarge {
                movable: format_size(movable_bytes),
                normal: format_size(normal_pages << geo.page_shift),
            });
        }
        if start < node.end_pfn {
            node.movable_start_pfn = Some(start);
        }
    }
    Ok(())
}

/// Zone spans as `zone_spanned_pages_in_node` computes them: the arch zone
/// limits clamped to the node, Normal cut where Movable starts.
fn zone_layouts(geo: &Geometry, ram: &[PfnRange], nodes: &[NodeLayout]) -> Vec<ZoneLayout> {
    let dma_end = MAX_DMA_BYTES >> geo.page_shift;
    let dma32_end = MAX_DMA32_BYTES >> geo.page_shift;
    let mut zones = Vec::with_capacity(nodes.len() * MAX_NR_ZONES);
    for node in nodes {
        let node_span = PfnRange::new(node.start_pfn, node.end_pfn);
        let movable = node.movable_start_pfn.unwrap_or(u64::MAX);
        let limits = [
            PfnRange::new(0, dma_end),
            PfnRange::new(dma_end, dma32_end),
            PfnRange::new(dma32_end, movable),
            PfnRange::new(movable, u64::MAX),
            PfnRange::new(0, 0),
        ];
        for (zt, limit) in ZoneType::ALL.into_iter().zip(limits) {
            let span = node_span.intersect(limit);
            let (start, spanned) = if span.is_empty() {
                (0, 0)
            } else {
                (span.start, span.len())
            };
            let present = ram.iter().map(|r| r.intersect(span).len()).sum();
            zones.push(ZoneLayout {
                nid: node.nid,
                zone_type: zt,
                start_pfn: start,
                spanned_pages: spanned,
                present_pages: present,
            });
        }
    }
    zones
}

/// The reservations boot makes before `memblock_free_all`: the first 1 MiB
/// on x86_64, the kernel image at 16 MiB, and each node's vmemmap, allocated
/// top-down below ZONE_MOVABLE; the CMA areas before the vmemmap, as
/// `dma_contiguous_reserve` runs before `sparse_init`. Returns the
/// reservations, the vmemmap size and the CMA areas.
fn reserve_boot_memory(
    geo: &Geometry,
    ram: &[PfnRange],
    nodes: &[NodeLayout],
    spec: &LayoutSpec,
) -> Result<(Vec<(PfnRange, ReservedKind)>, u64, Vec<crate::cma::CmaReservation>), LayoutError> {
    let mut reserved = Vec::new();
    if geo.arch == Arch::X86_64 {
        let low = PfnRange::new(0, (1u64 << 20) >> geo.page_shift);
        reserved.extend(
            ram.iter()
                .map(|r| r.intersect(low))
                .filter(|r| !r.is_empty())
                .map(|r| (r, ReservedKind::Firmware)),
        );
    }
    let kernel_pages = spec.kernel_reserved_bytes.div_ceil(geo.page_size());
    if kernel_pages > 0 {
        let start = KERNEL_PHYSICAL_START >> geo.page_shift;
        let kernel = PfnRange::new(start, start + kernel_pages);
        if !ram.iter().any(|r| r.start <= kernel.start && kernel.end <= r.end) {
            return Err(LayoutError::KernelDoesNotFit {
                kernel: format_size(spec.kernel_reserved_bytes),
            });
        }
        reserved.push((kernel, ReservedKind::Kernel));
    }
    let mut free = subtract(ram, reserved.iter().map(|(r, _)| *r));
    let spans: Vec<crate::cma::NodeSpan> = nodes.iter().map(|n| (n.nid, n.start_pfn, n.end_pfn)).collect();
    let cma = crate::cma::reserve_cma_areas(
        &spec.cma,
        &mut free,
        &spans,
        geo.pageblock_nr_pages(),
        MAX_DMA32_BYTES >> geo.page_shift,
        geo.page_shift,
    )?;
    reserved.extend(cma.iter().map(|a| (a.range, ReservedKind::Cma)));
    let mut memmap_boot_pages = 0;
    for node in nodes {
        let node_ram: Vec<PfnRange> = ram
            .iter()
            .map(|r| r.intersect(PfnRange::new(node.start_pfn, node.end_pfn)))
            .filter(|r| !r.is_empty())
            .collect();
        let bytes = count_sections(geo, &node_ram) as u64 * geo.pages_per_section() * STRUCT_PAGE_BYTES;
        let pages = bytes.div_ceil(geo.page_size());
        memmap_boot_pages += pages;
        let limit = node.movable_start_pfn.unwrap_or(node.end_pfn);
        let free = subtract(&node_ram, reserved.iter().map(|(r, _)| *r));
        let got = alloc_top_down(&free, pages, limit).ok_or(LayoutError::MemmapDoesNotFit(node.nid))?;
        reserved.extend(got.into_iter().map(|r| (r, ReservedKind::Memmap)));
    }
    reserved.sort_by_key(|(r, _)| r.start);
    Ok((reserved, memmap_boot_pages, cma))
}

/// Takes `nr_pages` from the top of `free` below `limit` (memblock's
/// default top-down allocation); the result is sorted.
fn alloc_top_down(free: &[PfnRange], mut nr_pages: u64, limit: u64) -> Option<Vec<PfnRange>> {
    let mut got = Vec::new();
    for r in free.iter().rev() {
        if nr_pages == 0 {
            break;
        }
        let r = PfnRange::new(r.start, r.end.min(limit));
        let take = r.len().min(nr_pages);
        if take > 0 {
            got.push(PfnRange::new(r.end - take, r.end));
            nr_pages -= take;
        }
    }
    got.reverse();
    (nr_pages == 0).then_some(got)
}

/// `ranges` minus every range of `holes` (both sorted or not; result sorted).
pub fn subtract(ranges: &[PfnRange], holes: impl Iterator<Item = PfnRange>) -> Vec<PfnRange> {
    let mut holes: Vec<PfnRange> = holes.collect();
    holes.sort_by_key(|r| r.start);
    let mut out = Vec::new();
    for r in ranges {
        let mut cursor = r.start;
        for h in holes.iter().filter(|h| h.end > r.start && h.start < r.end) {
            if h.start > cursor {
                out.push(PfnRange::new(cursor, h.start));
            }
            cursor = cursor.max(h.end);
        }
        if cursor < r.end {
            out.push(PfnRange::new(cursor, r.end));
        }
    }
    out
}

/// `memory_block_size_bytes()`: x86_64's `probe_memory_block_size` for a
/// virtual machine (the host is one); the section size elsewhere.
fn memory_block_bytes(geo: &Geometry, max_pfn: u64) -> u64 {
    let section = geo.section_size_bytes();
    if geo.arch != Arch::X86_64 {
        return section;
    }
    let boot_mem_end = max_pfn << geo.page_shift;
    if boot_mem_end < X86_LARGE_BLOCK_MEM {
        return section;
    }
    let mut bz = X86_MAX_BLOCK_BYTES;
    while bz > section && !boot_mem_end.is_multiple_of(bz) {
        bz >>= 1;
    }
    bz.max(section)
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_types::Preset;

    fn spec(mem: u64) -> LayoutSpec {
        LayoutSpec::new(mem, 2)
    }

    #[test]
    fn x86_24g_matches_the_host_zoneinfo() {
        let geo = Preset::X86_64.geometry();
        let l = Layout::build(&geo, &spec(24 << 30)).unwrap();
        let dma = l.zone(0, ZoneType::Dma);
        assert_eq!((dma.start_pfn, dma.spanned_pages, dma.present_pages), (1, 4095, 3998));
        let dma32 = l.zone(0, ZoneType::Dma32);
        assert_eq!(
            (dma32.start_pfn, dma32.spanned_pages, dma32.present_pages),
            (4096, 1044480, 782336)
        );
        let normal = l.zone(0, ZoneType::Normal);
        assert_eq!(
            (normal.start_pfn, normal.spanned_pages, normal.present_pages),
            (1048576, 5505024, 5505024)
        );
        assert_eq!(l.reserved_pages_in(dma.span()), 158, "DMA managed is 3840 on the host");
        assert_eq!(l.reserved_pages_in(dma32.span()), 9528);
        assert_eq!(l.memmap_boot_pages, 98304, "host: nr_memmap_boot_pages 98304");
        assert_eq!(l.memory_block_bytes, 128 << 20);
        assert_eq!(l.zone(0, ZoneType::Movable).spanned_pages, 0);
    }

    #[test]
    fn memory_block_size_follows_probe_memory_block_size() {
        let geo = Preset::X86_64.geometry();
        let bytes = |mem: u64| Layout::build(&geo, &spec(mem)).unwrap().memory_block_bytes;
        assert_eq!(bytes(16 << 30), 128 << 20);
        // 1T of RAM ends at 1T+1G: the largest block aligned to it is 1G.
        assert_eq!(bytes(1 << 40), 1 << 30);
        // 67G ends at 68G: aligned to 2G? 68G % 2G == 0.
        assert_eq!(bytes(67 << 30), 2 << 30);
    }

    #[test]
    fn nodes_split_memory_evenly_at_section_boundaries() {
        let geo = Preset::X86_64.geometry();
        let mut s = spec(16 << 30);
        s.nr_nodes = 2;
        s.nr_cpus = 4;
        let l = Layout::build(&geo, &s).unwrap();
        assert_eq!(l.nodes.len(), 2);
        assert_eq!(l.nodes[0].cpus, vec![0, 1]);
        assert_eq!(l.nodes[1].cpus, vec![2, 3]);
        assert_eq!(l.nodes[1].start_pfn % geo.pages_per_section(), 0);
        let total: u64 = l.nodes.iter().map(|n| n.present_pages).sum();
        assert_eq!(total, l.present_pages());
        assert_eq!(l.zone(1, ZoneType::Dma).spanned_pages, 0);
        assert!(l.zone(1, ZoneType::Normal).present_pages > 0);
    }

    #[test]
    fn movable_zone_takes_the_top_of_normal() {
        let geo = Preset::X86_64.geometry();
        let mut s = spec(16 << 30);
        s.movable_bytes = 4 << 30;
        let l = Layout::build(&geo, &s).unwrap();
        let movable = l.zone(0, ZoneType::Movable);
        let normal = l.zone(0, ZoneType::Normal);
        assert_eq!(movable.present_pages, (4 << 30) >> 12);
        assert_eq!(normal.span().end, movable.start_pfn);
        assert_eq!(l.reserved_pages_in(movable.span()), 0, "no boot memory in ZONE_MOVABLE");
        s.movable_bytes = 15 << 30;
        assert!(matches!(
            Layout::build(&geo, &s),
            Err(LayoutError::MovableTooLarge { .. })
        ));
    }

    #[test]
    fn bad_specs_are_errors() {
        let geo = Preset::X86_64.geometry();
        assert!(matches!(
            Layout::build(&geo, &spec(16 << 20)),
            Err(LayoutError::MemTooSmall(_))
        ));
        assert!(matches!(
            Layout::build(&geo, &spec((64 << 20) + 4096)),
            Err(LayoutError::MemNotAligned(_))
        ));
        assert!(matches!(
            Layout::build(&geo, &spec(32 << 40)),
            Err(LayoutError::TooManyPages { .. })
        ));
        let mut s = spec(256 << 20);
        s.nr_nodes = 4;
        assert!(matches!(Layout::build(&geo, &s), Err(LayoutError::BadNodes { .. })));
        let mut s = spec(32 << 20);
        s.kernel_reserved_bytes = 64 << 20;
        assert!(matches!(
            Layout::build(&geo, &s),
            Err(LayoutError::KernelDoesNotFit { .. })
        ));
    }

    #[test]
    fn arm64_64k_has_no_holes() {
        let geo = Preset::Arm64_64k.geometry();
        let l = Layout::build(&geo, &spec(8 << 30)).unwrap();
        assert_eq!(l.ram, vec![PfnRange::new(0, (8 << 30) >> 16)]);
        assert_eq!(l.zone(0, ZoneType::Dma).present_pages, 256);
        assert_eq!(l.memory_block_bytes, 512 << 20);
    }
}
