//! `online_pages` (mm/memory_hotplug.c): the range joins its zone with
//! isolated pageblocks, its pages are freed to the buddy allocator in
//! MAX_PAGE_ORDER chunks (`generic_online_page` -> `__free_pages_core`),
//! then isolation ends so they merge and can be allocated; watermarks and
//! pcp limits are recomputed.

use largo_types::ZoneType;

use super::HotplugError;
use crate::layout::PfnRange;
use crate::machine::Machine;

impl Machine {
    /// `online_pages(start, nr)` into the zone the pages already belong
    /// to, or for hot-added pages in no zone yet, `zone` (ZONE_NORMAL for
    /// `online`, ZONE_MOVABLE for `online_movable`).
    pub fn online_pages(&mut self, start: u64, nr: u64, zone: Option<ZoneType>) -> Result<(), HotplugError> {
        self.online_pages_except(start, nr, zone, &[])
    }

    /// `online_pages` where an online-page callback (virtio-mem's
    /// `virtio_mem_online_page`) keeps the pages of `keep_offline` fake
    /// offline: present in the zone, never given to the buddy allocator.
    pub(crate) fn online_pages_except(
        &mut self,
        start: u64,
        nr: u64,
        zone: Option<ZoneType>,
        keep_offline: &[PfnRange],
    ) -> Result<(), HotplugError> {
        if self.page_alloc.page_zone_index(start).is_none() {
            let nid = self.hotplug_node_of(start)?;
            let zt = zone.unwrap_or(ZoneType::Normal);
            self.page_alloc
                .span_zone_over(nid, zt, PfnRange::new(start, start + nr))
                .map_err(|e| HotplugError::Invalid(e.to_string()))?;
        }
        let zi = self.hotplug_range_zone(start, nr, true)?;
        if zone.is_some_and(|zt| zt != self.page_alloc().zones()[zi].zone_type) {
            return Err(HotplugError::Invalid(format!(
                "the range already belongs to ZONE_{}",
                self.page_alloc().zones()[zi].name().to_uppercase()
            )));
        }
        let was_populated = self.page_alloc().zones()[zi].populated();
        self.page_alloc.online_pages_range(zi, start, start + nr, keep_offline);
        if !was_populated {
            // The zone joins the zonelists (build_all_zonelists).
            self.page_alloc.build_all_zonelists();
        }
        self.sparse.set_online(start, start + nr, true);
        Ok(())
    }

    /// The node a present pfn's section belongs to.
    fn hotplug_node_of(&self, pfn: u64) -> Result<usize, HotplugError> {
        let nr = self.sparse().section_nr(pfn);
        match self.sparse().sections.get(nr) {
            Some(ms) if ms.present => Ok(ms.nid),
            _ => Err(HotplugError::Invalid(format!("pfn {pfn:#x} is not present"))),
        }
    }
}
