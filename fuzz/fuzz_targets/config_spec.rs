//! `--config NAME:FLAGS` values on arbitrary bytes: a typed spec (and a
//! machine configuration) or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    largo_cli::config::fuzz_config_spec(data);
});
