//! `--machine snapshot:FILE`: a machine booted from a host snapshot file
//! (here a synthetic one), and the errors for a file that is not one.

mod common;

use common::{largo, stdout};
use largo_mm::snapshot::{HostSnapshot, PfnKind, SnapshotZone};

/// A 1 GiB host: DMA and DMA32; DMA32 has every other page free in
/// [64K, 96K), 64 free 4 MiB blocks from 128K, the rest in use.
fn synthetic() -> HostSnapshot {
    let nr: u64 = 1 << 18;
    let mut kinds = vec![PfnKind::File as u8; nr as usize];
    kinds[0] = PfnKind::Hole as u8;
    for p in (65536..98304).step_by(2) {
        kinds[p] = PfnKind::Free as u8;
    }
    kinds[131072..131072 + 64 * 1024].fill(PfnKind::Free as u8);
    let zone = |name: &str, start: u64, spanned: u64, managed: u64| SnapshotZone {
        nid: 0,
        name: name.into(),
        start_pfn: start,
        spanned_pages: spanned,
        present_pages: spanned,
        managed_pages: managed,
        free: Vec::new(),
        blocks: Vec::new(),
        pcp_pages: 0,
    };
    let kinds: Vec<PfnKind> = kinds.into_iter().map(|b| PfnKind::from_u8(b).unwrap()).collect();
    let mut snap = HostSnapshot::from_kinds(
        &kinds,
        9,
        vec![
            zone("DMA", 1, 4095, 3840),
            zone("DMA32", 4096, nr - 4096, nr - 4096 - 9528),
        ],
    );
    snap.header.knobs = vec![("vm/min_free_kbytes".into(), "4096".into())];
    snap
}

#[test]
fn a_machine_boots_from_a_snapshot_file() {
    let dir = std::env::temp_dir().join(format!("largo-cli-snapshot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("host.lsnap");
    largo_host::snapshot::file::save(&synthetic(), &file).unwrap();
    let machine = format!("snapshot:{}", file.display());
    let text = stdout(&["show", "buddyinfo", "--machine", &machine]);
    let dma32 = text.lines().find(|l| l.contains("DMA32")).expect("a DMA32 line");
    let counts: Vec<u64> = dma32.split_whitespace().skip(4).map(|w| w.parse().unwrap()).collect();
    assert_eq!(counts[0], 16384, "{text}");
    assert_eq!(counts[10], 64, "{text}");
    assert!(counts[1..10].iter().all(|&n| n == 0), "{text}");
    // A 256 MiB THP burst gets the PMD blocks, then falls back; the first
    // page table (unmovable, no unmovable free block) steals from the
    // largest movable block, claiming one of the 128 pageblocks.
    let out = stdout(&[
        "show",
        "vmstat",
        "anon-w-seq:size=256M",
        "--machine",
        &machine,
        "--thp",
        "2M",
        "--set",
        "transparent_hugepage/defrag=never",
    ]);
    let item = |name: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {out}"))
    };
    assert_eq!(item("thp_fault_alloc"), 127);
    assert_eq!(item("thp_fault_fallback"), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_a_snapshot_is_a_usage_error() {
    let dir = std::env::temp_dir().join(format!("largo-cli-notsnap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.lsnap");
    std::fs::write(&file, "hello\n").unwrap();
    for m in [
        format!("snapshot:{}", file.display()),
        format!("snapshot:{}/missing", dir.display()),
    ] {
        let out = largo(&["show", "buddyinfo", "--machine", &m]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--machine snapshot:") && err.lines().count() == 1, "{err}");
    }
    let out = largo(&["show", "buddyinfo", "--machine", "snapshot:"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
