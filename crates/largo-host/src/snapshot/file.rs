//! The snapshot file: gzip of a first line `largo-snapshot 1`, a JSON
//! header line ([`SnapshotHeader`]), then one byte per pfn ([`PfnKind`])
//! and one byte per pageblock (the migratetype's index). Runs of one kind
//! and the repeating pattern of a fragmented host compress to a few MB
//! for 24 GiB.

use std::io::{BufRead, Read, Write};

use largo_mm::snapshot::{HostSnapshot, PfnKind, SnapshotHeader};

/// The first line of a snapshot file. Version 2 numbers migratetypes as
/// a CONFIG_CMA kernel does (CMA 4, Isolate 5); version 1 files (Isolate
/// 4, no CMA) are read and renumbered.
pub const MAGIC: &str = "largo-snapshot 2";
const MAGIC_V1: &str = "largo-snapshot 1";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    #[error("not a largo snapshot (first line {0:?}, expected {MAGIC:?})")]
    NotASnapshot(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the snapshot's header: {0}")]
    Header(#[from] serde_json::Error),
    #[error("the snapshot is truncated: {got} of {want} bytes of {what}")]
    Truncated {
        what: &'static str,
        got: usize,
        want: usize,
    },
    #[error("pfn {pfn}: byte {byte} is not a page kind")]
    BadKind { pfn: u64, byte: u8 },
    #[error("pageblock {index}: byte {byte} is not a migratetype")]
    BadMigratetype { index: usize, byte: u8 },
    #[error("the snapshot's header: {0}")]
    BadHeader(String),
}

/// The largest machine a snapshot may describe: 64 TiB of 4 KiB pages.
const MAX_PFNS: u64 = 1 << 34;

/// The header's numbers are ones a host can have.
fn check_header(h: &SnapshotHeader) -> Result<(), SnapshotFileError> {
    let bad = |why: String| Err(SnapshotFileError::BadHeader(why));
    if !h.page_size.is_power_of_two() || !(4096..=65536).contains(&h.page_size) {
        return bad(format!("page size {} is not 4, 16 or 64 KiB", h.page_size));
    }
    if h.pageblock_order == 0 || h.pageblock_order > 20 {
        return bad(format!("pageblock order {} is out of range", h.pageblock_order));
    }
    if h.nr_pfns == 0 || h.nr_pfns > MAX_PFNS {
        return bad(format!("{} page frames", h.nr_pfns));
    }
    for z in &h.zones {
        let end = z.start_pfn.checked_add(z.spanned_pages);
        if end.is_none_or(|e| e > h.nr_pfns) || z.nid >= 1024 || z.managed_pages > z.present_pages {
            return bad(format!("zone {} of node {} does not fit the snapshot", z.name, z.nid));
        }
    }
    Ok(())
}

/// Writes `snap` (gzip).
pub fn write(snap: &HostSnapshot, w: impl Write) -> Result<(), SnapshotFileError> {
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    writeln!(gz, "{MAGIC}")?;
    serde_json::to_writer(&mut gz, &snap.header)?;
    writeln!(gz)?;
    gz.write_all(&snap.kinds)?;
    gz.write_all(&snap.pageblock_mt)?;
    gz.finish()?;
    Ok(())
}

/// Reads a snapshot written by [`write`], checking every byte.
pub fn read(r: impl Read) -> Result<HostSnapshot, SnapshotFileError> {
    let mut r = std::io::BufReader::new(flate2::read::GzDecoder::new(r));
    let mut line = String::new();
    r.read_line(&mut line)
        .map_err(|_| SnapshotFileError::NotASnapshot("(not gzip text)".into()))?;
    let v1 = match line.trim_end() {
        MAGIC => false,
        MAGIC_V1 => true,
        _ => return Err(SnapshotFileError::NotASnapshot(line.chars().take(40).collect())),
    };
    line.clear();
    r.read_line(&mut line)?;
    let mut header: SnapshotHeader = serde_json::from_str(&line)?;
    if v1 {
        renumber_v1_header(&mut header);
    }
    check_header(&header)?;
    let kinds = read_exact_vec(&mut r, header.nr_pfns as usize, "page kinds")?;
    if let Some((i, &b)) = kinds.iter().enumerate().find(|(_, &b)| PfnKind::from_u8(b).is_none()) {
        return Err(SnapshotFileError::BadKind { pfn: i as u64, byte: b });
    }
    let nr_pb = HostSnapshot::nr_pageblocks(header.nr_pfns, header.pageblock_order);
    let mut pageblock_mt = read_exact_vec(&mut r, nr_pb, "pageblock migratetypes")?;
    if v1 {
        for b in pageblock_mt.iter_mut().filter(|b| **b == V1_ISOLATE) {
            *b = largo_types::MigrateType::Isolate.index() as u8;
        }
    }
    if let Some((index, &byte)) = pageblock_mt
        .iter()
        .enumerate()
        .find(|(_, &b)| b as usize >= largo_types::MIGRATE_TYPES)
    {
        return Err(SnapshotFileError::BadMigratetype { index, byte });
    }
    Ok(HostSnapshot {
        header,
        kinds,
        pageblock_mt,
    })
}

/// MIGRATE_ISOLATE's index in version 1 files.
const V1_ISOLATE: u8 = 4;

/// A version 1 header's per-type counts gain the (empty) CMA entry
/// before Isolate.
fn renumber_v1_header(h: &mut SnapshotHeader) {
    let cma = largo_types::MigrateType::Cma.index();
    for z in &mut h.zones {
        if z.blocks.len() > cma {
            z.blocks.insert(cma, 0);
        }
        for per_order in &mut z.free {
            if per_order.len() > cma {
                per_order.insert(cma, 0);
            }
        }
    }
}

/// Reads a snapshot file.
pub fn load(path: &std::path::Path) -> Result<HostSnapshot, SnapshotFileError> {
    let f = std::fs::File::open(path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    read(f)
}

/// Writes a snapshot file.
pub fn save(snap: &HostSnapshot, path: &std::path::Path) -> Result<(), SnapshotFileError> {
    let f =
        std::fs::File::create(path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    write(snap, std::io::BufWriter::new(f))
}

fn read_exact_vec(r: &mut impl Read, n: usize, what: &'static str) -> Result<Vec<u8>, SnapshotFileError> {
    // Grown as the bytes come: a header claiming more than the file holds
    // fails as truncated, without reserving its size first.
    let mut v = Vec::new();
    r.take(n as u64).read_to_end(&mut v)?;
    if v.len() != n {
        return Err(SnapshotFileError::Truncated {
            what,
            got: v.len(),
            want: n,
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_mm::snapshot::PfnKind::*;

    fn snapshot(kinds: &[PfnKind]) -> HostSnapshot {
        let mut s = HostSnapshot::from_kinds(kinds, 2, Vec::new());
        s.header.knobs = vec![("vm/min_free_kbytes".into(), "1024".into())];
        s
    }

    #[test]
    fn a_snapshot_round_trips_through_its_file() {
        let s = snapshot(&[Anon, Free, Slab, Uninit, Hole, Reserved, PageTable, File, Kernel]);
        let mut buf = Vec::new();
        write(&s, &mut buf).unwrap();
        assert_eq!(read(&buf[..]).unwrap(), s);
        assert!(read(&buf[..buf.len() / 2]).is_err(), "a truncated file is refused");
        let mut other = Vec::new();
        let mut gz = flate2::write::GzEncoder::new(&mut other, flate2::Compression::default());
        gz.write_all(b"something else\n").unwrap();
        gz.finish().unwrap();
        assert!(matches!(read(&other[..]), Err(SnapshotFileError::NotASnapshot(_))));
        assert!(matches!(
            read(&b"plain text"[..]),
            Err(SnapshotFileError::NotASnapshot(_))
        ));
    }

    #[test]
    fn a_version_1_file_is_renumbered_for_cma() {
        let mut s = snapshot(&[Free, Free, Anon, Anon, Free, Free, Anon, Anon]);
        s.header.zones = vec![largo_mm::snapshot::SnapshotZone {
            nid: 0,
            name: "Normal".into(),
            start_pfn: 0,
            spanned_pages: 8,
            present_pages: 8,
            managed_pages: 8,
            free: vec![vec![1, 2, 3, 4, 5]],
            blocks: vec![10, 20, 30, 40, 50],
            pcp_pages: 0,
        }];
        // Version 1: five types, Isolate at 4.
        s.pageblock_mt = vec![4, 1];
        let mut buf = Vec::new();
        let mut gz = flate2::write::GzEncoder::new(&mut buf, flate2::Compression::default());
        writeln!(gz, "{MAGIC_V1}").unwrap();
        serde_json::to_writer(&mut gz, &s.header).unwrap();
        writeln!(gz).unwrap();
        gz.write_all(&s.kinds).unwrap();
        gz.write_all(&s.pageblock_mt).unwrap();
        gz.finish().unwrap();
        let got = read(&buf[..]).unwrap();
        let isolate = largo_types::MigrateType::Isolate.index() as u8;
        assert_eq!(got.pageblock_mt, vec![isolate, 1]);
        assert_eq!(got.header.zones[0].blocks, vec![10, 20, 30, 40, 0, 50]);
        assert_eq!(got.header.zones[0].free[0], vec![1, 2, 3, 4, 0, 5]);
    }
}
