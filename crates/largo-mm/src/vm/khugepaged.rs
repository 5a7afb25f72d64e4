//! khugepaged (mm/khugepaged.c, v6.18: `khugepaged_enter_vma`,
//! `khugepaged_do_scan`, `khugepaged_scan_mm_slot`, `khugepaged_wait_work`):
//! mms whose VMAs may hold PMD THPs are registered; the thread scans
//! `pages_to_scan` pages' worth of their PMD ranges per wake, collapsing
//! each range that qualifies (`collapse.rs`), then sleeps
//! `scan_sleep_millisecs`. Time is the machine's simulated clock: the
//! machine runs a scan when one is due (see `Machine::advance_time`).

use std::collections::VecDeque;

use super::collapse::{Collapser, Scan};
use super::types::{MmId, VmaId};
use super::{Ctx, Vm};

/// khugepaged's state (`khugepaged_scan`, the mm slot list, its counters).
#[derive(Clone, Debug, Default)]
pub struct Khugepaged {
    /// Registered mms (`mm_slot`s), in registration order.
    pub mm_slots: VecDeque<MmId>,
    /// Where the scan stands: the mm and the next address in it.
    pub cursor: Option<(MmId, u64)>,
    /// `pages_collapsed`: PMD ranges collapsed.
    pub pages_collapsed: u64,
    /// `full_scans`: passes over the whole mm list.
    pub full_scans: u64,
    /// The thread waits for an mm (no work) and must run at once when
    /// one registers (`__khugepaged_enter` wakes it).
    pub wake_now: bool,
    /// When the thread next scans (ns of machine time), if it sleeps.
    pub due_ns: Option<u64>,
    /// An mm outside the model is on the list for good (validation keeps
    /// one on the host): the thread never idles, so a registration does
    /// not wake it, and with no scan due it waits for a wake.
    pub external_mm: bool,
    /// The thread is running (its reclaim counts as khugepaged's:
    /// `current_is_khugepaged`).
    pub running: bool,
    /// The cpu the thread runs on (its per-cpu LRU batches, pcp lists and
    /// memcg stocks are that cpu's).
    pub cpu: usize,
}

impl Vm {
    /// `khugepaged_enter_vma`: registers the VMA's mm if PMD THPs are
    /// enabled somewhere and khugepaged may collapse in this VMA
    /// (`thp_vma_allowable_order(TVA_KHUGEPAGED)`: the sysfs settings, and
    /// the VMA must have an anon_vma already).
    pub(crate) fn khugepaged_enter_vma(&mut self, vma: VmaId) {
        let mm = self.vmas[vma].mm;
        if self.mms[mm].khugepaged || !self.thp.pmd_enabled() || !self.khugepaged_allowed(vma) {
            return;
        }
        self.khugepaged_enter(mm);
    }

    /// `__khugepaged_enter`: the mm joins the list; an idle thread wakes.
    pub(crate) fn khugepaged_enter(&mut self, mm: MmId) {
        let k = &mut self.khugepaged;
        if k.mm_slots.is_empty() && k.due_ns.is_none() && !k.external_mm {
            k.wake_now = true;
        }
        k.mm_slots.push_back(mm);
        self.mms[mm].khugepaged = true;
    }

    /// A write to `scan_sleep_millisecs` (or `alloc_sleep_millisecs`):
    /// the sleep ends, the thread scans when the machine next runs its
    /// delayed work.
    pub fn khugepaged_wake(&mut self) {
        self.khugepaged.wake_now = true;
    }

    /// `khugepaged_exit`: an exiting mm leaves the list.
    pub(crate) fn khugepaged_exit(&mut self, mm: MmId) {
        let k = &mut self.khugepaged;
        let Some(pos) = k.mm_slots.iter().position(|&m| m == mm) else {
            return;
        };
        k.mm_slots.remove(pos);
        if k.cursor.is_some_and(|(m, _)| m == mm) {
            // The scanner would find it exiting and move on.
            k.cursor = k.mm_slots.get(pos).map(|&m| (m, 0));
            if k.cursor.is_none() {
                k.full_scans += 1;
            }
        }
    }

    /// `thp_vma_allowable_order(vma, TVA_KHUGEPAGED, PMD_ORDER)` for an
    /// anonymous VMA.
    fn khugepaged_allowed(&self, vma: VmaId) -> bool {
        let v = &self.vmas[vma];
        v.is_anonymous()
            && v.anon_vma.is_some()
            && !v.flags.contains(super::types::VmFlags::GROWSDOWN)
            && self.allowable_orders(vma, 1 << self.pmd_order()) != 0
    }

    /// `khugepaged_do_scan` then `khugepaged_wait_work`, run when the
    /// thread wakes at `now_ns`: scans up to `pages_to_scan` (one pass
    /// over the list at most), then sets when it wakes next.
    pub fn khugepaged_run(&mut self, ctx: &mut Ctx, now_ns: u64) {
        self.khugepaged.wake_now = false;
        self.khugepaged.running = true;
        // khugepaged_do_scan: lru_add_drain_all, so that the pages of the
        // ranges are on the LRU to be isolated.
        self.lru_add_drain_all(ctx.pa);
        let budget = self.thp.khugepaged.pages_to_scan;
        let (mut progress, mut passes_from_head) = (0u64, 0);
        let mut alloc_failed = false;
        while progress < budget {
            if self.khugepaged.cursor.is_none() {
                passes_from_head += 1;
            }
            if self.khugepaged.mm_slots.is_empty() || passes_from_head >= 2 {
                break;
            }
            let (done, result) = self.khugepaged_scan_mm_slot(ctx, budget - progress);
            progress += done;
            if result == Scan::AllocFail {
                // khugepaged_alloc_sleep, then (a second failure) give up:
                // the model resumes after the alloc sleep.
                alloc_failed = true;
                break;
            }
        }
        let k = &self.thp.khugepaged;
        let sleep_ms = if alloc_failed {
            k.alloc_sleep_ms
        } else {
            k.scan_sleep_ms
        };
        self.khugepaged.running = false;
        let has_work = !self.khugepaged.mm_slots.is_empty() || self.khugepaged.external_mm;
        self.khugepaged.due_ns = has_work.then(|| now_ns + sleep_ms * 1_000_000);
    }

    /// `khugepaged_scan_mm_slot`: from the cursor, the PMD ranges of the
    /// mm's VMAs that khugepaged may collapse, until `pages` are scanned
    /// or a collapse happened; the cursor moves on to the next mm (a full
    /// scan counted after the last) once every VMA is done.
    fn khugepaged_scan_mm_slot(&mut self, ctx: &mut Ctx, pages: u64) -> (u64, Scan) {
        let pmd_size = self.pmd_size();
        let pmd_nr = 1u64 << self.pmd_order();
        let (mm, mut address) = match self.khugepaged.cursor {
            Some(c) => c,
            None => (self.khugepaged.mm_slots[0], 0),
        };
        self.khugepaged.cursor = Some((mm, address));
        let mut progress = 0;
        let mut result = Scan::Succeed;
        let vmas: Vec<VmaId> = self.mms[mm].vmas.range(..).map(|(_, &id)| id).collect();
        for id in vmas {
            if !self.vmas.contains(id) || self.vmas[id].end <= address {
                continue;
            }
            if !self.khugepaged_allowed(id) {
                progress += 1;
                continue;
            }
            let v = &self.vmas[id];
            let hstart = v.start.next_multiple_of(pmd_size);
            let hend = v.end & !(pmd_size - 1);
            if address > hend {
                progress += 1;
                continue;
            }
            address = address.max(hstart);
            while address < hend {
                result = self.collapse_scan_pmd(ctx, id, address, Collapser::Khugepaged);
                if result == Scan::Succeed {
                    self.khugepaged.pages_collapsed += 1;
                }
                address += pmd_size;
                progress += pmd_nr;
                self.khugepaged.cursor = Some((mm, address));
                // A collapse drops mmap_lock: the scan resumes from here.
                if result == Scan::Succeed || result == Scan::AllocFail || progress >= pages {
                    return (progress, result);
                }
            }
        }
        // Every VMA scanned: on to the next mm, or a full scan done.
        let k = &mut self.khugepaged;
        let next = k
            .mm_slots
            .iter()
            .position(|&m| m == mm)
            .and_then(|p| k.mm_slots.get(p + 1));
        k.cursor = next.map(|&m| (m, 0));
        if k.cursor.is_none() {
            k.full_scans += 1;
        }
        (progress, result)
    }
}
