//! The binary encoding, for long recordings: a magic, the version, the
//! header, then one record per event: its tag byte and its fields in the
//! order of the event table, each written by its codec (varints, with
//! addresses and pids delta-coded), so a run of page faults costs a few
//! bytes each.
//!
//! ```text
//! "LGOTRACE" version:varint nfields:varint (klen:varint k vlen:varint v)*
//! (tag fields*)*
//! ```

use std::io::{Read, Write};

use crate::codec::{Decoder, Encoder};
use crate::error::{RecordError, TraceError};
use crate::event::*;

pub const MAGIC: &[u8; 8] = b"LGOTRACE";
/// Largest header string, and most header fields: a malformed length
/// cannot make the reader allocate more.
pub const MAX_STRING_BYTES: u64 = 1 << 20;
pub const MAX_HEADER_FIELDS: u64 = 4096;
/// Bytes buffered before they are written out.
const FLUSH_BYTES: usize = 64 << 10;

/// Writes the binary encoding.
pub struct BinaryWriter<W: Write> {
    out: W,
    enc: Encoder,
}

impl<W: Write> BinaryWriter<W> {
    pub fn new(mut out: W, header: &Header) -> std::io::Result<BinaryWriter<W>> {
        let mut enc = Encoder::new();
        enc.put_bytes(MAGIC);
        enc.put_varint(BINARY_VERSION as u64);
        enc.put_varint(header.fields.len() as u64);
        for (k, v) in &header.fields {
            for s in [k, v] {
                enc.put_varint(s.len() as u64);
                enc.put_bytes(s.as_bytes());
            }
        }
        out.write_all(&enc.take())?;
        Ok(BinaryWriter { out, enc })
    }

    pub fn write(&mut self, e: &Event) -> std::io::Result<()> {
        e.encode(&mut self.enc);
        if self.enc.len() >= FLUSH_BYTES {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> std::io::Result<()> {
        self.out.write_all(self.enc.bytes())?;
        self.enc.clear();
        Ok(())
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush_buf()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Streams the binary encoding.
pub struct BinaryReader<R> {
    dec: Decoder<R>,
    header: Header,
    done: bool,
}

impl<R: Read> BinaryReader<R> {
    pub fn new(input: R) -> Result<BinaryReader<R>, TraceError> {
        let mut dec = Decoder::new(input);
        let mut magic = [0u8; 8];
        for b in magic.iter_mut() {
            *b = dec.byte()?.ok_or_else(|| dec.bad(RecordError::TooShort))?;
        }
        if &magic != MAGIC {
            return Err(dec.bad(RecordError::BadMagic));
        }
        dec.start_record();
        let version = dec.varint()?;
        if version != BINARY_VERSION as u64 {
            return Err(dec.bad(RecordError::Version {
                encoding: "binary",
                found: version,
                supported: BINARY_VERSION,
            }));
        }
        dec.start_record();
        let n = dec.varint()?;
        if n > MAX_HEADER_FIELDS {
            return Err(dec.bad(RecordError::HeaderFields {
                n,
                max: MAX_HEADER_FIELDS,
            }));
        }
        let mut header = Header::new();
        for _ in 0..n {
            let k = string(&mut dec)?;
            let v = string(&mut dec)?;
            header.fields.push((k, v));
        }
        Ok(BinaryReader {
            dec,
            header,
            done: false,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The byte offset of the last record read.
    pub fn offset(&self) -> u64 {
        self.dec.record()
    }

    fn read_event(&mut self) -> Result<Option<Event>, TraceError> {
        self.dec.start_record();
        let Some(tag) = self.dec.byte()? else { return Ok(None) };
        let e = Event::decode(tag, &mut self.dec)?;
        e.check().map_err(|reason| self.dec.bad(reason))?;
        Ok(Some(e))
    }
}

/// A header string: its length, bounded, then its UTF-8 bytes.
fn string<R: Read>(dec: &mut Decoder<R>) -> Result<String, TraceError> {
    dec.start_record();
    let len = dec.varint()?;
    if len > MAX_STRING_BYTES {
        return Err(dec.bad(RecordError::HeaderString {
            len,
            max: MAX_STRING_BYTES,
        }));
    }
    String::from_utf8(dec.bytes(len)?).map_err(|_| dec.bad(RecordError::HeaderNotUtf8))
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
