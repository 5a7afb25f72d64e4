//! `largo/movable_min_kb`, the TAO-style remedy: ZONE_MOVABLE serves
//! only allocations of the set size or more.

use largo_mm::gfp::GFP_HIGHUSER_MOVABLE;
use largo_mm::machine::Machine;
use largo_mm::MachineConfig;
use largo_types::ZoneType;

fn machine() -> Machine {
    Machine::new(MachineConfig {
        mem_bytes: 6 << 30,
        movable_bytes: 1 << 30,
        ..MachineConfig::default()
    })
    .unwrap()
}

fn zone_type(m: &Machine, pfn: u64) -> ZoneType {
    let pa = m.page_alloc();
    pa.zones()[pa.page_zone_index(pfn).unwrap()].zone_type
}

#[test]
fn small_allocations_stay_out_of_the_zone_and_large_ones_use_it() {
    let mut m = machine();
    // Without the knob a movable page comes from ZONE_MOVABLE first.
    let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 0).unwrap().unwrap();
    assert_eq!(zone_type(&m, f.pfn.0), ZoneType::Movable);
    m.set_knob("largo/movable_min_kb", "64").unwrap();
    let value = m
        .knobs()
        .into_iter()
        .find(|k| k.path == "largo/movable_min_kb")
        .unwrap()
        .value;
    assert_eq!(value, "64");
    for _ in 0..10_000 {
        let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 0).unwrap().unwrap();
        assert_ne!(zone_type(&m, f.pfn.0), ZoneType::Movable, "a 4K page in the TAO zone");
    }
    let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 4).unwrap().unwrap();
    assert_eq!(zone_type(&m, f.pfn.0), ZoneType::Movable, "64K comes from the zone");
    m.check().unwrap();
    assert!(m.set_knob("largo/movable_min_kb", "48").is_err(), "not a power of two");
    assert!(m.set_knob("largo/movable_min_kb", "2").is_err(), "below a page");
    m.set_knob("largo/movable_min_kb", "0").unwrap();
    let f = m.alloc_pages(0, GFP_HIGHUSER_MOVABLE, 0).unwrap().unwrap();
    assert_eq!(zone_type(&m, f.pfn.0), ZoneType::Movable, "off again");
}
