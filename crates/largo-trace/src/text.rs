//! The text encoding: one event per line, `#` comments, hand-writable.
//!
//! ```text
//! largo-trace 1
//! @kernel 6.18.44
//! @page_size 4096
//! # pid verb arguments
//! 100 mmap 0x7f0000000000 2M rw- private,anonymous
//! 100 touch 0x7f0000000000 64K w
//! 100 fault 0x7f0000010000 r
//! tick 1000000
//! ```
//!
//! Addresses are hex with `0x` or decimal; lengths may also carry a K, M,
//! G or T suffix. `prot` is `rwx` letters with `-` for absent ones; mmap
//! flags are a comma list of names or a `0x` number; madvise advice is a
//! name or number.

use std::io::{BufRead, Read, Write};

use crate::error::{Location, TraceError};
use crate::event::*;

/// The first non-comment line.
pub const MAGIC_LINE: &str = "largo-trace";
/// Longest line the reader accepts.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Parses `0x..` hex, decimal, or (for lengths) a size with K/M/G/T.
fn number(tok: &str, sized: bool) -> Result<u64, String> {
    let bad = || format!("'{tok}' is not a number");
    if let Some(hex) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| bad());
    }
    if sized {
        let (digits, shift) = match tok.as_bytes().last() {
            Some(b'K' | b'k') => (&tok[..tok.len() - 1], 10),
            Some(b'M' | b'm') => (&tok[..tok.len() - 1], 20),
            Some(b'G' | b'g') => (&tok[..tok.len() - 1], 30),
            Some(b'T' | b't') => (&tok[..tok.len() - 1], 40),
            _ => (tok, 0),
        };
        let v: u64 = digits.parse().map_err(|_| bad())?;
        return v
            .checked_mul(1 << shift)
            .ok_or_else(|| format!("'{tok}' overflows 64 bits"));
    }
    tok.parse().map_err(|_| bad())
}

fn prot(tok: &str) -> Result<Prot, String> {
    let b = tok.as_bytes();
    if b.len() != 3 || !matches!(b[0], b'r' | b'-') || !matches!(b[1], b'w' | b'-') || !matches!(b[2], b'x' | b'-') {
        return Err(format!("'{tok}' is not a protection like rw- or r-x"));
    }
    Ok(Prot(
        (b[0] == b'r') as u8 | ((b[1] == b'w') as u8) << 1 | ((b[2] == b'x') as u8) << 2,
    ))
}

fn prot_text(p: Prot) -> String {
    let c = |bit, ch| if p.0 & bit != 0 { ch } else { '-' };
    [c(Prot::READ, 'r'), c(Prot::WRITE, 'w'), c(Prot::EXEC, 'x')]
        .iter()
        .collect()
}

fn map_flags(tok: &str) -> Result<MapFlags, String> {
    if tok.starts_with("0x") {
        return number(tok, false).and_then(|v| {
            u32::try_from(v)
                .map(MapFlags)
                .map_err(|_| format!("'{tok}' is too large"))
        });
    }
    let mut f = 0;
    for name in tok.split(',') {
        let bit = MapFlags::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| format!("unknown mmap flag '{name}'"))?;
        f |= bit;
    }
    Ok(MapFlags(f))
}

fn map_flags_text(f: MapFlags) -> String {
    let mut names: Vec<&str> = MapFlags::NAMES
        .iter()
        .filter(|(_, b)| f.0 & b == *b)
        .map(|(n, _)| *n)
        .collect();
    let known: u32 = MapFlags::NAMES.iter().map(|(_, b)| b).fold(0, |a, b| a | b);
    if f.0 & !known != 0 || names.is_empty() {
        return format!("{:#x}", f.0);
    }
    names.dedup();
    names.join(",")
}

fn advice(tok: &str) -> Result<u32, String> {
    if let Some((_, v)) = ADVICE_NAMES.iter().find(|(n, _)| *n == tok) {
        return Ok(*v);
    }
    number(tok, false).and_then(|v| u32::try_from(v).map_err(|_| format!("advice '{tok}' is too large")))
}

fn advice_text(a: u32) -> String {
    ADVICE_NAMES
        .iter()
        .find(|(_, v)| *v == a)
        .map_or_else(|| a.to_string(), |(n, _)| n.to_string())
}

fn rw(tok: &str) -> Result<bool, String> {
    match tok {
        "r" => Ok(false),
        "w" => Ok(true),
        _ => Err(format!("'{tok}' is not r or w")),
    }
}

fn lookup<T: Copy>(tok: &str, names: &[(&str, T)], what: &str) -> Result<T, String> {
    names.iter().find(|(n, _)| *n == tok).map(|(_, v)| *v).ok_or_else(|| {
        let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        format!("unknown {what} '{tok}': expected {}", all.join(", "))
    })
}

/// Parses one event line (without comment).
fn event(toks: &[&str]) -> Result<Event, String> {
    if toks[0] == "tick" {
        let [_, ns] = toks else {
            return Err("tick takes one argument: NS".into());
        };
        return Ok(Event::Tick { ns: number(ns, false)? });
    }
    let pid: TracePid = toks[0]
        .parse()
        .map_err(|_| format!("'{}' is not a pid or 'tick'", toks[0]))?;
    let verb = *toks.get(1).ok_or("a pid needs a verb after it")?;
    let args = &toks[2..];
    let want = |n: usize, usage: &str| -> Result<(), String> {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("{verb} takes {n} argument(s): {usage}"))
        }
    };
    let addr = |i: usize| number(args[i], false);
    let len = |i: usize| number(args[i], true);
    Ok(match verb {
        "exec" => {
            want(0, "")?;
            Event::Exec { pid }
        }
        "vma" => {
            want(4, "START END PERMS KIND")?;
            let perms = args[2];
            if perms.len() != 4 || !perms.is_ascii() {
                return Err(format!("'{perms}' is not permissions like rw-p"));
            }
            let (start, end) = (addr(0)?, addr(1)?);
            if end < start {
                return Err("vma END is below START".into());
            }
            Event::Vma {
                pid,
                start,
                end,
                prot: prot(&perms[..3])?,
                kind: lookup(args[3], VmaKind::NAMES, "vma kind")?,
            }
        }
        "brk_start" => {
            want(1, "ADDR")?;
            Event::BrkStart { pid, addr: addr(0)? }
        }
        "mmap" => {
            want(4, "ADDR LEN PROT FLAGS")?;
            Event::Mmap {
                pid,
                addr: addr(0)?,
                len: len(1)?,
                prot: prot(args[2])?,
                flags: map_flags(args[3])?,
            }
        }
        "munmap" => {
            want(2, "ADDR LEN")?;
            Event::Munmap {
                pid,
                addr: addr(0)?,
                len: len(1)?,
            }
        }
        "mremap" => {
            want(4, "OLD_ADDR OLD_LEN NEW_ADDR NEW_LEN")?;
            Event::Mremap {
                pid,
                old_addr: addr(0)?,
                old_len: len(1)?,
                new_addr: addr(2)?,
                new_len: len(3)?,
            }
        }
        "mprotect" => {
            want(3, "ADDR LEN PROT")?;
            Event::Mprotect {
                pid,
                addr: addr(0)?,
                len: len(1)?,
                prot: prot(args[2])?,
            }
        }
        "madvise" => {
            want(3, "ADDR LEN ADVICE")?;
            Event::Madvise {
                pid,
                addr: addr(0)?,
                len: len(1)?,
                advice: advice(args[2])?,
            }
        }
        "brk" => {
            want(1, "ADDR")?;
            Event::Brk { pid, addr: addr(0)? }
        }
        "fault" => {
            want(2, "ADDR r|w")?;
            Event::Fault {
                pid,
                addr: addr(0)?,
                write: rw(args[1])?,
            }
        }
        "exec_page" => {
            want(1, "ADDR")?;
            Event::ExecPage { pid, addr: addr(0)? }
        }
        "touch" => {
            want(3, "ADDR LEN r|w")?;
            Event::Touch {
                pid,
                addr: addr(0)?,
                len: len(1)?,
                write: rw(args[2])?,
            }
        }
        "clone" => {
            want(2, "CHILD process|thread|vfork")?;
            Event::Clone {
                pid,
                child: args[0].parse().map_err(|_| format!("'{}' is not a pid", args[0]))?,
                kind: lookup(args[1], CloneKind::NAMES, "clone kind")?,
            }
        }
        "exit" => {
            want(0, "")?;
            Event::Exit { pid }
        }
        "prctl_thp_disable" => {
            want(1, "0|1|except_advised")?;
            Event::PrctlThpDisable {
                pid,
                mode: lookup(args[0], ThpDisableMode::NAMES, "THP disable mode")?,
            }
        }
        "drop_caches" => {
            want(1, "MODE")?;
            let mode = number(args[0], false)?;
            if !(1..=3).contains(&mode) {
                return Err("drop_caches MODE is 1, 2 or 3".into());
            }
            Event::DropCaches { pid, mode: mode as u8 }
        }
        "move_pages" => {
            want(3, "ADDR LEN NODE")?;
            let node = number(args[2], false)?;
            Event::MovePages {
                pid,
                addr: addr(0)?,
                len: len(1)?,
                node: u32::try_from(node).map_err(|_| format!("node {node} is too large"))?,
            }
        }
        v if MemoryOp::from_verb(v).is_some() => {
            want(1, "BLOCK")?;
            Event::MemoryBlock {
                pid,
                block: number(args[0], false)?,
                op: MemoryOp::from_verb(v).expect("checked"),
            }
        }
        other => return Err(format!("unknown event '{other}'")),
    })
}

/// Streams a text trace: the header first, then events one at a time.
pub struct TextReader<R> {
    input: R,
    line_no: u64,
    buf: Vec<u8>,
    header: Header,
    /// A first event read while finishing the header.
    pending: Option<Event>,
    done: bool,
}

impl<R: BufRead> TextReader<R> {
    /// Reads the magic line and the `@` header lines.
    pub fn new(input: R) -> Result<TextReader<R>, TraceError> {
        let mut r = TextReader {
            input,
            line_no: 0,
            buf: Vec::new(),
            header: Header::new(),
            pending: None,
            done: false,
        };
        let first = r
            .next_tokens()?
            .ok_or_else(|| TraceError::at(Location::Line(r.line_no.max(1)), "empty trace"))?;
        match first.as_slice() {
            [m, v] if m == MAGIC_LINE => {
                let version: u32 = v
                    .parse()
                    .map_err(|_| TraceError::at(Location::Line(r.line_no), format!("bad version '{v}'")))?;
                if version != FORMAT_VERSION {
                    return Err(TraceError::at(
                        Location::Line(r.line_no),
                        format!("format version {version}; this largo reads version {FORMAT_VERSION}"),
                    ));
                }
                r.header.version = version;
            }
            _ => {
                return Err(TraceError::at(
                    Location::Line(r.line_no),
                    format!("expected '{MAGIC_LINE} {FORMAT_VERSION}' first"),
                ))
            }
        }
        loop {
            let Some(toks) = r.next_tokens()? else {
                r.done = true;
                break;
            };
            if let Some(key) = toks[0].strip_prefix('@') {
                if key.is_empty() {
                    return Err(TraceError::at(Location::Line(r.line_no), "'@' needs a key"));
                }
                r.header.fields.push((key.to_string(), toks[1..].join(" ")));
                continue;
            }
            let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
            r.pending = Some(event(&refs).map_err(|e| TraceError::at(Location::Line(r.line_no), e))?);
            break;
        }
        Ok(r)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The line of the last record read.
    pub fn line(&self) -> u64 {
        self.line_no
    }

    /// The next non-blank, non-comment line split into tokens.
    fn next_tokens(&mut self) -> Result<Option<Vec<String>>, TraceError> {
        loop {
            self.buf.clear();
            let n = self
                .input
                .by_ref()
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| TraceError::at(Location::Line(self.line_no + 1), format!("cannot read: {e}")))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            if self.buf.len() > MAX_LINE_BYTES {
                return Err(TraceError::at(
                    Location::Line(self.line_no),
                    format!("line longer than {MAX_LINE_BYTES} bytes"),
                ));
            }
            let line = std::str::from_utf8(&self.buf)
                .map_err(|_| TraceError::at(Location::Line(self.line_no), "the line is not UTF-8 text"))?;
            let content = line.split('#').next().unwrap_or("");
            let toks: Vec<String> = content.split_whitespace().map(str::to_string).collect();
            if !toks.is_empty() {
                return Ok(Some(toks));
            }
        }
    }

    fn read_event(&mut self) -> Result<Option<Event>, TraceError> {
        if let Some(e) = self.pending.take() {
            return Ok(Some(e));
        }
        if self.done {
            return Ok(None);
        }
        let Some(toks) = self.next_tokens()? else {
            self.done = true;
            return Ok(None);
        };
        if toks[0].starts_with('@') {
            return Err(TraceError::at(
                Location::Line(self.line_no),
                "header lines must come before the first event",
            ));
        }
        let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
        event(&refs)
            .map(Some)
            .map_err(|e| TraceError::at(Location::Line(self.line_no), e))
    }
}

impl<R: BufRead> Iterator for TextReader<R> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.read_event() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                self.pending = None;
                Some(Err(e))
            }
        }
    }
}

/// A length as the writer prints it: with a suffix when exact.
fn len_text(v: u64) -> String {
    for (suffix, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if v >= 1 << shift && v.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", v >> shift);
        }
    }
    v.to_string()
}

/// One event as a line (without newline).
pub fn event_line(e: &Event) -> String {
    use Event::*;
    match *e {
        Exec { pid } => format!("{pid} exec"),
        Vma {
            pid,
            start,
            end,
            prot,
            kind,
        } => format!("{pid} vma {start:#x} {end:#x} {}p {}", prot_text(prot), kind.name()),
        BrkStart { pid, addr } => format!("{pid} brk_start {addr:#x}"),
        Mmap {
            pid,
            addr,
            len,
            prot,
            flags,
        } => format!(
            "{pid} mmap {addr:#x} {} {} {}",
            len_text(len),
            prot_text(prot),
            map_flags_text(flags)
        ),
        Munmap { pid, addr, len } => format!("{pid} munmap {addr:#x} {}", len_text(len)),
        Mremap {
            pid,
            old_addr,
            old_len,
            new_addr,
            new_len,
        } => format!(
            "{pid} mremap {old_addr:#x} {} {new_addr:#x} {}",
            len_text(old_len),
            len_text(new_len)
        ),
        Mprotect { pid, addr, len, prot } => format!("{pid} mprotect {addr:#x} {} {}", len_text(len), prot_text(prot)),
        Madvise { pid, addr, len, advice } => {
            format!("{pid} madvise {addr:#x} {} {}", len_text(len), advice_text(advice))
        }
        Brk { pid, addr } => format!("{pid} brk {addr:#x}"),
        Fault { pid, addr, write } => format!("{pid} fault {addr:#x} {}", if write { "w" } else { "r" }),
        ExecPage { pid, addr } => format!("{pid} exec_page {addr:#x}"),
        Touch { pid, addr, len, write } => {
            format!(
                "{pid} touch {addr:#x} {} {}",
                len_text(len),
                if write { "w" } else { "r" }
            )
        }
        Clone { pid, child, kind } => format!("{pid} clone {child} {}", kind.name()),
        Exit { pid } => format!("{pid} exit"),
        PrctlThpDisable { pid, mode } => format!("{pid} prctl_thp_disable {}", mode.name()),
        DropCaches { pid, mode } => format!("{pid} drop_caches {mode}"),
        Tick { ns } => format!("tick {ns}"),
        MovePages { pid, addr, len, node } => format!("{pid} move_pages {addr:#x} {} {node}", len_text(len)),
        MemoryBlock { pid, block, op } => format!("{pid} {} {block}", op.verb()),
    }
}

/// Writes a trace in the text encoding.
pub fn write_text(
    out: &mut dyn Write,
    header: &Header,
    events: impl IntoIterator<Item = Event>,
) -> std::io::Result<()> {
    writeln!(out, "{MAGIC_LINE} {}", header.version.max(FORMAT_VERSION))?;
    for (k, v) in &header.fields {
        // A value is one line, and '#' would start a comment.
        let v: String = v.chars().map(|c| if c == '\n' || c == '#' { ' ' } else { c }).collect();
        writeln!(out, "@{k} {}", v.trim())?;
    }
    for e in events {
        writeln!(out, "{}", event_line(&e))?;
    }
    Ok(())
}
