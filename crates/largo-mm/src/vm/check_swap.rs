//! Swap and LRU invariants (part of `Vm::check_invariants`):
//!
//! - every slot's map count is the number of page-table swap entries
//!   naming it; its cache bit is set exactly for slots whose folio is in
//!   the swap cache, and the cache table names that folio;
//! - every swap-cache folio's slots name it back;
//! - every LRU list links folios of its lruvec in both directions, holds
//!   the pages it counts, and each folio on it says it is there (with the
//!   memmap's `PG_lru`); folios in a cpu's batch are on no list.

use rustc_hash::FxHashMap as HashMap;

use super::check::VmInvariantError;
use super::lru::{FolioRef, LruList};
use super::Vm;
use crate::memmap::PageFlags;
use crate::page_alloc::PageAlloc;
use crate::swap::{CacheSlot, SwapEntry};

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(VmInvariantError(format!($($fmt)+)));
        }
    };
}

impl Vm {
    pub(super) fn check_swap(&self, refs: &HashMap<SwapEntry, u64>) -> Result<(), VmInvariantError> {
        for (ty, dev) in self.swap.devices.iter().enumerate() {
            dev.check().map_err(VmInvariantError)?;
            for offset in 1..dev.max {
                let e = SwapEntry::new(ty as u8, offset);
                let count = dev.count(offset) as u64 + dev.continued.get(&offset).copied().unwrap_or(0) as u64;
                let want = refs.get(&e).copied().unwrap_or(0);
                ensure!(
                    count == want,
                    "swap slot {e:?}: map count {count} but {want} swap entries"
                );
                let cached = matches!(dev.cache_slot(offset), Some(CacheSlot::Folio(_)));
                ensure!(
                    dev.has_cache(offset) == cached,
                    "swap slot {e:?}: cache bit {} but a cached folio: {cached}",
                    dev.has_cache(offset)
                );
                if let Some(CacheSlot::Folio(t)) = dev.cache_slot(offset) {
                    let FolioRef::Anon(k) = FolioRef::from_token(t) else {
                        return Err(VmInvariantError(format!("swap slot {e:?} caches a shmem folio")));
                    };
                    let folio = self.folios.get(k);
                    ensure!(
                        folio.is_some_and(|f| f
                            .swap
                            .is_some_and(|s| s.ty == e.ty && s.offset <= offset && offset < s.offset + f.nr_pages())),
                        "swap slot {e:?}: its cached folio {k} does not hold it"
                    );
                }
            }
        }
        for (k, f) in self.folios.iter() {
            if let Some(e) = f.swap {
                for i in 0..f.nr_pages() {
                    let slot = self.swap.device(e).cache_slot(e.offset + i);
                    ensure!(
                        slot == Some(CacheSlot::Folio(FolioRef::Anon(k).token())),
                        "swap-cache folio {:#x}: slot {} does not name it",
                        f.pfn,
                        e.offset + i
                    );
                }
            }
        }
        Ok(())
    }

    pub(super) fn check_lru(&self, pa: &PageAlloc) -> Result<(), VmInvariantError> {
        let mut on_lists = 0usize;
        for lv in 0..self.lruvecs.len() {
            for lru in LruList::ALL {
                let mut pages = 0i64;
                let mut prev: Option<FolioRef> = None;
                let mut cur = self.lruvecs[lv].head(lru);
                while let Some(r) = cur {
                    let s = self.lru_state(r);
                    ensure!(
                        s.list == Some(lru),
                        "{r:?} is linked on {lru:?} of lruvec {lv} but says {:?}",
                        s.list
                    );
                    ensure!(
                        s.prev_link() == prev,
                        "{r:?}: broken prev link on {lru:?} of lruvec {lv}"
                    );
                    ensure!(self.folio_lruvec(pa, r) == lv, "{r:?} is on lruvec {lv}, not its own");
                    ensure!(
                        LruList::of(self.folio_is_file_lru(r), s.active) == lru,
                        "{r:?}: its flags choose another list than {lru:?}"
                    );
                    let (pfn, order) = self.folio_pfn_order(r);
                    ensure!(
                        pa.memmap.page(pfn).flags().contains(PageFlags::LRU),
                        "{r:?} on a list without PG_lru"
                    );
                    pages += 1 << order;
                    on_lists += 1;
                    prev = Some(r);
                    cur = s.next_link();
                }
                ensure!(
                    self.lruvecs[lv].tail(lru) == prev,
                    "lruvec {lv} {lru:?}: tail does not end the list"
                );
                ensure!(
                    self.lruvecs[lv].nr_pages[lru as usize] == pages,
                    "lruvec {lv} {lru:?}: {} pages counted, {pages} on the list",
                    self.lruvecs[lv].nr_pages[lru as usize]
                );
            }
        }
        let claimed = self.folios.iter().filter(|(_, f)| f.lru.list.is_some()).count()
            + self.shmem.folios.iter().filter(|(_, f)| f.lru.list.is_some()).count();
        ensure!(
            claimed == on_lists,
            "{claimed} folios say they are on a list, {on_lists} are"
        );
        for batch in &self.lru_batches {
            for &r in batch {
                let s = self.lru_state(r);
                ensure!(s.batched && s.list.is_none(), "{r:?} in an lru_add batch: {s:?}");
            }
        }
        // lru_lazyfree, lru_deactivate and activate: each folio counts its entries.
        self.check_counted_batch(&self.lru_lazyfree_batches, "lru_lazyfree", |s| s.lazyfree_batched)?;
        self.check_counted_batch(&self.lru_deactivate_batches, "lru_deactivate", |s| s.deactivate_batched)?;
        self.check_counted_batch(&self.lru_activate_batches, "activate", |s| s.activate_batched)?;
        Ok(())
    }

    fn check_counted_batch(
        &self,
        batches: &[Vec<FolioRef>],
        name: &str,
        counted: impl Fn(&super::lru::LruState) -> u16,
    ) -> Result<(), VmInvariantError> {
        let mut entries: HashMap<FolioRef, usize> = HashMap::default();
        for &r in batches.iter().flatten() {
            *entries.entry(r).or_default() += 1;
        }
        for &r in entries.keys() {
            let present = match r {
                FolioRef::Anon(k) => self.folios.contains(k),
                FolioRef::Shmem(k) => self.shmem.folios.contains(k),
            };
            ensure!(present, "{r:?} in an {name} batch: gone");
        }
        let anon = self.folios.iter().map(|(k, f)| (FolioRef::Anon(k), &f.lru));
        let shmem = self.shmem.folios.iter().map(|(k, f)| (FolioRef::Shmem(k), &f.lru));
        for (r, s) in anon.chain(shmem) {
            let n = entries.get(&r).copied().unwrap_or(0);
            ensure!(
                counted(s) as usize == n,
                "{r:?} counts {} {name} entries, the batches hold {n}",
                counted(s)
            );
        }
        Ok(())
    }
}
