//! Shmem invariants, recounted from the page tables and page caches:
//! every shmem leaf maps a page of a folio of the VMA's inode at the
//! index the VMA gives; per-page mapcounts equal the PTEs; a folio's
//! entire mapcount equals its PMD mappings and its refcount its cache
//! references plus its mappings; the page cache is consistent; NR_SHMEM,
//! NR_SHMEM_THPS, NR_SHMEM_PMDMAPPED and NR_FILE_MAPPED match.

use rustc_hash::FxHashMap as HashMap;

use super::super::check::VmInvariantError;
use super::super::pgtable::Pte;
use super::super::Vm;
use crate::page_alloc::PageAlloc;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(VmInvariantError(format!($($fmt)+)));
        }
    };
}

/// What the page tables say of shmem folios.
#[derive(Default)]
pub struct ShmemRecount {
    /// key -> (PTE mappings, PMD mappings).
    folios: HashMap<usize, (i64, i64)>,
    /// pfn -> PTEs mapping it.
    pages: HashMap<u64, i64>,
}

impl Vm {
    /// One present leaf of a shmem VMA; returns the pages it maps.
    pub(crate) fn check_shmem_leaf(
        &self,
        pa: &PageAlloc,
        vma: usize,
        addr: u64,
        e: Pte,
        level: u32,
        r: &mut ShmemRecount,
    ) -> Result<u64, VmInvariantError> {
        let pfn = e.pfn();
        let key = self.shmem_key_of_pfn(pa, pfn);
        ensure!(
            key.is_some(),
            "{addr:#x} in a shmem VMA maps {pfn:#x}, not a shmem folio"
        );
        let key = key.unwrap();
        let f = &self.shmem.folios[key];
        let v = &self.vmas[vma];
        ensure!(v.shmem == Some(f.inode), "{addr:#x} maps a folio of another inode");
        let index = v.page_index(addr, self.page_shift());
        ensure!(
            index == f.index + (pfn - f.pfn),
            "{addr:#x} maps page {} of a folio at index {}, the VMA says index {index}",
            pfn - f.pfn,
            f.index
        );
        let c = r.folios.entry(key).or_default();
        if level == 1 {
            ensure!(
                f.order == self.pmd_order() && pfn == f.pfn,
                "a shmem PMD at {addr:#x} maps a non-PMD folio"
            );
            c.1 += 1;
            return Ok(f.nr_pages());
        }
        c.0 += 1;
        *r.pages.entry(pfn).or_default() += 1;
        Ok(1)
    }

    /// The shmem folios against the recount.
    pub(crate) fn check_shmem(&self, pa: &PageAlloc, r: &ShmemRecount) -> Result<(), VmInvariantError> {
        let nodes = self.node_stat.len();
        let (mut shmem, mut thps, mut pmdmapped, mut mapped) = (
            vec![0i64; nodes],
            vec![0i64; nodes],
            vec![0i64; nodes],
            vec![0i64; nodes],
        );
        for (id, i) in self.shmem.inodes.iter() {
            let have: std::collections::BTreeSet<(u32, u64)> = i.xa_nodes.keys().copied().collect();
            let mut per_level = [0u32; super::xarray::XA_LEVELS as usize];
            for &(level, _) in &have {
                per_level[level as usize] += 1;
            }
            ensure!(
                per_level == i.xa_nodes_per_level,
                "shmem inode {id}: xarray nodes per level {:?} but it has {per_level:?}",
                i.xa_nodes_per_level
            );
            ensure!(
                have == self.xa_nodes_expected(id),
                "shmem inode {id}: xarray nodes {have:?} but its entries need {:?}",
                self.xa_nodes_expected(id)
            );
            for (&first, &(_, order)) in &i.swapped {
                let nr = 1u64 << order;
                ensure!(
                    first % nr == 0 && i.cache.range(..first + nr).next_back().is_none_or(|(&c, &k)| {
                        c + self.shmem.folios.get(k).map_or(1, |f| f.nr_pages()) <= first
                    }),
                    "shmem inode {id}: swapped range at {first} (order {order}) overlaps its page cache or is unaligned"
                );
            }
            let named = self.shmem.sysv.values().any(|&inode| inode == id);
            ensure!(
                i.ipc_held == named && (!i.ipc_held || i.sysv),
                "shmem inode {id}: held by the IPC namespace {} but named by a segment {named}",
                i.ipc_held
            );
        }
        for (key, f) in self.shmem.folios.iter() {
            if f.lru.released {
                let held =
                    f.lru.held_by_batch() || self.lru_drained_dead.contains(&super::super::lru::FolioRef::Shmem(key));
                ensure!(
                    pa.memmap.page(f.pfn).refcount() == 1 && held && f.entire_mapcount == 0,
                    "released shmem folio {key}: only an LRU batch may hold it"
                );
                continue;
            }
            ensure!(
                self.shmem.inodes.get(f.inode).and_then(|i| i.cache.get(&f.index)) == Some(&key),
                "shmem folio {key} is not in its inode's page cache at {}",
                f.index
            );
            let (ptes, pmds) = r.folios.get(&key).copied().unwrap_or_default();
            ensure!(
                f.entire_mapcount as i64 == pmds,
                "shmem folio {key}: entire mapcount {} but {pmds} PMDs",
                f.entire_mapcount
            );
            let refs = pa.memmap.page(f.pfn).refcount() as i64;
            ensure!(
                refs == f.nr_pages() as i64 + ptes + pmds,
                "shmem folio {key}: refcount {refs}, but {} cache references, {ptes} PTEs and {pmds} PMDs",
                f.nr_pages()
            );
            let mut pages_mapped = 0;
            for p in f.pfn..f.pfn + f.nr_pages() {
                let want = r.pages.get(&p).copied().unwrap_or(0);
                let got = pa.memmap.page(p).mapcount() as i64;
                ensure!(got == want, "shmem page {p:#x}: mapcount {got} but {want} PTEs");
                pages_mapped += i64::from(want > 0);
            }
            ensure!(
                f.nr_pages_mapped as i64 == pages_mapped,
                "shmem folio {key}: nr_pages_mapped {} but {pages_mapped}",
                f.nr_pages_mapped
            );
            let nid = self.node_of(pa, f.pfn);
            let nr = f.nr_pages() as i64;
            shmem[nid] += nr;
            if f.order == self.pmd_order() {
                thps[nid] += nr;
            }
            if pmds > 0 {
                pmdmapped[nid] += nr;
                mapped[nid] += nr;
            } else {
                mapped[nid] += pages_mapped;
            }
        }
        for (inode, i) in self.shmem.inodes.iter() {
            for (&index, &key) in &i.cache {
                let f = self.shmem.folios.get(key);
                ensure!(
                    f.is_some_and(|f| f.inode == inode && f.index == index && index % f.nr_pages() == 0),
                    "inode {inode}: page cache entry {index} -> folio {key} disagrees"
                );
            }
        }
        for (nid, s) in self.node_stat.iter().enumerate() {
            let got = (s.shmem, s.shmem_thps, s.shmem_pmdmapped, s.file_mapped);
            let want = (shmem[nid], thps[nid], pmdmapped[nid], mapped[nid]);
            ensure!(
                got == want,
                "node {nid}: shmem/thps/pmdmapped/file_mapped {got:?} but recount {want:?}"
            );
        }
        Ok(())
    }
}
