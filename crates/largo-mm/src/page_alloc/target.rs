//! Where a migrating folio goes: the `new_folio_t` callbacks that
//! `migrate_pages` is given (mm/migrate.c `alloc_migration_target`,
//! mm/compaction.c `compaction_alloc`).

use super::gfp::{Gfp, GFP_HIGHUSER_MOVABLE, GFP_TRANSHUGE, GFP_USER};
use super::{PageAlloc, Reclaim};
use crate::compaction::CompactControl;
use crate::memmap::Folio;

/// The destination policy of one `migrate_pages` call.
pub enum MigrationTarget<'a> {
    /// `move_pages` and NUMA balancing: node `nid` only (`__GFP_THISNODE`).
    ThisNode(usize),
    /// Memory offlining and `alloc_contig_range`: any node, `nid` first
    /// (`GFP_USER | __GFP_MOVABLE | __GFP_RETRY_MAYFAIL`). Isolated
    /// pageblocks never hand out pages, so the range being emptied is
    /// never a destination.
    PreferNode(usize),
    /// Compaction: the free pages the free scanner isolated.
    Compaction(&'a mut CompactControl),
}

impl PageAlloc {
    /// A destination folio of `order` for `target`, or `None` (`-ENOMEM`).
    /// A large destination never enters direct reclaim
    /// (`alloc_migration_target` clears `__GFP_RECLAIM` and uses `GFP_TRANSHUGE`).
    pub fn alloc_migration_dst(
        &mut self,
        cpu: usize,
        target: &mut MigrationTarget,
        order: u32,
        reclaim: &mut dyn Reclaim,
    ) -> Option<Folio> {
        let (nid, gfp) = match target {
            MigrationTarget::Compaction(cc) => return self.compactor().compaction_alloc(cc, order),
            MigrationTarget::ThisNode(nid) if order > 0 => {
                (*nid, (GFP_TRANSHUGE | Gfp::THISNODE).difference(Gfp::DIRECT_RECLAIM))
            }
            MigrationTarget::ThisNode(nid) => (*nid, GFP_HIGHUSER_MOVABLE | Gfp::THISNODE),
            MigrationTarget::PreferNode(nid) if order > 0 => (
                *nid,
                GFP_TRANSHUGE.difference(Gfp::DIRECT_RECLAIM | Gfp::KSWAPD_RECLAIM),
            ),
            MigrationTarget::PreferNode(nid) => (*nid, GFP_USER | Gfp::MOVABLE | Gfp::RETRY_MAYFAIL),
        };
        self.alloc_pages_node(cpu, nid, gfp, order, reclaim)
            .unwrap_or_else(|e| unreachable!("a valid migration target request: {e}"))
    }
}
