//! The priority loop (mm/vmscan.c `do_try_to_free_pages`, `shrink_node`,
//! `shrink_node_memcgs`, v6.18): from `DEF_PRIORITY` down to 0, each node
//! shrinks the lruvecs of the memcgs reclaim targets until the goal is
//! met; a pass that reclaimed nothing because it skipped deactivation is
//! tried again with deactivation forced.

use super::super::reclaim::SHRINK_BATCH;
use super::super::{Ctx, Vm};
use super::{Reclaimer, ScanControl, DEF_PRIORITY, SWAP_CLUSTER_MAX};

impl Vm {
    /// `try_to_free_mem_cgroup_pages`: memcg limit reclaim of at least
    /// `SWAP_CLUSTER_MAX` pages for a charge of `nr_pages`. Returns the
    /// pages reclaimed.
    pub(crate) fn try_to_free_mem_cgroup_pages(&mut self, ctx: &mut Ctx, memcg: usize, nr_pages: u64) -> u64 {
        let swappiness = self.memcg_swappiness(memcg);
        let mut sc = ScanControl::new(
            nr_pages.max(SWAP_CLUSTER_MAX),
            Reclaimer::Direct,
            Some(memcg),
            swappiness,
        );
        let nodes: Vec<usize> = (0..self.node_stat.len()).collect();
        self.do_try_to_free_pages(ctx, &nodes, &mut sc)
    }

    /// Global reclaim of node `nid` for `nr_to_reclaim` pages, by a direct
    /// reclaimer or kswapd. Returns the pages reclaimed.
    pub(crate) fn try_to_free_pages(&mut self, ctx: &mut Ctx, nid: usize, nr_to_reclaim: u64, kswapd: bool) -> u64 {
        let who = match (kswapd, self.khugepaged.running) {
            (true, _) => Reclaimer::Kswapd,
            (false, true) => Reclaimer::Khugepaged,
            (false, false) => Reclaimer::Direct,
        };
        let mut sc = ScanControl::new(nr_to_reclaim.max(SWAP_CLUSTER_MAX), who, None, self.swappiness);
        self.do_try_to_free_pages(ctx, &[nid], &mut sc)
    }

    /// `do_try_to_free_pages`.
    fn do_try_to_free_pages(&mut self, ctx: &mut Ctx, nodes: &[usize], sc: &mut ScanControl) -> u64 {
        loop {
            sc.priority = DEF_PRIORITY;
            loop {
                sc.nr_scanned = 0;
                for &nid in nodes {
                    self.shrink_node(ctx, nid, sc);
                }
                if sc.nr_reclaimed >= sc.nr_to_reclaim || sc.priority == 0 {
                    break;
                }
                sc.priority -= 1;
            }
            for &nid in nodes {
                let target = self.lruvec_index(nid, sc.target_memcg.unwrap_or(0));
                for t in 0..2 {
                    self.lruvecs[target].refaults[t] = self.lruvec_workingset_activate(target, t);
                }
            }
            if sc.nr_reclaimed > 0 || !sc.skipped_deactivate || sc.force_deactivate {
                return sc.nr_reclaimed;
            }
            sc.force_deactivate = true;
            sc.skipped_deactivate = false;
        }
    }

    /// `shrink_node` -> `shrink_node_memcgs`: the target's lruvec (and for
    /// global reclaim every memcg's, the root's first); memcg reclaim stops
    /// once the goal is met.
    fn shrink_node(&mut self, ctx: &mut Ctx, nid: usize, sc: &mut ScanControl) {
        let target = self.lruvec_index(nid, sc.target_memcg.unwrap_or(0));
        self.prepare_scan_control(ctx, target, sc);
        let memcgs: Vec<usize> = match sc.target_memcg {
            Some(m) => vec![m],
            None => (0..self.lruvecs.len() / self.node_stat.len()).collect(),
        };
        for memcg in memcgs {
            let lv = self.lruvec_index(nid, memcg);
            self.shrink_lruvec(ctx, lv, sc);
            // shrink_slab(sc->gfp_mask, nid, memcg, sc->priority); global
            // reclaim's shrinkers run once per pass in reclaim.rs.
            if sc.cgroup_reclaim() && memcg != 0 {
                self.shrink_slab_memcg(ctx, nid, memcg, sc.priority);
            }
            if sc.cgroup_reclaim() && sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
    }

    /// `shrink_slab` of a memcg other than the root -> `shrink_slab_memcg`:
    /// the memcg-aware shrinkers whose bit is set in the (memcg, node)
    /// map; of the model's shrinkers only "thp-deferred_split" is
    /// memcg-aware (`SHRINKER_NUMA_AWARE | SHRINKER_MEMCG_AWARE |
    /// SHRINKER_NONSLAB`). Returns the folios split.
    fn shrink_slab_memcg(&mut self, ctx: &mut Ctx, nid: usize, memcg: usize, priority: u32) -> u64 {
        let lv = self.lruvec_index(nid, memcg);
        if !self.lruvecs[lv].deferred_split_shrinker_bit {
            return 0;
        }
        self.do_shrink_slab_deferred_split_memcg(ctx, lv, memcg, priority)
    }

    /// `do_shrink_slab` of the deferred split shrinker for a memcg:
    /// `freeable` is the memcg's queue length (`deferred_split_count`);
    /// the scan target is the (memcg, node)'s `nr_deferred` plus
    /// `delta = (freeable >> priority) * 4 / seeks` (`DEFAULT_SEEKS` 2),
    /// at most twice `freeable`; it scans in `SHRINK_BATCH`es while the
    /// target is a batch or at least `freeable`, and defers what it left
    /// (at most twice `freeable`).
    fn do_shrink_slab_deferred_split_memcg(&mut self, ctx: &mut Ctx, lv: usize, memcg: usize, priority: u32) -> u64 {
        const DEFAULT_SEEKS: u64 = 2;
        let freeable = self.deferred_split_count_memcg(memcg);
        if freeable == 0 {
            return 0;
        }
        let nr = std::mem::take(&mut self.lruvecs[lv].deferred_split_nr_deferred);
        let delta = (freeable >> priority) * 4 / DEFAULT_SEEKS;
        let mut total_scan = ((nr >> priority) + delta).min(2 * freeable);
        let (mut freed, mut scanned) = (0, 0);
        while total_scan >= SHRINK_BATCH || total_scan >= freeable {
            let nr_to_scan = SHRINK_BATCH.min(total_scan);
            match self.deferred_split_scan_memcg(ctx, memcg, nr_to_scan) {
                None => break,
                Some(split) => freed += split,
            }
            total_scan -= nr_to_scan;
            scanned += nr_to_scan;
        }
        let next_deferred = (nr + delta).saturating_sub(scanned).min(2 * freeable);
        self.lruvecs[lv].deferred_split_nr_deferred += next_deferred;
        freed
    }
}
