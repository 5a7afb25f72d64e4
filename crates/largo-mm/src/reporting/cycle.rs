//! One reporting pass: every zone that passes the watermark gate, every
//! free list from the reporting order up (isolate lists skipped), batches
//! of `PAGE_REPORTING_CAPACITY` blocks isolated, reported and put back at
//! the tail, flagged `PG_reported` if they did not merge.

use largo_physmem::Backing;
use largo_types::MigrateType;

use super::{PrState, ReportSink, TimelineSample, PAGE_REPORTING_CAPACITY, PAGE_REPORTING_DELAY_NS};
use crate::memmap::PageFlags;
use crate::page_alloc::{AllocFlags, Fpi, PageAlloc};

/// The batch being filled: `(pfn, order)` of isolated blocks.
type Batch = Vec<(u64, u32)>;

/// The device refused a report (`prdev->report` failed): the pass ends
/// (`page_reporting_process_zone` stops at the first error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReportFailed;

impl PageAlloc {
    /// `page_reporting_process`: the delayed work. ACTIVE for the pass; at
    /// its end IDLE, or, if a free (or an exhausted budget) asked for more
    /// meanwhile, another pass `PAGE_REPORTING_DELAY` later.
    pub fn page_reporting_process(&mut self, sink: &mut dyn ReportSink, backing: &mut dyn Backing) {
        self.reporting.state = PrState::Active;
        self.reporting.due_ns = None;
        let mut batch = Batch::with_capacity(PAGE_REPORTING_CAPACITY);
        let mut allowance = self.retention_allowance();
        for zi in 0..self.zones.len() {
            if self
                .page_reporting_process_zone(zi, &mut batch, &mut allowance, sink, backing)
                .is_err()
            {
                break;
            }
        }
        let r = &mut self.reporting;
        r.stats.passes += 1;
        r.stats.timeline.push(TimelineSample {
            t_ms: r.now_ns / 1_000_000,
            passes: r.stats.passes,
            reported_kib: r.stats.reported_kib,
        });
        if r.state == PrState::Requested {
            r.due_ns = Some(r.now_ns + PAGE_REPORTING_DELAY_NS);
        } else {
            r.state = PrState::Idle;
        }
    }

    /// Pages this pass may still isolate under the retention watermark:
    /// the unreported free pages beyond `retain_pages` (unbounded when off).
    fn retention_allowance(&self) -> u64 {
        if self.reporting.retain_pages == 0 {
            return u64::MAX;
        }
        let free: i64 = self.zones.iter().map(|z| z.stat.nr_free_pages).sum();
        let reported: u64 = self
            .zones
            .iter()
            .flat_map(|z| z.free_area.iter().enumerate())
            .map(|(order, a)| a.nr_reported << order)
            .sum();
        (free.max(0) as u64)
            .saturating_sub(reported)
            .saturating_sub(self.reporting.retain_pages)
    }

    /// `page_reporting_process_zone`: the watermark gate, each list in
    /// order then migratetype, then the leftover batch.
    fn page_reporting_process_zone(
        &mut self,
        zi: usize,
        batch: &mut Batch,
        allowance: &mut u64,
        sink: &mut dyn ReportSink,
        backing: &mut dyn Backing,
    ) -> Result<(), ReportFailed> {
        let order_min = self.reporting.order(self.geo.pageblock_order);
        let zone = &self.zones[zi];
        let watermark = zone.low_wmark_pages() + ((PAGE_REPORTING_CAPACITY as u64) << order_min);
        if !self.zone_watermark_ok(zi, 0, watermark, 0, AllocFlags::CMA) {
            return Ok(());
        }
        for order in order_min..=self.geo.max_page_order {
            for mt in MigrateType::ALL {
                if mt == MigrateType::Isolate {
                    continue;
                }
                self.page_reporting_cycle(zi, order, mt, batch, allowance, sink, backing)?;
            }
        }
        if !batch.is_empty() {
            let ok = self.report_batch(batch, sink, backing);
            self.page_reporting_drain(batch, ok);
            ok.then_some(()).ok_or(ReportFailed)?;
        }
        Ok(())
    }

    /// `page_reporting_cycle` on `free_area[order].free_list[mt]`: skip
    /// reported blocks; while the budget lasts, fill the batch, and each
    /// time it is full rotate the walk position to the head, report, drain
    /// and start again from the head.
    #[allow(clippy::too_many_arguments)]
    fn page_reporting_cycle(
        &mut self,
        zi: usize,
        order: u32,
        mt: MigrateType,
        batch: &mut Batch,
        allowance: &mut u64,
        sink: &mut dyn ReportSink,
        backing: &mut dyn Backing,
    ) -> Result<(), ReportFailed> {
        let area = &self.zones[zi].free_area[order as usize];
        let list = area.free_list[mt.index()];
        if list.is_empty() {
            return Ok(());
        }
        self.work.zone_lock += 1;
        let capacity = PAGE_REPORTING_CAPACITY as u64;
        let mut budget = area.nr_free.div_ceil(capacity * 16) as i64;
        let mut cursor = list.first();
        let mut stopped_at = None;
        while let Some(pfn) = cursor {
            self.reporting.stats.walked += 1;
            let next = self.next_on_list(pfn);
            if self.memmap.page(pfn).flags().contains(PageFlags::REPORTED) {
                cursor = next;
                continue;
            }
            if budget < 0 {
                self.reporting.state = PrState::Requested;
                stopped_at = Some(pfn);
                break;
            }
            if batch.len() < PAGE_REPORTING_CAPACITY {
                if *allowance < 1 << order || !self.__isolate_free_page(zi, pfn, order) {
                    stopped_at = Some(pfn);
                    break;
                }
                *allowance -= 1 << order;
                batch.push((pfn, order));
                cursor = next;
                continue;
            }
            self.rotate_to_front(zi, order, mt, pfn);
            let ok = self.report_batch(batch, sink, backing);
            self.work.zone_lock += 1;
            self.page_reporting_drain(batch, ok);
            budget -= 1;
            if !ok {
                return Err(ReportFailed);
            }
            cursor = self.zones[zi].free_area[order as usize].free_list[mt.index()].first();
        }
        if let Some(pfn) = stopped_at {
            self.rotate_to_front(zi, order, mt, pfn);
        }
        Ok(())
    }

    fn next_on_list(&self, pfn: u64) -> Option<u64> {
        let next = self.memmap.page(pfn).next();
        (next != crate::memmap::NIL).then_some(next as u64)
    }

    fn rotate_to_front(&mut self, zi: usize, order: u32, mt: MigrateType, pfn: u64) {
        let list = &mut self.zones[zi].free_area[order as usize].free_list[mt.index()];
        list.rotate_to_front(&mut self.memmap.pages, pfn);
    }

    /// `prdev->report` on the batch; the device's latency passes on the
    /// simulated clock. True if the device took it.
    fn report_batch(&mut self, batch: &Batch, sink: &mut dyn ReportSink, backing: &mut dyn Backing) -> bool {
        let r = &mut self.reporting;
        r.stats.report_calls += 1;
        r.now_ns += r.ack_latency_ns;
        if sink.report(batch, backing).is_err() {
            return false;
        }
        let page_kib = self.geo.page_size() >> 10;
        for &(pfn, order) in batch.iter() {
            r.stats.reported_kib += page_kib << order;
            r.stats.reported_pages_by_order[order as usize] += 1;
            r.discarded.set_range(pfn, 1 << order);
        }
        true
    }

    /// `page_reporting_drain`: every block back to the tail of its list
    /// without a new notification; `PG_reported` on those that did not
    /// merge, if the device took them.
    fn page_reporting_drain(&mut self, batch: &mut Batch, reported: bool) {
        for (pfn, order) in batch.drain(..) {
            let mt = self.pageblocks.migratetype(pfn);
            self.__putback_isolated_page(pfn, order, mt);
            if !reported {
                continue;
            }
            let page = self.memmap.page(pfn);
            if page.is_buddy() && page.order() == order {
                self.memmap.page_mut(pfn).insert_flags(PageFlags::REPORTED);
                let zi = self.zone_of(pfn);
                self.zones[zi].free_area[order as usize].nr_reported += 1;
            }
        }
    }

    /// `__isolate_free_page`: takes a free block off its list if the zone
    /// stays above its min watermark; a block of at least half a
    /// pageblock turns its mergeable pageblocks MOVABLE, with the other
    /// free blocks in them (`move_freepages_block`).
    pub(crate) fn __isolate_free_page(&mut self, zi: usize, pfn: u64, order: u32) -> bool {
        let mt = self.pageblocks.migratetype(pfn);
        if mt != MigrateType::Isolate {
            let watermark = self.zones[zi].min_wmark_pages() + (1 << order);
            if !self.zone_watermark_ok(zi, 0, watermark, 0, AllocFlags::CMA) {
                return false;
            }
        }
        self.del_page_from_free_list(zi, pfn, order, mt);
        self.account_freepages(zi, -(1i64 << order), mt);
        // With mobility grouping disabled every pageblock stays UNMOVABLE
        // (`set_pageblock_migratetype`), so there is nothing to retype.
        if order + 1 >= self.geo.pageblock_order && !self.mobility_disabled {
            let end = pfn + (1 << order);
            let mut at = pfn;
            while at < end {
                let block_mt = self.pageblocks.migratetype(at);
                if block_mt.is_mergeable() {
                    self.move_freepages_block(zi, at, block_mt, MigrateType::Movable);
                }
                at += 1 << self.geo.pageblock_order;
            }
        }
        true
    }

    /// `__putback_isolated_page`: back through `__free_one_page` at the
    /// tail, without notifying reporting (it may merge).
    pub(crate) fn __putback_isolated_page(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        let zi = self.zone_of(pfn);
        self.__free_one_page(
            zi,
            pfn,
            order,
            mt,
            Fpi {
                skip_report_notify: true,
                to_tail: true,
            },
        );
    }
}
