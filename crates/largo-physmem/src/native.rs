//! Programs run natively on the host kernel, each in a forked child:
//! steps of memory system calls and touches in a [`Window`], a snapshot of
//! host files taken by the child right after its last step, and a stop so
//! that the parent can read the child's state (`/proc/PID/pagemap`, ...)
//! before it exits. Forking is `unsafe` (what a child of a multithreaded
//! process may do); this module is where the children are, and they run
//! only the steps below: system calls, memory accesses and file reads
//! into buffers prepared before the fork.

use std::ffi::CStr;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::host::{
    close_fd, fork_and_stop, fork_and_wait, ftruncate, host_page_size, memfd_create, prctl_thp_disable, prefault_stack,
    punch_hole, write_file_no_alloc, ChildExit, Forked, HostAdvice, HostError, MapSource, UserWork, Window,
};

/// Stack depth prefaulted before forking, so the child faults no new stack page.
const STACK_PREFAULT_BYTES: usize = 192 << 10;

/// One thing a native task does. Addresses are the program's; the run
/// adds the window's offset to each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Map {
        addr: u64,
        len: u64,
        write: bool,
        /// MAP_SHARED|MAP_ANONYMOUS instead of MAP_PRIVATE|MAP_ANONYMOUS.
        shared: bool,
    },
    /// `memfd_create` as the program's descriptor `fd` (below [`MAX_FDS`]).
    MemfdCreate {
        fd: u32,
    },
    Ftruncate {
        fd: u32,
        len: u64,
    },
    /// `mmap` of the program's descriptor `fd` from byte `offset`.
    MapFd {
        addr: u64,
        len: u64,
        write: bool,
        shared: bool,
        fd: u32,
        offset: u64,
    },
    Close {
        fd: u32,
    },
    PunchHole {
        fd: u32,
        offset: u64,
        len: u64,
    },
    /// `shmget` of a new SysV segment, the program's segment `index`
    /// (below [`crate::sysv::MAX_SEGMENTS`]).
    ShmGet {
        index: usize,
        size: u64,
    },
    /// `shmat` of segment `index`, `len` bytes, at `addr`.
    ShmAt {
        index: usize,
        addr: u64,
        len: u64,
        write: bool,
    },
    /// `shmdt(addr)` of a segment of `len` bytes.
    ShmDt {
        addr: u64,
        len: u64,
    },
    /// `shmctl(IPC_RMID)` of segment `index`.
    ShmRmid {
        index: usize,
    },
    /// `nanosleep` of `ns`.
    Sleep {
        ns: u64,
    },
    /// Writes khugepaged's `scan_sleep_millisecs` back, which wakes it.
    KhugepagedWake,
    Unmap {
        addr: u64,
        len: u64,
    },
    Remap {
        old: u64,
        old_len: u64,
        new: u64,
        new_len: u64,
    },
    Protect {
        addr: u64,
        len: u64,
        write: bool,
    },
    Advise {
        addr: u64,
        len: u64,
        advice: HostAdvice,
    },
    Touch {
        addr: u64,
        len: u64,
        write: bool,
    },
    Fault {
        addr: u64,
        write: bool,
    },
    /// A child process running these steps to its exit.
    Fork(Vec<Step>),
    ThpDisable(u8),
    DropCaches(u8),
}

/// Where a program runs: program address + `delta` = host address; with
/// `work`, user work after every page a touch accesses; with `cpu`, every
/// process of it bound to that cpu; with `cgroup_procs`, in that cgroup
/// (see [`CgroupStay`]).
#[derive(Clone, Copy)]
pub struct Placement<'a> {
    pub delta: u64,
    pub work: Option<&'a UserWork>,
    pub cpu: Option<usize>,
    pub cgroup: Option<CgroupStay<'a>>,
    /// Where khugepaged runs on the host, its files: a wake goes through
    /// them, and a sleep that follows a wake lasts until the pass the wake
    /// started has ended (`full_scans` moves).
    pub khugepaged: Option<&'a KhugepagedFiles>,
}

/// The cgroup a program's steps run in: the child writes its pid to
/// `join` (a `cgroup.procs` file) before its first step and to `leave`
/// after its last, so the counters it reads afterwards (whose kernel
/// buffers are charged to the reader's cgroup) do not disturb it. A child
/// that stops at its end stops first before it leaves (the cgroup's
/// files are read then), then again at its end. `leave` is opened before
/// the child joins ([`crate::host::ProcsFile`]), so leaving charges the
/// cgroup nothing.
#[derive(Clone, Copy)]
pub struct CgroupStay<'a> {
    pub join: &'a CStr,
    pub leave: &'a CStr,
}

/// `MADV_POPULATE_READ` (Linux 5.14).
const MADV_POPULATE_READ: i32 = 22;

/// Exit status of a child that could not be pinned or join its cgroup.
pub const SETUP_FAILED: i32 = 98;

/// Host files read into one buffer prepared beforehand: a capture
/// allocates nothing, so it can be taken right before a fork and in the
/// child without the reading itself showing in memory counters.
#[derive(Debug)]
pub struct FileSnapshot {
    files: Vec<PathBuf>,
    buf: Vec<u8>,
    /// (start, end) of each file's bytes in `buf`, from the last capture.
    spans: Vec<(usize, usize)>,
}

impl FileSnapshot {
    /// Prepares a snapshot of `files` holding up to `bytes` in all.
    pub fn new(files: Vec<PathBuf>, bytes: usize) -> FileSnapshot {
        let n = files.len();
        FileSnapshot {
            files,
            // Written now, so a capture touches no new page.
            buf: vec![1u8; bytes],
            spans: Vec::with_capacity(n),
        }
    }

    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Reads every file into the buffer (no allocation: paths are short
    /// enough for the standard library's on-stack conversion).
    pub fn capture(&mut self) {
        self.spans.clear();
        let mut at = 0;
        for path in &self.files {
            let start = at;
            if let Ok(mut f) = std::fs::File::open(path) {
                while at < self.buf.len() {
                    match f.read(&mut self.buf[at..]) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => at += n,
                    }
                }
            }
            self.spans.push((start, at));
        }
    }

    /// Writes every page of the buffer and of the spans (a forked child's
    /// copy becomes its own before it joins a cgroup).
    pub fn prefault(&mut self) {
        let page = crate::host::host_page_size() as usize;
        for i in (0..self.buf.len()).step_by(page) {
            // An opaque value: the store cannot be elided.
            self.buf[i] = std::hint::black_box(self.buf[i]);
        }
        crate::host::own_object(self);
        self.spans.clear();
        // Within the capacity reserved: no allocation.
        while self.spans.len() < self.spans.capacity() {
            self.spans.push(std::hint::black_box((0, 0)));
        }
        self.spans.clear();
    }

    /// Each file's bytes from the last capture, in order.
    pub fn contents(&self) -> Vec<&[u8]> {
        self.spans.iter().map(|&(s, e)| &self.buf[s..e]).collect()
    }

    /// Writes the last capture to `path` (each file's bytes, then a NUL),
    /// allocation-free: from a forked child.
    fn write_to(&self, path: &Path) -> bool {
        let Ok(mut f) = std::fs::File::create(path) else {
            return false;
        };
        self.spans
            .iter()
            .all(|&(s, e)| f.write_all(&self.buf[s..e]).is_ok() && f.write_all(&[0]).is_ok())
    }

    /// What a child's [`FileSnapshot`] wrote to `path`: each file's bytes.
    pub fn read_written(path: &Path) -> std::io::Result<Vec<Vec<u8>>> {
        let bytes = std::fs::read(path)?;
        let mut parts: Vec<Vec<u8>> = bytes.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
        parts.pop(); // after the last NUL
        Ok(parts)
    }
}

/// How a forked program ends.
pub enum End<'a> {
    /// It exits after its steps.
    Exit,
    /// It stops after its steps, until resumed or dropped.
    Stop,
    /// It captures `snapshot`, writes it to `to`, and stops for its
    /// parent to read its state.
    SnapshotAndStop {
        snapshot: &'a mut FileSnapshot,
        to: &'a Path,
    },
}

/// Program descriptors a native run can hold (`Step::MemfdCreate`).
pub const MAX_FDS: usize = 64;

/// A process's identifiers: the host descriptor of each program
/// descriptor, the identifier of each SysV segment it made or found (-1:
/// none). A fork copies them.
#[derive(Clone, Copy)]
struct Ids {
    fds: [i32; MAX_FDS],
    shm: [i32; crate::sysv::MAX_SEGMENTS],
}

impl Ids {
    const NONE: Ids = Ids {
        fds: [-1; MAX_FDS],
        shm: [-1; crate::sysv::MAX_SEGMENTS],
    };

    /// Segment `index`: the identifier this process knows, else the one
    /// its key names (made by another process of the run).
    fn shm_id(&mut self, index: usize) -> Option<i32> {
        if self.shm[index] < 0 {
            self.shm[index] = crate::sysv::lookup(index)?;
        }
        Some(self.shm[index])
    }
}

/// Exit status of a child whose snapshot could not be written.
pub const SNAPSHOT_FAILED: i32 = 99;
/// A child failing at step `i` exits with `STEP_FAILED + min(i, 100)`.
pub const STEP_FAILED: i32 = 100;

/// Runs `steps` in a forked child on `window`. With
/// [`End::SnapshotAndStop`] the child, once its steps succeeded, is
/// returned stopped; otherwise (or when a step failed) it has exited.
pub fn run_forked(window: &mut Window, steps: &[Step], place: Placement, end: End) -> Result<Forked, HostError> {
    let stop = matches!(end, End::SnapshotAndStop { .. } | End::Stop);
    // A child that runs in a cgroup and stops at its end waits first, still
    // in the cgroup, for its parent to stop it and read it.
    let handshake = match (stop, place.cgroup) {
        (true, Some(_)) => Some(crate::handshake::Handshake::new()?),
        _ => None,
    };
    run_forked_with(window, steps, place, end, handshake)
}

/// [`run_forked`] with the handshake (for a child that runs in a cgroup
/// and stops) made by the caller: before a counter snapshot, so its
/// shared page is not in the program's counts (`nr_shmem`).
pub fn run_forked_with(
    window: &mut Window,
    steps: &[Step],
    place: Placement,
    mut end: End,
    handshake: Option<crate::handshake::Handshake>,
) -> Result<Forked, HostError> {
    prefault_stack(STACK_PREFAULT_BYTES);
    let page = host_page_size();
    let stop = matches!(end, End::SnapshotAndStop { .. } | End::Stop);
    let own = own_mappings_outside(window.base(), window.base() + window.size());
    let handshake = handshake.filter(|_| stop && place.cgroup.is_some());
    let handshake_end = handshake.as_ref().map(|h| h.child_end());
    let body = move || {
        // The root cgroup's `cgroup.procs`, open while the program runs
        // in its cgroup.
        let mut leave_procs = None;
        // THP may be off in the parent (`ThpOffGuard`): a program starts
        // with the default, as a process forked by a shell does.
        let _ = crate::host::prctl_thp_disable(0);
        // This process's own memory (a copy of the parent's) takes no
        // THP and is no work for khugepaged: only the program's is.
        for &(start, end) in &own {
            let _ = crate::host::madvise_raw(start, end - start, libc::MADV_NOHUGEPAGE);
        }
        if let Some(cpu) = place.cpu {
            if !crate::host::pin_to_cpu(cpu) {
                return SETUP_FAILED;
            }
        }
        if let Some(cg) = place.cgroup {
            // Its own pages are written (copied from the parent) before it
            // joins, so the cgroup is charged for the program's alone.
            prefault_stack(STACK_PREFAULT_BYTES);
            if let End::SnapshotAndStop { ref mut snapshot, .. } = end {
                snapshot.prefault();
            }
            window.prefault_bookkeeping();
            // Its code and data were mapped lazily in this copy (fork does
            // not copy the page tables of file mappings): fault them all
            // in now, so no page table or page cache page of this process
            // is charged to the cgroup once it joins.
            for &(start, end) in &own {
                let _ = crate::host::madvise_raw(start, end - start, MADV_POPULATE_READ);
            }
            // A mapping made over the reservation would split and free
            // parts of it, charged to the parent's cgroup, and stir the
            // object stock: the program maps into free space instead.
            if window.release().is_err() {
                return SETUP_FAILED;
            }
            // Opened outside the cgroup: leaving it then charges nothing.
            let Some(leave) = crate::host::ProcsFile::open(cg.leave) else {
                return SETUP_FAILED;
            };
            leave_procs = Some(leave);
            if !crate::host::join_cgroup(cg.join) {
                return SETUP_FAILED;
            }
        }
        if let Err(index) = exec(steps, window, place, page, &mut { Ids::NONE }) {
            return STEP_FAILED + index.min(100) as i32;
        }
        if let Some(leave) = leave_procs {
            if let Some(h) = handshake_end {
                // The parent stops it and reads the cgroup (and the
                // layout) now, while everything is still charged as the
                // program left it, once the page tables it freed are back.
                crate::host::rcu_settle();
                h.arrive_and_wait();
            }
            if !leave.join() {
                return SETUP_FAILED;
            }
        }
        if let End::SnapshotAndStop { snapshot, to } = end {
            snapshot.capture();
            if !snapshot.write_to(to) {
                return SNAPSHOT_FAILED;
            }
        }
        0
    };
    if stop {
        // The child runs `exec` (system calls and memory accesses on the
        // window) and the snapshot (file reads into a prepared buffer, one
        // file write): no lock another thread may hold.
        match handshake {
            // SAFETY: the child's body is as above.
            Some(h) => unsafe { crate::host::fork_and_stop_at(body, h) },
            // SAFETY: the child's body is as above.
            None => unsafe { fork_and_stop(body) },
        }
    } else {
        // SAFETY: as above, without the snapshot.
        unsafe { fork_and_wait(body) }.map(Forked::Exited)
    }
}

/// The mappings of this process (/proc/self/maps) outside `[lo, hi)`,
/// read before a fork.
fn own_mappings_outside(lo: u64, hi: u64) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (s, e) = line.split_whitespace().next()?.split_once('-')?;
            Some((u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?))
        })
        .filter(|&(s, e)| e <= lo || s >= hi)
        .collect()
}

/// [`run_forked`] for a program that just exits.
pub fn run_to_exit(window: &mut Window, steps: &[Step], place: Placement) -> Result<ChildExit, HostError> {
    match run_forked(window, steps, place, End::Exit)? {
        Forked::Exited(e) => Ok(e),
        Forked::Stopped(s) => s.resume(),
    }
}

const DROP_CACHES: &CStr = c"/proc/sys/vm/drop_caches";
const SCAN_SLEEP: &CStr = c"/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs";

/// The longest a sleep waits, beyond its own length, for the khugepaged
/// pass a wake started.
const KHUGEPAGED_PASS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// khugepaged's `full_scans` and `scan_sleep_millisecs`, opened and read
/// once by the parent before it forks. A child in a memory cgroup reads
/// and writes them through the inherited descriptors at offset 0, which
/// reuses the seq_file buffer the first read allocated; opening them
/// itself would allocate a `struct file`, a `seq_file` and its buffer
/// (all accounted) in the cgroup at every poll, churning its object
/// stock and, at the limit, charging pages.
pub struct KhugepagedFiles {
    full_scans: std::fs::File,
    scan_sleep: std::fs::File,
}

impl KhugepagedFiles {
    /// Opens both files and reads each once (in the parent, before it
    /// forks).
    pub fn open() -> std::io::Result<KhugepagedFiles> {
        let dir = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/khugepaged");
        let files = KhugepagedFiles {
            full_scans: std::fs::File::open(dir.join("full_scans"))?,
            scan_sleep: std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join("scan_sleep_millisecs"))?,
        };
        // The first reads allocate the seq_file buffers: here, outside.
        let mut buf = [0u8; 32];
        files.full_scans.read_at(&mut buf, 0)?;
        files.scan_sleep.read_at(&mut buf, 0)?;
        Ok(files)
    }

    /// `full_scans` now (allocation-free).
    fn full_scans(&self) -> Option<u64> {
        let mut buf = [0u8; 32];
        let n = self.full_scans.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
    }

    /// Writes `scan_sleep_millisecs` back, which wakes khugepaged at once
    /// (allocation-free; the store's buffer is not accounted).
    fn wake(&self) -> bool {
        let mut buf = [0u8; 32];
        let Ok(n) = self.scan_sleep.read_at(&mut buf, 0) else {
            return false;
        };
        let value = buf[..n].trim_ascii_end();
        self.scan_sleep.write_at(value, 0).is_ok_and(|w| w == value.len())
    }

    /// Waits until `full_scans` passes `before`, or
    /// [`KHUGEPAGED_PASS_TIMEOUT`]. A woken pass goes on from the list
    /// cursor (the head after a completed pass, as the harness leaves it)
    /// and counts `full_scans` once it has scanned the last mm on the list
    /// (mm/khugepaged.c `khugepaged_do_scan`, `khugepaged_scan_mm_slot`),
    /// so every mm registered before the wake has then been scanned. The
    /// kernel thread runs at nice 19: on a busy machine a pass can take far
    /// longer than the sleep a trace asks for, and the model always
    /// finishes it inside that sleep.
    fn settle_pass(&self, before: u64) {
        let start = std::time::Instant::now();
        while self.full_scans().is_some_and(|n| n <= before) && start.elapsed() < KHUGEPAGED_PASS_TIMEOUT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Reads `scan_sleep_millisecs` and writes it back (no allocation: from
/// a forked child): the store wakes khugepaged at once.
pub fn khugepaged_wake() -> bool {
    let mut buf = [0u8; 32];
    let path = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs");
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(n) = f.read(&mut buf) else {
        return false;
    };
    write_file_no_alloc(SCAN_SLEEP, buf[..n].trim_ascii_end())
}

/// Executes one process's steps (in its forked child). Returns the index
/// of the failing step.
fn exec(steps: &[Step], w: &mut Window, place: Placement, page: u64, ids: &mut Ids) -> Result<(), usize> {
    let at = |a: u64| a.wrapping_add(place.delta);
    // khugepaged's `full_scans` at the first wake no sleep has waited for.
    let mut woken_at: Option<u64> = None;
    for (i, step) in steps.iter().enumerate() {
        let ok = match *step {
            Step::Map {
                addr,
                len,
                write,
                shared,
            } => w
                .map_with(at(addr), len, write, MapSource::Anonymous { shared })
                .is_ok(),
            Step::MemfdCreate { fd } => memfd_create().map(|host| ids.fds[fd as usize] = host).is_ok(),
            Step::Ftruncate { fd, len } => ftruncate(ids.fds[fd as usize], len).is_ok(),
            Step::MapFd {
                addr,
                len,
                write,
                shared,
                fd,
                offset,
            } => {
                let source = MapSource::Fd {
                    fd: ids.fds[fd as usize],
                    offset,
                    shared,
                };
                w.map_with(at(addr), len, write, source).is_ok()
            }
            Step::Close { fd } => close_fd(std::mem::replace(&mut ids.fds[fd as usize], -1)).is_ok(),
            Step::PunchHole { fd, offset, len } => punch_hole(ids.fds[fd as usize], offset, len).is_ok(),
            Step::ShmGet { index, size } => crate::sysv::create(index, size).map(|id| ids.shm[index] = id).is_ok(),
            Step::ShmAt {
                index,
                addr,
                len,
                write,
            } => ids
                .shm_id(index)
                .is_some_and(|id| w.attach_shm(id, at(addr), len, write).is_ok()),
            Step::ShmDt { addr, len } => w.detach_shm(at(addr), len).is_ok(),
            Step::ShmRmid { index } => ids.shm_id(index).is_some_and(|id| crate::sysv::remove(id).is_ok()),
            Step::KhugepagedWake => match place.khugepaged {
                Some(k) => {
                    woken_at = woken_at.or(k.full_scans());
                    k.wake()
                }
                None => khugepaged_wake(),
            },
            Step::Sleep { ns } => {
                std::thread::sleep(std::time::Duration::from_nanos(ns));
                if let (Some(before), Some(k)) = (woken_at.take(), place.khugepaged) {
                    k.settle_pass(before);
                }
                true
            }
            Step::Unmap { addr, len } => w.unmap(at(addr), len).is_ok(),
            Step::Remap {
                old,
                old_len,
                new,
                new_len,
            } => w.remap(at(old), old_len, at(new), new_len).is_ok(),
            Step::Protect { addr, len, write } => w.protect(at(addr), len, write).is_ok(),
            Step::Advise {
                addr,
                len,
                advice: HostAdvice::Collapse,
            } => w.madvise(at(addr), len, HostAdvice::Collapse).is_ok() || last_errno_is_collapse_outcome(),
            Step::Advise { addr, len, advice } => w.madvise(at(addr), len, advice).is_ok(),
            Step::Touch { addr, len, write } => {
                let base = at(addr) & !(page - 1);
                let n = (at(addr) + len - base).div_ceil(page);
                w.touch_with((0..n).map(|k| base + k * page), write, place.work).is_ok()
            }
            Step::Fault { addr, write } => w.touch_with(std::iter::once(at(addr)), write, place.work).is_ok(),
            Step::Fork(ref child) => {
                prefault_stack(STACK_PREFAULT_BYTES);
                let mut child_ids = *ids;
                // SAFETY: the grandchild runs `exec` too (see `run_forked`).
                let exit = unsafe { fork_and_wait(|| i32::from(exec(child, w, place, page, &mut child_ids).is_err())) };
                exit.is_ok_and(|e| e.code == Some(0))
            }
            Step::ThpDisable(mode) => prctl_thp_disable(mode).is_ok(),
            Step::DropCaches(mode) => write_file_no_alloc(DROP_CACHES, &[b'0' + mode % 10]),
        };
        if !ok {
            return Err(i);
        }
    }
    Ok(())
}

/// Whether the last system call failed the way MADV_COLLAPSE reports a
/// range it could not collapse (`madvise_collapse_errno`: EINVAL, ENOMEM,
/// EAGAIN, EBUSY): the program's outcome, which the model reproduces, not
/// a failure of the run.
fn last_errno_is_collapse_outcome() -> bool {
    matches!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EINVAL | libc::ENOMEM | libc::EAGAIN | libc::EBUSY)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_program_stops_for_its_parent_and_its_snapshot_comes_back() {
        let mut w = Window::reserve(4 << 20, 1 << 20, 0).unwrap();
        let base = w.base();
        let steps = [
            Step::Map {
                addr: base,
                len: 64 << 10,
                write: true,
                shared: false,
            },
            Step::Touch {
                addr: base,
                len: 64 << 10,
                write: true,
            },
        ];
        let dir = std::env::temp_dir().join(format!("largo-native-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b, out) = (dir.join("a"), dir.join("b"), dir.join("out"));
        std::fs::write(&a, "first").unwrap();
        std::fs::write(&b, "second\n").unwrap();
        let mut snap = FileSnapshot::new(vec![a, b], 4096);
        let place = Placement {
            delta: 0,
            work: None,
            cpu: None,
            cgroup: None,
            khugepaged: None,
        };
        let end = End::SnapshotAndStop {
            snapshot: &mut snap,
            to: &out,
        };
        let Forked::Stopped(child) = run_forked(&mut w, &steps, place, end).unwrap() else {
            panic!("the child stops after its steps");
        };
        // Stopped: its mapping is there to read.
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.pid())).unwrap();
        assert!(maps.contains(&format!("{base:x}-")), "{maps}");
        let exit = child.resume().unwrap();
        assert_eq!(exit.code, Some(0));
        let parts = FileSnapshot::read_written(&out).unwrap();
        assert_eq!(parts, vec![b"first".to_vec(), b"second\n".to_vec()]);
        // A failing step: the child exits with its index, never stops.
        let bad = [Step::Unmap { addr: 0, len: 4096 }];
        let exit = run_to_exit(&mut w, &bad, place).unwrap();
        assert_eq!(exit.code, Some(STEP_FAILED));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
