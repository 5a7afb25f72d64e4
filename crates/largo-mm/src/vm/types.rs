//! The vocabulary of the VM layer: protection and mapping flags as the
//! syscalls take them, `vm_flags` of a VMA, madvise advice, fault results.

use bitflags::bitflags;

/// A task (process or thread) id.
pub type Pid = u32;
/// Index of an address space in the VM.
pub type MmId = usize;
/// Index of a VMA in the VM's VMA table.
pub type VmaId = usize;
/// Index of an anon_vma.
pub type AnonVmaId = usize;

bitflags! {
    /// `PROT_*` of mmap and mprotect.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Prot: u32 {
        const READ = 0x1;
        const WRITE = 0x2;
        const EXEC = 0x4;
    }
}

bitflags! {
    /// `MAP_*` of mmap.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MapFlags: u32 {
        const SHARED = 0x01;
        const PRIVATE = 0x02;
        const FIXED = 0x10;
        const ANONYMOUS = 0x20;
        const GROWSDOWN = 0x100;
        const NORESERVE = 0x4000;
        const POPULATE = 0x8000;
        const FIXED_NOREPLACE = 0x100000;
    }
}

bitflags! {
    /// `vm_flags` of a VMA (the subset the model uses, kernel names).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct VmFlags: u64 {
        const READ = 1 << 0;
        const WRITE = 1 << 1;
        const EXEC = 1 << 2;
        const SHARED = 1 << 3;
        const MAYREAD = 1 << 4;
        const MAYWRITE = 1 << 5;
        const MAYEXEC = 1 << 6;
        const MAYSHARE = 1 << 7;
        const GROWSDOWN = 1 << 8;
        const LOCKED = 1 << 13;
        const ACCOUNT = 1 << 20;
        const NORESERVE = 1 << 21;
        const HUGEPAGE = 1 << 29;
        const NOHUGEPAGE = 1 << 30;
    }
}

impl VmFlags {
    /// Flags that must be equal for two VMAs to merge (`VM_SOFTDIRTY`
    /// aside, everything the model keeps).
    pub fn mergeable_with(self, other: VmFlags) -> bool {
        self == other
    }

    /// `vm_flags` for a new mapping with `prot` (`calc_vm_prot_bits` plus
    /// the MAY bits of a private anonymous mapping).
    pub fn from_prot(prot: Prot) -> VmFlags {
        let mut f = VmFlags::MAYREAD | VmFlags::MAYWRITE | VmFlags::MAYEXEC;
        if prot.contains(Prot::READ) {
            f |= VmFlags::READ;
        }
        if prot.contains(Prot::WRITE) {
            f |= VmFlags::WRITE;
        }
        if prot.contains(Prot::EXEC) {
            f |= VmFlags::EXEC;
        }
        f
    }

    /// `vma_is_accessible`.
    pub fn accessible(self) -> bool {
        self.intersects(VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC)
    }
}

/// `MADV_*` advice the model implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Advice {
    DontNeed,
    Free,
    HugePage,
    NoHugePage,
    /// MADV_COLLAPSE: PMD-map the range now (anonymous memory).
    Collapse,
    /// MADV_COLD: deactivate the range's folios.
    Cold,
    /// MADV_PAGEOUT: reclaim the range's folios now.
    PageOut,
    /// MADV_REMOVE: punch the range out of the shmem file a shared
    /// mapping maps (its pages and swap entries freed, the file size kept).
    Remove,
}

impl Advice {
    pub fn name(self) -> &'static str {
        match self {
            Advice::DontNeed => "MADV_DONTNEED",
            Advice::Free => "MADV_FREE",
            Advice::HugePage => "MADV_HUGEPAGE",
            Advice::NoHugePage => "MADV_NOHUGEPAGE",
            Advice::Collapse => "MADV_COLLAPSE",
            Advice::Cold => "MADV_COLD",
            Advice::PageOut => "MADV_PAGEOUT",
            Advice::Remove => "MADV_REMOVE",
        }
    }
}

/// `prctl(PR_SET_THP_DISABLE, ...)` modes (v6.18).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThpDisable {
    /// `PR_SET_THP_DISABLE, 0`.
    Off,
    /// `PR_SET_THP_DISABLE, 1, 0`: `MMF_DISABLE_THP_COMPLETELY`.
    Completely,
    /// `PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED`.
    ExceptAdvised,
}

/// What backs a VMA (`vma_is_anonymous`, `vm_file`, shmem's `vm_ops`).
/// Private anonymous memory and shared shmem mappings are modelled; the
/// other kinds hold their place in the address space (placement, merging,
/// guard gaps, SIGSEGV for accesses outside any mapping or against its
/// protection) but their pages are not modelled: an access to them is
/// [`Access::NotModelled`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VmaBacking {
    /// Private anonymous memory (the stack and the brk heap too).
    Anon,
    /// A file mapping (private or shared).
    File,
    /// A shared mapping of a shmem inode: shared anonymous memory
    /// (`MAP_SHARED | MAP_ANONYMOUS`) or a memfd (`vma_is_shmem`).
    Shmem,
    /// vdso, vvar, vsyscall and other special mappings.
    Special,
}

impl VmaBacking {
    /// What `mmap` with these flags creates.
    pub fn of_mmap(flags: MapFlags) -> VmaBacking {
        match (flags.contains(MapFlags::ANONYMOUS), flags.contains(MapFlags::SHARED)) {
            (true, false) => VmaBacking::Anon,
            (true, true) => VmaBacking::Shmem,
            (false, _) => VmaBacking::File,
        }
    }
}

/// The `si_code` of a SIGSEGV (`bad_area` / `bad_area_access_error` in
/// arch/x86/mm/fault.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum SegvCode {
    /// `SEGV_MAPERR`: no mapping at the address.
    #[serde(rename = "SEGV_MAPERR")]
    MapErr,
    /// `SEGV_ACCERR`: a mapping that does not permit the access.
    #[serde(rename = "SEGV_ACCERR")]
    AccErr,
}

impl SegvCode {
    /// What the code means, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            SegvCode::MapErr => "SEGV_MAPERR, no mapping there",
            SegvCode::AccErr => "SEGV_ACCERR, the mapping does not permit it",
        }
    }
}

/// How a memory access ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The page tables already allowed it (no fault).
    Hit,
    /// A page fault was handled.
    Faulted,
    /// The task would get SIGSEGV, with this `si_code`.
    Segv(SegvCode),
    /// A permitted access to memory the model does not hold (a file,
    /// shmem or special mapping): no fault is modelled.
    NotModelled,
    /// Memory ran out and the OOM killer picked a victim (maybe this task).
    Oom,
    /// The task would get SIGBUS: a shmem page beyond the file's end.
    Sigbus,
}

/// An error of a memory syscall, with the errno the kernel returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmError {
    #[error("EINVAL: {0}")]
    Invalid(&'static str),
    #[error("ENOMEM: {0}")]
    NoMem(&'static str),
    #[error("EAGAIN: {0}")]
    Again(&'static str),
    #[error("EEXIST: the range overlaps an existing mapping")]
    Exists,
    #[error("EFAULT: no mapping at {0:#x}")]
    Fault(u64),
    #[error("ESRCH: no task {0}")]
    NoTask(Pid),
    #[error("ENOTSUP: {0} is not modelled")]
    NotSupported(&'static str),
    #[error("ENODEV: node {0} has no memory")]
    NoNode(i32),
    #[error("EBADF: no open shmem file at descriptor {0}")]
    BadFd(u32),
    #[error("EBUSY: {0}")]
    Busy(&'static str),
    #[error("EACCES: {0}")]
    Access(&'static str),
}

impl VmError {
    /// The negative errno value the syscall returns.
    pub fn errno(&self) -> i32 {
        match self {
            VmError::Invalid(_) => -22,
            VmError::NoMem(_) => -12,
            VmError::Again(_) => -11,
            VmError::Exists => -17,
            VmError::Fault(_) => -14,
            VmError::NoTask(_) => -3,
            VmError::NotSupported(_) => -95,
            VmError::NoNode(_) => -19,
            VmError::BadFd(_) => -9,
            VmError::Busy(_) => -16,
            VmError::Access(_) => -13,
        }
    }
}
