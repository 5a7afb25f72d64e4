//! The text trace reader on arbitrary bytes: no panic, bounded memory.
#![no_main]

use largo_trace::text::TextReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = TextReader::new(std::io::Cursor::new(data)) {
        for event in reader {
            if event.is_err() {
                break;
            }
        }
    }
});
