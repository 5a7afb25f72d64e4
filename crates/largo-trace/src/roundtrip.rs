//! Property tests over every event of the table: both encodings
//! round-trip, and random or mutated input never panics and every
//! malformed record says where it is. `PROPTEST_CASES=N` changes the
//! number of cases (default 500).

use proptest::prelude::*;

use crate::*;

fn header() -> Header {
    let mut h = Header::new();
    h.set("kernel", "6.18.44-fc");
    h.set("page_size", "4096");
    h.set("command", "gcc -O2 -c sqlite3.c");
    h
}

fn encoded(t: &Trace, binary: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write_to(&mut out, t, binary).unwrap();
    out
}

fn text_bytes(t: &Trace) -> Vec<u8> {
    encoded(t, false)
}

fn binary_bytes(t: &Trace) -> Vec<u8> {
    encoded(t, true)
}

/// Events whose fields relate as the readers require.
fn valid_event() -> impl Strategy<Value = Event> {
    Event::strategy().prop_map(|mut e| {
        if let Event::Vma { start, ref mut end, .. } = e {
            *end = (*end).max(start);
        }
        e
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

#[test]
fn every_event_kind_has_a_unique_verb_and_tag() {
    let mut verbs: Vec<&str> = EVENT_KINDS.iter().map(|k| k.verb).collect();
    let mut tags: Vec<u8> = EVENT_KINDS.iter().map(|k| k.tag).collect();
    verbs.sort_unstable();
    verbs.dedup();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(verbs.len(), EVENT_KINDS.len());
    assert_eq!(tags.len(), EVENT_KINDS.len());
    assert_eq!(
        EventKind::of_verb("mmap").unwrap().usage(),
        "PID mmap ADDR LEN PROT FLAGS"
    );
    assert_eq!(EventKind::of_verb("tick").unwrap().usage(), "tick NS");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn both_encodings_round_trip(events in prop::collection::vec(valid_event(), 0..200)) {
        let t = Trace { header: header(), events };
        prop_assert_eq!(parse_bytes(&text_bytes(&t)).unwrap(), t.clone());
        prop_assert_eq!(parse_bytes(&binary_bytes(&t)).unwrap(), t);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000), binary in any::<bool>()) {
        let mut input = if binary { b"LGOTRACE\x02".to_vec() } else { b"largo-trace 1\n".to_vec() };
        input.extend(bytes);
        let _ = parse_bytes(&input);
    }

    #[test]
    fn mutated_traces_fail_cleanly(events in prop::collection::vec(valid_event(), 1..50), at in any::<prop::sample::Index>(), byte in any::<u8>(), binary in any::<bool>()) {
        let t = Trace { header: header(), events };
        let mut bytes = if binary { binary_bytes(&t) } else { text_bytes(&t) };
        let i = at.index(bytes.len());
        bytes[i] = byte;
        if let Err(e) = parse_bytes(&bytes) {
            // Every malformed record says where it is.
            prop_assert!(e.location().is_some(), "{e}");
        }
    }
}
