//! Workload specifications (`NAME:KEY=VALUE,...`) and durations on
//! arbitrary text: a specification or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok((def, spec)) = largo_workloads::builtin::parse(text) {
            // What parses, prints and parses back the same.
            assert_eq!(def.parse(&spec.describe()).as_ref(), Ok(&spec));
        }
        let _ = largo_workloads::spec::parse_duration(text);
        let _ = largo_workloads::policy::thp_knobs(text);
        let _ = largo_workloads::policy::policy_knobs(text);
    }
});
