//! Sizes with K/M/G/T suffixes on arbitrary text: a size or an error,
//! never a panic or an overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(bytes) = largo_types::parse_size(text) {
            // What parses prints as a size that parses to the same bytes.
            assert_eq!(largo_types::parse_size(&largo_types::format_size(bytes)).ok(), Some(bytes));
        }
    }
});
