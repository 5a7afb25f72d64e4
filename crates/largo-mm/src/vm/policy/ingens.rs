//! The `ingens` order policy: utilisation-driven promotion (Kwon et al.,
//! "Coordinated and Efficient Huge Page Management with Ingens", OSDI
//! 2016). Faults map base pages; once the share of populated base pages
//! in an aligned block of an order the knobs allow reaches `util`
//! percent, the block is promoted: one folio of that order, each
//! populated page copied into it and the rest zeroed
//! (`Vm::promote_block`). Ingens promotes 2 MiB regions from a background
//! thread at 90%; here the block is of the largest order the knobs allow
//! at the fault (2 MiB when PMD THP is on), and the promotion happens in the fault that reaches the threshold, so
//! its cost is the faulting task's kernel time.

use super::{param_u32, BlockFill, FaultHistory, FaultSite, OrderPolicy, PolicyParseError};
use crate::vm::order::Orders;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ingens {
    /// Percent of a block's base pages populated before it is promoted.
    pub util: u32,
}

impl Default for Ingens {
    fn default() -> Self {
        Ingens { util: 90 }
    }
}

impl Ingens {
    pub(super) fn from_params(params: &[(&str, &str)]) -> Result<Ingens, PolicyParseError> {
        let mut i = Ingens::default();
        for &(k, v) in params {
            match k {
                "util" => i.util = param_u32("ingens", k, v, 1, 100)?,
                _ => {
                    return Err(PolicyParseError::UnknownParam {
                        policy: "ingens",
                        param: k.into(),
                        expected: "util",
                    })
                }
            }
        }
        Ok(i)
    }

    pub(super) fn spec(&self) -> String {
        if *self == Ingens::default() {
            "ingens".into()
        } else {
            format!("ingens:util={}", self.util)
        }
    }
}

impl OrderPolicy for Ingens {
    fn orders(&self, _: &FaultSite, _: &FaultHistory, _: Orders, _: &dyn BlockFill) -> Orders {
        0
    }

    fn mapped(&self, site: &FaultSite, first_page: u64, order: u32, hist: &mut FaultHistory) {
        hist.record(site.page, first_page, 1 << order);
    }

    fn promotes(&self) -> bool {
        true
    }

    fn promote(&self, _: &FaultSite, _: &FaultHistory, _: u32, populated: u64, nr_pages: u64) -> bool {
        populated * 100 >= self.util as u64 * nr_pages
    }
}
