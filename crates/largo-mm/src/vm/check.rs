//! VM invariants: page tables, rmap, mapcounts, refcounts and counters
//! agree. Recomputes everything from the page tables.
//!
//! - every present leaf maps the zero page, the huge zero folio, or a page
//!   of an anon folio whose anon_vma lists the VMA and whose `index` places
//!   the page at this address (rmap finds the mapping);
//! - per-page mapcounts equal the PTEs mapping each page; a folio's large
//!   mapcount is its PTE mappings plus its PMD mappings, its entire
//!   mapcount its PMD mappings, and its refcount the sum (no other users);
//! - every anon folio is mapped, and every PMD mapping has a deposited table;
//! - each mm's RSS, each node's NR_ANON_MAPPED, NR_ANON_THPS and
//!   NR_PAGETABLE (tables, plus those freed through RCU whose callbacks
//!   wait), the per-size nr_anon and nr_anon_partially_mapped gauges, and
//!   the deferred split queues match the recount;
//! - every page-table page is a PGTABLE page pointing back at its table.

use rustc_hash::FxHashMap as HashMap;

use super::lru::FolioRef;
use super::pgtable::Slot;
use super::stats::{LruStat, MthpStat};
use super::Vm;
use crate::memmap::PageFlags;
use crate::page_alloc::PageAlloc;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("VM invariant violated: {0}")]
pub struct VmInvariantError(pub String);

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(VmInvariantError(format!($($fmt)+)));
        }
    };
}

#[derive(Default)]
struct FolioCount {
    ptes: i64,
    pmds: i64,
}

impl Vm {
    pub fn check_invariants(&self, pa: &PageAlloc) -> Result<(), VmInvariantError> {
        let shift = self.page_shift();
        let mut per_page: HashMap<u64, i64> = HashMap::default();
        let mut per_folio: HashMap<usize, FolioCount> = HashMap::default();
        let mut tables_seen = 0usize;
        let mut mapped_once: HashMap<u64, ()> = HashMap::default();
        let mut shmem = super::shmem::ShmemRecount::default();
        let mut swap_refs: HashMap<crate::swap::SwapEntry, u64> = HashMap::default();
        // find_vma's hint relies on it: every VMA is in its mm's tree.
        for (id, v) in self.vmas.iter() {
            ensure!(
                self.mms.get(v.mm).and_then(|m| m.vmas.get(&v.start)) == Some(&id),
                "VMA {id} [{:#x}, {:#x}) is not in mm {}'s tree",
                v.start,
                v.end,
                v.mm
            );
        }
        self.check_rmap_indexes().map_err(VmInvariantError)?;
        for (mm_id, mm) in self.mms.iter() {
            let mut swap_ents = 0u64;
            let mut rss = 0u64;
            let mut rss_shmem = 0u64;
            let mut tables = vec![(mm.pgd, self.pt.shape.levels - 1, 0u64)];
            // The VMA of the previous leaf: a table's leaves mostly share one.
            let mut last_vma: Option<super::types::VmaId> = None;
            while let Some((table, level, base)) = tables.pop() {
                tables_seen += 1;
                let page = &self.pt.pages[table];
                let rec = pa.memmap.page(page.pfn);
                ensure!(
                    rec.flags().contains(PageFlags::PGTABLE) && rec.private() as usize == table + 1,
                    "table {table} page {:#x} is not marked as a page table",
                    page.pfn
                );
                let used = page.entries.iter().filter(|e| !e.is_none()).count() as u32;
                ensure!(
                    used == page.nr_used,
                    "table {table}: nr_used {} but {used} entries",
                    page.nr_used
                );
                let span = 1u64 << self.pt.shape.level_shift(level);
                for (i, e) in page.entries.iter().enumerate() {
                    if e.is_none() {
                        continue;
                    }
                    let addr = base + i as u64 * span;
                    if e.is_table() {
                        ensure!(level > 0, "PTE table {table} holds a table entry");
                        tables.push((e.table_idx(), level - 1, addr));
                        continue;
                    }
                    if e.is_swap() {
                        ensure!(level == 0, "a swap entry above the PTE level at {addr:#x}");
                        let entry = e.swap_entry();
                        ensure!(
                            (entry.ty as usize) < self.swap.devices.len()
                                && entry.offset > 0
                                && entry.offset < self.swap.device(entry).max,
                            "mm {mm_id}: {addr:#x} holds swap entry {entry:?} of no device"
                        );
                        *swap_refs.entry(entry).or_default() += 1;
                        swap_ents += 1;
                        continue;
                    }
                    ensure!(level <= 1, "leaf above the PMD level at {addr:#x}");
                    let vma = match last_vma {
                        Some(id) if self.vmas[id].contains(addr) => Some(id),
                        _ => mm.vma_at(addr, &self.vmas),
                    };
                    ensure!(vma.is_some(), "mm {mm_id}: {addr:#x} is mapped outside every VMA");
                    let vma = vma.unwrap();
                    last_vma = Some(vma);
                    if self.is_shmem_vma(vma) {
                        rss_shmem += self.check_shmem_leaf(pa, vma, addr, *e, level, &mut shmem)?;
                        continue;
                    }
                    ensure!(
                        self.vmas[vma].is_anonymous(),
                        "mm {mm_id}: {addr:#x} is mapped in a {:?} VMA, whose pages are not modelled",
                        self.vmas[vma].backing
                    );
                    if e.is_special() {
                        let ok = if level == 1 {
                            self.huge_zero_pfn().is_some_and(|p| p.0 == e.pfn())
                                && self.deposits.contains_key(&Slot { table, index: i })
                        } else {
                            e.pfn() == self.zero_pfn
                        };
                        ensure!(ok, "mm {mm_id}: {addr:#x} special entry does not map a zero page");
                        continue;
                    }
                    let pfn = e.pfn();
                    let key = self.folio_key_of_pfn(pa, pfn);
                    ensure!(key.is_some(), "mm {mm_id}: {addr:#x} maps {pfn:#x}, not an anon folio");
                    let key = key.unwrap();
                    let meta = &self.folios[key];
                    let page_index = self.vmas[vma].page_index(addr, shift);
                    ensure!(
                        page_index == meta.index + (pfn - meta.pfn),
                        "mm {mm_id}: {addr:#x} maps page {} of its folio, rmap index says {}",
                        pfn - meta.pfn,
                        page_index - meta.index
                    );
                    ensure!(
                        self.anon_vmas
                            .get(meta.anon_vma)
                            .is_some_and(|av| av.vmas.contains(&vma)),
                        "mm {mm_id}: {addr:#x}: the folio's anon_vma does not list VMA {vma}"
                    );
                    let c = per_folio.entry(key).or_default();
                    if level == 1 {
                        ensure!(
                            self.deposits.contains_key(&Slot { table, index: i }),
                            "PMD mapping at {addr:#x} without a deposit"
                        );
                        ensure!(
                            pfn == meta.pfn && meta.order == self.pmd_order(),
                            "PMD at {addr:#x} maps a non-PMD folio"
                        );
                        c.pmds += 1;
                        rss += meta.nr_pages();
                        for p in pfn..pfn + meta.nr_pages() {
                            mapped_once.insert(p, ());
                        }
                    } else {
                        c.ptes += 1;
                        rss += 1;
                        *per_page.entry(pfn).or_default() += 1;
                        mapped_once.insert(pfn, ());
                    }
                }
            }
            ensure!(
                rss == mm.rss_anon,
                "mm {mm_id}: MM_ANONPAGES {} but {rss} pages mapped",
                mm.rss_anon
            );
            ensure!(
                rss_shmem == mm.rss_shmem,
                "mm {mm_id}: MM_SHMEMPAGES {} but {rss_shmem} pages mapped",
                mm.rss_shmem
            );
            ensure!(
                swap_ents == mm.swap_ents,
                "mm {mm_id}: MM_SWAPENTS {} but {swap_ents} swap entries",
                mm.swap_ents
            );
        }
        // Shmem's references on the slots of its swapped pages.
        for inode in self.shmem.inodes.iter().map(|(_, i)| i) {
            for &(entry, order) in inode.swapped.values() {
                for i in 0..1u64 << order {
                    *swap_refs.entry(entry.plus(i)).or_default() += 1;
                }
            }
        }
        self.check_swap(&swap_refs)?;
        self.check_lru(pa)?;
        ensure!(
            tables_seen + self.deposits.len() == self.pt.pages.len(),
            "{} page tables exist, {} reachable and {} deposited",
            self.pt.pages.len(),
            tables_seen,
            self.deposits.len()
        );
        self.check_folios(pa, &per_page, &per_folio)?;
        self.check_shmem(pa, &shmem)?;
        self.check_counters(pa, &mapped_once)
    }

    fn check_folios(
        &self,
        pa: &PageAlloc,
        per_page: &HashMap<u64, i64>,
        per_folio: &HashMap<usize, FolioCount>,
    ) -> Result<(), VmInvariantError> {
        for (key, meta) in self.folios.iter() {
            let head = pa.memmap.page(meta.pfn);
            ensure!(
                head.private() as usize == key + 1,
                "folio {:#x}: head record points elsewhere",
                meta.pfn
            );
            let unmapped = FolioCount::default();
            let c = per_folio.get(&key);
            if meta.lru.released {
                let held = meta.lru.held_by_batch() || self.lru_drained_dead.contains(&FolioRef::Anon(key));
                ensure!(
                    c.is_none() && meta.swap.is_none() && head.refcount() == 1 && held,
                    "released folio {:#x}: only an LRU batch may hold it",
                    meta.pfn
                );
                continue;
            }
            ensure!(
                c.is_some() || meta.swap.is_some(),
                "anon folio {:#x} of order {} is neither mapped nor in the swap cache",
                meta.pfn,
                meta.order
            );
            let c = c.unwrap_or(&unmapped);
            let cache_refs = if meta.swap.is_some() { meta.nr_pages() as i64 } else { 0 };
            for p in meta.pfn..meta.pfn + meta.nr_pages() {
                let want = per_page.get(&p).copied().unwrap_or(0);
                let got = pa.memmap.page(p).mapcount() as i64;
                ensure!(got == want, "page {p:#x}: mapcount {got} but {want} PTEs map it");
            }
            let refs = head.refcount() as i64 - cache_refs;
            if meta.order == 0 {
                ensure!(
                    refs == c.ptes,
                    "folio {:#x}: refcount {refs}, {} mappings",
                    meta.pfn,
                    c.ptes
                );
                continue;
            }
            ensure!(
                meta.large_mapcount as i64 == c.ptes + c.pmds,
                "folio {:#x}: large mapcount {} but {} PTEs + {} PMDs",
                meta.pfn,
                meta.large_mapcount,
                c.ptes,
                c.pmds
            );
            ensure!(
                meta.entire_mapcount as i64 == c.pmds,
                "folio {:#x}: entire mapcount {}",
                meta.pfn,
                meta.entire_mapcount
            );
            ensure!(
                refs == c.ptes + c.pmds,
                "folio {:#x}: refcount {refs}, {} mappings",
                meta.pfn,
                c.ptes + c.pmds
            );
            let pages_mapped = (meta.pfn..meta.pfn + meta.nr_pages())
                .filter(|p| per_page.contains_key(p))
                .count() as i32;
            ensure!(
                meta.nr_pages_mapped == pages_mapped,
                "folio {:#x}: nr_pages_mapped {}",
                meta.pfn,
                meta.nr_pages_mapped
            );
            let partially = head.flags().contains(PageFlags::PARTIALLY_MAPPED);
            ensure!(
                !partially || meta.deferred.is_some(),
                "folio {:#x}: partially mapped but not queued",
                meta.pfn
            );
        }
        Ok(())
    }

    fn check_counters(&self, pa: &PageAlloc, mapped_once: &HashMap<u64, ()>) -> Result<(), VmInvariantError> {
        let nodes = self.node_stat.len();
        let mut anon_mapped = vec![0i64; nodes];
        let mut anon_thps = vec![0i64; nodes];
        let mut nr_anon = vec![0i64; self.pmd_order() as usize + 1];
        let mut partial = vec![0i64; self.pmd_order() as usize + 1];
        let mut queued = vec![0u64; nodes];
        let mut lru = vec![LruStat::default(); self.zone_lru.len()];
        for &p in mapped_once.keys() {
            anon_mapped[self.node_of(pa, p)] += 1;
        }
        for (_, meta) in self.folios.iter() {
            let nid = self.node_of(pa, meta.pfn);
            if meta.entire_mapcount > 0 {
                anon_thps[nid] += meta.nr_pages() as i64;
            }
            if !meta.from_shmem {
                nr_anon[meta.order as usize] += 1;
            }
            let zi = pa.page_zone_index(meta.pfn).expect("anon folio in a zone");
            count_lru(&mut lru[zi], meta.lru.list, meta.nr_pages() as i64);
            if pa.memmap.page(meta.pfn).flags().contains(PageFlags::PARTIALLY_MAPPED) {
                partial[meta.order as usize] += 1;
            }
            if meta.deferred.is_some() {
                queued[nid] += 1;
            }
        }
        for nid in 0..nodes {
            let s = &self.node_stat[nid];
            ensure!(
                s.anon_mapped == anon_mapped[nid],
                "node {nid}: NR_ANON_MAPPED {} but {} pages mapped",
                s.anon_mapped,
                anon_mapped[nid]
            );
            ensure!(
                s.anon_thps == anon_thps[nid],
                "node {nid}: NR_ANON_THPS {} but {}",
                s.anon_thps,
                anon_thps[nid]
            );
            ensure!(
                self.deferred[nid].len == queued[nid],
                "node {nid}: deferred queue length {} but {} queued",
                self.deferred[nid].len,
                queued[nid]
            );
        }
        for f in self.shmem.folios.iter().map(|(_, f)| f) {
            let zi = pa.page_zone_index(f.pfn).expect("shmem folio in a zone");
            count_lru(&mut lru[zi], f.lru.list, f.nr_pages() as i64);
        }
        for (zi, (&got, want)) in self.zone_lru.iter().zip(&lru).enumerate() {
            ensure!(
                got == *want,
                "zone {zi}: LRU counts {got:?} but the folios add up to {want:?}"
            );
        }
        for order in 2..=self.pmd_order() {
            let o = order as usize;
            ensure!(
                self.mthp.get(order, MthpStat::NrAnon) == nr_anon[o],
                "order {order}: nr_anon {} but {} folios",
                self.mthp.get(order, MthpStat::NrAnon),
                nr_anon[o]
            );
            ensure!(
                self.mthp.get(order, MthpStat::NrAnonPartiallyMapped) == partial[o],
                "order {order}: nr_anon_partially_mapped {} but {}",
                self.mthp.get(order, MthpStat::NrAnonPartiallyMapped),
                partial[o]
            );
        }
        let pagetables: i64 = self.node_stat.iter().map(|s| s.pagetable).sum();
        // Tables freed through RCU count until their callback runs: still
        // page-table pages, out of every mm.
        let mut awaiting_rcu = 0usize;
        let mut in_use: Option<HashMap<u64, ()>> = None;
        for (_, c) in &self.rcu_pending {
            if let super::kmem::RcuCallback::Table { pfn, .. } = *c {
                awaiting_rcu += 1;
                ensure!(
                    pa.memmap.page(pfn).flags().contains(PageFlags::PGTABLE),
                    "table page {pfn:#x} awaiting RCU is no longer a page table"
                );
                let in_use = in_use.get_or_insert_with(|| self.pt.pages.iter().map(|(_, t)| (t.pfn, ())).collect());
                ensure!(
                    !in_use.contains_key(&pfn),
                    "table page {pfn:#x} awaiting RCU is still in use"
                );
            }
        }
        ensure!(
            pagetables == (self.pt.pages.len() + awaiting_rcu) as i64,
            "NR_PAGETABLE {pagetables} but {} tables and {awaiting_rcu} awaiting RCU",
            self.pt.pages.len()
        );
        let mm_tables: u64 = self.mms.iter().map(|(_, m)| m.nr_pgtables).sum();
        ensure!(
            mm_tables == self.pt.pages.len() as u64,
            "mms count {mm_tables} tables, {} exist",
            self.pt.pages.len()
        );
        Ok(())
    }
}

/// A folio's pages on the zone's count of the list it is on.
fn count_lru(stat: &mut LruStat, list: Option<super::lru::LruList>, nr: i64) {
    use super::lru::LruList;
    match list {
        Some(LruList::InactiveAnon) => stat.inactive_anon += nr,
        Some(LruList::ActiveAnon) => stat.active_anon += nr,
        Some(LruList::InactiveFile) => stat.inactive_file += nr,
        Some(LruList::ActiveFile) => stat.active_file += nr,
        None => {}
    }
}
