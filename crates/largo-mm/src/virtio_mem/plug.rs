//! Plugging (`virtio_mem_sbm_plug_request`, `virtio_mem_sbm_plug_and_add_mb`,
//! `virtio_mem_fake_online`) and the resize entry point.

use largo_types::format_size;

use super::{ResizeReport, VirtioMem, VirtioMemError};
use crate::layout::PfnRange;
use crate::machine::Machine;
use crate::memmap::PageFlags;
use crate::page_alloc::max_order_chunks;

impl Machine {
    /// The virtio-mem device, if the machine has one.
    pub fn virtio_mem(&self) -> Option<&VirtioMem> {
        self.virtio_mem.as_ref()
    }

    /// The host sets `requested_size`; the driver plugs or unplugs whole
    /// sub-blocks towards it (a remainder below one sub-block is never
    /// reached, as in the driver).
    pub fn virtio_mem_resize(&mut self, requested_bytes: u64) -> Result<ResizeReport, VirtioMemError> {
        let shift = self.geometry().page_shift;
        let dev = self.virtio_mem.as_mut().ok_or(VirtioMemError::NoDevice)?;
        if requested_bytes > dev.region_pages() << shift {
            return Err(VirtioMemError::TooLarge {
                requested: format_size(requested_bytes),
                region: format_size(dev.region_pages() << shift),
            });
        }
        dev.requested_pages = requested_bytes >> shift;
        let (requested, plugged, sb) = (dev.requested_pages, dev.plugged_pages, dev.sb_pages);
        let mut report = ResizeReport {
            requested_bytes,
            plugged_before_bytes: plugged << shift,
            ..ResizeReport::default()
        };
        if requested > plugged {
            self.virtio_mem_plug_request((requested - plugged) / sb, &mut report)?;
        } else if requested < plugged {
            self.virtio_mem_unplug_request((plugged - requested) / sb, &mut report);
        }
        report.plugged_after_bytes = self.virtio_mem.as_ref().map_or(0, |d| d.plugged_pages << shift);
        Ok(report)
    }

    /// `virtio_mem_sbm_plug_request`: partly plugged units first (lowest
    /// first), then units not added, lowest first; `-ENOSPC` when the
    /// region runs out.
    fn virtio_mem_plug_request(&mut self, mut nb_sb: u64, report: &mut ResizeReport) -> Result<(), VirtioMemError> {
        let dev = self.virtio_mem.as_ref().expect("device checked");
        let partial: Vec<usize> = dev
            .added_units()
            .filter(|&(_, n)| n < dev.sbs_per_unit())
            .map(|(i, _)| i)
            .collect();
        let fresh: Vec<usize> = (0..dev.units.len()).filter(|&i| dev.units[i].is_none()).collect();
        for unit in partial {
            if nb_sb == 0 {
                return Ok(());
            }
            self.virtio_mem_plug_any_sb(unit, &mut nb_sb, report);
        }
        for unit in fresh {
            if nb_sb == 0 {
                return Ok(());
            }
            self.virtio_mem_plug_and_add(unit, &mut nb_sb, report)?;
        }
        if nb_sb > 0 {
            report.errno = Some("-ENOSPC");
        }
        Ok(())
    }

    /// `virtio_mem_sbm_plug_any_sb`: the unit's unplugged sub-blocks,
    /// lowest first, handed to the buddy allocator.
    fn virtio_mem_plug_any_sb(&mut self, unit: usize, nb_sb: &mut u64, report: &mut ResizeReport) {
        let dev = self.virtio_mem.as_ref().expect("device checked");
        let sbs = dev.sbs_per_unit();
        for sb in 0..sbs {
            let dev = self.virtio_mem.as_mut().expect("device checked");
            if *nb_sb == 0 {
                return;
            }
            let units = dev.units[unit].as_mut().expect("unit added");
            if units[sb] {
                continue;
            }
            units[sb] = true;
            dev.plugged_pages += dev.sb_pages;
            let (pfn, nr) = (dev.sb_pfn(unit, sb), dev.sb_pages);
            *nb_sb -= 1;
            report.sub_blocks_moved += 1;
            self.virtio_mem_fake_online(pfn, nr);
        }
    }

    /// `virtio_mem_sbm_plug_and_add_mb`: the unit's first sub-blocks are
    /// plugged, its memory added and onlined with the rest kept fake
    /// offline (the driver's online-page callback). The device sits on the
    /// last node, whose span is the highest. A failure to add or online
    /// leaves the unit unplugged, as the driver's unplug-after-failure does.
    fn virtio_mem_plug_and_add(
        &mut self,
        unit: usize,
        nb_sb: &mut u64,
        report: &mut ResizeReport,
    ) -> Result<(), VirtioMemError> {
        let nid = self.page_alloc().nodes().len() - 1;
        let dev = self.virtio_mem.as_mut().expect("device checked");
        let sbs = dev.sbs_per_unit();
        let count = (*nb_sb).min(sbs as u64) as usize;
        let plugged: Vec<bool> = (0..sbs).map(|sb| sb < count).collect();
        let start = dev.sb_pfn(unit, 0);
        let nr = dev.unit_pages;
        let zone = dev.zone;
        let keep_offline: Vec<PfnRange> = (count..sbs)
            .map(|sb| PfnRange::new(dev.sb_pfn(unit, sb), dev.sb_pfn(unit, sb) + dev.sb_pages))
            .collect();
        let ids = self
            .add_memory_driver_managed(nid, start, nr)
            .map_err(|e| VirtioMemError::AddMemory(e.to_string()))?;
        if let Err(e) = self.online_pages_except(start, nr, Some(zone), &keep_offline) {
            for &id in &ids {
                let _ = self.remove_memory_block(id);
            }
            return Err(VirtioMemError::AddMemory(e.to_string()));
        }
        for id in ids {
            if let Some(b) = self.sparse.block_mut(id) {
                b.state = crate::sparse::MemoryBlockState::Online;
            }
        }
        let dev = self.virtio_mem.as_mut().expect("device checked");
        dev.units[unit] = Some(plugged);
        dev.plugged_pages += count as u64 * dev.sb_pages;
        *nb_sb -= count as u64;
        report.sub_blocks_moved += count as u64;
        report.units_added += 1;
        Ok(())
    }

    /// `virtio_mem_fake_online`: fake-offline pages of an online block go
    /// to the buddy allocator and become managed again
    /// (`generic_online_page` for each aligned chunk).
    pub(crate) fn virtio_mem_fake_online(&mut self, pfn: u64, nr: u64) {
        let zi = self.page_alloc.zone_of(pfn);
        for p in pfn..pfn + nr {
            let page = self.page_alloc.memmap.page_mut(p);
            debug_assert!(page.flags() == PageFlags::OFFLINE, "pfn {p:#x} is not fake offline");
            page.clear();
        }
        for (p, order) in max_order_chunks(self.geometry().max_page_order, pfn, pfn + nr) {
            self.page_alloc.__free_pages_core(zi, p, order);
        }
    }
}
