//! The events of a trace: what the processes of a program did to their
//! address spaces, in the kernel's terms (DESIGN.md section 7).

/// Format version of both encodings.
pub const FORMAT_VERSION: u32 = 1;

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
    pub const NAMES: &'static [(&'static str, VmaKind)] = &[
        ("anon", VmaKind::Anon),
        ("file", VmaKind::File),
        ("stack", VmaKind::Stack),
        ("heap", VmaKind::Heap),
        ("special", VmaKind::Special),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("special", |(n, _)| n)
    }

    /// Anonymous private memory the model maps.
    pub fn is_anonymous(self) -> bool {
        matches!(self, VmaKind::Anon | VmaKind::Stack | VmaKind::Heap)
    }
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

impl CloneKind {
    pub const NAMES: &'static [(&'static str, CloneKind)] = &[
        ("process", CloneKind::Process),
        ("thread", CloneKind::Thread),
        ("vfork", CloneKind::Vfork),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("process", |(n, _)| n)
    }
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
pub const MADV_HUGEPAGE: u32 = 14;
pub const MADV_NOHUGEPAGE: u32 = 15;

/// `PR_SET_THP_DISABLE` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThpDisableMode {
    Off,
    Completely,
    ExceptAdvised,
}

impl ThpDisableMode {
    pub const NAMES: &'static [(&'static str, ThpDisableMode)] = &[
        ("0", ThpDisableMode::Off),
        ("1", ThpDisableMode::Completely),
        ("except_advised", ThpDisableMode::ExceptAdvised),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, k)| *k == self).map_or("0", |(n, _)| n)
    }
}

/// What a memory hotplug event does to a memory block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryOp {
    /// `echo offline > memoryN/state`.
    Offline,
    /// `echo online > memoryN/state`.
    Online,
    /// `echo online_movable > memoryN/state`.
    OnlineMovable,
    /// The block is hot-added (ACPI / virtio-mem / `add_memory`), offline.
    Add,
    /// The (offline) block is hot-removed (`remove_memory`).
    Remove,
}

impl MemoryOp {
    /// (text verb, binary tag) of each op.
    pub const ALL: [(MemoryOp, &'static str, u8); 5] = [
        (MemoryOp::Offline, "memory_offline", 21),
        (MemoryOp::Online, "memory_online", 22),
        (MemoryOp::Add, "memory_add", 23),
        (MemoryOp::Remove, "memory_remove", 24),
        (MemoryOp::OnlineMovable, "memory_online_movable", 25),
    ];

    pub fn verb(self) -> &'static str {
        Self::ALL.iter().find(|(o, _, _)| *o == self).map_or("", |e| e.1)
    }

    pub fn tag(self) -> u8 {
        Self::ALL.iter().find(|(o, _, _)| *o == self).map_or(0, |e| e.2)
    }

    pub fn from_verb(verb: &str) -> Option<MemoryOp> {
        Self::ALL.iter().find(|e| e.1 == verb).map(|e| e.0)
    }

    pub fn from_tag(tag: u8) -> Option<MemoryOp> {
        Self::ALL.iter().find(|e| e.2 == tag).map(|e| e.0)
    }
}

/// One event. Addresses and lengths are bytes; `mmap`, `mremap` and `brk`
/// carry the kernel's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A new program image: the process's address space is replaced by the
    /// `vma` and `brk_start` events that follow.
    Exec {
        pid: TracePid,
    },
    /// A mapping of the image's initial layout.
    Vma {
        pid: TracePid,
        start: u64,
        end: u64,
        prot: Prot,
        kind: VmaKind,
    },
    /// Where the brk heap starts.
    BrkStart {
        pid: TracePid,
        addr: u64,
    },
    Mmap {
        pid: TracePid,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
    },
    Munmap {
        pid: TracePid,
        addr: u64,
        len: u64,
    },
    Mremap {
        pid: TracePid,
        old_addr: u64,
        old_len: u64,
        new_addr: u64,
        new_len: u64,
    },
    Mprotect {
        pid: TracePid,
        addr: u64,
        len: u64,
        prot: Prot,
    },
    Madvise {
        pid: TracePid,
        addr: u64,
        len: u64,
        advice: u32,
    },
    Brk {
        pid: TracePid,
        addr: u64,
    },
    /// A user page fault at `addr`.
    Fault {
        pid: TracePid,
        addr: u64,
        write: bool,
    },
    /// A page exec itself filled (arguments, environment) before the
    /// program ran: present at the exec stop, never faulted by the program.
    ExecPage {
        pid: TracePid,
        addr: u64,
    },
    /// An access to every page of `[addr, addr + len)` (hand-written
    /// scenarios); each page faults or not as the page tables say.
    Touch {
        pid: TracePid,
        addr: u64,
        len: u64,
        write: bool,
    },
    Clone {
        pid: TracePid,
        child: TracePid,
        kind: CloneKind,
    },
    Exit {
        pid: TracePid,
    },
    PrctlThpDisable {
        pid: TracePid,
        mode: ThpDisableMode,
    },
    /// `echo MODE > /proc/sys/vm/drop_caches`.
    DropCaches {
        pid: TracePid,
        mode: u8,
    },
    /// `move_pages(pid, ..., MPOL_MF_MOVE)` of every base page of
    /// `[addr, addr + len)` to `node`.
    MovePages {
        pid: TracePid,
        addr: u64,
        len: u64,
        node: u32,
    },
    /// Memory hotplug of memory block `block`: offline, online (its
    /// `state` file), hot-add or hot-remove.
    MemoryBlock {
        pid: TracePid,
        block: u64,
        op: MemoryOp,
    },
    /// Time passes.
    Tick {
        ns: u64,
    },
}

impl Event {
    /// The process the event belongs to (`None` for ticks).
    pub fn pid(&self) -> Option<TracePid> {
        use Event::*;
        match *self {
            Exec { pid }
            | Vma { pid, .. }
            | BrkStart { pid, .. }
            | Mmap { pid, .. }
            | Munmap { pid, .. }
            | Mremap { pid, .. }
            | Mprotect { pid, .. }
            | Madvise { pid, .. }
            | Brk { pid, .. }
            | Fault { pid, .. }
            | ExecPage { pid, .. }
            | Touch { pid, .. }
            | Clone { pid, .. }
            | Exit { pid }
            | PrctlThpDisable { pid, .. }
            | DropCaches { pid, .. }
            | MovePages { pid, .. }
            | MemoryBlock { pid, .. } => Some(pid),
            Tick { .. } => None,
        }
    }
}

/// What a trace says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub version: u32,
    /// `key value` pairs in order: `kernel`, `page_size`, `captured`,
    /// `command`, `sys_time_ns`, `config`, ... Keys may repeat (`config`).
    pub fields: Vec<(String, String)>,
}

impl Header {
    pub fn new() -> Header {
        Header {
            version: FORMAT_VERSION,
            fields: Vec::new(),
        }
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
