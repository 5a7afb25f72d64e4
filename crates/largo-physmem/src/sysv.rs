//! SysV shared memory segments of native runs: made under keys of
//! largo's own range ([`KEY_BASE`] + the program's segment index), so any
//! process of a run finds them and [`remove_segments`] removes whatever a
//! run left (a program that never removed a segment, a killed run).

use crate::host::HostError;

/// The first IPC key of largo's segments ("la" in the high bytes).
pub const KEY_BASE: i32 = 0x6c61_0000;
/// Segments per program.
pub const MAX_SEGMENTS: usize = 64;

fn sys(call: &'static str) -> HostError {
    HostError::Sys {
        call,
        source: std::io::Error::last_os_error(),
    }
}

fn key(index: usize) -> libc::key_t {
    KEY_BASE + index as i32
}

/// `shmget(KEY_BASE + index, size, IPC_CREAT | IPC_EXCL | 0600)`: a new
/// segment; its identifier.
pub fn create(index: usize, size: u64) -> Result<i32, HostError> {
    // SAFETY: a system call with no memory arguments.
    let id = unsafe { libc::shmget(key(index), size as usize, libc::IPC_CREAT | libc::IPC_EXCL | 0o600) };
    if id < 0 {
        return Err(sys("shmget"));
    }
    Ok(id)
}

/// The identifier of segment `index`, if it exists and is not removed.
pub fn lookup(index: usize) -> Option<i32> {
    // SAFETY: a system call with no memory arguments.
    let id = unsafe { libc::shmget(key(index), 0, 0) };
    (id >= 0).then_some(id)
}

/// `shmat(id, addr, SHM_REMAP [| SHM_RDONLY])`: the segment at exactly
/// `addr`, replacing whatever the caller's window had there.
pub(crate) fn attach(id: i32, addr: u64, write: bool) -> Result<(), HostError> {
    let flags = libc::SHM_REMAP | if write { 0 } else { libc::SHM_RDONLY };
    // SAFETY: the caller maps over a range of its own window, which no
    // Rust reference covers. Checked for the (void *)-1 failure value.
    let p = unsafe { libc::shmat(id, addr as *const libc::c_void, flags) };
    if p as isize == -1 {
        return Err(sys("shmat"));
    }
    Ok(())
}

/// `shmdt(addr)`.
pub(crate) fn detach(addr: u64) -> Result<(), HostError> {
    // SAFETY: unmaps a segment the caller attached in its window; nothing
    // in Rust refers to it.
    if unsafe { libc::shmdt(addr as *const libc::c_void) } != 0 {
        return Err(sys("shmdt"));
    }
    Ok(())
}

/// `shmctl(id, IPC_RMID)`.
pub fn remove(id: i32) -> Result<(), HostError> {
    // SAFETY: IPC_RMID passes no buffer.
    if unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) } != 0 {
        return Err(sys("shmctl"));
    }
    Ok(())
}

/// Removes every segment under largo's keys (before and after a run).
pub fn remove_segments() {
    for index in 0..MAX_SEGMENTS {
        if let Some(id) = lookup(index) {
            let _ = remove(id);
        }
    }
}
