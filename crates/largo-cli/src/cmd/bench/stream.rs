//! A reproducible stream of allocations and frees, replayed identically
//! through different allocators.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Relative frequency of orders 0..=10, weighted toward low orders.
pub const ORDER_WEIGHTS: [u32; 11] = [30, 16, 12, 10, 8, 7, 5, 4, 3, 3, 2];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Allocate a block of this order and append it to the live list.
    Alloc(u8),
    /// Free the live block at this index; the last live block takes its place.
    Free(u32),
}

/// Generates `nr_ops` operations. While fewer than `target_live_pages`
/// pages are live, allocations are three times as likely as frees, above
/// it a third as likely, so the stream settles around the target.
pub fn generate(seed: u64, nr_ops: usize, target_live_pages: u64) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let total_weight: u32 = ORDER_WEIGHTS.iter().sum();
    let mut live: Vec<u8> = Vec::new();
    let mut live_pages = 0u64;
    let mut ops = Vec::with_capacity(nr_ops);
    for _ in 0..nr_ops {
        let p_alloc = if live_pages < target_live_pages { 0.75 } else { 0.25 };
        if live.is_empty() || rng.random_bool(p_alloc) {
            let mut pick = rng.random_range(0..total_weight);
            let mut order = 0;
            while pick >= ORDER_WEIGHTS[order] {
                pick -= ORDER_WEIGHTS[order];
                order += 1;
            }
            live.push(order as u8);
            live_pages += 1 << order;
            ops.push(Op::Alloc(order as u8));
        } else {
            let idx = rng.random_range(0..live.len());
            live_pages -= 1 << live.swap_remove(idx);
            ops.push(Op::Free(idx as u32));
        }
    }
    ops
}

/// An allocator the stream can drive.
pub trait FrameSource {
    type Handle: Copy;
    fn alloc(&mut self, order: u32) -> Option<Self::Handle>;
    fn free(&mut self, handle: Self::Handle, order: u32);
}

/// Replays `ops`; returns how many allocations failed. A failed
/// allocation still occupies its live slot, so both allocators walk the
/// same sequence; its free is skipped.
pub fn replay<S: FrameSource>(ops: &[Op], src: &mut S) -> u64 {
    let mut live: Vec<(Option<S::Handle>, u32)> = Vec::with_capacity(1 << 16);
    let mut failures = 0;
    for op in ops {
        match *op {
            Op::Alloc(order) => {
                let h = src.alloc(order as u32);
                failures += h.is_none() as u64;
                live.push((h, order as u32));
            }
            Op::Free(idx) => {
                let (h, order) = live.swap_remove(idx as usize);
                if let Some(h) = h {
                    src.free(h, order);
                }
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_reproducible_and_settles_near_the_target() {
        let a = generate(7, 200_000, 100_000);
        assert_eq!(a, generate(7, 200_000, 100_000));
        assert_ne!(a, generate(8, 200_000, 100_000));
        let mut live: Vec<u8> = Vec::new();
        for op in &a {
            match *op {
                Op::Alloc(o) => live.push(o),
                Op::Free(i) => {
                    live.swap_remove(i as usize);
                }
            }
        }
        let pages: u64 = live.iter().map(|o| 1u64 << o).sum();
        assert!((50_000..200_000).contains(&pages), "live pages at the end: {pages}");
        assert!(a.contains(&Op::Alloc(10)));
    }
}
