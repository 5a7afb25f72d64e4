//! One reporting pass: every zone that passes the watermark gate, every
//! free list from the reporting order up (isolate lists skipped), batches
//! of `PAGE_REPORTING_CAPACITY` blocks isolated, reported and put back at
//! the tail, flagged `PG_reported` if they did not merge.

use largo_physmem::Backing;
use largo_types::MigrateType;

use super::{PrState, ReportSink, TimelineSample, PAGE_REPORTING_CAPACITY, PAGE_REPORTING_DELAY_NS};
use crate::memmap::PageFlags;
use crate::page_alloc::{AllocFlags, PageAlloc};

/// The batch being filled: `(pfn, order)` of isolated blocks.
type Batch = Vec<(u64, u32)>;

/// Free page reporting at work on one machine's allocator: the pass
/// reaches the free lists through the allocator's `__isolate_free_page`
/// and `__putback_isolated_page` (and reads the lists it walks), every
/// use spelled `self.pa`; its state is the allocator's [`super::PageReporting`].
pub struct Reporter<'a> {
    pub(crate) pa: &'a mut PageAlloc,
}

/// The device refused a report (`prdev->report` failed): the pass ends
/// (`page_reporting_process_zone` stops at the first error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReportFailed;

impl Reporter<'_> {
    /// `page_reporting_process`: the delayed work. ACTIVE for the pass; at
    /// its end IDLE, or, if a free (or an exhausted budget) asked for more
    /// meanwhile, another pass `PAGE_REPORTING_DELAY` later.
    pub fn page_reporting_process(&mut self, sink: &mut dyn ReportSink, backing: &mut dyn Backing) {
        self.pa.reporting.state = PrState::Active;
        self.pa.reporting.due_ns = None;
        let mut batch = Batch::with_capacity(PAGE_REPORTING_CAPACITY);
        let mut allowance = self.retention_allowance();
        for zi in 0..self.pa.zones.len() {
            if self
                .page_reporting_process_zone(zi, &mut batch, &mut allowance, sink, backing)
                .is_err()
            {
                break;
            }
        }
        let r = &mut self.pa.reporting;
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
        if self.pa.reporting.retain_pages == 0 {
            return u64::MAX;
        }
        let free: i64 = self.pa.zones.iter().map(|z| z.stat.nr_free_pages).sum();
        let reported: u64 = self
            .pa
            .zones
            .iter()
            .flat_map(|z| z.free_area.iter().enumerate())
            .map(|(order, a)| a.nr_reported << order)
            .sum();
        (free.max(0) as u64)
            .saturating_sub(reported)
            .saturating_sub(self.pa.reporting.retain_pages)
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
        let order_min = self.pa.reporting.order(self.pa.geo.pageblock_order);
        let zone = &self.pa.zones[zi];
        let watermark = zone.low_wmark_pages() + ((PAGE_REPORTING_CAPACITY as u64) << order_min);
        if !self.pa.zone_watermark_ok(zi, 0, watermark, 0, AllocFlags::CMA) {
            return Ok(());
        }
        for order in order_min..=self.pa.geo.max_page_order {
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
        let area = &self.pa.zones[zi].free_area[order as usize];
        let list = area.free_list[mt.index()];
        if list.is_empty() {
            return Ok(());
        }
        self.pa.work.zone_lock += 1;
        let capacity = PAGE_REPORTING_CAPACITY as u64;
        let mut budget = area.nr_free.div_ceil(capacity * 16) as i64;
        let mut cursor = list.first();
        let mut stopped_at = None;
        while let Some(pfn) = cursor {
            self.pa.reporting.stats.walked += 1;
            let next = self.next_on_list(pfn);
            if self.pa.memmap.page(pfn).flags().contains(PageFlags::REPORTED) {
                cursor = next;
                continue;
            }
            if budget < 0 {
                self.pa.reporting.state = PrState::Requested;
                stopped_at = Some(pfn);
                break;
            }
            if batch.len() < PAGE_REPORTING_CAPACITY {
                if *allowance < 1 << order || !self.pa.__isolate_free_page(zi, pfn, order) {
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
            self.pa.work.zone_lock += 1;
            self.page_reporting_drain(batch, ok);
            budget -= 1;
            if !ok {
                return Err(ReportFailed);
            }
            cursor = self.pa.zones[zi].free_area[order as usize].free_list[mt.index()].first();
        }
        if let Some(pfn) = stopped_at {
            self.rotate_to_front(zi, order, mt, pfn);
        }
        Ok(())
    }

    fn next_on_list(&self, pfn: u64) -> Option<u64> {
        let next = self.pa.memmap.page(pfn).next();
        (next != crate::memmap::NIL).then_some(next as u64)
    }

    fn rotate_to_front(&mut self, zi: usize, order: u32, mt: MigrateType, pfn: u64) {
        let list = &mut self.pa.zones[zi].free_area[order as usize].free_list[mt.index()];
        list.rotate_to_front(&mut self.pa.memmap.pages, pfn);
    }

    /// `prdev->report` on the batch; the device's latency passes on the
    /// simulated clock. True if the device took it.
    fn report_batch(&mut self, batch: &Batch, sink: &mut dyn ReportSink, backing: &mut dyn Backing) -> bool {
        let r = &mut self.pa.reporting;
        r.stats.report_calls += 1;
        r.now_ns += r.ack_latency_ns;
        if sink.report(batch, backing).is_err() {
            return false;
        }
        let page_kib = self.pa.geo.page_size() >> 10;
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
            let mt = self.pa.pageblocks.migratetype(pfn);
            self.pa.__putback_isolated_page(pfn, order, mt);
            if !reported {
                continue;
            }
            let page = self.pa.memmap.page(pfn);
            if page.is_buddy() && page.order() == order {
                self.pa.memmap.page_mut(pfn).insert_flags(PageFlags::REPORTED);
                let zi = self.pa.zone_of(pfn);
                self.pa.zones[zi].free_area[order as usize].nr_reported += 1;
            }
        }
    }
}
