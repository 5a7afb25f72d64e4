//! Where boot puts a CMA area (mm/cma.c `cma_declare_contiguous_nid`,
//! `__cma_declare_contiguous_nid`, `cma_alloc_mem`): the size rounds up to
//! `CMA_MIN_ALIGNMENT_PAGES` (one pageblock, so a 1 GiB pageblock makes
//! every area at least 1 GiB), and the memblock reservation is taken
//! bottom-up from 4 GiB when the machine reaches that far above it, else
//! top-down below the end of RAM; an area for a node (`numa_cma=`) only
//! from that node's memory. It happens before the memmap is allocated, as
//! `dma_contiguous_reserve` runs early in `setup_arch`.

use crate::layout::PfnRange;

/// One `--cma SIZE[@NODE]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmaSpec {
    pub bytes: u64,
    /// `numa_cma=NODE:SIZE` (exact node); `None`: `cma=SIZE` (any node).
    pub nid: Option<usize>,
}

/// A reserved area, before activation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmaReservation {
    /// `reserved` for `cma=`, `numaN` for a node's area.
    pub name: String,
    pub range: PfnRange,
    pub nid: Option<usize>,
    /// What was asked, before rounding to the pageblock.
    pub requested_bytes: u64,
}

/// Why an area cannot be reserved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmaDeclareError {
    #[error("CMA area {0}: size 0 (-EINVAL)")]
    Empty(usize),
    #[error("CMA area {index}: no node {nid}")]
    NoNode { index: usize, nid: usize },
    #[error("CMA area {index}: failed to reserve {size} (-ENOMEM): no free aligned range of RAM that large")]
    NoRoom { index: usize, size: String },
}

/// The node ranges the placement may use: `(nid, start_pfn, end_pfn)`.
pub type NodeSpan = (usize, u64, u64);

/// `cma_alloc_mem` for every spec in order, each from what RAM is still
/// free (`free`, sorted; consumed). `pageblock_pages` is the alignment.
pub fn reserve_cma_areas(
    specs: &[CmaSpec],
    free: &mut Vec<PfnRange>,
    nodes: &[NodeSpan],
    pageblock_pages: u64,
    four_gib_pfn: u64,
    page_shift: u32,
) -> Result<Vec<CmaReservation>, CmaDeclareError> {
    let mut out = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        if spec.bytes == 0 {
            return Err(CmaDeclareError::Empty(index));
        }
        let nr_pages = spec.bytes.div_ceil(1 << page_shift).next_multiple_of(pageblock_pages);
        let spans: Vec<PfnRange> = match spec.nid {
            Some(nid) => {
                let &(_, s, e) = nodes
                    .iter()
                    .find(|(n, _, _)| *n == nid)
                    .ok_or(CmaDeclareError::NoNode { index, nid })?;
                vec![PfnRange::new(s, e)]
            }
            None => nodes.iter().map(|&(_, s, e)| PfnRange::new(s, e)).collect(),
        };
        // memblock ranges never cross a node: the free RAM is cut at
        // each node's edges, so an area lies in one node.
        let mut window: Vec<PfnRange> = free
            .iter()
            .flat_map(|r| spans.iter().map(move |s| r.intersect(*s)))
            .filter(|r| !r.is_empty())
            .collect();
        window.sort_by_key(|r| r.start);
        let limit = spans.iter().map(|s| s.end).max().unwrap_or(0);
        let got = if limit >= four_gib_pfn + nr_pages {
            first_fit_bottom_up(&window, nr_pages, pageblock_pages, four_gib_pfn)
        } else {
            None
        }
        .or_else(|| first_fit_top_down(&window, nr_pages, pageblock_pages))
        .ok_or_else(|| CmaDeclareError::NoRoom {
            index,
            size: largo_types::format_size(nr_pages << page_shift),
        })?;
        *free = crate::layout::subtract(free, std::iter::once(got));
        out.push(CmaReservation {
            name: spec.nid.map_or_else(|| "reserved".to_string(), |n| format!("numa{n}")),
            range: got,
            nid: spec.nid,
            requested_bytes: spec.bytes,
        });
    }
    Ok(out)
}

/// The lowest aligned run of `nr` pages at or above `from`.
fn first_fit_bottom_up(free: &[PfnRange], nr: u64, align: u64, from: u64) -> Option<PfnRange> {
    free.iter().find_map(|r| {
        let start = r.start.max(from).next_multiple_of(align);
        (start + nr <= r.end).then(|| PfnRange::new(start, start + nr))
    })
}

/// The highest aligned run of `nr` pages (memblock's default direction),
/// never at pfn 0.
fn first_fit_top_down(free: &[PfnRange], nr: u64, align: u64) -> Option<PfnRange> {
    free.iter().rev().find_map(|r| {
        let start = r.end.checked_sub(nr)? / align * align;
        (start >= r.start.max(1)).then(|| PfnRange::new(start, start + nr))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB_PAGES: u64 = 1 << 18;

    #[test]
    fn areas_round_to_the_pageblock_and_go_above_4g_bottom_up() {
        // 8 GiB of RAM: 0..3G and 4G..9G (x86's hole below 4G).
        let mut free = vec![
            PfnRange::new(256, 3 * GIB_PAGES),
            PfnRange::new(4 * GIB_PAGES, 9 * GIB_PAGES),
        ];
        let nodes = [(0, 0, 9 * GIB_PAGES)];
        let spec = [CmaSpec {
            bytes: 3 << 20,
            nid: None,
        }];
        let got = reserve_cma_areas(&spec, &mut free, &nodes, 512, 4 * GIB_PAGES, 12).unwrap();
        assert_eq!(
            got[0].range,
            PfnRange::new(4 * GIB_PAGES, 4 * GIB_PAGES + 1024),
            "4M: two 2M pageblocks"
        );
        // A 1 GiB pageblock makes the same request a whole GiB.
        let mut free = vec![PfnRange::new(4 * GIB_PAGES, 9 * GIB_PAGES)];
        let got = reserve_cma_areas(&spec, &mut free, &nodes, GIB_PAGES, 4 * GIB_PAGES, 12).unwrap();
        assert_eq!(got[0].range.len(), GIB_PAGES);
        assert_eq!(free[0].start, 5 * GIB_PAGES, "taken from the free RAM");
    }

    #[test]
    fn a_small_machine_places_its_area_top_down_and_a_node_area_in_its_node() {
        let mut free = vec![PfnRange::new(256, 2 * GIB_PAGES)];
        let nodes = [(0, 0, GIB_PAGES), (1, GIB_PAGES, 2 * GIB_PAGES)];
        let specs = [
            CmaSpec {
                bytes: 64 << 20,
                nid: None,
            },
            CmaSpec {
                bytes: 64 << 20,
                nid: Some(0),
            },
        ];
        let got = reserve_cma_areas(&specs, &mut free, &nodes, 512, 4 * GIB_PAGES, 12).unwrap();
        assert_eq!(got[0].range.end, 2 * GIB_PAGES);
        assert_eq!(got[1].range.end, GIB_PAGES, "node 0's top");
        assert_eq!(got[1].name, "numa0");
        let too_big = [CmaSpec {
            bytes: 4 << 30,
            nid: None,
        }];
        assert!(matches!(
            reserve_cma_areas(&too_big, &mut free, &nodes, 512, 4 * GIB_PAGES, 12),
            Err(CmaDeclareError::NoRoom { .. })
        ));
    }
}
