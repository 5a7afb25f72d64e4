//! The events of a trace: what the processes of a program did to their
//! address spaces, in the kernel's terms, and the event table that
//! defines each event once: its text verb, binary tag and fields with
//! their codecs (see `macros.rs` for what the table generates).

use crate::codec::{
    Access as AccessCodec, Addr, Advice as AdviceCodec, Block, CacheMode, ChildPid, Fd, Len, MmapFlags, Name, Named,
    Node, Ns, Perms, ProtBits, ShmId,
};
use crate::error::RecordError;
use crate::macros::define_events;

/// Version of the text encoding.
pub const TEXT_VERSION: u32 = 1;
/// Version of the binary encoding (2: one record layout from the event
/// table; version 1 is no longer read).
pub const BINARY_VERSION: u32 = 2;

/// A process (or thread) id as the trace names it.
pub type TracePid = u32;

/// `PROT_*` bits: read 1, write 2, exec 4.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prot(pub u8);

impl Prot {
    pub const READ: u8 = 1;
    pub const WRITE: u8 = 2;
    pub const EXEC: u8 = 4;

    pub fn readable(self) -> bool {
        self.0 & Self::READ != 0
    }

    pub fn writable(self) -> bool {
        self.0 & Self::WRITE != 0
    }
}

/// `MAP_*` flags of an mmap, with the kernel's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MapFlags(pub u32);

impl MapFlags {
    pub const SHARED: u32 = 0x01;
    pub const PRIVATE: u32 = 0x02;
    pub const FIXED: u32 = 0x10;
    pub const ANONYMOUS: u32 = 0x20;
    pub const GROWSDOWN: u32 = 0x100;
    pub const NORESERVE: u32 = 0x4000;
    pub const POPULATE: u32 = 0x8000;
    pub const STACK: u32 = 0x20000;
    pub const HUGETLB: u32 = 0x40000;
    pub const FIXED_NOREPLACE: u32 = 0x100000;

    /// Names used by the text encoding.
    pub const NAMES: &'static [(&'static str, u32)] = &[
        ("shared", Self::SHARED),
        ("private", Self::PRIVATE),
        ("fixed", Self::FIXED),
        ("anonymous", Self::ANONYMOUS),
        ("growsdown", Self::GROWSDOWN),
        ("noreserve", Self::NORESERVE),
        ("populate", Self::POPULATE),
        ("stack", Self::STACK),
        ("hugetlb", Self::HUGETLB),
        ("fixed_noreplace", Self::FIXED_NOREPLACE),
    ];

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// Private anonymous memory: what the anonymous fault path serves.
    pub fn private_anonymous(self) -> bool {
        self.has(Self::ANONYMOUS) && !self.has(Self::SHARED) && !self.has(Self::HUGETLB)
    }
}

/// What a mapping of a process's initial layout is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VmaKind {
    /// Private anonymous memory (an ELF segment's .bss tail, ...).
    Anon,
    /// A file mapping.
    File,
    /// The main thread's stack (grows down).
    Stack,
    /// The brk heap.
    Heap,
    /// vdso, vvar, vsyscall and other special mappings.
    Special,
}

impl VmaKind {
    /// Anonymous private memory the model maps.
    pub fn is_anonymous(self) -> bool {
        matches!(self, VmaKind::Anon | VmaKind::Stack | VmaKind::Heap)
    }
}

impl Named for VmaKind {
    const WHAT: &'static str = "vma kind";
    const USAGE: &'static str = "KIND";
    const NAMES: &'static [(&'static str, VmaKind)] = &[
        ("anon", VmaKind::Anon),
        ("file", VmaKind::File),
        ("stack", VmaKind::Stack),
        ("heap", VmaKind::Heap),
        ("special", VmaKind::Special),
    ];
}

/// What a clone created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloneKind {
    /// A new process with a copy of the address space (fork, clone without CLONE_VM).
    Process,
    /// A thread sharing the address space (CLONE_VM).
    Thread,
    /// vfork: the child borrows the parent's address space until it execs or exits.
    Vfork,
}

impl Named for CloneKind {
    const WHAT: &'static str = "clone kind";
    const USAGE: &'static str = "process|thread|vfork";
    const NAMES: &'static [(&'static str, CloneKind)] = &[
        ("process", CloneKind::Process),
        ("thread", CloneKind::Thread),
        ("vfork", CloneKind::Vfork),
    ];
}

/// `madvise` advice names with the kernel's values.
pub const ADVICE_NAMES: &[(&str, u32)] = &[
    ("normal", 0),
    ("random", 1),
    ("sequential", 2),
    ("willneed", 3),
    ("dontneed", 4),
    ("free", 8),
    ("remove", 9),
    ("dontfork", 10),
    ("dofork", 11),
    ("mergeable", 12),
    ("unmergeable", 13),
    ("hugepage", 14),
    ("nohugepage", 15),
    ("dontdump", 16),
    ("dodump", 17),
    ("wipeonfork", 18),
    ("keeponfork", 19),
    ("cold", 20),
    ("pageout", 21),
    ("populate_read", 22),
    ("populate_write", 23),
    ("dontneed_locked", 24),
    ("collapse", 25),
    ("guard_install", 102),
    ("guard_remove", 103),
];

pub const MADV_DONTNEED: u32 = 4;
pub const MADV_FREE: u32 = 8;
pub const MADV_REMOVE: u32 = 9;
pub const MADV_HUGEPAGE: u32 = 14;
pub const MADV_NOHUGEPAGE: u32 = 15;
pub const MADV_COLLAPSE: u32 = 25;
pub const MADV_COLD: u32 = 20;
pub const MADV_PAGEOUT: u32 = 21;

/// `PR_SET_THP_DISABLE` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThpDisableMode {
    Off,
    Completely,
    ExceptAdvised,
}

impl Named for ThpDisableMode {
    const WHAT: &'static str = "THP disable mode";
    const USAGE: &'static str = "0|1|except_advised";
    const NAMES: &'static [(&'static str, ThpDisableMode)] = &[
        ("0", ThpDisableMode::Off),
        ("1", ThpDisableMode::Completely),
        ("except_advised", ThpDisableMode::ExceptAdvised),
    ];
}

/// A kind of event as the table defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventKind {
    /// The text verb (and handler method).
    pub verb: &'static str,
    /// The binary record tag.
    pub tag: u8,
    /// Written `PID verb ...` (every event but `tick`).
    pub has_pid: bool,
    /// The text arguments after the verb.
    pub args: &'static [&'static str],
}

impl EventKind {
    pub fn of_verb(verb: &str) -> Option<&'static EventKind> {
        EVENT_KINDS.iter().find(|k| k.verb == verb)
    }

    /// `PID mmap ADDR LEN PROT FLAGS`.
    pub fn usage(&self) -> String {
        let mut s = String::new();
        if self.has_pid {
            s.push_str("PID ");
        }
        s.push_str(self.verb);
        for a in self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

define_events! {
    /// A new program image: the process's address space is replaced by the
    /// `vma` and `brk_start` events that follow.
    Exec = 1, exec(pid) {},
    /// A mapping of the image's initial layout.
    Vma = 2, vma(pid) {
        start: u64 as Addr,
        end: u64 as Addr,
        prot: Prot as Perms,
        kind: VmaKind as Name,
    },
    /// Where the brk heap starts.
    BrkStart = 3, brk_start(pid) { addr: u64 as Addr },
    /// `mmap` and where the kernel placed it.
    Mmap = 4, mmap(pid) {
        addr: u64 as Addr,
        len: u64 as Len,
        prot: Prot as ProtBits,
        flags: MapFlags as MmapFlags,
    },
    Munmap = 5, munmap(pid) { addr: u64 as Addr, len: u64 as Len },
    /// `mremap` and where the kernel put the result.
    Mremap = 6, mremap(pid) {
        old_addr: u64 as Addr,
        old_len: u64 as Len,
        new_addr: u64 as Addr,
        new_len: u64 as Len,
    },
    Mprotect = 7, mprotect(pid) { addr: u64 as Addr, len: u64 as Len, prot: Prot as ProtBits },
    Madvise = 8, madvise(pid) { addr: u64 as Addr, len: u64 as Len, advice: u32 as AdviceCodec },
    /// `brk` and the break the kernel returned.
    Brk = 9, brk(pid) { addr: u64 as Addr },
    /// A user page fault at `addr`.
    Fault = 10, fault(pid) { addr: u64 as Addr, write: bool as AccessCodec },
    /// A kernel-mode fault on user memory at `addr` (a syscall writing a
    /// buffer, exec clearing the end of a data segment): it faults the
    /// page as a user access would, but outside every mapping the syscall
    /// fails with EFAULT instead of the program getting SIGSEGV.
    KernelFault = 11, kernel_fault(pid) { addr: u64 as Addr, write: bool as AccessCodec },
    /// An access to every page of `[addr, addr + len)` (hand-written
    /// scenarios); each page faults or not as the page tables say.
    Touch = 12, touch(pid) { addr: u64 as Addr, len: u64 as Len, write: bool as AccessCodec },
    Clone = 14, clone(pid) { child: TracePid as ChildPid, kind: CloneKind as Name },
    Exit = 15, exit(pid) {},
    PrctlThpDisable = 16, prctl_thp_disable(pid) { mode: ThpDisableMode as Name },
    /// `echo MODE > /proc/sys/vm/drop_caches`.
    DropCaches = 17, drop_caches(pid) { mode: u8 as CacheMode },
    /// Time passes.
    Tick = 18, tick() { ns: u64 as Ns },
    /// A page exec itself filled (arguments, environment) before the
    /// program ran: present at the exec stop, never faulted by the program.
    ExecPage = 19, exec_page(pid) { addr: u64 as Addr },
    /// `move_pages(pid, ..., MPOL_MF_MOVE)` of every base page of
    /// `[addr, addr + len)` to `node`.
    MovePages = 20, move_pages(pid) { addr: u64 as Addr, len: u64 as Len, node: u32 as Node },
    /// `echo offline > /sys/devices/system/memory/memoryBLOCK/state`.
    MemoryOffline = 21, memory_offline(pid) { block: u64 as Block },
    /// `echo online > .../memoryBLOCK/state`.
    MemoryOnline = 22, memory_online(pid) { block: u64 as Block },
    /// Memory block `block` is hot-added (ACPI, virtio-mem: `add_memory`), offline.
    MemoryAdd = 23, memory_add(pid) { block: u64 as Block },
    /// The (offline) block is hot-removed (`remove_memory`).
    MemoryRemove = 24, memory_remove(pid) { block: u64 as Block },
    /// `echo online_movable > .../memoryBLOCK/state`.
    MemoryOnlineMovable = 25, memory_online_movable(pid) { block: u64 as Block },
    /// `memfd_create` returned `fd`: a new, empty shmem file.
    MemfdCreate = 26, memfd_create(pid) { fd: u32 as Fd },
    /// `ftruncate(fd, len)` of a shmem file.
    Ftruncate = 27, ftruncate(pid) { fd: u32 as Fd, len: u64 as Len },
    /// `mmap` of `len` bytes of the shmem file `fd` from byte `offset`,
    /// and where the kernel placed it.
    MmapFd = 28, mmap_fd(pid) {
        addr: u64 as Addr,
        len: u64 as Len,
        prot: Prot as ProtBits,
        flags: MapFlags as MmapFlags,
        fd: u32 as Fd,
        offset: u64 as Len,
    },
    /// `close(fd)`.
    Close = 29, close(pid) { fd: u32 as Fd },
    /// `fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len)`.
    PunchHole = 30, punch_hole(pid) { fd: u32 as Fd, offset: u64 as Len, len: u64 as Len },
    /// The process sleeps `ns` (`nanosleep`): time passes for the
    /// machine's background work (khugepaged) and is slept natively.
    Sleep = 31, sleep(pid) { ns: u64 as Ns },
    /// `echo $(cat F) > F` for F = khugepaged/scan_sleep_millisecs: the
    /// write wakes khugepaged, which scans at once.
    KhugepagedWake = 32, khugepaged_wake(pid) {},
    /// `shmget` made SysV shared memory segment `shmid` of `size` bytes.
    ShmGet = 33, shmget(pid) { shmid: u32 as ShmId, size: u64 as Len },
    /// `shmat(shmid)` mapped the whole segment (`len`: its size in whole
    /// pages) at `addr`; read-only with `SHM_RDONLY`.
    ShmAt = 34, shmat(pid) {
        shmid: u32 as ShmId,
        addr: u64 as Addr,
        len: u64 as Len,
        prot: Prot as ProtBits,
    },
    /// `shmdt(addr)`: the segment attached at `addr` unmapped.
    ShmDt = 35, shmdt(pid) { addr: u64 as Addr },
    /// `shmctl(shmid, IPC_RMID)`: the segment goes once nothing has it
    /// attached.
    ShmRmid = 36, shm_rmid(pid) { shmid: u32 as ShmId },
}

impl Event {
    /// What the table's per-field codecs cannot see: relations between
    /// fields. Both readers apply it.
    pub fn check(&self) -> Result<(), RecordError> {
        match *self {
            Event::Vma { start, end, .. } if end < start => Err(RecordError::VmaEndBelowStart),
            _ => Ok(()),
        }
    }
}

/// What a trace says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// `key value` pairs in order: `kernel`, `page_size`, `captured`,
    /// `command`, `sys_time_ns`, `config`, ... Keys may repeat (`config`).
    pub fields: Vec<(String, String)>,
}

impl Header {
    pub fn new() -> Header {
        Header::default()
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.fields.push((key.to_string(), value.into()));
    }

    /// The recorded page size (4096 if the trace does not say).
    pub fn page_size(&self) -> u64 {
        self.get("page_size").and_then(|v| v.parse().ok()).unwrap_or(4096)
    }
}

/// A whole trace in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub header: Header,
    pub events: Vec<Event>,
}
