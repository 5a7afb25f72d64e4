//! The anonymous fault path's counts, against what the host kernel counts.

use largo_mm::stats::render::vmstat_value;
use largo_mm::vm::stats::MthpStat;
use largo_mm::vm::{Access, MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};

fn machine(knobs: &[(&str, &str)]) -> Machine {
    let m = Machine::new(MachineConfig {
        knobs: knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..MachineConfig::default()
    })
    .unwrap();
    m.check().unwrap();
    m
}

/// will-it-scale page_fault1: mmap 128 MiB, write one byte per page, munmap.
fn page_fault1(m: &mut Machine, iterations: u32) {
    let page = m.geometry().page_size();
    m.with_vm(0, |vm, ctx| {
        let pid = vm.spawn(ctx).unwrap();
        for _ in 0..iterations {
            let len = 128 << 20;
            let addr = vm
                .mmap(
                    ctx,
                    pid,
                    0,
                    len,
                    Prot::READ | Prot::WRITE,
                    MapFlags::PRIVATE | MapFlags::ANONYMOUS,
                )
                .unwrap();
            let mut a = addr;
            while a < addr + len {
                assert!(!matches!(vm.access(ctx, pid, a, true).unwrap(), Access::Segv(_)));
                a += page;
            }
            vm.munmap(ctx, pid, addr, len).unwrap();
        }
    });
}

fn mthp(m: &Machine, kb: u64, stat: MthpStat) -> i64 {
    let order = (kb * 1024 / m.geometry().page_size()).trailing_zeros();
    m.vm().mthp.get(order, stat)
}

#[test]
fn page_fault1_with_64k_folios() {
    for sizes in [&[64][..], &[16, 32, 64][..]] {
        let knobs: Vec<(String, String)> = sizes
            .iter()
            .map(|kb| {
                (
                    format!("transparent_hugepage/hugepages-{kb}kB/enabled"),
                    "always".to_string(),
                )
            })
            .collect();
        let knobs: Vec<(&str, &str)> = knobs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut m = machine(&knobs);
        let before = vmstat_value(&m, "pgfault");
        page_fault1(&mut m, 2);
        assert_eq!(mthp(&m, 64, MthpStat::AnonFaultAlloc), 4096, "{sizes:?}");
        assert_eq!(mthp(&m, 16, MthpStat::AnonFaultAlloc), 0);
        assert_eq!(vmstat_value(&m, "pgfault") - before, 4096);
        assert_eq!(mthp(&m, 64, MthpStat::NrAnon), 0, "all freed by munmap");
        m.check().unwrap();
    }
}

#[test]
fn page_fault1_without_mthp() {
    let mut m = machine(&[]);
    page_fault1(&mut m, 2);
    assert_eq!(vmstat_value(&m, "pgfault"), 65536);
    for kb in [16, 32, 64, 2048] {
        assert_eq!(mthp(&m, kb, MthpStat::AnonFaultAlloc), 0);
    }
    assert_eq!(vmstat_value(&m, "thp_fault_alloc"), 0);
    m.check().unwrap();
}

#[test]
fn page_fault1_with_pmd_thp_always() {
    let mut m = machine(&[("transparent_hugepage/hugepages-2048kB/enabled", "always")]);
    page_fault1(&mut m, 2);
    assert_eq!(vmstat_value(&m, "thp_fault_alloc"), 128);
    assert_eq!(vmstat_value(&m, "pgfault"), 128);
    assert_eq!(mthp(&m, 2048, MthpStat::AnonFaultAlloc), 128);
    m.check().unwrap();
}
