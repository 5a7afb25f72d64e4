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

/// A malformed trace, or a failure to read one.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{location}: {reason}")]
    Malformed { location: Location, reason: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl TraceError {
    pub fn at(location: Location, reason: impl Into<String>) -> TraceError {
        TraceError::Malformed {
            location,
            reason: reason.into(),
        }
    }

    /// The location, for a malformed record.
    pub fn location(&self) -> Option<Location> {
        match self {
            TraceError::Malformed { location, .. } => Some(*location),
            TraceError::Io(_) => None,
        }
    }
}
