//! The binary trace reader (and the gzip and format sniffing in front of
//! it) on arbitrary bytes: no panic, bounded memory.
#![no_main]

use largo_trace::binary::BinaryReader;
use largo_trace::Reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = BinaryReader::new(std::io::Cursor::new(data)) {
        for event in reader {
            if event.is_err() {
                break;
            }
        }
    }
    if let Ok(reader) = Reader::from_bytes(data.to_vec()) {
        for event in reader {
            if event.is_err() {
                break;
            }
        }
    }
});
