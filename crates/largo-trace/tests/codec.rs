//! Malformed input gives an error that names the line or byte; files of
//! every encoding round-trip; v1 binary traces are refused clearly. (The
//! round-trip and never-panic property tests over every event of the
//! table are unit tests of the crate: `src/roundtrip.rs`.)

use largo_trace::*;

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
    let mut huge = b"LGOTRACE\x02\x01\xff\xff\xff\xff\xff\xff\x0f".to_vec();
    huge.extend_from_slice(b"x");
    let e = parse_bytes(&huge).unwrap_err();
    assert!(e.to_string().contains("header string"), "{e}");
    // A pid delta that overflows the previous pid (found by the
    // binary_reader fuzz target) is an error, not an overflow panic.
    let overflow = b"LGOTRACE\x02\x00\x01\x00\x0e\xfa\xff\x00\x01\x00\x0e\xfe\xfe\xff\xff\xff\xff\xff\xff\xff\x01\x00\x0e\xfa\xff\x65\x00\x00\x00\x00\x00\x00";
    let e = parse_bytes(overflow).unwrap_err();
    assert!(e.to_string().contains("pid"), "{e}");
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

#[test]
fn version_1_binary_traces_are_refused_with_the_reason() {
    let e = parse_bytes(b"LGOTRACE\x01\x00\x0f\x01").unwrap_err();
    assert_eq!(e.location(), Some(Location::Byte(8)), "{e}");
    assert!(
        e.to_string()
            .contains("binary format version 1; this largo reads version 2"),
        "{e}"
    );
}

#[test]
fn gzip_inside_gzip_directories_and_fake_gz_files_say_what_they_are() {
    use std::io::Write as _;
    let gz = |bytes: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    };
    let once = gz(b"largo-trace 1\n1 exit\n");
    assert_eq!(parse_bytes(&once).unwrap().events, vec![Event::Exit { pid: 1 }]);
    // Layers upon layers would recurse; one is allowed.
    let mut nested = once.clone();
    for _ in 0..1000 {
        nested = gz(&nested);
    }
    let e = parse_bytes(&nested).unwrap_err();
    assert!(e.to_string().contains("gzip data inside gzip data"), "{e}");
    let dir = std::env::temp_dir().join(format!("largo-trace-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = read_trace(&dir).unwrap_err();
    assert!(e.to_string().contains("is a directory, not a trace file"), "{e}");
    let fake = dir.join("fake.trace.gz");
    std::fs::write(&fake, "largo-trace 1\n1 exit\n").unwrap();
    let e = read_trace(&fake).unwrap_err();
    assert!(e.to_string().contains("is named .gz but is not gzip data"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn events_are_located_by_index() {
    let dir = std::env::temp_dir().join(format!("largo-trace-locate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("t.trace");
    std::fs::write(&text, "largo-trace 1\n@k v\n# c\n1 exit\n\n2 exit # two\n").unwrap();
    assert_eq!(locate(&text, 0).unwrap(), Some(Location::Line(4)));
    assert_eq!(locate(&text, 1).unwrap(), Some(Location::Line(6)));
    assert_eq!(locate(&text, 2).unwrap(), None);
    let bin = dir.join("t.ltb");
    write_trace(&bin, &read_trace(&text).unwrap()).unwrap();
    let first = locate(&bin, 0).unwrap().unwrap();
    let second = locate(&bin, 1).unwrap().unwrap();
    assert!(
        matches!((first, second), (Location::Byte(a), Location::Byte(b)) if b == a + 2),
        "{first:?} {second:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A reader that hands out one byte per read: the decoder never holds ten
/// bytes, so every varint goes byte by byte.
struct OneByte<'a>(&'a [u8]);

impl std::io::Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&b, rest)), Some(slot)) => {
                *slot = b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

/// A tag byte and a varint after it, record after record, until the
/// first error or the end: each value or error with the decoder's input
/// offset after it (the bytes consumed so far).
fn varints(mut dec: codec::Decoder<impl std::io::Read>) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        dec.start_record();
        match dec.byte() {
            Ok(None) => return out,
            Ok(Some(tag)) => out.push(format!("tag {tag} @{}", dec.offset())),
            Err(e) => {
                out.push(format!("{e} @{}", dec.offset()));
                return out;
            }
        }
        match dec.varint() {
            Ok(v) => out.push(format!("{v} @{}", dec.offset())),
            Err(e) => {
                out.push(format!("{e} @{}", dec.offset()));
                return out;
            }
        }
    }
}

proptest::proptest! {
    /// Varints read from a buffer holding ten bytes or more (the decoder's
    /// slice path) give the values, the bytes consumed and the errors
    /// (overflow, cut short) of varints read a byte at a time.
    #[test]
    fn buffered_varints_read_as_byte_by_byte(
        // Runs of continuation bytes (up to twelve: a varint's tenth byte
        // and beyond), each ended by a byte around the tenth byte's limit
        // of 1, or by any byte.
        segments in proptest::collection::vec(
            (0usize..=12, 0x80u8..=0xff, proptest::prop_oneof![0u8..=3, proptest::num::u8::ANY]),
            0..24,
        )
    ) {
        let bytes: Vec<u8> = segments
            .iter()
            .flat_map(|&(run, cont, last)| std::iter::repeat_n(cont, run).chain([last]))
            .collect();
        let buffered = varints(codec::Decoder::new(&bytes[..]));
        let byte_by_byte = varints(codec::Decoder::new(OneByte(&bytes)));
        proptest::prop_assert_eq!(buffered, byte_by_byte);
    }
}
