//! Reclaim of one lruvec (mm/vmscan.c, v6.18): how much of each list to
//! scan (`get_scan_count`), the scan itself in `SWAP_CLUSTER_MAX` chunks
//! (`shrink_lruvec`), and when the inactive list is too small
//! (`inactive_is_low`).

use super::super::lru::LruList;
use super::super::{Ctx, Vm};
use super::{ScanControl, DEF_PRIORITY, MAX_SWAPPINESS, SWAP_CLUSTER_MAX};

/// `enum scan_balance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanBalance {
    Equal,
    Fract { anon: u64, file: u64, denominator: u64 },
    File,
    Anon,
}

/// `int_sqrt`.
fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

impl Vm {
    /// `lruvec_page_state(lruvec, NR_LRU_BASE + lru)`: the memcg
    /// statistics as last flushed (see [`FlushedStats`]); for a memcg's
    /// lruvec its own pages, for the root's the node's (hierarchical).
    pub(crate) fn lruvec_page_state(&self, lv: usize, lru: LruList) -> u64 {
        let nr_nodes = self.node_stat.len();
        if lv >= nr_nodes {
            return self.lruvecs[lv].flushed.nr_pages[lru as usize].max(0) as u64;
        }
        let nid = lv;
        (0..self.lruvecs.len() / nr_nodes)
            .map(|memcg| self.lruvecs[memcg * nr_nodes + nid].flushed.nr_pages[lru as usize].max(0) as u64)
            .sum()
    }

    /// `node_page_state(pgdat, NR_LRU_BASE + lru)`: the node's pages on
    /// `lru` now (every memcg).
    pub(crate) fn node_lru_state(&self, nid: usize, lru: LruList) -> u64 {
        let nr_nodes = self.node_stat.len();
        (0..self.lruvecs.len() / nr_nodes)
            .map(|memcg| self.lruvecs[memcg * nr_nodes + nid].nr_pages[lru as usize].max(0) as u64)
            .sum()
    }

    /// The pages on every list of a lruvec (hierarchical for the root).
    pub(crate) fn lruvec_size_total(&self, lv: usize) -> u64 {
        LruList::ALL.iter().map(|&l| self.lruvec_page_state(lv, l)).sum()
    }

    /// `inactive_is_low`: the inactive list is smaller than the active
    /// one divided by `int_sqrt(10 * GiB of both)` (1 below a GiB).
    pub(crate) fn inactive_is_low(&self, lv: usize, inactive: LruList) -> bool {
        let active = inactive.toggled();
        let i = self.lruvec_page_state(lv, inactive);
        let a = self.lruvec_page_state(lv, active);
        let gb = (i + a) >> (30 - self.page_shift());
        let ratio = if gb > 0 { int_sqrt(10 * gb) } else { 1 };
        i * ratio < a
    }

    /// `prepare_scan_control` for the reclaim target's lruvec `target`.
    pub(crate) fn prepare_scan_control(&mut self, ctx: &Ctx, target: usize, sc: &mut ScanControl) {
        sc.anon_cost = self.lruvecs[target].anon_cost;
        sc.file_cost = self.lruvecs[target].file_cost;
        if sc.force_deactivate {
            sc.may_deactivate = [true, true];
        } else {
            for (t, inactive) in [(0, LruList::InactiveAnon), (1, LruList::InactiveFile)] {
                let refaults = self.lruvec_workingset_activate(target, t);
                sc.may_deactivate[t] =
                    refaults != self.lruvecs[target].refaults[t] || self.inactive_is_low(target, inactive);
            }
        }
        let file = self.lruvec_page_state(target, LruList::InactiveFile);
        sc.cache_trim_mode = (file >> sc.priority) > 0 && !sc.may_deactivate[1];
        if !sc.cgroup_reclaim() {
            let nid = target % self.node_stat.len();
            let pa = &*ctx.pa;
            let zones = pa.zones().iter().filter(|z| z.nid == nid && z.managed());
            let high: u64 = zones.map(|z| z.high_wmark_pages()).sum();
            let free: u64 = pa
                .zones()
                .iter()
                .filter(|z| z.nid == nid)
                .map(|z| z.stat.nr_free_pages.max(0) as u64)
                .sum();
            let file = self.node_lru_state(nid, LruList::ActiveFile) + self.node_lru_state(nid, LruList::InactiveFile);
            let anon = self.node_lru_state(nid, LruList::InactiveAnon);
            sc.file_is_tiny = file + free <= high && !sc.may_deactivate[0] && (anon >> sc.priority) > 0;
        }
    }

    /// `WORKINGSET_ACTIVATE_ANON` (`t` 0) or `_FILE` (1) of a lruvec,
    /// hierarchical for the root's.
    pub(crate) fn lruvec_workingset_activate(&self, lv: usize, t: usize) -> u64 {
        let nr_nodes = self.node_stat.len();
        if lv >= nr_nodes {
            return self.lruvecs[lv].flushed.workingset_activate[t];
        }
        (0..self.lruvecs.len() / nr_nodes)
            .map(|m| self.lruvecs[m * nr_nodes + lv].flushed.workingset_activate[t])
            .sum()
    }

    /// `get_scan_count`: pages of each list to scan at this priority.
    fn get_scan_count(&self, lv: usize, sc: &ScanControl) -> [u64; 4] {
        let swappiness = sc.swappiness;
        let balance = if !sc.may_swap || self.swap.free_pages() == 0 {
            ScanBalance::File
        } else if sc.cgroup_reclaim() && swappiness == 0 {
            ScanBalance::File
        } else if sc.priority == 0 && swappiness != 0 {
            ScanBalance::Equal
        } else if sc.file_is_tiny {
            ScanBalance::Anon
        } else if sc.cache_trim_mode {
            ScanBalance::File
        } else {
            // calculate_pressure_balance
            let total = sc.anon_cost + sc.file_cost;
            let anon_cost = total + sc.anon_cost;
            let file_cost = total + sc.file_cost;
            let total = anon_cost + file_cost;
            let ap = swappiness * (total + 1) / (anon_cost + 1);
            let fp = (MAX_SWAPPINESS - swappiness) * (total + 1) / (file_cost + 1);
            ScanBalance::Fract {
                anon: ap,
                file: fp,
                denominator: ap + fp,
            }
        };
        let mut nr = [0u64; 4];
        for lru in LruList::ALL {
            let size = self.lruvecs[lv].nr_pages[lru as usize].max(0) as u64;
            let scan = size >> sc.priority;
            let file = lru.is_file();
            nr[lru as usize] = match balance {
                ScanBalance::Equal => scan,
                ScanBalance::Fract {
                    anon,
                    file: f,
                    denominator,
                } => {
                    let fraction = if file { f } else { anon };
                    scan * fraction / denominator.max(1)
                }
                ScanBalance::File => {
                    if file {
                        scan
                    } else {
                        0
                    }
                }
                ScanBalance::Anon => {
                    if file {
                        0
                    } else {
                        scan
                    }
                }
            };
        }
        nr
    }

    /// `shrink_list`: an active list is deactivated only when the type may
    /// be; an inactive one is reclaimed.
    fn shrink_list(&mut self, ctx: &mut Ctx, lv: usize, lru: LruList, nr: u64, sc: &mut ScanControl) -> u64 {
        if lru.is_active() {
            if sc.may_deactivate[lru.is_file() as usize] {
                self.shrink_active_list(ctx, lv, lru, nr, sc);
            } else {
                sc.skipped_deactivate = true;
            }
            return 0;
        }
        self.shrink_inactive_list(ctx, lv, lru, nr, sc)
    }

    /// `shrink_lruvec`: the lists in `SWAP_CLUSTER_MAX` chunks until the
    /// targets run out or enough is reclaimed (then the scan is cut in
    /// proportion); afterwards the active anon list is aged if the
    /// inactive one is low and there is swap.
    pub(crate) fn shrink_lruvec(&mut self, ctx: &mut Ctx, lv: usize, sc: &mut ScanControl) {
        let mut nr = self.get_scan_count(lv, sc);
        let targets = nr;
        let nr_to_reclaim = sc.nr_to_reclaim;
        let proportional =
            !sc.cgroup_reclaim() && sc.reclaimer != super::Reclaimer::Kswapd && sc.priority == DEF_PRIORITY;
        let mut nr_reclaimed = 0;
        let (ia, aa, ifl, af) = (0, 1, 2, 3);
        while nr[ia] > 0 || nr[af] > 0 || nr[ifl] > 0 {
            for lru in LruList::ALL {
                let l = lru as usize;
                if nr[l] > 0 {
                    let n = nr[l].min(SWAP_CLUSTER_MAX);
                    nr[l] -= n;
                    nr_reclaimed += self.shrink_list(ctx, lv, lru, n, sc);
                }
            }
            if nr_reclaimed < nr_to_reclaim || proportional {
                continue;
            }
            let nr_file = nr[ifl] + nr[af];
            let nr_anon = nr[ia] + nr[aa];
            if nr_file == 0 || nr_anon == 0 {
                break;
            }
            let (stop, other, percentage) = if nr_file > nr_anon {
                let target = targets[ia] + targets[aa] + 1;
                ((ia, aa), (ifl, af), nr_anon * 100 / target)
            } else {
                let target = targets[ifl] + targets[af] + 1;
                ((ifl, af), (ia, aa), nr_file * 100 / target)
            };
            nr[stop.0] = 0;
            nr[stop.1] = 0;
            for l in [other.0, other.1] {
                let scanned = targets[l] - nr[l];
                nr[l] = targets[l] * (100 - percentage) / 100;
                nr[l] -= nr[l].min(scanned);
            }
        }
        sc.nr_reclaimed += nr_reclaimed;
        if self.swap.has_swap() && self.inactive_is_low(lv, LruList::InactiveAnon) {
            self.shrink_active_list(ctx, lv, LruList::ActiveAnon, SWAP_CLUSTER_MAX, sc);
        }
    }
}
