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

use crate::error::{Location, RecordError, TraceError};
use crate::event::*;

/// The first non-comment line.
pub const MAGIC_LINE: &str = "largo-trace";
/// Longest line the reader accepts.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Parses one event line (without comment): `PID VERB ARGS...`, or
/// `VERB ARGS...` for events of no process (`tick`).
fn event(toks: &[&str]) -> Result<Event, RecordError> {
    let (pid, verb, args) = match toks[0].parse::<TracePid>() {
        Ok(pid) => {
            let verb = *toks.get(1).ok_or(RecordError::NeedsVerb)?;
            (Some(pid), verb, &toks[2..])
        }
        Err(_) if toks[0].bytes().all(|b| b.is_ascii_digit()) => return Err(RecordError::NotAPid(toks[0].into())),
        Err(_) => (None, toks[0], &toks[1..]),
    };
    let e = Event::from_text(verb, pid, args)?;
    e.check()?;
    Ok(e)
}

/// Streams a text trace: the header first, then events one at a time.
pub struct TextReader<R> {
    input: R,
    line_no: u64,
    buf: Vec<u8>,
    header: Header,
    /// A first event read while finishing the header, and its line.
    pending: Option<(Event, u64)>,
    /// The line of the last event returned.
    event_line: u64,
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
            event_line: 0,
            done: false,
        };
        let Some(first) = r.next_tokens()? else {
            r.line_no = r.line_no.max(1);
            return Err(r.bad(RecordError::Empty));
        };
        match first.as_slice() {
            [m, v] if m == MAGIC_LINE => {
                let version: u64 = v.parse().map_err(|_| r.bad(RecordError::BadVersion(v.clone())))?;
                if version != TEXT_VERSION as u64 {
                    return Err(r.bad(RecordError::Version {
                        encoding: "text",
                        found: version,
                        supported: TEXT_VERSION,
                    }));
                }
            }
            _ => {
                return Err(r.bad(RecordError::NoMagicLine {
                    magic: MAGIC_LINE,
                    version: TEXT_VERSION,
                }))
            }
        }
        loop {
            let Some(toks) = r.next_tokens()? else {
                r.done = true;
                break;
            };
            if let Some(key) = toks[0].strip_prefix('@') {
                if key.is_empty() {
                    return Err(r.bad(RecordError::HeaderKeyEmpty));
                }
                r.header.fields.push((key.to_string(), toks[1..].join(" ")));
                continue;
            }
            let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
            let e = event(&refs).map_err(|e| r.bad(e))?;
            r.pending = Some((e, r.line_no));
            break;
        }
        Ok(r)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The line of the last event returned.
    pub fn line(&self) -> u64 {
        self.event_line
    }

    /// An error at the line read last.
    fn bad(&self, reason: RecordError) -> TraceError {
        TraceError::at(Location::Line(self.line_no), reason)
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
                .map_err(|e| TraceError::at(Location::Line(self.line_no + 1), RecordError::Read(e.to_string())))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            if self.buf.len() > MAX_LINE_BYTES {
                return Err(self.bad(RecordError::LineTooLong(MAX_LINE_BYTES)));
            }
            let line = std::str::from_utf8(&self.buf).map_err(|_| self.bad(RecordError::LineNotUtf8))?;
            let content = line.split('#').next().unwrap_or("");
            let toks: Vec<String> = content.split_whitespace().map(str::to_string).collect();
            if !toks.is_empty() {
                return Ok(Some(toks));
            }
        }
    }

    fn read_event(&mut self) -> Result<Option<Event>, TraceError> {
        if let Some((e, line)) = self.pending.take() {
            self.event_line = line;
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
            return Err(self.bad(RecordError::HeaderAfterEvent));
        }
        let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
        let e = event(&refs).map_err(|e| self.bad(e))?;
        self.event_line = self.line_no;
        Ok(Some(e))
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

/// One event as a line (without newline).
pub fn event_line(e: &Event) -> String {
    let mut line = String::new();
    e.write_text(&mut line);
    line
}

/// Writes a trace in the text encoding.
pub fn write_text(
    out: &mut dyn Write,
    header: &Header,
    events: impl IntoIterator<Item = Event>,
) -> std::io::Result<()> {
    writeln!(out, "{MAGIC_LINE} {TEXT_VERSION}")?;
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
