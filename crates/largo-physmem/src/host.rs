//! Memory operations on the host itself, for running a workload natively
//! under the real kernel (validation and calibration): an address-space
//! [`Window`] owned by this process in which anonymous mappings are made at
//! chosen addresses and touched, `fork` with the child's resource usage,
//! and this process's resource usage.
//!
//! Every access goes through a `Window`, which checks that the bytes lie in
//! a live anonymous mapping it made itself: no Rust object can alias them.

use crate::spans::{Spans, RESERVED_SPANS};
use std::io;

/// `madvise` advice the host runner gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAdvice {
    DontNeed,
    Free,
    HugePage,
    NoHugePage,
    /// MADV_COLLAPSE (Linux 6.1): its failures (EINVAL for a range with
    /// no page table, ENOMEM, EAGAIN) are outcomes, not errors of a run.
    Collapse,
    /// MADV_COLD (Linux 5.4).
    Cold,
    /// MADV_PAGEOUT (Linux 5.4).
    PageOut,
    /// MADV_REMOVE: a hole punched in the shmem file a shared mapping maps.
    Remove,
}

/// What a [`Window::map_with`] mapping maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapSource {
    Anonymous {
        shared: bool,
    },
    /// A file descriptor of this process (a memfd), from byte `offset`.
    Fd {
        fd: i32,
        offset: u64,
        shared: bool,
    },
}

/// `madvise(addr, len, advice)` on this process's own mappings outside
/// any window (MADV_NOHUGEPAGE: no effect on their contents).
pub(crate) fn madvise_raw(addr: u64, len: u64, advice: libc::c_int) -> Result<(), HostError> {
    // SAFETY: advice that changes no memory contents (only VMA flags), on
    // ranges of this process's address space.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len as usize, advice) } != 0 {
        return Err(sys("madvise"));
    }
    Ok(())
}

/// `memfd_create(name, 0)`: a new shmem file's descriptor.
pub fn memfd_create() -> Result<i32, HostError> {
    // SAFETY: a system call with a static NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"largo".as_ptr(), 0) };
    if fd < 0 {
        return Err(sys("memfd_create"));
    }
    Ok(fd)
}

/// `ftruncate(fd, len)`.
pub fn ftruncate(fd: i32, len: u64) -> Result<(), HostError> {
    // SAFETY: a system call on a descriptor; no memory is passed.
    if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
        return Err(sys("ftruncate"));
    }
    Ok(())
}

/// `fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len)`.
pub fn punch_hole(fd: i32, offset: u64, len: u64) -> Result<(), HostError> {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: a system call on a descriptor; the pages it drops belong to
    // a memfd whose mappings no Rust reference covers.
    if unsafe { libc::fallocate(fd, mode, offset as libc::off_t, len as libc::off_t) } != 0 {
        return Err(sys("fallocate"));
    }
    Ok(())
}

/// `close(fd)`.
pub fn close_fd(fd: i32) -> Result<(), HostError> {
    // SAFETY: closes a descriptor this module opened (memfd_create).
    if unsafe { libc::close(fd) } != 0 {
        return Err(sys("close"));
    }
    Ok(())
}

/// `MADV_COLLAPSE` from include/uapi/asm-generic/mman-common.h.
const MADV_COLLAPSE: libc::c_int = 25;

impl HostAdvice {
    fn raw(self) -> libc::c_int {
        match self {
            HostAdvice::DontNeed => libc::MADV_DONTNEED,
            HostAdvice::Free => libc::MADV_FREE,
            HostAdvice::HugePage => libc::MADV_HUGEPAGE,
            HostAdvice::NoHugePage => libc::MADV_NOHUGEPAGE,
            HostAdvice::Collapse => MADV_COLLAPSE,
            HostAdvice::Cold => libc::MADV_COLD,
            HostAdvice::PageOut => libc::MADV_PAGEOUT,
            HostAdvice::Remove => libc::MADV_REMOVE,
        }
    }
}

/// A misuse of a window or a failed system call.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("[{addr:#x}, +{len:#x}) is outside the window [{base:#x}, +{size:#x})")]
    OutsideWindow { addr: u64, len: u64, base: u64, size: u64 },
    #[error("{addr:#x} is not in a live mapping of the window")]
    NotMapped { addr: u64 },
    #[error("{call}: {source}")]
    Sys {
        call: &'static str,
        #[source]
        source: io::Error,
    },
}

pub(crate) fn sys(call: &'static str) -> HostError {
    HostError::Sys {
        call,
        source: io::Error::last_os_error(),
    }
}

/// The base page size of the host.
pub fn host_page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    n.max(4096) as u64
}

/// A range of this process's address space reserved with a `PROT_NONE`
/// mapping; mappings are made and removed inside it with `MAP_FIXED`, so
/// nothing else in the process can be placed there meanwhile.
pub struct Window {
    base: u64,
    size: u64,
    /// Live mappings made here.
    mapped: Spans,
    /// The whole reservation `[lo, hi)`: the window and any guard around
    /// it ([`Window::reserve_owning`]).
    reserved: (u64, u64),
    /// The reservation was given up ([`Window::release`]): unmapped
    /// ranges stay free.
    bare: bool,
}

impl Window {
    /// Reserves `size` bytes whose start is congruent to `phase` modulo
    /// `align` (a power of two), so addresses translated into it keep
    /// their alignment up to `align`.
    pub fn reserve(size: u64, align: u64, phase: u64) -> Result<Window, HostError> {
        let align = align.max(host_page_size());
        let total = size.checked_add(align).ok_or(HostError::Sys {
            call: "mmap",
            source: io::Error::from(io::ErrorKind::InvalidInput),
        })?;
        // SAFETY: a new private anonymous PROT_NONE mapping at a kernel-chosen
        // address; it affects no existing memory. Checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total as usize,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap"));
        }
        let raw = p as u64;
        let base = raw + ((phase.wrapping_sub(raw)) & (align - 1));
        // Trim the slack around [base, base + size).
        let head = base - raw;
        let tail = total - head - size;
        // SAFETY: both ranges lie in the reservation just made and are
        // referenced by nothing.
        unsafe {
            if head > 0 {
                libc::munmap(raw as *mut libc::c_void, head as usize);
            }
            if tail > 0 {
                libc::munmap((base + size) as *mut libc::c_void, tail as usize);
            }
        }
        Ok(Window {
            base,
            size,
            mapped: Spans::with_capacity(RESERVED_SPANS),
            reserved: (base, base + size),
            bare: false,
        })
    }

    /// [`Window::reserve`], and the whole `span`-aligned regions the
    /// window touches stay reserved around it: no other mapping of this
    /// process comes to share their page tables.
    pub fn reserve_owning(size: u64, span: u64, phase: u64) -> Result<Window, HostError> {
        let span = span.max(host_page_size());
        let owned = (phase % span + size).div_ceil(span) * span;
        let mut w = Window::reserve(owned, span, 0)?;
        let lo = w.base;
        w.base = lo + phase % span;
        w.size = size;
        w.reserved = (lo, lo + owned);
        Ok(w)
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    fn check_inside(&self, addr: u64, len: u64) -> Result<(), HostError> {
        let ok = addr >= self.base && addr.checked_add(len).is_some_and(|e| e <= self.base + self.size);
        if ok {
            Ok(())
        } else {
            Err(HostError::OutsideWindow {
                addr,
                len,
                base: self.base,
                size: self.size,
            })
        }
    }

    /// `mmap(addr, len, PROT_READ[|PROT_WRITE], MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED)`
    /// inside the window.
    pub fn map(&mut self, addr: u64, len: u64, write: bool) -> Result<(), HostError> {
        self.map_with(addr, len, write, MapSource::Anonymous { shared: false })
    }

    /// `mmap(addr, len, PROT_READ[|PROT_WRITE], MAP_FIXED | ...)` of
    /// anonymous memory (private or shared) or of a descriptor, inside
    /// the window.
    pub fn map_with(&mut self, addr: u64, len: u64, write: bool, source: MapSource) -> Result<(), HostError> {
        self.check_inside(addr, len)?;
        let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
        let (flags, fd, offset) = match source {
            MapSource::Anonymous { shared: false } => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0),
            MapSource::Anonymous { shared: true } => (libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0),
            MapSource::Fd { fd, offset, shared } => {
                let kind = if shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
                (kind, fd, offset as libc::off_t)
            }
        };
        // SAFETY: the range lies in this window, which only ever holds the
        // reservation and mappings made here; replacing them affects no
        // memory Rust code refers to. Checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                len as usize,
                prot,
                flags | libc::MAP_FIXED,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap"));
        }
        self.mapped.insert(addr, addr + len, write);
        Ok(())
    }

    /// `shmat` of SysV segment `id` (`len` bytes) at `addr` in the window.
    pub fn attach_shm(&mut self, id: i32, addr: u64, len: u64, write: bool) -> Result<(), HostError> {
        self.check_inside(addr, len)?;
        crate::sysv::attach(id, addr, write)?;
        self.mapped.insert(addr, addr + len, write);
        Ok(())
    }

    /// `shmdt(addr)` of the segment (`len` bytes) attached there; the
    /// range returns to the reservation.
    pub fn detach_shm(&mut self, addr: u64, len: u64) -> Result<(), HostError> {
        self.check_inside(addr, len)?;
        crate::sysv::detach(addr)?;
        self.reserve_again(addr, len)?;
        self.forget(addr, addr + len);
        Ok(())
    }

    /// `munmap(addr, len)`; the range returns to the reservation.
    pub fn unmap(&mut self, addr: u64, len: u64) -> Result<(), HostError> {
        self.check_inside(addr, len)?;
        // SAFETY: as in `map`; munmap of a range of this window.
        if unsafe { libc::munmap(addr as *mut libc::c_void, len as usize) } != 0 {
            return Err(sys("munmap"));
        }
        self.reserve_again(addr, len)?;
        self.forget(addr, addr + len);
        Ok(())
    }

    /// Drops `[start, end)` from the live mappings, keeping the parts outside.
    fn forget(&mut self, start: u64, end: u64) {
        self.mapped.forget(start, end);
    }

    /// Gives up the PROT_NONE reservation (before any mapping is made):
    /// the range is then free, and the program's mappings are made into
    /// free space and unmapped back to it, as in a fresh process, with no
    /// reservation mapping split or freed on the way. Only for a forked
    /// child that makes no mapping of its own.
    pub fn release(&mut self) -> Result<(), HostError> {
        if self.bare || self.mapped.iter().next().is_some() {
            return Ok(());
        }
        let (lo, hi) = self.reserved;
        // SAFETY: unmaps this window's reservation, which holds no mapping
        // yet and which nothing refers to.
        if unsafe { libc::munmap(lo as *mut libc::c_void, (hi - lo) as usize) } != 0 {
            return Err(sys("munmap"));
        }
        self.bare = true;
        Ok(())
    }

    /// Writes the pages of the mapping bookkeeping (a forked child that
    /// joins a memory cgroup does so first: its program then writes no
    /// page of its own beyond the window's).
    pub fn prefault_bookkeeping(&mut self) {
        self.mapped.prefault();
        own_object(self);
    }

    /// `madvise(addr, len, advice)`.
    pub fn madvise(&mut self, addr: u64, len: u64, advice: HostAdvice) -> Result<(), HostError> {
        self.check_inside(addr, len)?;
        // SAFETY: advice on a range of this window; DONTNEED and FREE only
        // drop contents of anonymous mappings no Rust object refers to.
        if unsafe { libc::madvise(addr as *mut libc::c_void, len as usize, advice.raw()) } != 0 {
            return Err(sys("madvise"));
        }
        Ok(())
    }

    /// `mremap(old, old_len, new_len, MREMAP_MAYMOVE | MREMAP_FIXED, new)`
    /// inside the window (or in place when `new == old`). The old range
    /// returns to the reservation.
    pub fn remap(&mut self, old: u64, old_len: u64, new: u64, new_len: u64) -> Result<(), HostError> {
        self.check_inside(old, old_len)?;
        self.check_inside(new, new_len)?;
        let write = self.mapped.find(old).is_some_and(|s| s.write);
        if new == old && new_len > old_len {
            // Growing in place: the reservation above must make room.
            let (gap, gap_len) = (old + old_len, new_len - old_len);
            if self.mapped.overlaps(gap, gap + gap_len) {
                return Err(HostError::NotMapped { addr: gap });
            }
            // SAFETY: unmaps only reservation pages of this window (no live
            // mapping is there, checked above).
            if unsafe { libc::munmap(gap as *mut libc::c_void, gap_len as usize) } != 0 {
                return Err(sys("munmap"));
            }
        }
        let (flags, target) = if new == old {
            (0, std::ptr::null_mut())
        } else {
            (libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, new as *mut libc::c_void)
        };
        // SAFETY: both ranges lie in this window, which only holds mappings
        // made here and the reservation; nothing Rust refers to is moved.
        let p = unsafe {
            libc::mremap(
                old as *mut libc::c_void,
                old_len as usize,
                new_len as usize,
                flags,
                target,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mremap"));
        }
        self.forget(old, old + old_len);
        if new != old && old_len > 0 {
            self.reserve_again(old, old_len)?;
        }
        self.mapped.insert(new, new + new_len, write);
        Ok(())
    }

    /// Puts a PROT_NONE reservation back over a range of the window that
    /// has just been unmapped.
    fn reserve_again(&mut self, addr: u64, len: u64) -> Result<(), HostError> {
        if self.bare {
            return Ok(());
        }
        // SAFETY: re-reserves an unmapped range of this window.
        let p = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                len as usize,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap"));
        }
        Ok(())
    }

    /// `mprotect(addr, len, PROT_READ[|PROT_WRITE])` on mapped memory of
    /// the window.
    pub fn protect(&mut self, addr: u64, len: u64, write: bool) -> Result<(), HostError> {
        self.check_inside(addr, len)?;
        let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
        // SAFETY: a range of this window's own mappings; no Rust reference
        // covers them.
        if unsafe { libc::mprotect(addr as *mut libc::c_void, len as usize, prot) } != 0 {
            return Err(sys("mprotect"));
        }
        self.mapped.protect(addr, addr + len, write);
        Ok(())
    }

    /// The live mappings: (start, end, writable), in address order.
    pub fn mappings(&self) -> Vec<(u64, u64, bool)> {
        self.mapped.iter().map(|s| (s.start, s.end, s.write)).collect()
    }

    /// The live mapping holding `addr`: `(start, end, writable)`.
    pub(crate) fn mapped_span(&self, addr: u64) -> Option<(u64, u64, bool)> {
        self.mapped.find(addr).map(|s| (s.start, s.end, s.write))
    }

    /// Whether `[addr, addr + 1)` is in a live mapping (a writable one
    /// for a write).
    fn is_mapped(&self, addr: u64, write: bool) -> bool {
        self.mapped.find(addr).is_some_and(|s| s.write || !write)
    }

    /// One access per address, in order: a volatile byte write of `0x5a`
    /// or a volatile read. Stops with an error at the first address that
    /// is not in a live mapping of the window (writable, for a write).
    pub fn touch(&self, addrs: impl Iterator<Item = u64>, write: bool) -> Result<(), HostError> {
        self.touch_with(addrs, write, None)
    }

    /// [`Window::touch`], with `work` run after each access.
    pub fn touch_with(
        &self,
        addrs: impl Iterator<Item = u64>,
        write: bool,
        work: Option<&UserWork>,
    ) -> Result<(), HostError> {
        for a in addrs {
            if !self.is_mapped(a, write) {
                return Err(HostError::NotMapped { addr: a });
            }
            let p = a as *mut u8;
            // SAFETY: `a` lies in a live anonymous mapping this window made,
            // which no Rust reference covers.
            unsafe {
                if write {
                    std::ptr::write_volatile(p, 0x5a);
                } else {
                    std::ptr::read_volatile(p);
                }
            }
            if let Some(w) = work {
                w.run();
            }
        }
        Ok(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        let (lo, hi) = self.reserved;
        // SAFETY: unmaps exactly this window's reservation, which nothing
        // else uses.
        unsafe {
            libc::munmap(lo as *mut libc::c_void, (hi - lo) as usize);
        }
    }
}

/// Resource usage of a process (`struct rusage`, the parts used).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rusage {
    pub utime_ns: u64,
    pub stime_ns: u64,
    /// Minor and major page faults.
    pub minflt: u64,
    pub majflt: u64,
}

impl Rusage {
    fn from_raw(r: &libc::rusage) -> Rusage {
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        Rusage {
            utime_ns: ns(r.ru_utime),
            stime_ns: ns(r.ru_stime),
            minflt: r.ru_minflt as u64,
            majflt: r.ru_majflt as u64,
        }
    }
}

/// `getrusage(RUSAGE_SELF)`.
pub fn rusage_self() -> Rusage {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, exclusively borrowed rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    Rusage::from_raw(&r)
}

/// `getrusage(RUSAGE_CHILDREN)`: every waited-for descendant.
pub fn rusage_children() -> Rusage {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, exclusively borrowed rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut r) };
    Rusage::from_raw(&r)
}

/// How a forked child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildExit {
    /// The exit status, or `None` if a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The child's resource usage, its waited-for descendants included.
    pub rusage: Rusage,
}

/// Forks; the child runs `child` and exits with its return value (101
/// if it panics: a panic never unwinds into the caller's frames in the
/// child); returns the child's pid to the parent.
///
/// # Safety
///
/// The child is a copy of this process with only the calling thread. If
/// the process has other threads, `child` must not take a lock another
/// thread may hold at the fork (the standard library's stdout and stderr
/// locks, the environment lock, a `Mutex` of the program) nor wait for
/// another thread; it should do little besides system calls and memory
/// accesses. glibc keeps malloc usable in the child.
unsafe fn fork_child(child: impl FnOnce() -> i32) -> Result<libc::pid_t, HostError> {
    // SAFETY: fork has no memory-safety preconditions of its own; what the
    // child may do is the caller's contract above.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(sys("fork"));
    }
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's atexit
        // handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// Forks; the child runs `child` and exits with its return value (101 if
/// it panics), the parent waits for it and returns how it ended.
///
/// # Safety
///
/// As for the child of [`fork_child`]: with other threads in the
/// process, `child` must not take a lock another thread may hold at the
/// fork nor wait for another thread (malloc is usable, glibc resets its
/// locks in the child). Only this crate calls it, with children that run
/// system calls and memory accesses ([`crate::native`]).
pub unsafe fn fork_and_wait(child: impl FnOnce() -> i32) -> Result<ChildExit, HostError> {
    // SAFETY: the caller upholds the contract of `fork_child`.
    let pid = unsafe { fork_child(child) }?;
    wait_child(pid)
}

/// Waits for the kernel's deferred frees to run: page-table pages freed
/// by munmap (and other RCU-freed memory) go back to their memcg only
/// after a grace period. `membarrier(MEMBARRIER_CMD_GLOBAL)` waits for
/// one (`synchronize_rcu`); the callbacks run just after. Allocation-free.
pub fn rcu_settle() {
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    for _ in 0..2 {
        // SAFETY: membarrier takes no pointers; a failure (not supported)
        // only makes the wait shorter.
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    }
    std::thread::sleep(std::time::Duration::from_millis(10));
}

/// Stops the calling process (SIGSTOP) until its parent resumes it.
pub fn stop_self() {
    // SAFETY: raising a signal at oneself has no memory effects.
    unsafe { libc::raise(libc::SIGSTOP) };
}

/// `child`, then a stop of the process (SIGSTOP) if it succeeded.
fn then_stop(child: impl FnOnce() -> i32) -> impl FnOnce() -> i32 {
    || {
        let code = child();
        if code == 0 {
            // SAFETY: raising a signal at oneself has no memory effects.
            unsafe { libc::raise(libc::SIGSTOP) };
        }
        code
    }
}

/// Forks a child that runs `child` and then stops itself (SIGSTOP), so
/// the parent can read its state (/proc/PID) before it exits.
///
/// # Safety
///
/// As for [`fork_and_wait`].
pub(crate) unsafe fn fork_and_stop(child: impl FnOnce() -> i32) -> Result<Forked, HostError> {
    let run = then_stop(child);
    // SAFETY: the caller upholds the contract of `fork_child`.
    let pid = unsafe { fork_child(run) }?;
    let (status, rusage) = wait4(pid, libc::WUNTRACED)?;
    if libc::WIFSTOPPED(status) {
        return Ok(Forked::Stopped(StoppedChild {
            pid,
            resumed: false,
            handshake: None,
        }));
    }
    Ok(Forked::Exited(child_exit(status, &rusage)))
}

/// [`fork_and_stop`] for a child that first waits at `handshake`: the
/// parent stops it there from outside (see [`crate::handshake`]) and
/// returns it stopped; resumed, it goes on to its end and stops again.
///
/// # Safety
///
/// As for [`fork_and_wait`].
pub(crate) unsafe fn fork_and_stop_at(
    child: impl FnOnce() -> i32,
    handshake: crate::handshake::Handshake,
) -> Result<Forked, HostError> {
    let run = then_stop(child);
    // SAFETY: the caller upholds the contract of `fork_child`.
    let pid = unsafe { fork_child(run) }?;
    if let crate::handshake::Arrival::Exited(status, rusage) = handshake.wait_arrival(pid)? {
        return Ok(Forked::Exited(child_exit(status, &rusage)));
    }
    // SAFETY: a signal to our own child.
    if unsafe { libc::kill(pid, libc::SIGSTOP) } != 0 {
        return Err(sys("kill"));
    }
    let (status, rusage) = wait4(pid, libc::WUNTRACED)?;
    if libc::WIFSTOPPED(status) {
        return Ok(Forked::Stopped(StoppedChild {
            pid,
            resumed: false,
            handshake: Some(handshake),
        }));
    }
    Ok(Forked::Exited(child_exit(status, &rusage)))
}

/// A forked child after its work: stopped for its parent to look at, or
/// already ended (it failed before stopping).
pub enum Forked {
    Stopped(StoppedChild),
    Exited(ChildExit),
}

/// A forked child stopped at the end of its work; it exits when resumed
/// (or is killed when dropped unresumed).
pub struct StoppedChild {
    pid: libc::pid_t,
    resumed: bool,
    /// Stopped at a handshake, which resuming releases.
    handshake: Option<crate::handshake::Handshake>,
}

impl StoppedChild {
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets it run until it stops again (`Forked::Stopped`) or exits.
    pub fn resume_until_stopped(mut self) -> Result<Forked, HostError> {
        self.resumed = true;
        if let Some(h) = self.handshake.take() {
            h.release();
        }
        // SAFETY: a signal to our own stopped child.
        if unsafe { libc::kill(self.pid, libc::SIGCONT) } != 0 {
            return Err(sys("kill"));
        }
        let (status, rusage) = wait4(self.pid, libc::WUNTRACED)?;
        if libc::WIFSTOPPED(status) {
            return Ok(Forked::Stopped(StoppedChild {
                pid: self.pid,
                resumed: false,
                handshake: None,
            }));
        }
        Ok(Forked::Exited(child_exit(status, &rusage)))
    }

    /// Lets it exit, and waits for it.
    pub fn resume(mut self) -> Result<ChildExit, HostError> {
        self.resumed = true;
        if let Some(h) = self.handshake.take() {
            h.release();
        }
        // SAFETY: a signal to our own stopped child.
        if unsafe { libc::kill(self.pid, libc::SIGCONT) } != 0 {
            return Err(sys("kill"));
        }
        wait_child(self.pid)
    }
}

impl Drop for StoppedChild {
    fn drop(&mut self) {
        if !self.resumed {
            // SAFETY: a signal to our own child, then reaping it.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = wait_child(self.pid);
        }
    }
}

/// `wait4` on `pid` (retrying on EINTR): its status and rusage.
fn wait4(pid: libc::pid_t, options: libc::c_int) -> Result<(libc::c_int, libc::rusage), HostError> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `r` are valid, exclusively borrowed.
        let got = unsafe { libc::wait4(pid, &mut status, options, &mut r) };
        if got == pid {
            return Ok((status, r));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(HostError::Sys {
                call: "wait4",
                source: err,
            });
        }
    }
}

/// `wait4(WNOHANG)`: the child's status and rusage if it has ended.
pub(crate) fn wait4_nohang(pid: libc::pid_t) -> Result<Option<(libc::c_int, libc::rusage)>, HostError> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `r` are valid, exclusively borrowed.
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut r) };
        if got == pid {
            return Ok(Some((status, r)));
        }
        if got == 0 {
            return Ok(None);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(HostError::Sys {
                call: "wait4",
                source: err,
            });
        }
    }
}

fn child_exit(status: libc::c_int, r: &libc::rusage) -> ChildExit {
    ChildExit {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        rusage: Rusage::from_raw(r),
    }
}

fn wait_child(pid: libc::pid_t) -> Result<ChildExit, HostError> {
    let (status, r) = wait4(pid, 0)?;
    Ok(child_exit(status, &r))
}

/// `prctl(PR_SET_THP_DISABLE, ...)` for this process: 0 off, 1 completely,
/// 2 except in MADV_HUGEPAGE regions (`PR_THP_DISABLE_EXCEPT_ADVISED`).
pub fn prctl_thp_disable(mode: u8) -> Result<(), HostError> {
    const PR_SET_THP_DISABLE: libc::c_int = 41;
    const PR_THP_DISABLE_EXCEPT_ADVISED: libc::c_ulong = 1 << 1;
    let (arg2, arg3): (libc::c_ulong, libc::c_ulong) = match mode {
        0 => (0, 0),
        1 => (1, 0),
        _ => (1, PR_THP_DISABLE_EXCEPT_ADVISED),
    };
    // SAFETY: prctl with integer arguments only; no memory is passed.
    if unsafe { libc::prctl(PR_SET_THP_DISABLE, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) } != 0 {
        return Err(sys("prctl"));
    }
    Ok(())
}

/// `prctl(PR_GET_THP_DISABLE)`: this process's mode as
/// [`prctl_thp_disable`] takes it.
pub fn prctl_thp_disable_mode() -> u8 {
    const PR_GET_THP_DISABLE: libc::c_int = 42;
    // SAFETY: prctl with integer arguments only; no memory is passed.
    let r = unsafe {
        libc::prctl(
            PR_GET_THP_DISABLE,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    match r {
        r if r <= 0 => 0,
        r if r & (1 << 1) != 0 => 2,
        _ => 1,
    }
}

/// THP off for this process while it lives (`PR_SET_THP_DISABLE`),
/// restored on drop: khugepaged then leaves the memory of a process that
/// forks native programs alone (its pages are shared with the children,
/// and would count as shared PTEs in khugepaged's scans). The native
/// children turn it back on first thing.
pub struct ThpOffGuard {
    previous: u8,
}

impl ThpOffGuard {
    pub fn new() -> Result<ThpOffGuard, HostError> {
        let previous = prctl_thp_disable_mode();
        prctl_thp_disable(1)?;
        Ok(ThpOffGuard { previous })
    }
}

impl Drop for ThpOffGuard {
    fn drop(&mut self) {
        let _ = prctl_thp_disable(self.previous);
    }
}

/// `move_pages(0, ...)` for this process: with `nodes`, move each page to
/// its node (`MPOL_MF_MOVE`); without, query each page's node. Returns the
/// syscall's result (a count of pages not migrated, or `-errno`) and the
/// status array (left as `i32::MIN` where the kernel wrote nothing).
pub fn move_pages(pages: &[u64], nodes: Option<&[i32]>) -> (i64, Vec<i32>) {
    const MPOL_MF_MOVE: libc::c_int = 1 << 1;
    let ptrs: Vec<*mut libc::c_void> = pages.iter().map(|&p| p as *mut libc::c_void).collect();
    let mut status = vec![i32::MIN; pages.len()];
    if nodes.is_some_and(|n| n.len() != pages.len()) {
        return (-(libc::EINVAL as i64), status);
    }
    let node_ptr = nodes.map_or(std::ptr::null(), |n| n.as_ptr());
    // SAFETY: `ptrs`, the node array (when given) and `status` each hold
    // `pages.len()` elements and outlive the call; the kernel only reads
    // the first two and writes the third. The addresses are values the
    // kernel checks itself (a bad one yields -EFAULT in its status).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_long,
            pages.len() as libc::c_ulong,
            ptrs.as_ptr(),
            node_ptr,
            status.as_mut_ptr(),
            if nodes.is_some() { MPOL_MF_MOVE } else { 0 },
        )
    };
    let ret = if rc < 0 {
        -(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL) as i64)
    } else {
        rc as i64
    };
    (ret, status)
}

/// Writes `value` to a file in a child-safe way (no allocation): for
/// `/proc/sys/vm/drop_caches` from a forked child. Returns success.
pub fn write_file_no_alloc(path: &std::ffi::CStr, value: &[u8]) -> bool {
    // SAFETY: `path` is a valid NUL-terminated string; the descriptor is
    // checked and closed.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, value.as_ptr().cast(), value.len());
        libc::close(fd);
        n == value.len() as isize
    }
}

/// Writes the first and last byte of `obj` (their current values): a
/// forked child copies the pages holding the object now, before it joins
/// a memory cgroup, rather than at its first update there.
pub fn own_object<T>(obj: &mut T) {
    let size = std::mem::size_of::<T>();
    if size == 0 {
        return;
    }
    let p = (obj as *mut T).cast::<u8>();
    // SAFETY: both bytes lie inside `*obj`, which the exclusive borrow
    // lets us write; each is written with the value just read, so the
    // object is unchanged (padding bytes included: any value is valid).
    unsafe {
        std::ptr::write_volatile(p, std::ptr::read_volatile(p));
        let last = p.add(size - 1);
        std::ptr::write_volatile(last, std::ptr::read_volatile(last));
    }
}

/// Binds the calling thread (and what it forks later) to one cpu
/// (`sched_setaffinity`), allocation-free: from a forked child.
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: `set` is a plain bitmask on the stack, zeroed and then set
    // through the libc macros; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Writes this process's id to `procs` (a cgroup's `cgroup.procs`):
/// the process joins the cgroup. Allocation-free: from a forked child.
pub fn join_cgroup(procs: &std::ffi::CStr) -> bool {
    ProcsFile::open(procs).is_some_and(ProcsFile::join)
}

/// A cgroup's `cgroup.procs` opened for writing ahead of the move, so the
/// move itself opens nothing: opening allocates a `struct file`, charged
/// (`SLAB_ACCOUNT`) to the cgroup the process is in at the open. A process
/// leaving a memory cgroup at its limit would otherwise charge it one more
/// page and make it reclaim after the program's last step.
pub struct ProcsFile(std::os::fd::OwnedFd);

impl ProcsFile {
    /// Opens `procs` (allocation-free: from a forked child).
    pub fn open(procs: &std::ffi::CStr) -> Option<ProcsFile> {
        // SAFETY: `procs` is a valid NUL-terminated string; the result is
        // checked.
        let fd = unsafe { libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        Some(ProcsFile(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
        }))
    }

    /// Moves this process into the cgroup; the file is closed on return.
    pub fn join(self) -> bool {
        let (buf, at) = pid_digits();
        let value = &buf[at..];
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.0);
        // SAFETY: writes `value.len()` bytes from a live stack buffer to a
        // descriptor this value owns.
        let n = unsafe { libc::write(fd, value.as_ptr().cast(), value.len()) };
        n == value.len() as isize
    }
}

/// This process's id in decimal, at the end of a stack buffer: the digits
/// are `buf[at..]`.
fn pid_digits() -> ([u8; 20], usize) {
    let mut buf = [0u8; 20];
    let mut n = std::process::id();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    (buf, at)
}

/// Waits for an exclusive `flock` on an open descriptor (retrying on
/// EINTR). The lock goes when the descriptor is closed.
pub fn flock_exclusive(fd: std::os::fd::RawFd) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor the caller owns; no memory is involved.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// User work between page faults: a buffer written line by line, so the
/// CPU's private caches hold the program's data, not the kernel's, when
/// the next fault comes (as in real programs, whose code runs between
/// faults). The buffer is a shared anonymous mapping populated up front,
/// so a forked child writes it without faulting.
pub struct UserWork {
    base: *mut u8,
    bytes: usize,
}

// SAFETY: the mapping is owned by this value and written only through
// `run`, which takes `&self` and writes with volatile byte stores whose
// interleaving between threads cannot break anything (the contents do
// not matter).
unsafe impl Send for UserWork {}
// SAFETY: as for Send: shared use only writes bytes with volatile stores.
unsafe impl Sync for UserWork {}

impl UserWork {
    /// A populated buffer of `bytes` (rounded up to a page).
    pub fn new(bytes: usize) -> Result<UserWork, HostError> {
        let bytes = bytes.max(1).next_multiple_of(4096);
        // SAFETY: a fresh shared anonymous mapping; no existing memory is
        // affected. MAP_POPULATE faults it in now, in this process.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap"));
        }
        Ok(UserWork { base: p.cast(), bytes })
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Writes one byte in every 64-byte line of the buffer.
    #[inline(never)]
    pub fn run(&self) {
        for off in (0..self.bytes).step_by(64) {
            // SAFETY: `off < bytes`, inside the live mapping this value owns.
            unsafe {
                let p = self.base.add(off);
                std::ptr::write_volatile(p, std::ptr::read_volatile(p).wrapping_add(1));
            }
        }
    }
}

impl Drop for UserWork {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value made.
        unsafe {
            libc::munmap(self.base.cast(), self.bytes);
        }
    }
}

/// Touches `bytes` of this thread's stack, so a forked child that stays
/// within that depth faults no new stack page.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    let mut buf = [0u8; 256 << 10];
    let n = bytes.min(buf.len());
    for i in (0..n).step_by(1024) {
        // SAFETY: `i` is inside `buf`, a local array.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_maps_touches_and_unmaps_at_chosen_alignment() {
        let mut w = Window::reserve(8 << 20, 2 << 20, 0x1000).unwrap();
        assert_eq!(w.base() & ((2 << 20) - 1), 0x1000);
        let a = w.base() + (1 << 20);
        w.map(a, 64 << 10, true).unwrap();
        w.touch((0..16).map(|i| a + i * 4096), true).unwrap();
        assert!(
            w.touch(std::iter::once(a + (64 << 10)), false).is_err(),
            "past the mapping"
        );
        w.madvise(a, 64 << 10, HostAdvice::DontNeed).unwrap();
        w.unmap(a, 32 << 10).unwrap();
        assert!(w.touch(std::iter::once(a), true).is_err());
        w.touch(std::iter::once(a + (32 << 10)), true).unwrap();
        w.map(a, 4096, false).unwrap();
        assert!(w.touch(std::iter::once(a), true).is_err(), "read-only");
        w.touch(std::iter::once(a), false).unwrap();
        assert!(w.map(w.base() + w.size(), 4096, true).is_err(), "outside the window");
    }

    #[test]
    fn a_forked_child_reports_its_exit_and_a_panic_never_unwinds_into_the_caller() {
        // SAFETY: the children return a constant or panic (the panic
        // hook's stderr lock is the only lock they may take; the tests
        // of this binary print nothing while it runs).
        let e = unsafe { fork_and_wait(|| 7) }.unwrap();
        assert_eq!(e.code, Some(7));
        assert_eq!(e.signal, None);
        // SAFETY: as above.
        let e = unsafe { fork_and_wait(|| panic!("in the child")) };
        assert_eq!(e.unwrap().code, Some(101));
    }
}
