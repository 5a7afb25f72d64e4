//! A point where a forked child waits while its parent stops it from
//! outside: the child announces it through a shared page and spins; the
//! parent sends the SIGSTOP. A signal a task raises at itself is queued
//! with a `sigqueue` charged to the task's memory cgroup; sent by the
//! parent it is charged to the parent's, so a child inside a measured
//! cgroup can be stopped there without disturbing it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::host::{sys, HostError};

const WAITING: u32 = 0;
const ARRIVED: u32 = 1;
const RELEASED: u32 = 2;

/// One shared page holding the handshake's state.
///
/// Invariant: `flag` points at the start of a live `MAP_SHARED` page of
/// this process (and, after a fork, of the child), unmapped on drop.
pub struct Handshake {
    flag: *const AtomicU32,
}

// SAFETY: the page is shared memory accessed only through the atomic.
unsafe impl Send for Handshake {}

/// What the parent saw while waiting for the child.
pub enum Arrival {
    /// The child is at the handshake point.
    Arrived,
    /// It ended first (`wait4` status and rusage).
    Exited(libc::c_int, libc::rusage),
}

impl Handshake {
    /// Maps the shared page (before the fork).
    pub fn new() -> Result<Handshake, HostError> {
        let page = crate::host::host_page_size() as usize;
        // SAFETY: a new shared anonymous mapping at a kernel-chosen address;
        // it affects no existing memory. Checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap"));
        }
        let h = Handshake {
            flag: p.cast::<AtomicU32>(),
        };
        // Written now: the page is the parent's, not the child's cgroup's.
        h.flag().store(WAITING, Ordering::SeqCst);
        Ok(h)
    }

    fn flag(&self) -> &AtomicU32 {
        // SAFETY: the invariant: a live page, zero-initialised by mmap and
        // only ever accessed as this atomic.
        unsafe { &*self.flag }
    }

    /// The child's end of it: the shared page, whatever becomes of this
    /// handle in the parent.
    pub fn child_end(&self) -> ChildEnd {
        ChildEnd { flag: self.flag }
    }

    /// In the parent: waits until child `pid` arrives or ends.
    pub(crate) fn wait_arrival(&self, pid: libc::pid_t) -> Result<Arrival, HostError> {
        loop {
            if self.flag().load(Ordering::SeqCst) == ARRIVED {
                return Ok(Arrival::Arrived);
            }
            if let Some((status, rusage)) = crate::host::wait4_nohang(pid)? {
                return Ok(Arrival::Exited(status, rusage));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// In the parent: lets the child go on.
    pub(crate) fn release(&self) {
        self.flag().store(RELEASED, Ordering::SeqCst);
    }
}

/// The child's end of a [`Handshake`].
///
/// Invariant: `flag` points into the handshake's shared page, which stays
/// mapped in the child (the parent unmapping its own copy does not unmap
/// the child's).
#[derive(Clone, Copy)]
pub struct ChildEnd {
    flag: *const AtomicU32,
}

impl ChildEnd {
    /// In the child: announces the point and waits until the parent
    /// releases it (allocation-free).
    pub fn arrive_and_wait(self) {
        // SAFETY: the invariant: a live page of this process.
        let flag = unsafe { &*self.flag };
        flag.store(ARRIVED, Ordering::SeqCst);
        while flag.load(Ordering::SeqCst) != RELEASED {
            // SAFETY: sched_yield takes no arguments.
            unsafe { libc::sched_yield() };
        }
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        let page = crate::host::host_page_size() as usize;
        // SAFETY: unmaps the page this handshake mapped, used by nothing
        // else once it is dropped.
        unsafe { libc::munmap(self.flag as *mut libc::c_void, page) };
    }
}
