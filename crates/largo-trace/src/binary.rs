//! The binary encoding, for long recordings: a magic, the version, the
//! header, then one record per event: a tag byte and LEB128 varints, with
//! addresses delta-coded (zigzag) against the previous address, so a run
//! of page faults costs a few bytes each.
//!
//! ```text
//! "LGOTRACE" version:varint nfields:varint (klen:varint k vlen:varint v)*
//! (tag fields*)*
//! ```

use std::io::{Read, Write};

use crate::error::{Location, TraceError};
use crate::event::*;

pub const MAGIC: &[u8; 8] = b"LGOTRACE";
/// Largest header string, and most header fields: a malformed length
/// cannot make the reader allocate more.
pub const MAX_STRING_BYTES: u64 = 1 << 20;
pub const MAX_HEADER_FIELDS: u64 = 4096;

mod tag {
    pub const EXEC: u8 = 1;
    pub const VMA: u8 = 2;
    pub const BRK_START: u8 = 3;
    pub const MMAP: u8 = 4;
    pub const MUNMAP: u8 = 5;
    pub const MREMAP: u8 = 6;
    pub const MPROTECT: u8 = 7;
    pub const MADVISE: u8 = 8;
    pub const BRK: u8 = 9;
    pub const FAULT_R: u8 = 10;
    pub const FAULT_W: u8 = 11;
    pub const TOUCH_R: u8 = 12;
    pub const TOUCH_W: u8 = 13;
    pub const CLONE: u8 = 14;
    pub const EXIT: u8 = 15;
    pub const PRCTL: u8 = 16;
    pub const DROP_CACHES: u8 = 17;
    pub const TICK: u8 = 18;
    pub const EXEC_PAGE: u8 = 19;
    pub const MOVE_PAGES: u8 = 20;
    // 21..=25: memory hotplug, `MemoryOp::ALL`.
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes the binary encoding.
pub struct BinaryWriter<W: Write> {
    out: W,
    last_addr: u64,
    buf: Vec<u8>,
}

impl<W: Write> BinaryWriter<W> {
    pub fn new(mut out: W, header: &Header) -> std::io::Result<BinaryWriter<W>> {
        let mut buf = Vec::new();
        buf.extend_from_slice(MAGIC);
        put(&mut buf, header.version.max(FORMAT_VERSION) as u64);
        put(&mut buf, header.fields.len() as u64);
        for (k, v) in &header.fields {
            put(&mut buf, k.len() as u64);
            buf.extend_from_slice(k.as_bytes());
            put(&mut buf, v.len() as u64);
            buf.extend_from_slice(v.as_bytes());
        }
        out.write_all(&buf)?;
        buf.clear();
        Ok(BinaryWriter { out, last_addr: 0, buf })
    }

    fn addr(&mut self, a: u64) {
        put(&mut self.buf, zigzag(a.wrapping_sub(self.last_addr) as i64));
        self.last_addr = a;
    }

    pub fn write(&mut self, e: &Event) -> std::io::Result<()> {
        use Event::*;
        let b = &mut self.buf;
        match *e {
            Exec { pid } => {
                b.push(tag::EXEC);
                put(b, pid as u64);
            }
            Vma {
                pid,
                start,
                end,
                prot,
                kind,
            } => {
                b.push(tag::VMA);
                put(b, pid as u64);
                b.push(prot.0);
                b.push(kind as u8);
                self.addr(start);
                put(&mut self.buf, end - start);
            }
            BrkStart { pid, addr } => {
                b.push(tag::BRK_START);
                put(b, pid as u64);
                self.addr(addr);
            }
            Mmap {
                pid,
                addr,
                len,
                prot,
                flags,
            } => {
                b.push(tag::MMAP);
                put(b, pid as u64);
                b.push(prot.0);
                put(b, flags.0 as u64);
                self.addr(addr);
                put(&mut self.buf, len);
            }
            Munmap { pid, addr, len } => {
                b.push(tag::MUNMAP);
                put(b, pid as u64);
                self.addr(addr);
                put(&mut self.buf, len);
            }
            Mremap {
                pid,
                old_addr,
                old_len,
                new_addr,
                new_len,
            } => {
                b.push(tag::MREMAP);
                put(b, pid as u64);
                self.addr(old_addr);
                put(&mut self.buf, old_len);
                self.addr(new_addr);
                put(&mut self.buf, new_len);
            }
            Mprotect { pid, addr, len, prot } => {
                b.push(tag::MPROTECT);
                put(b, pid as u64);
                b.push(prot.0);
                self.addr(addr);
                put(&mut self.buf, len);
            }
            Madvise { pid, addr, len, advice } => {
                b.push(tag::MADVISE);
                put(b, pid as u64);
                put(b, advice as u64);
                self.addr(addr);
                put(&mut self.buf, len);
            }
            Brk { pid, addr } => {
                b.push(tag::BRK);
                put(b, pid as u64);
                self.addr(addr);
            }
            Fault { pid, addr, write } => {
                b.push(if write { tag::FAULT_W } else { tag::FAULT_R });
                put(b, pid as u64);
                self.addr(addr);
            }
            ExecPage { pid, addr } => {
                b.push(tag::EXEC_PAGE);
                put(b, pid as u64);
                self.addr(addr);
            }
            Touch { pid, addr, len, write } => {
                b.push(if write { tag::TOUCH_W } else { tag::TOUCH_R });
                put(b, pid as u64);
                self.addr(addr);
                put(&mut self.buf, len);
            }
            Clone { pid, child, kind } => {
                b.push(tag::CLONE);
                put(b, pid as u64);
                put(b, child as u64);
                b.push(kind as u8);
            }
            Exit { pid } => {
                b.push(tag::EXIT);
                put(b, pid as u64);
            }
            PrctlThpDisable { pid, mode } => {
                b.push(tag::PRCTL);
                put(b, pid as u64);
                b.push(mode as u8);
            }
            DropCaches { pid, mode } => {
                b.push(tag::DROP_CACHES);
                put(b, pid as u64);
                b.push(mode);
            }
            Tick { ns } => {
                b.push(tag::TICK);
                put(b, ns);
            }
            MemoryBlock { pid, block, op } => {
                b.push(op.tag());
                put(b, pid as u64);
                put(b, block);
            }
            MovePages { pid, addr, len, node } => {
                b.push(tag::MOVE_PAGES);
                put(b, pid as u64);
                self.addr(addr);
                put(&mut self.buf, len);
                put(&mut self.buf, node as u64);
            }
        }
        if self.buf.len() >= 64 << 10 {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush_buf()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn put(buf: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf.push(byte);
            return;
        }
        buf.push(byte | 0x80);
    }
}

/// Streams the binary encoding.
pub struct BinaryReader<R> {
    input: R,
    offset: u64,
    record: u64,
    last_addr: u64,
    header: Header,
    done: bool,
}

impl<R: Read> BinaryReader<R> {
    pub fn new(input: R) -> Result<BinaryReader<R>, TraceError> {
        let mut r = BinaryReader {
            input,
            offset: 0,
            record: 0,
            last_addr: 0,
            header: Header::new(),
            done: false,
        };
        let mut magic = [0u8; 8];
        for b in magic.iter_mut() {
            *b = r
                .byte()?
                .ok_or_else(|| TraceError::at(Location::Byte(r.offset), "too short for a binary trace"))?;
        }
        if &magic != MAGIC {
            return Err(TraceError::at(
                Location::Byte(0),
                "not a binary largo trace (bad magic)",
            ));
        }
        let version = r.varint()?;
        if version != FORMAT_VERSION as u64 {
            return Err(TraceError::at(
                Location::Byte(8),
                format!("format version {version}; this largo reads version {FORMAT_VERSION}"),
            ));
        }
        let n = r.varint()?;
        if n > MAX_HEADER_FIELDS {
            return Err(TraceError::at(
                Location::Byte(r.offset),
                format!("{n} header fields (at most {MAX_HEADER_FIELDS})"),
            ));
        }
        for _ in 0..n {
            let k = r.string()?;
            let v = r.string()?;
            r.header.fields.push((k, v));
        }
        Ok(r)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    fn byte(&mut self) -> Result<Option<u8>, TraceError> {
        let mut b = [0u8; 1];
        loop {
            match self.input.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(_) => {
                    self.offset += 1;
                    return Ok(Some(b[0]));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TraceError::at(Location::Byte(self.offset), format!("cannot read: {e}"))),
            }
        }
    }

    fn need(&mut self) -> Result<u8, TraceError> {
        self.byte()?
            .ok_or_else(|| TraceError::at(Location::Byte(self.record), "the record is cut short"))
    }

    fn varint(&mut self) -> Result<u64, TraceError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.need()?;
            if i == 9 && b > 1 {
                return Err(TraceError::at(
                    Location::Byte(self.record),
                    "a varint overflows 64 bits",
                ));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(TraceError::at(
            Location::Byte(self.record),
            "a varint is longer than 10 bytes",
        ))
    }

    fn pid(&mut self) -> Result<TracePid, TraceError> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| TraceError::at(Location::Byte(self.record), format!("pid {v} is too large")))
    }

    fn addr(&mut self) -> Result<u64, TraceError> {
        let d = unzigzag(self.varint()?);
        self.last_addr = self.last_addr.wrapping_add(d as u64);
        Ok(self.last_addr)
    }

    fn string(&mut self) -> Result<String, TraceError> {
        self.record = self.offset;
        let n = self.varint()?;
        if n > MAX_STRING_BYTES {
            return Err(TraceError::at(
                Location::Byte(self.record),
                format!("a {n}-byte header string (at most {MAX_STRING_BYTES})"),
            ));
        }
        let mut bytes = Vec::with_capacity(n as usize);
        for _ in 0..n {
            bytes.push(self.need()?);
        }
        String::from_utf8(bytes)
            .map_err(|_| TraceError::at(Location::Byte(self.record), "a header string is not UTF-8"))
    }

    fn prot(&mut self) -> Result<Prot, TraceError> {
        let p = self.need()?;
        if p > 7 {
            return Err(TraceError::at(
                Location::Byte(self.record),
                format!("protection bits {p:#x}"),
            ));
        }
        Ok(Prot(p))
    }

    fn read_event(&mut self) -> Result<Option<Event>, TraceError> {
        self.record = self.offset;
        let Some(t) = self.byte()? else { return Ok(None) };
        let at = self.record;
        let bad = move |what: String| TraceError::at(Location::Byte(at), what);
        let e = match t {
            tag::EXEC => Event::Exec { pid: self.pid()? },
            tag::VMA => {
                let pid = self.pid()?;
                let prot = self.prot()?;
                let k = self.need()?;
                let kind = *[
                    VmaKind::Anon,
                    VmaKind::File,
                    VmaKind::Stack,
                    VmaKind::Heap,
                    VmaKind::Special,
                ]
                .get(k as usize)
                .ok_or_else(|| bad(format!("vma kind {k}")))?;
                let start = self.addr()?;
                let len = self.varint()?;
                let end = start.checked_add(len).ok_or_else(|| bad("vma end overflows".into()))?;
                Event::Vma {
                    pid,
                    start,
                    end,
                    prot,
                    kind,
                }
            }
            tag::BRK_START => Event::BrkStart {
                pid: self.pid()?,
                addr: self.addr()?,
            },
            tag::MMAP => {
                let pid = self.pid()?;
                let prot = self.prot()?;
                let f = self.varint()?;
                let flags = MapFlags(u32::try_from(f).map_err(|_| bad(format!("mmap flags {f:#x}")))?);
                Event::Mmap {
                    pid,
                    prot,
                    flags,
                    addr: self.addr()?,
                    len: self.varint()?,
                }
            }
            tag::MUNMAP => Event::Munmap {
                pid: self.pid()?,
                addr: self.addr()?,
                len: self.varint()?,
            },
            tag::MREMAP => Event::Mremap {
                pid: self.pid()?,
                old_addr: self.addr()?,
                old_len: self.varint()?,
                new_addr: self.addr()?,
                new_len: self.varint()?,
            },
            tag::MPROTECT => {
                let pid = self.pid()?;
                let prot = self.prot()?;
                Event::Mprotect {
                    pid,
                    prot,
                    addr: self.addr()?,
                    len: self.varint()?,
                }
            }
            tag::MADVISE => {
                let pid = self.pid()?;
                let a = self.varint()?;
                let advice = u32::try_from(a).map_err(|_| bad(format!("advice {a}")))?;
                Event::Madvise {
                    pid,
                    advice,
                    addr: self.addr()?,
                    len: self.varint()?,
                }
            }
            tag::BRK => Event::Brk {
                pid: self.pid()?,
                addr: self.addr()?,
            },
            tag::FAULT_R | tag::FAULT_W => Event::Fault {
                pid: self.pid()?,
                addr: self.addr()?,
                write: t == tag::FAULT_W,
            },
            tag::EXEC_PAGE => Event::ExecPage {
                pid: self.pid()?,
                addr: self.addr()?,
            },
            tag::TOUCH_R | tag::TOUCH_W => Event::Touch {
                pid: self.pid()?,
                addr: self.addr()?,
                len: self.varint()?,
                write: t == tag::TOUCH_W,
            },
            tag::CLONE => {
                let pid = self.pid()?;
                let child = self.pid()?;
                let k = self.need()?;
                let kind = *[CloneKind::Process, CloneKind::Thread, CloneKind::Vfork]
                    .get(k as usize)
                    .ok_or_else(|| bad(format!("clone kind {k}")))?;
                Event::Clone { pid, child, kind }
            }
            tag::EXIT => Event::Exit { pid: self.pid()? },
            tag::PRCTL => {
                let pid = self.pid()?;
                let m = self.need()?;
                let mode = *[
                    ThpDisableMode::Off,
                    ThpDisableMode::Completely,
                    ThpDisableMode::ExceptAdvised,
                ]
                .get(m as usize)
                .ok_or_else(|| bad(format!("THP disable mode {m}")))?;
                Event::PrctlThpDisable { pid, mode }
            }
            tag::DROP_CACHES => {
                let pid = self.pid()?;
                let mode = self.need()?;
                if !(1..=3).contains(&mode) {
                    return Err(bad(format!("drop_caches mode {mode}")));
                }
                Event::DropCaches { pid, mode }
            }
            tag::TICK => Event::Tick { ns: self.varint()? },
            tag::MOVE_PAGES => {
                let pid = self.pid()?;
                let addr = self.addr()?;
                let len = self.varint()?;
                let node = self.varint()?;
                let node = u32::try_from(node).map_err(|_| bad(format!("node {node}")))?;
                Event::MovePages { pid, addr, len, node }
            }
            t if MemoryOp::from_tag(t).is_some() => Event::MemoryBlock {
                pid: self.pid()?,
                block: self.varint()?,
                op: MemoryOp::from_tag(t).expect("checked"),
            },
            other => return Err(bad(format!("unknown record tag {other}"))),
        };
        Ok(Some(e))
    }
}

impl<R: Read> Iterator for BinaryReader<R> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_event() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
