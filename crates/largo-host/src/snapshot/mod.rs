//! Exact snapshots of this host's physical memory (`largo host
//! snapshot`, `--machine snapshot:FILE`, `--machine host`): [`take`]
//! reads the host, [`infer`] types its pageblocks, [`file`] stores it.
//! The data type and the boot from it are the engine's
//! (`largo_mm::snapshot`, `largo_mm::page_alloc::exact`).

pub mod file;
pub mod infer;
pub mod take;

use std::sync::Arc;

use largo_mm::machine::MachineShape;
use largo_mm::snapshot::{HostSnapshot, PfnKind};
use largo_mm::MachineConfig;
use largo_types::MIGRATE_TYPES;

use crate::hostshape::{config_from, HostZone, ShapeError};

/// The machine a snapshot describes: x86_64 with the host's memory, its
/// zones' managed sizes, min_free_kbytes, THP and reporting knobs, a
/// reporting device if it reported free pages (free blocks at its order
/// counted as reported, as on an idle host), its page cache, and its
/// memory laid out pfn by pfn.
pub fn snapshot_config(snap: Arc<HostSnapshot>) -> Result<MachineConfig, ShapeError> {
    let h = &snap.header;
    if h.page_size != 4096 {
        return Err(ShapeError::Read(
            "the snapshot".into(),
            format!(
                "its pages are {} bytes; only 4 KiB x86_64 hosts are modelled",
                h.page_size
            ),
        ));
    }
    let zones: Vec<HostZone> = h
        .zones
        .iter()
        .map(|z| {
            let mut blocks = [0u64; MIGRATE_TYPES];
            for (b, &n) in blocks.iter_mut().zip(&z.blocks) {
                *b = n;
            }
            HostZone {
                nid: z.nid,
                name: z.name.clone(),
                start_pfn: z.start_pfn,
                spanned_pages: z.spanned_pages,
                present_pages: z.present_pages,
                managed_pages: z.managed_pages,
                free: z
                    .free
                    .iter()
                    .map(|f| {
                        let mut a = [0u64; MIGRATE_TYPES];
                        for (x, &n) in a.iter_mut().zip(f) {
                            *x = n;
                        }
                        a
                    })
                    .collect(),
                blocks,
                pcp_pages: z.pcp_pages,
            }
        })
        .collect();
    let min_free = h
        .knobs
        .iter()
        .find(|(k, _)| k == "vm/min_free_kbytes")
        .map_or("67584".to_string(), |(_, v)| v.clone());
    let mut c = config_from(zones, h.reporting_order, &min_free)?;
    c.knobs.extend(
        h.knobs
            .iter()
            .filter(|(k, _)| k.starts_with("transparent_hugepage/"))
            .cloned(),
    );
    c.shape = Some(MachineShape {
        zones: Vec::new(),
        reported_from_order: h.reporting_order,
    });
    let file_pages = snap.kinds.iter().filter(|&&b| b == PfnKind::File as u8).count() as u64;
    c.page_cache_bytes = file_pages * h.page_size;
    c.snapshot = Some(snap);
    Ok(c)
}

/// This host now: from an exact snapshot (root: every free block where it
/// is), else, with a note on stderr, from its zone counts
/// ([`crate::hostshape::host_config`]).
pub fn host_config_now() -> Result<MachineConfig, ShapeError> {
    match take::take(&mut |_, _| {}) {
        Ok(snap) => snapshot_config(Arc::new(snap)),
        Err(e) => {
            eprintln!("largo: the machine is shaped from this host's zone counts only (no exact snapshot: {e})");
            crate::hostshape::host_config()
        }
    }
}
