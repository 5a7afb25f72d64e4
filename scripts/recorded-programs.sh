#!/bin/sh
# The shipped recorded programs (crates/largo-workloads/traces/): fetch their
# inputs from the package registries into the paths they were recorded at,
# then validate each trace against this host (root) or record it again.
#
#   scripts/recorded-programs.sh inputs            # fetch and unpack the inputs
#   scripts/recorded-programs.sh corpus-inputs     # only the generated ones
#   scripts/recorded-programs.sh validate [NAME]   # largo validate trace (root)
#   scripts/recorded-programs.sh record NAME       # record NAME again (root)
#
# NAME is lua-build, sqlite-cc, python-compileall, xz-compress,
# xz-compress-mt, sort-words, python-json or python-shm-workers (default:
# all of them). The last five read inputs generated here from fixed seeds
# (CORPUS, default /tmp/largo-corpus): 6 MiB of pseudo-random bytes in
# base64 (8.5 MB), 3 million pseudo-random words (27 MB), a pure-Python
# JSON job, and four forked workers filling one 64 MiB shared anonymous
# buffer.
# PYTHON names the interpreter of python-compileall (recorded with CPython
# 3.11.7 built by pyenv); the compilers are the host's gcc (recorded with
# Debian gcc 12.2.0). A program's page faults follow its exact binary and
# inputs: other versions replay fine but will not match the shipped traces.
set -eu
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TRACES="$ROOT/crates/largo-workloads/traces"
PYTHON="${PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}"
LARGO="${LARGO:-$ROOT/target/release/largo}"
CORPUS="${CORPUS:-/tmp/largo-corpus}"
ALL="lua-build sqlite-cc python-compileall xz-compress xz-compress-mt sort-words python-json python-shm-workers"
LUA_FILES="lapi.c lauxlib.c lbaselib.c lcode.c lcorolib.c lctype.c ldblib.c ldebug.c ldo.c ldump.c lfunc.c lgc.c linit.c liolib.c llex.c lmathlib.c lmem.c loadlib.c lobject.c lopcodes.c loslib.c lparser.c lstate.c lstring.c lstrlib.c ltable.c ltablib.c ltm.c lundump.c lutf8lib.c lvm.c lzio.c"

inputs() {
    # Lua 5.4.7 and SQLite 3.46 sources as crates.io ships them (lua-src
    # 547.1.0, libsqlite3-sys 0.30.1), fetched by cargo into its registry.
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/src"
    cat > "$work/Cargo.toml" <<TOML
[package]
name = "largo-recorded-inputs"
version = "0.0.0"
edition = "2021"
[dependencies]
lua-src = "=547.1.0"
libsqlite3-sys = { version = "=0.30.1", features = ["bundled"] }
TOML
    echo 'fn main() {}' > "$work/src/main.rs"
    cargo fetch --manifest-path "$work/Cargo.toml" >&2
    reg="${CARGO_HOME:-$HOME/.cargo}/registry/src"
    lua="$(ls -d "$reg"/*/lua-src-547.1.0/lua-5.4.7 | head -1)"
    sqlite="$(ls -d "$reg"/*/libsqlite3-sys-0.30.1/sqlite3 | head -1)"
    rm -rf /tmp/luabuild && cp -r "$lua" /tmp/luabuild
    cp "$sqlite/sqlite3.c" /tmp/sqlite3.c
    if [ -x "$PYTHON" ]; then
        # The interpreter's own standard library, without its tests,
        # compiled extension modules and site-packages.
        lib="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')"
        rm -rf /tmp/pystd && mkdir /tmp/pystd
        for f in "$lib"/*; do
            case "$(basename "$f")" in
                test|site-packages|lib-dynload|config-*) ;;
                *) cp -r "$f" /tmp/pystd/ ;;
            esac
        done
        # One run first, as before the recording: it creates the
        # __pycache__ directories, which later runs only rewrite.
        env -i PATH=/usr/bin:/bin PYTHONHASHSEED=0 "$PYTHON" -m compileall -q -f \
            -x 'lib2to3/tests/data|/test/' /tmp/pystd >/dev/null
    else
        echo "no $PYTHON: python-compileall's input not prepared (set PYTHON)" >&2
    fi
    corpus_inputs
    echo "inputs in /tmp/luabuild, /tmp/sqlite3.c, /tmp/pystd, $CORPUS" >&2
}

# The generated inputs of the compressor, sort and interpreter programs:
# the same bytes on every machine (Python's Random with a fixed seed).
corpus_inputs() {
    mkdir -p "$CORPUS"
    python3 - "$CORPUS" <<'PY'
import base64, random, sys
d = sys.argv[1]
r = random.Random(1)
with open(f"{d}/b64.txt", "wb") as f:
    f.write(base64.encodebytes(r.randbytes(6 * 1024 * 1024)))
r = random.Random(2)
letters = "abcdefghijklmnopqrstuvwxyz"
with open(f"{d}/words.txt", "w") as f:
    for _ in range(3_000_000):
        f.write("".join(r.choice(letters) for _ in range(r.randint(4, 12))) + "\n")
with open(f"{d}/work.py", "w") as f:
    f.write("""import json, random
r = random.Random(7)
rows = [{"id": i, "name": "".join(r.choice("abcdefghij") for _ in range(12)),
         "v": [r.random() for _ in range(8)]} for i in range(150000)]
text = json.dumps(rows)
back = json.loads(text)
back.sort(key=lambda row: row["name"])
print(len(text), back[0]["id"])
""")
with open(f"{d}/shm_workers.py", "w") as f:
    f.write("""import mmap, os
SIZE = 64 << 20
buf = mmap.mmap(-1, SIZE)
quarter = SIZE // 4
pids = []
for w in range(4):
    pid = os.fork()
    if pid == 0:
        view = memoryview(buf)[w * quarter:(w + 1) * quarter]
        chunk = bytes([w + 1]) * 4096
        for off in range(0, quarter, 4096):
            view[off:off + 4096] = chunk
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print(sum(buf[i] for i in range(0, SIZE, 4096)))
""")
PY
}

# The directory and command each trace was recorded with.
run_in() {
    case "$1" in
        lua-build) cd /tmp/luabuild && shift && "$@" -- gcc -O2 -c $LUA_FILES ;;
        sqlite-cc) cd /tmp && shift && "$@" -- gcc -O0 -c /tmp/sqlite3.c -o /tmp/sqlite3.o ;;
        python-compileall)
            cd /tmp && shift && "$@" -- env -i PATH=/usr/bin:/bin PYTHONHASHSEED=0 "$PYTHON" -m compileall \
                -q -f -x 'lib2to3/tests/data|/test/' /tmp/pystd ;;
        xz-compress) cd "$CORPUS" && shift && "$@" -- env -i PATH=/usr/bin:/bin xz -9 -T1 -k -f b64.txt ;;
        xz-compress-mt)
            cd "$CORPUS" && shift && "$@" -- env -i PATH=/usr/bin:/bin xz -6 -T2 --block-size=2MiB -S .mt.xz -k -f b64.txt ;;
        sort-words)
            cd "$CORPUS" && shift && "$@" -- env -i PATH=/usr/bin:/bin LC_ALL=C sort --parallel=1 -S 256M -o words.sorted words.txt ;;
        python-json)
            cd "$CORPUS" && shift && "$@" -- env -i PATH=/usr/bin:/bin PYTHONHASHSEED=0 "$PYTHON" work.py ;;
        python-shm-workers)
            cd "$CORPUS" && shift && "$@" -- env -i PATH=/usr/bin:/bin PYTHONHASHSEED=0 "$PYTHON" shm_workers.py ;;
        *) echo "unknown program '$1': $ALL" >&2; exit 2 ;;
    esac
}

repeats() {
    case "$1" in
        lua-build|sqlite-cc) echo 7 ;;
        *) echo 9 ;;
    esac
}

[ -x "$LARGO" ] || cargo build --release -p largo-cli --manifest-path "$ROOT/Cargo.toml" >&2
case "${1:-}" in
    inputs) inputs ;;
    corpus-inputs) corpus_inputs ;;
    validate)
        names="${2:-$ALL}"
        for name in $names; do
            (run_in "$name" "$LARGO" validate trace "$TRACES/$name.ltb.gz" --repeats "$(repeats "$name")")
        done ;;
    record)
        name="${2:?record which program?}"
        (run_in "$name" "$LARGO" record --baseline-runs 5 -o "$TRACES/$name.ltb.gz") ;;
    *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
