//! Knob writes (`KNOB=VALUE`) on arbitrary text, applied to a small
//! machine: a write or the kernel's refusal, never a panic, and the
//! machine's invariants hold after every accepted write.
#![no_main]

use largo_mm::{Machine, MachineConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut m = Machine::new(MachineConfig {
        mem_bytes: 64 << 20,
        kernel_reserved_bytes: 1 << 20,
        ..MachineConfig::default()
    })
    .expect("a small machine boots");
    for line in text.lines() {
        if let Ok((path, value)) = largo_mm::knobs::parse_assignment(line) {
            if m.set_knob(&path, &value).is_ok() {
                m.check().expect("invariants after a knob write");
            }
        }
    }
});
