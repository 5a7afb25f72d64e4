//! Errors of the trace readers, with where the record is.

use std::fmt;

/// Where in the input a record starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of the text encoding.
    Line(u64),
    /// Byte offset in the (decompressed) binary encoding.
    Byte(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Byte(n) => write!(f, "byte {n}"),
        }
    }
}

/// What is wrong with a record (or the framing around it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("'{0}' is not a number")]
    NotANumber(String),
    #[error("'{0}' overflows 64 bits")]
    Overflow(String),
    #[error("{what} {value} is too large")]
    TooLarge { what: &'static str, value: u64 },
    #[error("'{0}' is not a pid")]
    NotAPid(String),
    #[error("'{0}' is not a protection like rw- or r-x")]
    BadProt(String),
    #[error("'{0}' is not permissions like rw-p")]
    BadPerms(String),
    #[error("unknown mmap flag '{0}'")]
    UnknownFlag(String),
    #[error("'{0}' is not r or w")]
    BadAccess(String),
    #[error("unknown {what} '{name}': expected {expected}")]
    UnknownName {
        what: &'static str,
        name: String,
        expected: String,
    },
    #[error("{what} '{value}': expected {expected}")]
    BadValue {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("{what} {value:#x}")]
    BadBits { what: &'static str, value: u64 },
    #[error("{verb} takes {} argument(s): {usage}", .usage.split_whitespace().count())]
    Arity { verb: &'static str, usage: String },
    #[error("unknown event '{0}' (`largo list events` shows them)")]
    UnknownEvent(String),
    #[error("a pid needs a verb after it")]
    NeedsVerb,
    #[error("{0} needs a PID before it")]
    NeedsPid(&'static str),
    #[error("{0} takes no PID")]
    TakesNoPid(&'static str),
    #[error("vma END is below START")]
    VmaEndBelowStart,
    #[error("unknown record tag {0}")]
    UnknownTag(u8),
    #[error("the record is cut short")]
    CutShort,
    #[error("a varint overflows 64 bits")]
    VarintOverflow,
    #[error("cannot read: {0}")]
    Read(String),
    // The framing: magic, version, header.
    #[error("empty trace")]
    Empty,
    #[error("expected '{magic} {version}' first")]
    NoMagicLine { magic: &'static str, version: u32 },
    #[error("too short for a binary trace")]
    TooShort,
    #[error("not a binary largo trace (bad magic)")]
    BadMagic,
    #[error("bad version '{0}'")]
    BadVersion(String),
    #[error("{encoding} format version {found}; this largo reads version {supported}")]
    Version {
        encoding: &'static str,
        found: u64,
        supported: u32,
    },
    #[error("'@' needs a key")]
    HeaderKeyEmpty,
    #[error("header lines must come before the first event")]
    HeaderAfterEvent,
    #[error("a {len}-byte header string (at most {max})")]
    HeaderString { len: u64, max: u64 },
    #[error("{n} header fields (at most {max})")]
    HeaderFields { n: u64, max: u64 },
    #[error("a header string is not UTF-8")]
    HeaderNotUtf8,
    #[error("line longer than {0} bytes")]
    LineTooLong(usize),
    #[error("the line is not UTF-8 text")]
    LineNotUtf8,
}

/// A malformed trace, or a failure to read one.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{location}: {reason}")]
    Malformed { location: Location, reason: RecordError },
    /// The input is not a trace at all (a directory, a `.gz` that is not
    /// gzip, gzip inside gzip).
    #[error("{0}")]
    NotATrace(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl TraceError {
    pub fn at(location: Location, reason: RecordError) -> TraceError {
        TraceError::Malformed { location, reason }
    }

    /// The location, for a malformed record.
    pub fn location(&self) -> Option<Location> {
        match self {
            TraceError::Malformed { location, .. } => Some(*location),
            TraceError::NotATrace(_) | TraceError::Io(_) => None,
        }
    }
}
