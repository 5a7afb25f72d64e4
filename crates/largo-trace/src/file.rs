//! Trace files: the encoding is recognised from the content (binary
//! magic, gzip, else text) on reading and chosen from the name on writing:
//! `.ltb` binary, `.ltb.gz` gzip-compressed binary, anything else text
//! (`.gz` compresses it).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::binary::{BinaryReader, BinaryWriter, MAGIC};
use crate::error::{Location, TraceError};
use crate::event::{Event, Header, Trace};
use crate::text::{write_text, TextReader};

/// A streaming reader of either encoding.
pub enum Reader {
    Text(TextReader<Box<dyn BufRead>>),
    Binary(BinaryReader<Box<dyn BufRead>>),
}

/// The gzip magic.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

impl Reader {
    /// Recognises the encoding from the first bytes; one gzip layer is
    /// unpacked (gzip inside gzip is refused: a trace is compressed once).
    pub fn new(input: Box<dyn BufRead>) -> Result<Reader, TraceError> {
        let mut input = input;
        if input.fill_buf()?.starts_with(&GZIP_MAGIC) {
            let mut inner: Box<dyn BufRead> = Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(input)));
            if inner.fill_buf()?.starts_with(&GZIP_MAGIC) {
                return Err(TraceError::NotATrace(
                    "gzip data inside gzip data: a trace is compressed once".into(),
                ));
            }
            return Reader::unpacked(inner);
        }
        Reader::unpacked(input)
    }

    fn unpacked(mut input: Box<dyn BufRead>) -> Result<Reader, TraceError> {
        if input.fill_buf()?.starts_with(MAGIC) {
            return Ok(Reader::Binary(BinaryReader::new(input)?));
        }
        Ok(Reader::Text(TextReader::new(input)?))
    }

    /// Opens a trace file; a directory, or a `.gz` file that is not gzip,
    /// is refused with what it is.
    pub fn open(path: &Path) -> Result<Reader, TraceError> {
        if path.is_dir() {
            return Err(TraceError::NotATrace(format!(
                "{} is a directory, not a trace file",
                path.display()
            )));
        }
        let f = File::open(path)?;
        let mut input: Box<dyn BufRead> = Box::new(BufReader::with_capacity(1 << 16, f));
        if path.extension().is_some_and(|e| e == "gz") && !input.fill_buf()?.starts_with(&GZIP_MAGIC) {
            return Err(TraceError::NotATrace(format!(
                "{} is named .gz but is not gzip data",
                path.display()
            )));
        }
        Reader::new(input)
    }

    pub fn from_bytes(bytes: Vec<u8>) -> Result<Reader, TraceError> {
        Reader::new(Box::new(std::io::Cursor::new(bytes)))
    }

    pub fn header(&self) -> &Header {
        match self {
            Reader::Text(r) => r.header(),
            Reader::Binary(r) => r.header(),
        }
    }

    /// Where the last event returned starts.
    pub fn location(&self) -> Location {
        match self {
            Reader::Text(r) => Location::Line(r.line()),
            Reader::Binary(r) => Location::Byte(r.offset()),
        }
    }

    /// Reads every event into memory.
    pub fn read_all(self) -> Result<Trace, TraceError> {
        let header = self.header().clone();
        let events = self.collect::<Result<Vec<Event>, TraceError>>()?;
        Ok(Trace { header, events })
    }
}

/// Where event `index` (0-based) of a trace file starts, read again from
/// the file (for messages about an event; `None` past the end).
pub fn locate(path: &Path, index: u64) -> Result<Option<Location>, TraceError> {
    locate_in(Reader::open(path)?, index)
}

/// Where event `index` (0-based) of a trace starts, read from `r`.
pub fn locate_in(mut r: Reader, index: u64) -> Result<Option<Location>, TraceError> {
    for _ in 0..=index {
        if r.next().transpose()?.is_none() {
            return Ok(None);
        }
    }
    Ok(Some(r.location()))
}

impl Iterator for Reader {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Reader::Text(r) => r.next(),
            Reader::Binary(r) => r.next(),
        }
    }
}

/// Reads a whole trace file.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    Reader::open(path)?.read_all()
}

/// Whether a path names a binary trace (`.ltb` or `.ltb.gz`).
pub fn is_binary_name(path: &Path) -> bool {
    let name = path.to_string_lossy();
    name.ends_with(".ltb") || name.ends_with(".ltb.gz")
}

/// Writes a trace, the encoding chosen from the name.
pub fn write_trace(path: &Path, trace: &Trace) -> std::io::Result<()> {
    let file = BufWriter::with_capacity(1 << 16, File::create(path)?);
    let gz = path.extension().is_some_and(|e| e == "gz");
    let mut out: Box<dyn Write> = if gz {
        Box::new(GzEncoder::new(file, Compression::best()))
    } else {
        Box::new(file)
    };
    write_to(&mut out, trace, is_binary_name(path))?;
    out.flush()
}

/// Writes a trace to a stream in the binary or text encoding.
pub fn write_to(out: &mut dyn Write, trace: &Trace, binary: bool) -> std::io::Result<()> {
    if binary {
        let mut w = BinaryWriter::new(out, &trace.header)?;
        for e in &trace.events {
            w.write(e)?;
        }
        w.finish()?;
        Ok(())
    } else {
        write_text(out, &trace.header, trace.events.iter().copied())
    }
}

/// Reads all of `input` (for tests and fuzzing).
pub fn parse_bytes(bytes: &[u8]) -> Result<Trace, TraceError> {
    Reader::from_bytes(bytes.to_vec())?.read_all()
}
