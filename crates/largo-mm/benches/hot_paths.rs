//! The engine's hot paths, for regressions to show as numbers
//! (`cargo bench -p largo-mm`): the page allocator's allocate/free at
//! order 0 (through the per-cpu lists) and order 4 (the buddy lists: the
//! pcp lists hold orders up to 3 and the PMD order), and the anonymous write fault
//! with its munmap (page_fault1's loop) at 4K and 64K folios.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use largo_mm::gfp::GFP_KERNEL;
use largo_mm::vm::{Access, MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};

const PAGE: u64 = 4096;

fn machine(knobs: &[(&str, &str)]) -> Machine {
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 4 << 30,
        ..MachineConfig::default()
    })
    .expect("a 4 GiB machine boots");
    for (k, v) in knobs {
        m.set_knob(k, v).expect("a valid knob");
    }
    m
}

/// `nr` allocations of `order` on cpu 0, then their frees.
fn alloc_free(c: &mut Criterion) {
    let mut g = c.benchmark_group("page_alloc");
    for order in [0u32, 4] {
        let nr = 1024u64;
        g.throughput(Throughput::Elements(nr));
        let mut m = machine(&[]);
        g.bench_function(format!("alloc_free_order{order}"), |b| {
            b.iter(|| {
                let folios: Vec<_> = (0..nr)
                    .map(|_| m.alloc_pages(0, GFP_KERNEL, order).unwrap().expect("memory"))
                    .collect();
                for f in folios {
                    m.free_folio(0, f).unwrap();
                }
            })
        });
    }
    g.finish();
}

/// page_fault1's loop: map 64 MiB, write every page, unmap.
fn fault(c: &mut Criterion) {
    let len = 64u64 << 20;
    let mut g = c.benchmark_group("fault");
    g.throughput(Throughput::Elements(len / PAGE));
    g.sample_size(20);
    for (name, knobs) in [
        ("page_fault1_4K", &[][..]),
        (
            "page_fault1_64K",
            &[("transparent_hugepage/hugepages-64kB/enabled", "always")][..],
        ),
    ] {
        let mut m = machine(knobs);
        let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
        g.bench_function(name, |b| {
            b.iter_batched(
                || (),
                |_| {
                    m.with_vm(0, |vm, ctx| {
                        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
                        let addr = vm.mmap(ctx, pid, 0, len, Prot::READ | Prot::WRITE, flags).unwrap();
                        for a in (addr..addr + len).step_by(PAGE as usize) {
                            let r = vm.access(ctx, pid, a, true).unwrap();
                            debug_assert!(matches!(r, Access::Faulted | Access::Hit));
                        }
                        vm.munmap(ctx, pid, addr, len).unwrap();
                    })
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, alloc_free, fault);
criterion_main!(benches);
