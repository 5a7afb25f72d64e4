//! Inferring each pageblock's migratetype for a snapshot. The kernel does
//! not export it per pfn, only per zone: /proc/pagetypeinfo counts the
//! pageblocks of each type and the free blocks of each order on each
//! type's lists (since 6.10 a free block always sits on the list of its
//! pageblock's type, so those counts are counts of the pageblocks' free
//! memory).
//!
//! Per zone: pageblocks are ranked by their unmovable evidence (frames of
//! slab, page tables and flagless kernel memory; ties by fewer free
//! frames); the top ones, as many as pagetypeinfo counts Unmovable,
//! Reclaimable and HighAtomic blocks, take those types (Reclaimable to
//! the largest slab shares, HighAtomic to the freest), the rest Movable.
//! Then pairs of blocks of different types are swapped, in a fixed
//! pseudo-random order, whenever that brings the per-type, per-order free
//! counts closer to pagetypeinfo's (a block holding anonymous or file
//! memory is never made non-movable by a swap unless it also holds kernel
//! memory). What still disagrees is reported as misplaced free pages.

use largo_mm::snapshot::{aligned_blocks, PfnKind, SnapshotZone};
use largo_types::{MigrateType, MIGRATE_TYPES};

/// The method, for the snapshot's header.
pub const METHOD: &str = "pageblocks ranked by unmovable frames (slab, page tables, flagless kernel memory), the top ones \
     typed Unmovable/Reclaimable/HighAtomic as many as /proc/pagetypeinfo counts, the rest Movable; then swaps that bring \
     the per-type per-order free block counts closer to pagetypeinfo's";

/// Swaps tried per zone.
const SWAP_TRIES: usize = 200_000;

/// The inferred types.
pub struct Inferred {
    /// One migratetype index per pageblock.
    pub pageblock_mt: Vec<u8>,
    /// Free pages on a type's lists beyond pagetypeinfo's count for that
    /// type and order, summed.
    pub misplaced_pages: u64,
}

/// What one pageblock holds.
#[derive(Clone, Debug, Default)]
struct Block {
    index: usize,
    unmovable: u64,
    slab: u64,
    movable: u64,
    free: u64,
    /// Free blocks per order starting in this pageblock.
    free_hist: Vec<u64>,
}

fn tally(kinds: &[u8], index: usize, pb_order: u32, free_hist: Vec<u64>) -> Block {
    let start = (index as u64) << pb_order;
    let end = (start + (1 << pb_order)).min(kinds.len() as u64);
    let mut b = Block {
        index,
        free_hist,
        ..Block::default()
    };
    for p in start..end {
        match PfnKind::from_u8(kinds[p as usize]).unwrap_or(PfnKind::Hole) {
            PfnKind::Slab => {
                b.slab += 1;
                b.unmovable += 1;
            }
            PfnKind::PageTable | PfnKind::Kernel => b.unmovable += 1,
            PfnKind::Anon | PfnKind::File => b.movable += 1,
            PfnKind::Free | PfnKind::PcpFree => b.free += 1,
            _ => {}
        }
    }
    b
}

/// The free buddy blocks of `[start, end)` per order, by the pageblock
/// each starts in (a block above the pageblock order counts once, in its
/// first pageblock).
fn free_histograms(kinds: &[u8], start: u64, end: u64, pb_order: u32, max_order: u32) -> Vec<Vec<u64>> {
    let first = start >> pb_order;
    let nr = (end.div_ceil(1 << pb_order) - first) as usize;
    let mut out = vec![vec![0u64; max_order as usize + 1]; nr];
    let free = |p: u64| kinds[p as usize] == PfnKind::Free as u8;
    let mut p = start;
    while p < end {
        if !free(p) {
            p += 1;
            continue;
        }
        let mut e = p;
        while e < end && free(e) {
            e += 1;
        }
        for (pfn, o) in aligned_blocks(p, e, max_order) {
            out[((pfn >> pb_order) - first) as usize][o as usize] += 1;
        }
        p = e;
    }
    out
}

/// Per type and order, the free blocks of the blocks assigned to it.
fn assigned_counts(blocks: &[Block], types: &[usize], nr_orders: usize) -> Vec<Vec<i64>> {
    let mut out = vec![vec![0i64; nr_orders]; MIGRATE_TYPES];
    for (b, &t) in blocks.iter().zip(types) {
        for (o, &n) in b.free_hist.iter().enumerate().take(nr_orders) {
            out[t][o] += n as i64;
        }
    }
    out
}

/// pagetypeinfo prints a count above this as `>100000`: a lower bound.
const PAGETYPEINFO_CAP: i64 = 100_000;

/// Pages of disagreement between assigned and target counts (a capped
/// target only disagrees with fewer).
fn error(assigned: &[Vec<i64>], target: &[Vec<i64>]) -> i64 {
    assigned
        .iter()
        .zip(target)
        .map(|(a, t)| {
            a.iter()
                .zip(t)
                .enumerate()
                .map(|(o, (&x, &y))| {
                    let d = if y >= PAGETYPEINFO_CAP {
                        (y - x).max(0)
                    } else {
                        (x - y).abs()
                    };
                    d << o
                })
                .sum::<i64>()
        })
        .sum()
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether `b` may take type `t` in a swap.
fn may_take(b: &Block, t: usize) -> bool {
    t == MigrateType::Movable.index() || b.movable == 0 || b.unmovable > 0
}

/// One zone's types: the initial ranking, then the swaps.
fn infer_zone(blocks: &[Block], zone: &SnapshotZone, nr_orders: usize) -> (Vec<usize>, i64) {
    let count = |mt: MigrateType| zone.blocks.get(mt.index()).copied().unwrap_or(0) as usize;
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(blocks[i].unmovable), blocks[i].free, blocks[i].index));
    let movable = MigrateType::Movable.index();
    let mut types = vec![movable; blocks.len()];
    let nonmovable = (count(MigrateType::Unmovable) + count(MigrateType::Reclaimable) + count(MigrateType::HighAtomic))
        .min(blocks.len());
    let mut top: Vec<usize> = order[..nonmovable].to_vec();
    top.sort_by_key(|&i| (std::cmp::Reverse(blocks[i].slab), blocks[i].index));
    let nr_recl = count(MigrateType::Reclaimable).min(top.len());
    for &i in &top[..nr_recl] {
        types[i] = MigrateType::Reclaimable.index();
    }
    let mut rest: Vec<usize> = top[nr_recl..].to_vec();
    rest.sort_by_key(|&i| (std::cmp::Reverse(blocks[i].free), blocks[i].index));
    let nr_high = count(MigrateType::HighAtomic).min(rest.len());
    for (k, &i) in rest.iter().enumerate() {
        types[i] = if k < nr_high {
            MigrateType::HighAtomic.index()
        } else {
            MigrateType::Unmovable.index()
        };
    }
    let target: Vec<Vec<i64>> = (0..MIGRATE_TYPES)
        .map(|mt| {
            (0..nr_orders)
                .map(|o| zone.free.get(o).and_then(|f| f.get(mt)).copied().unwrap_or(0) as i64)
                .collect()
        })
        .collect();
    let mut assigned = assigned_counts(blocks, &types, nr_orders);
    let mut err = error(&assigned, &target);
    let mut state = 0x5eed_u64;
    for _ in 0..SWAP_TRIES {
        if err == 0 || blocks.len() < 2 {
            break;
        }
        let a = (splitmix(&mut state) % blocks.len() as u64) as usize;
        let b = (splitmix(&mut state) % blocks.len() as u64) as usize;
        let (ta, tb) = (types[a], types[b]);
        if ta == tb || !may_take(&blocks[a], tb) || !may_take(&blocks[b], ta) {
            continue;
        }
        // Move a's free blocks from ta to tb and b's the other way; keep
        // the swap if the counts got closer, else move them back.
        let shift = |assigned: &mut [Vec<i64>], sign: i64| {
            for (o, (&fa, &fb)) in blocks[a]
                .free_hist
                .iter()
                .zip(&blocks[b].free_hist)
                .enumerate()
                .take(nr_orders)
            {
                let d = sign * (fb as i64 - fa as i64);
                assigned[ta][o] += d;
                assigned[tb][o] -= d;
            }
        };
        shift(&mut assigned, 1);
        let e = error(&assigned, &target);
        if e < err {
            err = e;
            types.swap(a, b);
        } else {
            shift(&mut assigned, -1);
        }
    }
    (types, err)
}

/// Pageblock types for a snapshot's frames.
pub fn infer_migratetypes(kinds: &[u8], zones: &[SnapshotZone], pb_order: u32) -> Inferred {
    let nr_pb = (kinds.len() as u64).div_ceil(1 << pb_order) as usize;
    let mut out = vec![MigrateType::Movable.index() as u8; nr_pb];
    let mut misplaced = 0i64;
    for z in zones {
        let first = (z.start_pfn >> pb_order) as usize;
        let last = ((z.start_pfn + z.spanned_pages).div_ceil(1 << pb_order) as usize).min(nr_pb);
        let max_order = z.free.len().saturating_sub(1).max(pb_order as usize) as u32;
        let nr_orders = max_order as usize + 1;
        let end = (z.start_pfn + z.spanned_pages).min(kinds.len() as u64);
        let hists = free_histograms(kinds, z.start_pfn.min(end), end, pb_order, max_order);
        let blocks: Vec<Block> = (first..last)
            .zip(hists)
            .map(|(i, h)| tally(kinds, i, pb_order, h))
            .collect();
        let (types, err) = infer_zone(&blocks, z, nr_orders);
        for (b, t) in blocks.iter().zip(types) {
            out[b.index] = t as u8;
        }
        misplaced += err / 2;
    }
    Inferred {
        pageblock_mt: out,
        misplaced_pages: misplaced.max(0) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_memory_makes_blocks_unmovable_and_free_counts_settle_the_rest() {
        // Four pageblocks of 4 frames: one with slab, one with anon, two
        // free; pagetypeinfo says one Unmovable block, with one order-0
        // free block on the Unmovable list.
        use PfnKind::*;
        let kinds: Vec<u8> = [
            Slab, Slab, Free, Kernel, // block 0: unmovable evidence, 1 free order-0
            Anon, Anon, Anon, Anon, // block 1
            Free, Free, Free, Free, // block 2
            Free, Free, Free, Free, // block 3
        ]
        .iter()
        .map(|&k| k as u8)
        .collect();
        let mut free = vec![vec![0u64; MIGRATE_TYPES]; 4];
        free[0][MigrateType::Unmovable.index()] = 1;
        free[3][MigrateType::Movable.index()] = 1; // blocks 2 and 3 merge into one order-3 block
        let mut blocks = vec![0u64; MIGRATE_TYPES];
        blocks[MigrateType::Unmovable.index()] = 1;
        blocks[MigrateType::Movable.index()] = 3;
        let zone = SnapshotZone {
            nid: 0,
            name: "Normal".into(),
            start_pfn: 0,
            spanned_pages: 16,
            present_pages: 16,
            managed_pages: 16,
            free,
            blocks,
            pcp_pages: 0,
        };
        let r = infer_migratetypes(&kinds, &[zone], 2);
        assert_eq!(r.pageblock_mt[0], MigrateType::Unmovable.index() as u8);
        assert!(r.pageblock_mt[1..]
            .iter()
            .all(|&t| t == MigrateType::Movable.index() as u8));
    }

    #[test]
    fn swaps_settle_what_the_ranking_cannot() {
        // Two blocks with one kernel frame each; the ranking (fewer free
        // frames first) would make block 0 Unmovable, but pagetypeinfo's
        // Unmovable list holds an order-1 block, which only block 1 has.
        use PfnKind::*;
        let kinds: Vec<u8> = [
            Kernel, Free, Anon, Anon, // block 0: one order-0 free block
            Kernel, Anon, Free, Free, // block 1: one order-1 free block
            Anon, Anon, Anon, Anon, // block 2
        ]
        .iter()
        .map(|&k| k as u8)
        .collect();
        let mut free = vec![vec![0u64; MIGRATE_TYPES]; 3];
        free[0][MigrateType::Movable.index()] = 1;
        free[1][MigrateType::Unmovable.index()] = 1;
        let mut blocks = vec![0u64; MIGRATE_TYPES];
        blocks[MigrateType::Unmovable.index()] = 1;
        blocks[MigrateType::Movable.index()] = 2;
        let zone = SnapshotZone {
            nid: 0,
            name: "Normal".into(),
            start_pfn: 0,
            spanned_pages: 12,
            present_pages: 12,
            managed_pages: 12,
            free,
            blocks,
            pcp_pages: 0,
        };
        let r = infer_migratetypes(&kinds, &[zone], 2);
        assert_eq!(
            r.pageblock_mt[1],
            MigrateType::Unmovable.index() as u8,
            "{:?}",
            r.pageblock_mt
        );
        assert_eq!(r.pageblock_mt[0], MigrateType::Movable.index() as u8);
        assert_eq!(r.misplaced_pages, 0);
    }
}
