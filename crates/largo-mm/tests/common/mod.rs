//! Helpers shared by the integration tests.
#![allow(dead_code)]

use largo_mm::machine::Machine;
use largo_mm::vm::{MapFlags, Prot};
use largo_types::Pfn;

pub const PAGE: u64 = 4096;

/// A new task with `len` bytes of private anonymous memory, every page
/// written; `fill(i)` (if given) is page `i`'s content on the backing.
pub fn anon_task(m: &mut Machine, len: u64, fill: Option<&dyn Fn(u64) -> Vec<u8>>) -> (u32, u64) {
    let pid = m.with_vm(0, |vm, ctx| vm.spawn(ctx)).unwrap();
    let prot = Prot::READ | Prot::WRITE;
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let addr = m.with_vm(0, |vm, ctx| vm.mmap(ctx, pid, 0, len, prot, flags)).unwrap();
    for i in 0..len / PAGE {
        m.with_vm(0, |vm, ctx| vm.access(ctx, pid, addr + i * PAGE, true))
            .unwrap();
        if let Some(fill) = fill {
            let pfn = m.vm().translate(pid, addr + i * PAGE).unwrap();
            m.backing_mut().write(Pfn(pfn), 0, &fill(i)).unwrap();
        }
    }
    (pid, addr)
}

/// Every page of the task still reads `fill(i)`, and none lies in `[lo, hi)`.
pub fn assert_intact_outside(
    m: &Machine,
    pid: u32,
    addr: u64,
    len: u64,
    fill: &dyn Fn(u64) -> Vec<u8>,
    lo: u64,
    hi: u64,
) {
    for i in 0..len / PAGE {
        let pfn = m.vm().translate(pid, addr + i * PAGE).unwrap();
        assert!(
            !(lo..hi).contains(&pfn),
            "page {i} still at pfn {pfn:#x} in [{lo:#x}, {hi:#x})"
        );
        let mut buf = vec![0u8; PAGE as usize];
        m.backing().read(Pfn(pfn), 0, &mut buf).unwrap();
        assert_eq!(buf, fill(i), "page {i} changed");
    }
}
