//! The `adaptive` order policy: a per-VMA order ceiling that rises on
//! dense faults and falls on sparse ones.
//!
//! A fault is dense when it extends a run of contiguous faulted pages
//! (the page right after or right before one of the VMA's recent runs)
//! or lands next to a populated page; otherwise it is sparse. Each dense
//! fault raises the VMA's ceiling by `grow` orders (3: 32K, 256K, 2M after
//! one, two, three dense faults), each sparse one lowers it by one. The fault's folio is at most the ceiling, or of an order
//! whose neighbouring block (the aligned block of that size just before
//! or after) is at least `dense` percent populated: memory used around
//! the fault is the best predictor that the block will be used too (the
//! host kernel's `anon_beside_full` asks for a full neighbour; the
//! threshold makes the bloat bound explicit). The VMA's size is the
//! prior: a VMA of at most `small` base pages starts with the ceiling
//! that covers it (small mappings are usually used whole), a larger one
//! at order 0 (large reservations are where sparse use lives).
//!
//! A block the ceiling allows that is still at most 1/8 populated is
//! promoted early (its few pages copied into one folio): a sequential
//! run whose first fault got a base page (no evidence yet) still gets
//! the PMD folio of its block on its fourth fault.
//!
//! A program writing one page every 64 KiB only takes sparse faults next
//! to blocks at most 1/4 full and gets base pages.

use super::{param_u32, BlockFill, FaultHistory, FaultSite, OrderPolicy, PolicyParseError};
use crate::vm::order::Orders;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adaptive {
    /// Orders the ceiling rises by per dense fault.
    pub grow: u32,
    /// VMAs of at most this many base pages start with the ceiling that
    /// covers them; larger ones at order 0.
    pub small: u32,
    /// Percent populated a neighbouring block must be for its order to be
    /// used above the ceiling.
    pub dense: u32,
}

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            grow: 3,
            small: 16,
            dense: 75,
        }
    }
}

/// The largest order whose folio has at most `nr_pages` pages (0 for none).
fn order_within(nr_pages: u64) -> u32 {
    if nr_pages <= 1 {
        0
    } else {
        63 - nr_pages.leading_zeros()
    }
}

/// Orders 0..=max.
fn up_to(max: u32) -> Orders {
    if max >= 63 {
        !0
    } else {
        (2u64 << max) - 1
    }
}

impl Adaptive {
    pub(super) fn from_params(params: &[(&str, &str)]) -> Result<Adaptive, PolicyParseError> {
        let mut a = Adaptive::default();
        for &(k, v) in params {
            match k {
                "grow" => a.grow = param_u32("adaptive", k, v, 1, 64)?,
                "small" => a.small = param_u32("adaptive", k, v, 0, 1 << 30)?,
                "dense" => a.dense = param_u32("adaptive", k, v, 1, 100)?,
                _ => {
                    return Err(PolicyParseError::UnknownParam {
                        policy: "adaptive",
                        param: k.into(),
                        expected: "grow, small, dense",
                    })
                }
            }
        }
        Ok(a)
    }

    pub(super) fn spec(&self) -> String {
        if *self == Adaptive::default() {
            "adaptive".into()
        } else {
            format!("adaptive:grow={},small={},dense={}", self.grow, self.small, self.dense)
        }
    }

    /// The ceiling before any fault: the VMA size prior.
    fn prior_order(&self, site: &FaultSite) -> u32 {
        if site.vma_pages <= self.small as u64 {
            order_within(site.vma_pages).min(site.pmd_order)
        } else {
            0
        }
    }

    /// The ceiling once this fault is counted.
    fn ceiling_after(&self, site: &FaultSite, hist: &FaultHistory) -> u32 {
        let ceiling = hist.max_order.map_or_else(|| self.prior_order(site), u32::from);
        let dense = site.beside_populated || hist.extended_run(site.page).is_some();
        if dense {
            (ceiling + self.grow).min(site.pmd_order)
        } else if hist.max_order.is_none() {
            ceiling
        } else {
            ceiling.saturating_sub(1)
        }
    }
}

impl OrderPolicy for Adaptive {
    fn orders(&self, site: &FaultSite, hist: &FaultHistory, allowed: Orders, fill: &dyn BlockFill) -> Orders {
        let within = allowed & up_to(self.ceiling_after(site, hist));
        let mut above = allowed & !within;
        let mut beside_dense = 0;
        while above != 0 {
            let order = 63 - above.leading_zeros();
            above &= !(1 << order);
            if fill.beside_per_mille(order) >= self.dense * 10 {
                beside_dense |= 1 << order;
            }
        }
        within | beside_dense
    }

    fn mapped(&self, site: &FaultSite, first_page: u64, order: u32, hist: &mut FaultHistory) {
        hist.max_order = Some(self.ceiling_after(site, hist) as u8);
        hist.record(site.page, first_page, 1 << order);
    }

    fn promotes(&self) -> bool {
        true
    }

    /// Early promotion: a block the ceiling now allows, still at most
    /// 1/8 populated, becomes one folio at the cost of copying those few
    /// pages. It is how a run that started with base pages in a PMD block
    /// (no evidence yet at its first fault) still gets the PMD folio the
    /// static policy would have given it, instead of 30-odd smaller faults.
    fn promote(&self, _: &FaultSite, hist: &FaultHistory, order: u32, populated: u64, nr_pages: u64) -> bool {
        hist.max_order.is_some_and(|m| order <= m as u32) && populated * 8 <= nr_pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Orders = 0b11_1111_1100; // orders 2..=9

    /// Neighbourhoods in which nothing, or every block, is populated.
    struct Fill(u32);
    impl BlockFill for Fill {
        fn beside_per_mille(&self, _: u32) -> u32 {
            self.0
        }
    }
    const EMPTY: Fill = Fill(0);

    fn site(page: u64) -> FaultSite {
        FaultSite {
            page,
            vma_pages: 1 << 17,
            pmd_order: 9,
            beside_populated: false,
        }
    }

    /// Faults `pages` in ascending order, each mapping the largest order
    /// offered whose aligned block holds no page mapped before (as
    /// `pte_none` would allow); returns the orders mapped.
    fn drive(a: &Adaptive, pages: impl IntoIterator<Item = u64>) -> Vec<u32> {
        let mut h = FaultHistory::default();
        let mut out = Vec::new();
        let mut mapped_to = 0u64;
        for p in pages {
            if p < mapped_to {
                continue;
            }
            let s = site(p);
            let mut orders = a.orders(&s, &h, ALL, &EMPTY);
            let mut order = 0;
            while orders != 0 {
                let o = 63 - orders.leading_zeros();
                if p & !((1 << o) - 1) >= mapped_to {
                    order = o;
                    break;
                }
                orders &= !(1 << o);
            }
            let first = p & !((1u64 << order) - 1);
            a.mapped(&s, first, order, &mut h);
            mapped_to = first + (1 << order);
            out.push(order);
        }
        out
    }

    #[test]
    fn sparse_faults_get_base_pages() {
        let orders = drive(&Adaptive::default(), (0..64).map(|i| i * 16));
        assert!(orders.iter().all(|&o| o == 0), "{orders:?}");
    }

    #[test]
    fn a_sequential_run_ramps_up_to_the_pmd_order() {
        let orders = drive(&Adaptive::default(), 0..4096);
        assert_eq!(orders[0], 0);
        assert!(orders.contains(&4) && orders.contains(&9), "{orders:?}");
        // Folios never outgrow the run they extend.
        assert!(orders.len() < 100, "{} faults for 4096 pages", orders.len());
    }

    #[test]
    fn a_small_vma_starts_with_the_folio_that_covers_it() {
        let a = Adaptive::default();
        let small = FaultSite {
            page: 3,
            vma_pages: 16,
            pmd_order: 9,
            beside_populated: false,
        };
        let h = FaultHistory::default();
        assert_eq!(a.orders(&small, &h, ALL, &EMPTY), 0b1_1100, "up to 64K (16 pages)");
        let big = FaultSite { vma_pages: 17, ..small };
        assert_eq!(a.orders(&big, &h, ALL, &EMPTY), 0);
        // A fault beside a populated page is dense: the ceiling rises by
        // `grow` (3) orders.
        let beside = FaultSite {
            beside_populated: true,
            ..big
        };
        assert_eq!(a.orders(&beside, &h, ALL, &EMPTY), 0b1100, "orders 2 and 3");
        let mut h = FaultHistory::default();
        h.max_order = Some(3);
        assert_eq!(a.orders(&beside, &h, ALL, &EMPTY), 0b111_1100);
        assert_eq!(a.orders(&big, &h, ALL, &EMPTY), 0b0_0100, "a sparse fault lowers it");
        // Orders whose neighbouring block is dense enough are allowed too.
        assert_eq!(a.orders(&big, &h, ALL, &Fill(750)), ALL);
        assert_eq!(a.orders(&big, &h, ALL, &Fill(749)), 0b0_0100);
    }
}
