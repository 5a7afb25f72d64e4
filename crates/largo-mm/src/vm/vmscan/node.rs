//! The priority loop (mm/vmscan.c `do_try_to_free_pages`, `shrink_node`,
//! `shrink_node_memcgs`, v6.18): from `DEF_PRIORITY` down to 0, each node
//! shrinks the lruvecs of the memcgs reclaim targets until the goal is
//! met; a pass that reclaimed nothing because it skipped deactivation is
//! tried again with deactivation forced.

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
            if sc.cgroup_reclaim() && sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
    }
}
