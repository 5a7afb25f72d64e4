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
    /// The directory the program was recorded in and runs in natively.
    pub cwd: &'static str,
    /// The command, as recorded (`scripts/recorded-programs.sh` runs the
    /// same).
    pub argv: &'static [&'static str],
    /// Files the command reads, which must exist for a native run
    /// (`scripts/recorded-programs.sh inputs` prepares them).
    pub inputs: &'static [&'static str],
    /// In `largo run`'s default suite.
    pub default_suite: bool,
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

/// The interpreter the Python programs were recorded with (a pyenv build).
const PYTHON: &str = "/root/.pyenv/versions/3.11.7/bin/python3.11";
/// Where the generated inputs of the compressor, sort and interpreter
/// programs live (`scripts/recorded-programs.sh corpus-inputs`).
const CORPUS: &str = "/tmp/largo-corpus";

pub const RECORDED: &[Recorded] = &[
    Recorded {
        name: "lua-build",
        cwd: "/tmp/luabuild",
        argv: &[
            "gcc",
            "-O2",
            "-c",
            "lapi.c",
            "lauxlib.c",
            "lbaselib.c",
            "lcode.c",
            "lcorolib.c",
            "lctype.c",
            "ldblib.c",
            "ldebug.c",
            "ldo.c",
            "ldump.c",
            "lfunc.c",
            "lgc.c",
            "linit.c",
            "liolib.c",
            "llex.c",
            "lmathlib.c",
            "lmem.c",
            "loadlib.c",
            "lobject.c",
            "lopcodes.c",
            "loslib.c",
            "lparser.c",
            "lstate.c",
            "lstring.c",
            "lstrlib.c",
            "ltable.c",
            "ltablib.c",
            "ltm.c",
            "lundump.c",
            "lutf8lib.c",
            "lvm.c",
            "lzio.c",
        ],
        inputs: &["/tmp/luabuild/lvm.c"],
        summary: "gcc -O2 -c of the 32 C files of Lua 5.4.7 (crates.io lua-src 547.1.0): 65 program images",
        default_suite: true,
        bytes: include_bytes!("../traces/lua-build.ltb.gz"),
    },
    Recorded {
        name: "sqlite-cc",
        cwd: "/tmp",
        argv: &["gcc", "-O0", "-c", "/tmp/sqlite3.c", "-o", "/tmp/sqlite3.o"],
        inputs: &["/tmp/sqlite3.c"],
        summary: "gcc -O0 -c sqlite3.c, the 9 MB SQLite amalgamation (crates.io libsqlite3-sys 0.30.1)",
        default_suite: true,
        bytes: include_bytes!("../traces/sqlite-cc.ltb.gz"),
    },
    Recorded {
        name: "python-compileall",
        cwd: "/tmp",
        argv: &[
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "PYTHONHASHSEED=0",
            PYTHON,
            "-m",
            "compileall",
            "-q",
            "-f",
            "-x",
            "lib2to3/tests/data|/test/",
            "/tmp/pystd",
        ],
        inputs: &[PYTHON, "/tmp/pystd"],
        summary: "CPython 3.11.7 byte-compiling its own standard library (python -m compileall -f)",
        default_suite: true,
        bytes: include_bytes!("../traces/python-compileall.ltb.gz"),
    },
    Recorded {
        name: "xz-compress",
        summary: "xz 5.4.1 -9 -T1 compressing 8.5 MB of base64 (generated, seed 1): one thread, a 64 MiB dictionary",
        cwd: CORPUS,
        argv: &[
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "xz",
            "-9",
            "-T1",
            "-k",
            "-f",
            "b64.txt",
        ],
        inputs: &["/tmp/largo-corpus/b64.txt"],
        default_suite: true,
        bytes: include_bytes!("../traces/xz-compress.ltb.gz"),
    },
    Recorded {
        name: "xz-compress-mt",
        summary: "xz 5.4.1 -6 -T2 --block-size=2MiB on the same input: two compressing threads",
        cwd: CORPUS,
        argv: &[
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "xz",
            "-6",
            "-T2",
            "--block-size=2MiB",
            "-S",
            ".mt.xz",
            "-k",
            "-f",
            "b64.txt",
        ],
        inputs: &["/tmp/largo-corpus/b64.txt"],
        default_suite: true,
        bytes: include_bytes!("../traces/xz-compress-mt.ltb.gz"),
    },
    Recorded {
        name: "sort-words",
        summary: "GNU sort 9.1 (LC_ALL=C, one thread, -S 256M) of 3 million generated words (27 MB)",
        cwd: CORPUS,
        argv: &[
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "LC_ALL=C",
            "sort",
            "--parallel=1",
            "-S",
            "256M",
            "-o",
            "words.sorted",
            "words.txt",
        ],
        inputs: &["/tmp/largo-corpus/words.txt"],
        default_suite: true,
        bytes: include_bytes!("../traces/sort-words.ltb.gz"),
    },
    Recorded {
        name: "python-json",
        summary: "CPython 3.11.7 building 150,000 records, JSON-encoding, decoding and sorting them",
        cwd: CORPUS,
        argv: &["env", "-i", "PATH=/usr/bin:/bin", "PYTHONHASHSEED=0", PYTHON, "work.py"],
        inputs: &[PYTHON, "/tmp/largo-corpus/work.py"],
        default_suite: true,
        bytes: include_bytes!("../traces/python-json.ltb.gz"),
    },
    Recorded {
        name: "python-shm-workers",
        summary:
            "CPython 3.11.7: four forked workers fill one 64 MiB shared anonymous buffer (mmap(-1)), the parent sums it",
        cwd: CORPUS,
        argv: &[
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "PYTHONHASHSEED=0",
            PYTHON,
            "shm_workers.py",
        ],
        inputs: &[PYTHON, "/tmp/largo-corpus/shm_workers.py"],
        default_suite: false,
        bytes: include_bytes!("../traces/python-shm-workers.ltb.gz"),
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
            // What a native run executes is what was recorded.
            assert_eq!(t.header.get("command"), Some(r.argv.join(" ").as_str()), "{}", r.name);
            assert!(r.cwd.starts_with('/') && !r.inputs.is_empty(), "{}", r.name);
        }
    }
}
