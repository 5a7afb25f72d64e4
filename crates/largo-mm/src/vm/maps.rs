//! What a task's address space looks like from outside (`/proc/PID/maps`).

use super::types::{Pid, VmError, VmFlags, VmaBacking};
use super::Vm;

/// One VMA as `/proc/PID/maps` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub flags: VmFlags,
    pub backing: VmaBacking,
}

impl MapEntry {
    #[inline]
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The `rwxp` permission column.
    pub fn perms(&self) -> String {
        let bit = |f: VmFlags, c: char| if self.flags.contains(f) { c } else { '-' };
        let mut s = String::with_capacity(4);
        s.push(bit(VmFlags::READ, 'r'));
        s.push(bit(VmFlags::WRITE, 'w'));
        s.push(bit(VmFlags::EXEC, 'x'));
        s.push(if self.flags.contains(VmFlags::SHARED) { 's' } else { 'p' });
        s
    }
}

impl Vm {
    /// The VMAs of `pid`'s address space in address order.
    pub fn maps(&self, pid: Pid) -> Result<Vec<MapEntry>, VmError> {
        let mm = self.task_mm(pid)?;
        Ok(self.mms[mm]
            .vmas
            .values()
            .map(|&id| {
                let v = &self.vmas[id];
                MapEntry {
                    start: v.start,
                    end: v.end,
                    flags: v.flags,
                    backing: v.backing,
                }
            })
            .collect())
    }

    /// The current program break of `pid`.
    pub fn brk_of(&self, pid: Pid) -> Result<u64, VmError> {
        Ok(self.mms[self.task_mm(pid)?].brk)
    }
}
