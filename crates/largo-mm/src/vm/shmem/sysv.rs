//! SysV shared memory (ipc/shm.c, v6.18): `shmget` makes a shmem file on
//! the internal mount (`shmem_kernel_file_setup`, unlinked), `shmat` maps
//! it whole, `shmdt` unmaps it, `shmctl(IPC_RMID)` lets it go once
//! nothing has it attached.
//!
//! A segment's mappings carry `shm_vm_ops`, not `shmem_anon_vm_ops`: they
//! are not anonymous shmem (`vma_is_anon_shmem`), so their folio sizes
//! come from the top-level `shmem_enabled` alone (the PMD size), never
//! from the per-size knobs ([`super::ShmemInode::sysv`]). A segment lives
//! on after its creator exits, until removed.

use super::super::types::{MapFlags, Pid, Prot, VmError, VmFlags};
use super::super::{Ctx, Vm};

impl Vm {
    /// `shmget(IPC_PRIVATE, size)` that returned `shmid` (`newseg`).
    pub fn shmget(&mut self, shmid: u32, size_bytes: u64) -> Result<(), VmError> {
        if size_bytes == 0 {
            return Err(VmError::Invalid("shmget of zero bytes"));
        }
        if self.shmem.sysv.contains_key(&shmid) {
            return Err(VmError::Exists);
        }
        let inode = self.new_shmem_inode(size_bytes, true, 0);
        let i = &mut self.shmem.inodes[inode];
        i.sysv = true;
        i.ipc_held = true;
        self.shmem.sysv.insert(shmid, inode);
        Ok(())
    }

    fn shm_inode(&self, shmid: u32) -> Result<usize, VmError> {
        self.shmem
            .sysv
            .get(&shmid)
            .copied()
            .ok_or(VmError::Invalid("no such shared memory segment"))
    }

    /// `shmat(shmid, addr)` (`do_shmat`): the whole segment, shared, at
    /// `addr` (replacing what is there, as SHM_REMAP does; 0: where the
    /// kernel finds room); `write` false is SHM_RDONLY. Returns where.
    pub fn shmat(&mut self, ctx: &mut Ctx, pid: Pid, shmid: u32, addr: u64, write: bool) -> Result<u64, VmError> {
        let inode = self.shm_inode(shmid)?;
        let len = self.shmem.inodes[inode].size_bytes;
        let prot = if write { Prot::READ | Prot::WRITE } else { Prot::READ };
        let flags = if addr == 0 {
            MapFlags::SHARED
        } else {
            MapFlags::SHARED | MapFlags::FIXED
        };
        let at = self.mmap_file(ctx, pid, addr, len, prot, flags, Some((inode, 0)))?;
        if !write {
            // SHM_RDONLY opens the segment's file read-only: the mapping
            // may never be written (no VM_MAYWRITE). Two attaches never
            // merge (each maps the segment from offset 0).
            let mm = self.task_mm(pid)?;
            if let Some(id) = self.find_vma(mm, at) {
                self.vmas[id].flags -= VmFlags::MAYWRITE;
            }
        }
        Ok(at)
    }

    /// The SysV segments that exist (not removed), by identifier.
    pub fn sysv_segments(&self) -> Vec<u32> {
        self.shmem.sysv.keys().copied().collect()
    }

    /// `shmdt(addr)` (`ksys_shmdt`): every mapping of the segment attached
    /// at `addr` within its size from there is unmapped.
    pub fn shmdt(&mut self, ctx: &mut Ctx, pid: Pid, addr: u64) -> Result<(), VmError> {
        let mm = self.task_mm(pid)?;
        let shift = self.page_shift();
        let first = self.mms[mm]
            .vmas_in(addr, addr + 1, &self.vmas)
            .into_iter()
            .find(|&id| {
                let v = &self.vmas[id];
                v.shmem.is_some_and(|i| self.shmem.inodes[i].sysv) && v.start - (v.pgoff << shift) == addr
            })
            .ok_or(VmError::Invalid("shmdt: no segment attached there"))?;
        let inode = self.vmas[first].shmem.expect("a segment's VMA");
        let size = self.page_align(self.shmem.inodes[inode].size_bytes).unwrap_or(u64::MAX);
        let end = addr.saturating_add(size);
        let parts: Vec<(u64, u64)> = self.mms[mm]
            .vmas_in(addr, end, &self.vmas)
            .into_iter()
            .filter(|&id| self.vmas[id].shmem == Some(inode))
            .map(|id| (self.vmas[id].start, self.vmas[id].end.min(end)))
            .collect();
        for (start, stop) in parts {
            self.munmap(ctx, pid, start, stop - start)?;
        }
        Ok(())
    }

    /// `shmctl(shmid, IPC_RMID)`: the identifier goes now, the segment
    /// when its last mapping does.
    pub fn shm_rmid(&mut self, ctx: &mut Ctx, shmid: u32) -> Result<(), VmError> {
        let inode = self.shm_inode(shmid)?;
        self.shmem.sysv.remove(&shmid);
        self.shmem.inodes[inode].ipc_held = false;
        self.shmem_put_if_unused(ctx, inode);
        Ok(())
    }
}
