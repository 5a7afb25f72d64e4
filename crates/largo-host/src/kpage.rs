//! Reading the kernel's per-page arrays (/proc/kpageflags,
//! /proc/kpagecount, /proc/PID/pagemap): little-endian u64 entries read
//! by position.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Up to `nr` entries from entry `index`; fewer where the file ends.
pub fn read_u64s_at(f: &File, index: u64, nr: usize) -> std::io::Result<Vec<u64>> {
    let mut buf = vec![0u8; nr * 8];
    let mut done = 0;
    while done < buf.len() {
        let n = f.read_at(&mut buf[done..], index * 8 + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(buf[..done - done % 8]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}
