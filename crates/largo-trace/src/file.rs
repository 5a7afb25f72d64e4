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
use crate::error::TraceError;
use crate::event::{Event, Header, Trace};
use crate::text::{write_text, TextReader};

/// A streaming reader of either encoding.
pub enum Reader {
    Text(TextReader<Box<dyn BufRead>>),
    Binary(BinaryReader<Box<dyn BufRead>>),
}

impl Reader {
    /// Recognises the encoding from the first bytes (gzip is unpacked).
    pub fn new(input: Box<dyn BufRead>) -> Result<Reader, TraceError> {
        let mut input = input;
        let head = input.fill_buf()?.to_vec();
        if head.starts_with(&[0x1f, 0x8b]) {
            let inner: Box<dyn BufRead> = Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(input)));
            return Reader::new(inner);
        }
        if head.starts_with(MAGIC) {
            return Ok(Reader::Binary(BinaryReader::new(input)?));
        }
        Ok(Reader::Text(TextReader::new(input)?))
    }

    pub fn open(path: &Path) -> Result<Reader, TraceError> {
        let f = File::open(path)?;
        Reader::new(Box::new(BufReader::with_capacity(1 << 16, f)))
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

    /// Reads every event into memory.
    pub fn read_all(self) -> Result<Trace, TraceError> {
        let header = self.header().clone();
        let events = self.collect::<Result<Vec<Event>, TraceError>>()?;
        Ok(Trace { header, events })
    }
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
