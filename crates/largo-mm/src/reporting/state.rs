//! The reporting device's state (`struct page_reporting_dev_info` and the
//! module parameters) and the trigger that requests a pass.

use serde::Serialize;

use super::refault::HostDiscarded;
use super::{PAGE_REPORTING_DELAY_NS, PAGE_REPORTING_HWM};
use largo_types::Geometry;

use crate::page_alloc::FreeArea;

/// `PAGE_REPORTING_IDLE`, `_REQUESTED`, `_ACTIVE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    Idle,
    Requested,
    Active,
}

/// What requests a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// Mainline `page_reporting_notify_free`: any free of a block at or
    /// above `page_reporting_order` (no count threshold).
    Mainline,
    /// The seed series' trigger (Alexander Duyck's free page reporting
    /// as first posted): a free at or above `pageblock_order` requests a
    /// pass only when that order's unreported free blocks in the zone
    /// number at least `PAGE_REPORTING_HWM` (32).
    Seed,
}

/// One sample of the reporting timeline, taken at the end of every pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TimelineSample {
    pub t_ms: u64,
    pub passes: u64,
    pub reported_kib: u64,
}

/// What reporting did, cumulative from boot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportingStats {
    /// Passes run (`page_reporting_process` calls).
    pub passes: u64,
    /// Bytes reported / 1024 (blocks handed to the device and acknowledged).
    pub reported_kib: u64,
    /// `prdev->report` calls.
    pub report_calls: u64,
    /// Blocks reported by order.
    pub reported_pages_by_order: Vec<u64>,
    /// Free-list entries the passes looked at.
    pub walked: u64,
    /// Pages the host had discarded that were allocated again (each
    /// refaults on the host when the guest touches it).
    pub host_refault_pages: u64,
    pub timeline: Vec<TimelineSample>,
}

/// The registered device and the module parameters.
#[derive(Clone, Debug)]
pub struct PageReporting {
    /// A device registered (`page_reporting_register`); off by default.
    pub registered: bool,
    /// `page_reporting_order`: `None` is the kernel's -1 ("unset") until
    /// a device registers with its order.
    pub order_param: Option<u32>,
    pub trigger: Trigger,
    /// largo's retention watermark (proposed in the seed thread, not in
    /// Linux): free pages a pass leaves unreported, 0 = off.
    pub retain_pages: u64,
    /// The device's acknowledge latency per report call.
    pub ack_latency_ns: u64,
    pub state: PrState,
    /// When the delayed work runs, if it is scheduled.
    pub due_ns: Option<u64>,
    /// The machine's simulated clock.
    pub now_ns: u64,
    pub stats: ReportingStats,
    pub discarded: HostDiscarded,
}

impl PageReporting {
    pub fn new(nr_orders: usize) -> PageReporting {
        PageReporting {
            registered: false,
            order_param: None,
            trigger: Trigger::Mainline,
            retain_pages: 0,
            ack_latency_ns: 0,
            state: PrState::Idle,
            due_ns: None,
            now_ns: 0,
            stats: ReportingStats {
                reported_pages_by_order: vec![0; nr_orders],
                ..ReportingStats::default()
            },
            discarded: HostDiscarded::default(),
        }
    }

    /// The order in force (`page_reporting_order`).
    pub fn order(&self, pageblock_order: u32) -> u32 {
        self.order_param.unwrap_or(pageblock_order)
    }

    /// `__page_reporting_request`: REQUESTED, and the delayed work
    /// scheduled if the device was idle.
    pub(crate) fn request(&mut self) {
        if self.state == PrState::Requested {
            return;
        }
        let old = std::mem::replace(&mut self.state, PrState::Requested);
        if old == PrState::Idle {
            self.due_ns = Some(self.now_ns + PAGE_REPORTING_DELAY_NS);
        }
    }
}

impl PageReporting {
    /// `page_reporting_register`: the device's order is used unless the
    /// parameter was set (`0 < order <= MAX_PAGE_ORDER`, else
    /// pageblock_order), and the first full pass is requested.
    pub fn register(&mut self, device_order: u32, ack_latency_ns: u64, max_pfn: u64, geo: &Geometry) {
        if self.registered {
            return;
        }
        if self.order_param.is_none() {
            let order = if device_order > 0 && device_order <= geo.max_page_order {
                device_order
            } else {
                geo.pageblock_order
            };
            self.order_param = Some(order);
        }
        self.registered = true;
        self.ack_latency_ns = ack_latency_ns;
        self.state = PrState::Idle;
        self.discarded.resize(max_pfn);
        self.request();
    }

    /// `page_reporting_notify_free`, at the end of `__free_one_page`: a
    /// block of `order` was freed onto `area`'s lists.
    #[inline]
    pub(crate) fn notify_free(&mut self, order: u32, area: &FreeArea, pageblock_order: u32) {
        if !self.registered {
            return;
        }
        match self.trigger {
            Trigger::Mainline => {
                if order < self.order(pageblock_order) {
                    return;
                }
            }
            Trigger::Seed => {
                if order < pageblock_order {
                    return;
                }
                if area.nr_free - area.nr_reported < PAGE_REPORTING_HWM {
                    return;
                }
            }
        }
        self.request();
    }
}
