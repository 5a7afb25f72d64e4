//! Both encodings round-trip every event; malformed input gives an error
//! that names the line or byte; random and mutated input never panics.
//!
//! `PROPTEST_CASES=N` changes the number of cases (default 500).

use largo_trace::binary::BinaryWriter;
use largo_trace::text::write_text;
use largo_trace::*;
use proptest::prelude::*;

fn arb_prot() -> impl Strategy<Value = Prot> {
    (0u8..8).prop_map(Prot)
}

fn arb_event() -> impl Strategy<Value = Event> {
    let pid = 1u32..70000;
    let addr = prop_oneof![any::<u64>(), 0x7f00_0000_0000u64..0x7f00_1000_0000];
    let len = prop_oneof![1u64..(1 << 30), Just(2 << 20), any::<u64>()];
    prop_oneof![
        pid.clone().prop_map(|pid| Event::Exec { pid }),
        (pid.clone(), addr.clone(), 0u64..(1 << 40), arb_prot(), 0usize..5).prop_map(|(pid, start, n, prot, k)| {
            Event::Vma {
                pid,
                start,
                end: start.saturating_add(n),
                prot,
                kind: VmaKind::NAMES[k].1,
            }
        }),
        (pid.clone(), addr.clone()).prop_map(|(pid, addr)| Event::BrkStart { pid, addr }),
        (pid.clone(), addr.clone(), len.clone(), arb_prot(), any::<u32>()).prop_map(|(pid, addr, len, prot, f)| {
            Event::Mmap {
                pid,
                addr,
                len,
                prot,
                flags: MapFlags(f),
            }
        }),
        (pid.clone(), addr.clone(), len.clone()).prop_map(|(pid, addr, len)| Event::Munmap { pid, addr, len }),
        (pid.clone(), addr.clone(), len.clone(), addr.clone(), len.clone()).prop_map(|(pid, a, l, b, m)| {
            Event::Mremap {
                pid,
                old_addr: a,
                old_len: l,
                new_addr: b,
                new_len: m,
            }
        }),
        (pid.clone(), addr.clone(), len.clone(), arb_prot()).prop_map(|(pid, addr, len, prot)| Event::Mprotect {
            pid,
            addr,
            len,
            prot
        }),
        (pid.clone(), addr.clone(), len.clone(), any::<u32>()).prop_map(|(pid, addr, len, advice)| Event::Madvise {
            pid,
            addr,
            len,
            advice
        }),
        (pid.clone(), addr.clone()).prop_map(|(pid, addr)| Event::Brk { pid, addr }),
        (pid.clone(), addr.clone(), any::<bool>()).prop_map(|(pid, addr, write)| Event::Fault { pid, addr, write }),
        (pid.clone(), addr.clone()).prop_map(|(pid, addr)| Event::ExecPage { pid, addr }),
        (pid.clone(), addr.clone(), len.clone(), any::<bool>()).prop_map(|(pid, addr, len, write)| Event::Touch {
            pid,
            addr,
            len,
            write
        }),
        (pid.clone(), pid.clone(), 0usize..3).prop_map(|(pid, child, k)| Event::Clone {
            pid,
            child,
            kind: CloneKind::NAMES[k].1
        }),
        pid.clone().prop_map(|pid| Event::Exit { pid }),
        (pid.clone(), 0usize..3).prop_map(|(pid, m)| Event::PrctlThpDisable {
            pid,
            mode: ThpDisableMode::NAMES[m].1
        }),
        (pid.clone(), 1u8..4).prop_map(|(pid, mode)| Event::DropCaches { pid, mode }),
        (pid.clone(), any::<u64>(), 0usize..5).prop_map(|(pid, block, k)| Event::MemoryBlock {
            pid,
            block,
            op: MemoryOp::ALL[k].0
        }),
        (pid, any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(pid, addr, len, node)| Event::MovePages {
            pid,
            addr,
            len,
            node
        }),
        any::<u64>().prop_map(|ns| Event::Tick { ns }),
    ]
}

fn header() -> Header {
    let mut h = Header::new();
    h.set("kernel", "6.18.44-fc");
    h.set("page_size", "4096");
    h.set("command", "gcc -O2 -c sqlite3.c");
    h
}

fn text_bytes(t: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    write_text(&mut out, &t.header, t.events.iter().copied()).unwrap();
    out
}

fn binary_bytes(t: &Trace) -> Vec<u8> {
    let mut w = BinaryWriter::new(Vec::new(), &t.header).unwrap();
    for e in &t.events {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn both_encodings_round_trip(events in prop::collection::vec(arb_event(), 0..200)) {
        let t = Trace { header: header(), events };
        prop_assert_eq!(parse_bytes(&text_bytes(&t)).unwrap(), t.clone());
        prop_assert_eq!(parse_bytes(&binary_bytes(&t)).unwrap(), t);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000), binary in any::<bool>()) {
        let mut input = if binary { b"LGOTRACE\x01".to_vec() } else { b"largo-trace 1\n".to_vec() };
        input.extend(bytes);
        let _ = parse_bytes(&input);
    }

    #[test]
    fn mutated_traces_fail_cleanly(events in prop::collection::vec(arb_event(), 1..50), at in any::<prop::sample::Index>(), byte in any::<u8>(), binary in any::<bool>()) {
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

#[test]
fn text_errors_name_the_line_and_the_reason() {
    let cases = [
        (
            "largo-trace 1\n100 mmap 0x1000 4K rw- private,anonymous\n100 mmap 0x2000 4K rwz private\n",
            3,
            "rwz",
        ),
        (
            "largo-trace 1\n@kernel 6.18\n\n# c\n100 fault 0x1000 x\n",
            5,
            "'x' is not r or w",
        ),
        ("largo-trace 1\n100 explode\n", 2, "unknown event 'explode'"),
        ("largo-trace 1\n100 munmap 0x1000\n", 2, "munmap takes 2 argument(s)"),
        (
            "largo-trace 1\n100 clone 7 fission\n",
            2,
            "expected process, thread, vfork",
        ),
        ("largo-trace 1\n100 exit\n@late header\n", 3, "before the first event"),
        ("largo-trace 2\n", 1, "format version 2"),
        ("hello\n", 1, "expected 'largo-trace 1' first"),
        (
            "largo-trace 1\n100 mmap 0x1000 99999999999999999999T rw- private\n",
            2,
            "not a number",
        ),
        // Found by cargo fuzz: a multi-byte character in the permissions.
        ("largo-trace 1\n100 vma 0x1000 0x2000 râp anon\n", 2, "not permissions"),
    ];
    for (text, line, needle) in cases {
        let e = parse_bytes(text.as_bytes()).unwrap_err();
        assert_eq!(e.location(), Some(Location::Line(line)), "{text:?}: {e}");
        assert!(e.to_string().contains(needle), "{text:?}: {e}");
        assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
    }
}

#[test]
fn binary_errors_name_the_byte_and_the_reason() {
    let t = Trace {
        header: header(),
        events: vec![
            Event::Fault {
                pid: 1,
                addr: 0x1000,
                write: true,
            },
            Event::Exit { pid: 1 },
        ],
    };
    let bytes = binary_bytes(&t);
    let cut = &bytes[..bytes.len() - 1];
    let e = parse_bytes(cut).unwrap_err();
    assert!(matches!(e.location(), Some(Location::Byte(_))), "{e}");
    assert!(e.to_string().contains("cut short"), "{e}");
    let mut bad = bytes.clone();
    let last = bad.len() - 2;
    bad[last] = 0xee;
    let e = parse_bytes(&bad).unwrap_err();
    assert_eq!(e.location(), Some(Location::Byte(last as u64)), "{e}");
    assert!(e.to_string().contains("unknown record tag 238"), "{e}");
    // A header string claiming a terabyte is refused, not allocated.
    let mut huge = b"LGOTRACE\x01\x01\xff\xff\xff\xff\xff\xff\x0f".to_vec();
    huge.extend_from_slice(b"x");
    let e = parse_bytes(&huge).unwrap_err();
    assert!(e.to_string().contains("header string"), "{e}");
}

#[test]
fn compressed_files_and_the_binary_encoding_are_small() {
    let events: Vec<Event> = (0..10_000u64)
        .map(|i| Event::Fault {
            pid: 4242,
            addr: 0x7f00_0000_0000 + i * 4096,
            write: i % 3 != 0,
        })
        .collect();
    let t = Trace {
        header: header(),
        events,
    };
    let text = text_bytes(&t).len();
    let binary = binary_bytes(&t).len();
    assert!(binary * 5 < text, "binary {binary} bytes vs text {text}");
    let dir = std::env::temp_dir().join(format!("largo-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["t.trace", "t.trace.gz", "t.ltb", "t.ltb.gz"] {
        let p = dir.join(name);
        write_trace(&p, &t).unwrap();
        assert_eq!(read_trace(&p).unwrap(), t, "{name}");
    }
    let gz = std::fs::metadata(dir.join("t.ltb.gz")).unwrap().len() as usize;
    assert!(gz < binary, "gzip {gz} vs binary {binary}");
    std::fs::remove_dir_all(&dir).unwrap();
}
