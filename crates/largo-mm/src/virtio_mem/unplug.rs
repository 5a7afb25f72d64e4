//! Unplugging (`virtio_mem_sbm_unplug_request`,
//! `virtio_mem_sbm_unplug_any_sb_online`, `virtio_mem_fake_offline`,
//! `offline_and_remove_memory`).

use super::ResizeReport;
use crate::compaction::ContigError;
use crate::machine::Machine;
use crate::memmap::PageFlags;
use crate::page_alloc::isolation::IsolateMode;

/// `alloc_contig_range` attempts per sub-block in ZONE_MOVABLE; a kernel
/// zone gives up after the first (`virtio_mem_fake_offline`).
const FAKE_OFFLINE_TRIES_MOVABLE: u32 = 5;

impl Machine {
    /// `virtio_mem_sbm_unplug_request`: partly plugged units before full
    /// ones, the highest first in each; `-EBUSY` if sub-blocks remain.
    pub(super) fn virtio_mem_unplug_request(&mut self, mut nb_sb: u64, report: &mut ResizeReport) {
        let dev = self.virtio_mem.as_ref().expect("device checked");
        let sbs = dev.sbs_per_unit();
        let mut order: Vec<usize> = dev.added_units().filter(|&(_, n)| n < sbs).map(|(i, _)| i).collect();
        order.reverse();
        let mut full: Vec<usize> = dev.added_units().filter(|&(_, n)| n == sbs).map(|(i, _)| i).collect();
        full.reverse();
        order.extend(full);
        for unit in order {
            if nb_sb == 0 {
                break;
            }
            self.virtio_mem_unplug_any_sb_online(unit, &mut nb_sb, report);
        }
        if nb_sb > 0 {
            report.errno = Some("-EBUSY");
        }
    }

    /// `virtio_mem_sbm_unplug_any_sb_online`: a fully plugged unit asked
    /// for whole is tried at once; otherwise (or on -EBUSY) sub-blocks one
    /// by one, highest first, a busy one skipped. A unit left with none
    /// plugged is offlined and removed.
    fn virtio_mem_unplug_any_sb_online(&mut self, unit: usize, nb_sb: &mut u64, report: &mut ResizeReport) {
        let dev = self.virtio_mem.as_ref().expect("device checked");
        let sbs = dev.sbs_per_unit();
        let (sb_pages, unit_pages) = (dev.sb_pages, dev.unit_pages);
        let all_plugged = dev.units[unit].as_ref().is_some_and(|u| u.iter().all(|&p| p));
        if sbs > 1 && *nb_sb >= sbs as u64 && all_plugged {
            let start = dev.sb_pfn(unit, 0);
            if self.virtio_mem_fake_offline(start, unit_pages).is_ok() {
                let dev = self.virtio_mem.as_mut().expect("device checked");
                dev.units[unit] = Some(vec![false; sbs]);
                dev.plugged_pages -= unit_pages;
                *nb_sb -= sbs as u64;
                report.sub_blocks_moved += sbs as u64;
                self.virtio_mem_remove_unit(unit, report);
                return;
            }
        }
        for sb in (0..sbs).rev() {
            if *nb_sb == 0 {
                break;
            }
            let dev = self.virtio_mem.as_ref().expect("device checked");
            if !dev.units[unit].as_ref().expect("unit added")[sb] {
                continue;
            }
            let pfn = dev.sb_pfn(unit, sb);
            match self.virtio_mem_fake_offline(pfn, sb_pages) {
                Ok(()) => {
                    let dev = self.virtio_mem.as_mut().expect("device checked");
                    dev.units[unit].as_mut().expect("unit added")[sb] = false;
                    dev.plugged_pages -= sb_pages;
                    *nb_sb -= 1;
                    report.sub_blocks_moved += 1;
                }
                Err(e) => {
                    report.sub_blocks_busy += 1;
                    report
                        .first_busy
                        .get_or_insert_with(|| format!("sub-block at pfn {pfn:#x}: {e}"));
                }
            }
        }
        let dev = self.virtio_mem.as_ref().expect("device checked");
        if dev.units[unit].as_ref().is_some_and(|u| u.iter().all(|&p| !p)) {
            self.virtio_mem_remove_unit(unit, report);
        }
    }

    /// `virtio_mem_fake_offline`: `alloc_contig_range(ACR_FLAGS_NONE)`
    /// over the range (up to 5 tries in ZONE_MOVABLE, one in a kernel
    /// zone); the pages become `PageOffline`, held by the driver, and stop
    /// being managed.
    pub(crate) fn virtio_mem_fake_offline(&mut self, pfn: u64, nr: u64) -> Result<(), ContigError> {
        let zi = self.page_alloc.zone_of(pfn);
        let movable = self.page_alloc.zones()[zi].zone_type == largo_types::ZoneType::Movable;
        let tries = if movable { FAKE_OFFLINE_TRIES_MOVABLE } else { 1 };
        let mut last = None;
        for _ in 0..tries {
            let got = self.with_reclaim(|pa, r| {
                pa.compactor()
                    .alloc_contig_range_mode(pfn, pfn + nr, false, IsolateMode::ContigAlloc, 0, r)
            });
            match got {
                Ok(_) => {
                    for p in pfn..pfn + nr {
                        let page = self.page_alloc.memmap.page_mut(p);
                        page.clear();
                        page.set_flags(PageFlags::OFFLINE);
                        page.set_refcount(1);
                    }
                    self.page_alloc.zones[zi].managed_pages -= nr;
                    return Ok(());
                }
                Err(e @ ContigError::Invalid { .. }) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one try"))
    }

    /// `offline_and_remove_memory` of a unit with nothing plugged: the
    /// driver lets go of its fake-offline pages, the memory blocks go
    /// offline and are removed.
    fn virtio_mem_remove_unit(&mut self, unit: usize, report: &mut ResizeReport) {
        let dev = self.virtio_mem.as_mut().expect("device checked");
        let (start, nr) = (dev.sb_pfn(unit, 0), dev.unit_pages);
        dev.units[unit] = None;
        // Handing the pages back first leaves offline_pages only free
        // pages to take: nothing else runs in between.
        self.virtio_mem_fake_online(start, nr);
        let block = self.sparse.memory_block_bytes >> self.geometry().page_shift;
        for id in (start / block..(start + nr) / block).collect::<Vec<_>>() {
            self.offline_memory_block(id)
                .and_then(|_| self.remove_memory_block(id))
                .expect("a unit of free pages goes offline");
        }
        report.units_removed += 1;
    }
}
