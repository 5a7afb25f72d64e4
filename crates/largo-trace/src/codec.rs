//! Field codecs: how each kind of event field is written and read in the
//! text encoding (one token) and the binary encoding (bytes of a record).
//! The event table (`event.rs`) names a codec for every field; the
//! record framing lives in `text.rs` and `binary.rs`.
//!
//! Binary primitives: LEB128 varints; addresses zigzag-coded as the
//! difference from the previous address of the stream, pids as the
//! difference from the previous pid, so the faults of one process cost a
//! few bytes each.

use std::io::Read;

use crate::error::{Location, RecordError, TraceError};
use crate::event::{Prot, TracePid, ADVICE_NAMES};
use crate::MapFlags;

/// One field kind in both encodings.
pub trait Codec<T> {
    /// The argument's name in the text usage (`ADDR`, `LEN`, ...).
    const USAGE: &'static str;
    fn parse(tok: &str) -> Result<T, RecordError>;
    fn write(v: T, out: &mut String);
    fn encode(v: T, enc: &mut Encoder);
    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<T, TraceError>;
    /// Random values, for the round-trip property test.
    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<T>;
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Builds binary records.
#[derive(Debug, Default)]
pub struct Encoder {
    buf: Vec<u8>,
    last_addr: u64,
    last_pid: TracePid,
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder::default()
    }

    pub fn put_byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub fn put_varint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub fn put_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// An address as the difference from the previous one.
    pub fn put_addr(&mut self, a: u64) {
        self.put_varint(zigzag(a.wrapping_sub(self.last_addr) as i64));
        self.last_addr = a;
    }

    /// The event's pid as the difference from the previous event's.
    pub fn put_pid(&mut self, pid: TracePid) {
        self.put_varint(zigzag(pid as i64 - self.last_pid as i64));
        self.last_pid = pid;
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes so far, leaving the encoder empty (its delta state kept).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn clear(&mut self) {
        self.buf.clear();
    }
}

/// Bytes the decoder reads from its input at a time.
const DECODE_CHUNK: usize = 1 << 16;

/// Reads binary records, knowing where each starts.
pub struct Decoder<R> {
    input: R,
    /// Bytes read from `input` and not yet decoded: `buf[pos..len]`
    /// (a record is decoded byte by byte, so the decoder keeps its own
    /// buffer rather than making a call on the reader per byte).
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Bytes decoded so far: the input offset of `buf[pos]`.
    offset: u64,
    record: u64,
    last_addr: u64,
    last_pid: TracePid,
}

impl<R: Read> Decoder<R> {
    pub fn new(input: R) -> Decoder<R> {
        Decoder {
            input,
            buf: vec![0; DECODE_CHUNK].into_boxed_slice(),
            pos: 0,
            len: 0,
            offset: 0,
            record: 0,
            last_addr: 0,
            last_pid: 0,
        }
    }

    /// Marks the start of a record (errors point at it).
    pub fn start_record(&mut self) {
        self.record = self.offset;
    }

    /// The offset of the current record.
    pub fn record(&self) -> u64 {
        self.record
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// A malformed-record error at the current record.
    pub fn bad(&self, reason: RecordError) -> TraceError {
        TraceError::at(Location::Byte(self.record), reason)
    }

    /// The next byte, `None` at the end of the input.
    #[inline]
    pub fn byte(&mut self) -> Result<Option<u8>, TraceError> {
        if self.pos == self.len && !self.refill()? {
            return Ok(None);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        self.offset += 1;
        Ok(Some(b))
    }

    /// Reads the next chunk of input into the emptied buffer; `false` at
    /// the end of the input.
    #[cold]
    fn refill(&mut self) -> Result<bool, TraceError> {
        loop {
            match self.input.read(&mut self.buf) {
                Ok(n) => {
                    (self.pos, self.len) = (0, n);
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(TraceError::at(
                        Location::Byte(self.offset),
                        RecordError::Read(e.to_string()),
                    ))
                }
            }
        }
    }

    /// The next byte of a record that must go on.
    pub fn need(&mut self) -> Result<u8, TraceError> {
        self.byte()?.ok_or_else(|| self.bad(RecordError::CutShort))
    }

    pub fn varint(&mut self) -> Result<u64, TraceError> {
        // Ten bytes buffered (the longest varint): read from the slice,
        // without a check for the buffer's end at each byte.
        if self.len - self.pos >= 10 {
            return self.varint_buffered();
        }
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.need()?;
            if i == 9 && b > 1 {
                return Err(self.bad(RecordError::VarintOverflow));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.bad(RecordError::VarintOverflow))
    }

    /// [`Decoder::varint`] with at least ten bytes in the buffer: the same
    /// value, bytes consumed and errors (an overflow is reported after
    /// its tenth byte, as byte by byte).
    #[inline]
    fn varint_buffered(&mut self) -> Result<u64, TraceError> {
        let bytes = &self.buf[self.pos..self.pos + 10];
        let mut v = 0u64;
        for (i, &b) in bytes.iter().enumerate() {
            if i == 9 && b > 1 {
                break;
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                self.pos += i + 1;
                self.offset += i as u64 + 1;
                return Ok(v);
            }
        }
        self.pos += 10;
        self.offset += 10;
        Err(self.bad(RecordError::VarintOverflow))
    }

    /// A varint that must fit 32 bits (`what` names it in the error).
    pub fn varint_u32(&mut self, what: &'static str) -> Result<u32, TraceError> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| self.bad(RecordError::TooLarge { what, value: v }))
    }

    pub fn addr(&mut self) -> Result<u64, TraceError> {
        let d = unzigzag(self.varint()?);
        self.last_addr = self.last_addr.wrapping_add(d as u64);
        Ok(self.last_addr)
    }

    pub fn pid(&mut self) -> Result<TracePid, TraceError> {
        let d = unzigzag(self.varint()?);
        // A delta from outside input can be any i64: the sum is checked.
        let pid = (self.last_pid as i64)
            .checked_add(d)
            .and_then(|p| u32::try_from(p).ok());
        let pid = pid.ok_or_else(|| {
            self.bad(RecordError::TooLarge {
                what: "pid",
                value: (self.last_pid as i64).wrapping_add(d) as u64,
            })
        })?;
        self.last_pid = pid;
        Ok(pid)
    }

    /// `n` bytes, `n` already bounded by the caller.
    pub fn bytes(&mut self, n: u64) -> Result<Vec<u8>, TraceError> {
        let mut bytes = Vec::with_capacity(n as usize);
        for _ in 0..n {
            bytes.push(self.need()?);
        }
        Ok(bytes)
    }
}

/// Parses `0x..` hex or decimal; with `sized`, also a K/M/G/T suffix.
pub fn number(tok: &str, sized: bool) -> Result<u64, RecordError> {
    let bad = || RecordError::NotANumber(tok.to_string());
    if let Some(hex) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| bad());
    }
    let (digits, shift) = match tok.as_bytes().last() {
        Some(b'K' | b'k') if sized => (&tok[..tok.len() - 1], 10),
        Some(b'M' | b'm') if sized => (&tok[..tok.len() - 1], 20),
        Some(b'G' | b'g') if sized => (&tok[..tok.len() - 1], 30),
        Some(b'T' | b't') if sized => (&tok[..tok.len() - 1], 40),
        _ => (tok, 0),
    };
    let v: u64 = digits.parse().map_err(|_| bad())?;
    v.checked_mul(1 << shift)
        .ok_or_else(|| RecordError::Overflow(tok.to_string()))
}

fn number_u32(tok: &str, what: &'static str) -> Result<u32, RecordError> {
    let v = number(tok, false)?;
    u32::try_from(v).map_err(|_| RecordError::TooLarge { what, value: v })
}

/// A length as the writer prints it: with a suffix when exact.
fn len_text(v: u64, out: &mut String) {
    use std::fmt::Write as _;
    for (suffix, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if v >= 1 << shift && v.is_multiple_of(1 << shift) {
            let _ = write!(out, "{}{suffix}", v >> shift);
            return;
        }
    }
    let _ = write!(out, "{v}");
}

#[cfg(test)]
fn any_addr() -> proptest::strategy::BoxedStrategy<u64> {
    use proptest::prelude::*;
    prop_oneof![any::<u64>(), 0x7f00_0000_0000u64..0x7f00_1000_0000].boxed()
}

/// A virtual address: hex in text, a delta in binary.
pub struct Addr;

impl Codec<u64> for Addr {
    const USAGE: &'static str = "ADDR";

    fn parse(tok: &str) -> Result<u64, RecordError> {
        number(tok, false)
    }

    fn write(v: u64, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{v:#x}");
    }

    fn encode(v: u64, enc: &mut Encoder) {
        enc.put_addr(v);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<u64, TraceError> {
        dec.addr()
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<u64> {
        any_addr()
    }
}

/// A length in bytes: K/M/G/T suffixes in text.
pub struct Len;

impl Codec<u64> for Len {
    const USAGE: &'static str = "LEN";

    fn parse(tok: &str) -> Result<u64, RecordError> {
        number(tok, true)
    }

    fn write(v: u64, out: &mut String) {
        len_text(v, out);
    }

    fn encode(v: u64, enc: &mut Encoder) {
        enc.put_varint(v);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<u64, TraceError> {
        dec.varint()
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<u64> {
        use proptest::prelude::*;
        prop_oneof![1u64..(1 << 30), Just(2 << 20), any::<u64>()].boxed()
    }
}

/// Plain unsigned numbers: decimal in text, a varint in binary.
macro_rules! plain_number {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $usage:literal) => {
        $(#[$doc])*
        pub struct $name;

        impl Codec<$ty> for $name {
            const USAGE: &'static str = $usage;

            fn parse(tok: &str) -> Result<$ty, RecordError> {
                let v = number(tok, false)?;
                <$ty>::try_from(v).map_err(|_| RecordError::TooLarge { what: $usage, value: v })
            }

            fn write(v: $ty, out: &mut String) {
                use std::fmt::Write as _;
                let _ = write!(out, "{v}");
            }

            fn encode(v: $ty, enc: &mut Encoder) {
                enc.put_varint(v as u64);
            }

            fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<$ty, TraceError> {
                let v = dec.varint()?;
                <$ty>::try_from(v).map_err(|_| dec.bad(RecordError::TooLarge { what: $usage, value: v }))
            }

            #[cfg(test)]
            fn strategy() -> proptest::strategy::BoxedStrategy<$ty> {
                use proptest::prelude::*;
                any::<$ty>().boxed()
            }
        }
    };
}

plain_number!(
    /// Nanoseconds.
    Ns,
    u64,
    "NS"
);
plain_number!(
    /// A memory block number.
    Block,
    u64,
    "BLOCK"
);
plain_number!(
    /// A NUMA node.
    Node,
    u32,
    "NODE"
);

plain_number!(
    /// A file descriptor of the traced process.
    Fd,
    u32,
    "FD"
);

plain_number!(
    /// A SysV shared memory identifier (`shmget`'s result).
    ShmId,
    u32,
    "SHMID"
);

/// Another process's pid (a clone's child).
pub struct ChildPid;

impl Codec<TracePid> for ChildPid {
    const USAGE: &'static str = "CHILD";

    fn parse(tok: &str) -> Result<TracePid, RecordError> {
        tok.parse().map_err(|_| RecordError::NotAPid(tok.to_string()))
    }

    fn write(v: TracePid, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{v}");
    }

    fn encode(v: TracePid, enc: &mut Encoder) {
        enc.put_varint(v as u64);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<TracePid, TraceError> {
        dec.varint_u32("pid")
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<TracePid> {
        use proptest::prelude::*;
        (1u32..70000).boxed()
    }
}

/// `drop_caches` mode: 1, 2 or 3.
pub struct CacheMode;

impl Codec<u8> for CacheMode {
    const USAGE: &'static str = "MODE";

    fn parse(tok: &str) -> Result<u8, RecordError> {
        match number(tok, false)? {
            m @ 1..=3 => Ok(m as u8),
            _ => Err(RecordError::BadValue {
                what: "drop_caches MODE",
                value: tok.to_string(),
                expected: "1, 2 or 3",
            }),
        }
    }

    fn write(v: u8, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{v}");
    }

    fn encode(v: u8, enc: &mut Encoder) {
        enc.put_byte(v);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<u8, TraceError> {
        match dec.need()? {
            m @ 1..=3 => Ok(m),
            m => Err(dec.bad(RecordError::BadBits {
                what: "drop_caches mode",
                value: m as u64,
            })),
        }
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<u8> {
        use proptest::prelude::*;
        (1u8..4).boxed()
    }
}

fn prot_from(b: &[u8]) -> Option<Prot> {
    if b.len() < 3 || !matches!(b[0], b'r' | b'-') || !matches!(b[1], b'w' | b'-') || !matches!(b[2], b'x' | b'-') {
        return None;
    }
    Some(Prot(
        (b[0] == b'r') as u8 | ((b[1] == b'w') as u8) << 1 | ((b[2] == b'x') as u8) << 2,
    ))
}

fn prot_text(p: Prot, out: &mut String) {
    for (bit, ch) in [(Prot::READ, 'r'), (Prot::WRITE, 'w'), (Prot::EXEC, 'x')] {
        out.push(if p.0 & bit != 0 { ch } else { '-' });
    }
}

/// `PROT_*` as `rwx` letters (`rw-`).
pub struct ProtBits;

impl Codec<Prot> for ProtBits {
    const USAGE: &'static str = "PROT";

    fn parse(tok: &str) -> Result<Prot, RecordError> {
        prot_from(tok.as_bytes())
            .filter(|_| tok.len() == 3)
            .ok_or_else(|| RecordError::BadProt(tok.to_string()))
    }

    fn write(v: Prot, out: &mut String) {
        prot_text(v, out);
    }

    fn encode(v: Prot, enc: &mut Encoder) {
        enc.put_byte(v.0);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<Prot, TraceError> {
        let p = dec.need()?;
        if p > 7 {
            return Err(dec.bad(RecordError::BadBits {
                what: "protection bits",
                value: p as u64,
            }));
        }
        Ok(Prot(p))
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<Prot> {
        use proptest::prelude::*;
        (0u8..8).prop_map(Prot).boxed()
    }
}

/// Permissions as /proc/PID/maps prints them (`rw-p`); the fourth letter
/// is read and not kept.
pub struct Perms;

impl Codec<Prot> for Perms {
    const USAGE: &'static str = "PERMS";

    fn parse(tok: &str) -> Result<Prot, RecordError> {
        prot_from(tok.as_bytes())
            .filter(|_| tok.len() == 4 && tok.is_ascii())
            .ok_or_else(|| RecordError::BadPerms(tok.to_string()))
    }

    fn write(v: Prot, out: &mut String) {
        prot_text(v, out);
        out.push('p');
    }

    /// In binary, permissions are the protection bits.
    fn encode(v: Prot, enc: &mut Encoder) {
        <ProtBits as Codec<Prot>>::encode(v, enc);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<Prot, TraceError> {
        <ProtBits as Codec<Prot>>::decode(dec)
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<Prot> {
        <ProtBits as Codec<Prot>>::strategy()
    }
}

/// `MAP_*` flags: a comma list of names, or a `0x` number.
pub struct MmapFlags;

impl Codec<MapFlags> for MmapFlags {
    const USAGE: &'static str = "FLAGS";

    fn parse(tok: &str) -> Result<MapFlags, RecordError> {
        if tok.starts_with("0x") {
            let v = number(tok, false)?;
            return u32::try_from(v).map(MapFlags).map_err(|_| RecordError::TooLarge {
                what: "FLAGS",
                value: v,
            });
        }
        let mut f = 0;
        for name in tok.split(',') {
            f |= MapFlags::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, b)| *b)
                .ok_or_else(|| RecordError::UnknownFlag(name.to_string()))?;
        }
        Ok(MapFlags(f))
    }

    fn write(v: MapFlags, out: &mut String) {
        use std::fmt::Write as _;
        let known: u32 = MapFlags::NAMES.iter().fold(0, |a, (_, b)| a | b);
        if v.0 & !known != 0 || v.0 == 0 {
            let _ = write!(out, "{:#x}", v.0);
            return;
        }
        let names: Vec<&str> = MapFlags::NAMES
            .iter()
            .filter(|(_, b)| v.0 & b == *b)
            .map(|(n, _)| *n)
            .collect();
        out.push_str(&names.join(","));
    }

    fn encode(v: MapFlags, enc: &mut Encoder) {
        enc.put_varint(v.0 as u64);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<MapFlags, TraceError> {
        dec.varint_u32("mmap flags").map(MapFlags)
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<MapFlags> {
        use proptest::prelude::*;
        any::<u32>().prop_map(MapFlags).boxed()
    }
}

/// `madvise` advice: a name or a number.
pub struct Advice;

impl Codec<u32> for Advice {
    const USAGE: &'static str = "ADVICE";

    fn parse(tok: &str) -> Result<u32, RecordError> {
        if let Some((_, v)) = ADVICE_NAMES.iter().find(|(n, _)| *n == tok) {
            return Ok(*v);
        }
        number_u32(tok, "advice")
    }

    fn write(v: u32, out: &mut String) {
        match ADVICE_NAMES.iter().find(|(_, a)| *a == v) {
            Some((name, _)) => out.push_str(name),
            None => {
                use std::fmt::Write as _;
                let _ = write!(out, "{v}");
            }
        }
    }

    fn encode(v: u32, enc: &mut Encoder) {
        enc.put_varint(v as u64);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<u32, TraceError> {
        dec.varint_u32("advice")
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<u32> {
        use proptest::prelude::*;
        any::<u32>().boxed()
    }
}

/// A read (`r`) or a write (`w`).
pub struct Access;

impl Codec<bool> for Access {
    const USAGE: &'static str = "r|w";

    fn parse(tok: &str) -> Result<bool, RecordError> {
        match tok {
            "r" => Ok(false),
            "w" => Ok(true),
            _ => Err(RecordError::BadAccess(tok.to_string())),
        }
    }

    fn write(v: bool, out: &mut String) {
        out.push(if v { 'w' } else { 'r' });
    }

    fn encode(v: bool, enc: &mut Encoder) {
        enc.put_byte(v as u8);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<bool, TraceError> {
        match dec.need()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(dec.bad(RecordError::BadBits {
                what: "access",
                value: b as u64,
            })),
        }
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<bool> {
        use proptest::prelude::*;
        any::<bool>().boxed()
    }
}

/// An enum written by name in text and by its index in `NAMES` in binary.
pub trait Named: Copy + PartialEq + std::fmt::Debug + 'static {
    /// What errors call it (`vma kind`).
    const WHAT: &'static str;
    /// Its usage (`process|thread|vfork`).
    const USAGE: &'static str;
    const NAMES: &'static [(&'static str, Self)];

    fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map(|(n, _)| *n)
            .expect("every value is named")
    }
}

/// A [`Named`] enum.
pub struct Name;

impl<T: Named> Codec<T> for Name {
    const USAGE: &'static str = T::USAGE;

    fn parse(tok: &str) -> Result<T, RecordError> {
        T::NAMES
            .iter()
            .find(|(n, _)| *n == tok)
            .map(|(_, v)| *v)
            .ok_or_else(|| RecordError::UnknownName {
                what: T::WHAT,
                name: tok.to_string(),
                expected: T::NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            })
    }

    fn write(v: T, out: &mut String) {
        out.push_str(v.name());
    }

    fn encode(v: T, enc: &mut Encoder) {
        let i = T::NAMES
            .iter()
            .position(|(_, k)| *k == v)
            .expect("every value is named");
        enc.put_byte(i as u8);
    }

    fn decode<R: Read>(dec: &mut Decoder<R>) -> Result<T, TraceError> {
        let i = dec.need()?;
        T::NAMES.get(i as usize).map(|(_, v)| *v).ok_or_else(|| {
            dec.bad(RecordError::BadBits {
                what: T::WHAT,
                value: i as u64,
            })
        })
    }

    #[cfg(test)]
    fn strategy() -> proptest::strategy::BoxedStrategy<T> {
        use proptest::prelude::*;
        (0..T::NAMES.len()).prop_map(|i| T::NAMES[i].1).boxed()
    }
}
