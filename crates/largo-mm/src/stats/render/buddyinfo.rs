use std::fmt::Write;

use crate::Machine;

/// /proc/buddyinfo (mm/vmstat.c `frag_show_print`): free blocks per order
/// of every populated zone.
pub fn buddyinfo(m: &Machine) -> String {
    let mut out = String::new();
    for zone in m.page_alloc().zones().iter().filter(|z| z.populated()) {
        let _ = write!(out, "Node {}, zone {:>8} ", zone.nid, zone.name());
        for area in &zone.free_area {
            let _ = write!(out, "{:>6} ", area.nr_free);
        }
        out.push('\n');
    }
    out
}
