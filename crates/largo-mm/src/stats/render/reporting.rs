//! `largo show page_reporting`: the module parameters and counters as
//! `grep . /sys/module/page_reporting/parameters/*` would print them (the
//! host's build adds `passes`, `reported_kib` and `walked` to mainline's
//! `page_reporting_order`), then the free blocks in the Reported state in
//! /proc/pagetypeinfo's layout.

use std::fmt::Write;

use crate::Machine;

pub fn page_reporting(m: &Machine) -> String {
    let r = m.reporting();
    let geo = m.geometry();
    let mut out = String::new();
    if !r.registered {
        out.push_str("no free page reporting device (the machine has no virtio-balloon)\n");
        return out;
    }
    let s = &r.stats;
    let page_kib = geo.page_size() >> 10;
    for (name, value) in [
        ("page_reporting_order", r.order(geo.pageblock_order).to_string()),
        ("passes", s.passes.to_string()),
        ("reported_kib", s.reported_kib.to_string()),
        ("walked", s.walked.to_string()),
        ("report_calls", s.report_calls.to_string()),
        ("host_refault_pages", s.host_refault_pages.to_string()),
        ("discarded_kib", (r.discarded.nr_pages() * page_kib).to_string()),
        ("state", format!("{:?}", r.state).to_lowercase()),
    ] {
        let _ = writeln!(out, "{name}:{value}");
    }
    out.push('\n');
    let _ = write!(out, "{:<43} ", "Reported free blocks at order");
    for order in 0..geo.nr_page_orders() {
        let _ = write!(out, "{order:>6} ");
    }
    out.push('\n');
    for zone in m.page_alloc().zones().iter().filter(|z| z.populated()) {
        let _ = write!(out, "{:<43} ", format!("Node {:>4}, zone {:>8}", zone.nid, zone.name()));
        for area in &zone.free_area {
            let _ = write!(out, "{:>6} ", area.nr_reported);
        }
        out.push('\n');
    }
    out
}
