//! The largo event stream: what the processes of a program did to their
//! memory: the initial layout of each program image, mmap / munmap /
//! mremap / mprotect / madvise / brk with their results, user page faults
//! (address, read or write), clone (process, thread, vfork), exit, the THP
//! prctl, drop_caches, move_pages, memory blocks going offline and online,
//! and the passing of time.
//!
//! Every event is defined once, in the event table of [`event`]: its text
//! verb, binary tag and fields with their codecs. From the table come the
//! `Event` enum, both encodings and the [`EventHandler`] trait through
//! which the model replay and the native host runner apply events.
//!
//! Two encodings: [`text`] (one event per line, comments, hand-writable;
//! the scenario suite is written in it) and [`binary`] (a tag byte and
//! varints per event, addresses delta-coded; for long recordings,
//! optionally gzip-compressed). Readers stream, never allocate more than a
//! record needs, and report the line or byte offset and the reason of a
//! malformed record.

pub mod binary;
pub mod codec;
pub mod error;
pub mod event;
pub mod file;
mod macros;
#[cfg(test)]
mod roundtrip;
pub mod text;

pub use codec::Named;
pub use error::{Location, RecordError, TraceError};
pub use event::*;
pub use file::{locate, parse_bytes, read_trace, write_to, write_trace, Reader};
