//! Traces of real programs recorded with `largo record` on a Linux 6.18
//! host, shipped with largo (`traces/`, how each was made in
//! `traces/README.md`) and part of `largo run`'s default suite.

use largo_trace::Trace;

/// One recorded program.
#[derive(Debug)]
pub struct Recorded {
    /// The workload name (`largo run lua-build`).
    pub name: &'static str,
    pub summary: &'static str,
    /// The trace file (binary, gzip-compressed).
    bytes: &'static [u8],
}

impl Recorded {
    /// The decoded trace. The bytes are checked by a test, so decoding
    /// cannot fail at run time.
    pub fn trace(&self) -> Trace {
        largo_trace::parse_bytes(self.bytes).expect("the shipped traces decode (tested)")
    }

    /// Where event `index` is (its byte in the decompressed trace).
    pub fn locate(&self, index: u64) -> Option<largo_trace::Location> {
        let reader = largo_trace::Reader::from_bytes(self.bytes.to_vec()).ok()?;
        largo_trace::file::locate_in(reader, index).ok().flatten()
    }
}

pub const RECORDED: &[Recorded] = &[
    Recorded {
        name: "lua-build",
        summary: "gcc -O2 -c of the 32 C files of Lua 5.4.7 (crates.io lua-src 547.1.0): 65 program images",
        bytes: include_bytes!("../traces/lua-build.ltb.gz"),
    },
    Recorded {
        name: "sqlite-cc",
        summary: "gcc -O0 -c sqlite3.c, the 9 MB SQLite amalgamation (crates.io libsqlite3-sys 0.30.1)",
        bytes: include_bytes!("../traces/sqlite-cc.ltb.gz"),
    },
    Recorded {
        name: "python-compileall",
        summary: "CPython 3.11.7 byte-compiling its own standard library (python -m compileall -f)",
        bytes: include_bytes!("../traces/python-compileall.ltb.gz"),
    },
];

/// The recorded program called `name`.
pub fn find(name: &str) -> Option<&'static Recorded> {
    RECORDED.iter().find(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_trace_decodes_and_says_how_it_was_made() {
        for r in RECORDED {
            let t = r.trace();
            assert!(t.events.len() > 5_000, "{}: {} events", r.name, t.events.len());
            assert_eq!(t.header.get("page_size"), Some("4096"), "{}", r.name);
            assert!(t.header.get("command").is_some(), "{}", r.name);
            assert_eq!(t.header.get("lost_events"), Some("0"), "{}", r.name);
        }
    }
}
