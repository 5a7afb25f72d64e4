//! move_pages(2) status arrays against this host's kernel: the same
//! requests on pages of this process and on the model give the same
//! return values and the same status in the same places. The host has
//! one NUMA node, so this covers the query mode, pages already on their
//! node, missing pages, the zero page, addresses outside any mapping and
//! the whole call failing for a node without memory.

use largo_mm::vm::{MapFlags, Prot};
use largo_mm::{Machine, MachineConfig};
use largo_physmem::copy::Vanilla;
use largo_physmem::host::{move_pages, Window};

const PAGE: u64 = 4096;

/// Pages 0 and 3 written, page 2 read (the zero page), page 1 untouched;
/// then an address with no mapping.
fn layout(base: u64) -> Vec<u64> {
    vec![base, base + PAGE, base + 2 * PAGE, 0x1000, base + 3 * PAGE]
}

fn host_side(requests: &[Option<Vec<i32>>]) -> Vec<(i64, Vec<i32>)> {
    let mut w = Window::reserve(1 << 21, 1 << 21, 0).unwrap();
    let base = w.base();
    w.map(base, 4 * PAGE, true).unwrap();
    w.touch([base, base + 3 * PAGE].into_iter(), true).unwrap();
    w.touch([base + 2 * PAGE].into_iter(), false).unwrap();
    let pages = layout(base);
    requests
        .iter()
        .map(|nodes| move_pages(&pages, nodes.as_deref()))
        .collect()
}

fn model_side(requests: &[Option<Vec<i32>>]) -> Vec<(i64, Vec<i32>)> {
    let mut m = Machine::new(MachineConfig::default()).unwrap();
    m.with_vm(0, |vm, ctx| {
        let pid = vm.spawn(ctx).unwrap();
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let base = vm.mmap(ctx, pid, 0, 4 * PAGE, Prot::READ | Prot::WRITE, flags).unwrap();
        vm.access(ctx, pid, base, true).unwrap();
        vm.access(ctx, pid, base + 3 * PAGE, true).unwrap();
        vm.access(ctx, pid, base + 2 * PAGE, false).unwrap();
        let pages = layout(base);
        requests
            .iter()
            .map(
                |nodes| match vm.move_pages(ctx, pid, &pages, nodes.as_deref(), &Vanilla) {
                    Ok(out) => (out.ret, out.status.iter().map(|s| s.unwrap_or(i32::MIN)).collect()),
                    Err(e) => (e.errno() as i64, vec![i32::MIN; pages.len()]),
                },
            )
            .collect()
    })
}

#[test]
fn status_arrays_equal_the_host_kernels() {
    let requests = vec![
        None,
        Some(vec![0; 5]),
        Some(vec![1; 5]),
        Some(vec![0, 0, 1, 0, 0]),
        Some(vec![-1, 0, 0, 0, 0]),
    ];
    let host = host_side(&requests);
    if host[0].0 == -(libc_enosys()) {
        largo_host::skip::skip("move_pages", "this kernel has no move_pages (ENOSYS)");
        return;
    }
    let model = model_side(&requests);
    for ((req, h), l) in requests.iter().zip(&host).zip(&model) {
        println!("nodes {req:?}: host {h:?}, largo {l:?}");
        assert_eq!(h, l, "nodes {req:?}");
    }
    // The query: node 0, ENOENT (untouched), EFAULT (the zero page: 6.18's
    // folio_walk with FW_ZEROPAGE, not ENOENT as older kernels), EFAULT
    // (no mapping), node 0.
    assert_eq!(host[0].1, vec![0, -2, -14, -14, 0]);
}

fn libc_enosys() -> i64 {
    38
}
