//! Dropping references to swap slots and freeing them (mm/swapfile.c,
//! v6.18: `swap_entries_put_map`, `swap_entries_put_cache`,
//! `swap_entries_free`, `swap_range_free`, `__swap_duplicate`).

use super::{Swap, SwapEntry, SWAP_HAS_CACHE, SWAP_MAP_MAX};

/// Why `swapcache_prepare` or `swap_duplicate` refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DupError {
    /// A slot already has a cache reference (a racing swap-in): `-EEXIST`.
    Exists,
    /// A slot is free: `-ENOENT`.
    NoEntry,
}

impl Swap {
    /// `swap_entries_free`: the last references of `nr` slots of one
    /// cluster went: the slots are free again.
    fn entries_free(&mut self, entry: SwapEntry, nr: u64) {
        let dev = &mut self.devices[entry.ty as usize];
        let ci = dev.cluster_of(entry.offset);
        for o in entry.offset..entry.offset + nr {
            dev.map[o as usize] = 0;
            dev.continued.remove(&o);
        }
        dev.clusters[ci as usize].count -= nr as u32;
        self.range_free(entry, nr);
        self.devices[entry.ty as usize].cluster_after_free(ci);
    }

    /// `swap_range_free`: the zero map cleared, zswap's copies dropped,
    /// the device told (`swap_slot_free_notify`), shadows cleared, the
    /// memcg record dropped (`mem_cgroup_uncharge_swap`), the space free.
    fn range_free(&mut self, entry: SwapEntry, nr: u64) {
        for i in 0..nr {
            self.zswap.invalidate(entry.plus(i));
        }
        let dev = &mut self.devices[entry.ty as usize];
        for o in entry.offset..entry.offset + nr {
            dev.set_zeromap(o, false);
            dev.set_written(o, false);
            dev.data.remove(&o);
            dev.cache.remove(&o);
            dev.set_cgroup_id(o, 1, 0);
            if dev.synchronous() {
                dev.notify_free += 1;
            }
        }
        dev.inuse_pages -= nr;
    }

    /// `swap_entry_put_locked`: one reference of `usage` kind (a map
    /// reference, or the cache bit) dropped from one slot; the slot is
    /// freed when nothing is left. Returns what is left.
    fn entry_put(&mut self, entry: SwapEntry, cache: bool) -> u8 {
        let dev = &mut self.devices[entry.ty as usize];
        let byte = dev.map[entry.offset as usize];
        let mut has_cache = byte & SWAP_HAS_CACHE;
        let mut count = byte & !SWAP_HAS_CACHE;
        if cache {
            debug_assert!(has_cache != 0, "cache reference of a slot without one");
            has_cache = 0;
        } else if count == SWAP_MAP_MAX && dev.continued.contains_key(&entry.offset) {
            let extra = dev.continued.get_mut(&entry.offset).expect("checked");
            *extra -= 1;
            if *extra == 0 {
                dev.continued.remove(&entry.offset);
            }
        } else {
            count -= 1;
        }
        let left = count | has_cache;
        if left != 0 {
            self.devices[entry.ty as usize].map[entry.offset as usize] = left;
        } else {
            self.entries_free(entry, 1);
        }
        left
    }

    /// `swap_entries_put_map`: one map reference dropped from each of `nr`
    /// slots of one cluster. Returns whether any slot is left with only
    /// its cache reference.
    fn entries_put_map(&mut self, entry: SwapEntry, nr: u64) -> bool {
        let dev = &self.devices[entry.ty as usize];
        let last_maps = nr > 1
            && (entry.offset..entry.offset + nr)
                .all(|o| dev.map[o as usize] & !SWAP_HAS_CACHE == 1 && !dev.continued.contains_key(&o));
        if last_maps {
            let has_cache = dev.has_cache(entry.offset);
            let uniform = (entry.offset..entry.offset + nr).all(|o| dev.has_cache(o) == has_cache);
            if uniform {
                if has_cache {
                    let dev = &mut self.devices[entry.ty as usize];
                    for o in entry.offset..entry.offset + nr {
                        dev.map[o as usize] = SWAP_HAS_CACHE;
                    }
                } else {
                    self.entries_free(entry, nr);
                }
                return has_cache;
            }
        }
        let mut has_cache = false;
        for i in 0..nr {
            if self.entry_put(entry.plus(i), false) == SWAP_HAS_CACHE {
                has_cache = true;
            }
        }
        has_cache
    }

    /// `swap_entries_put_map_nr` / `swap_free_nr`: one map reference
    /// dropped from each of `nr` slots, cluster by cluster. Returns whether
    /// any slot is left with only its cache reference.
    pub fn swap_free_nr(&mut self, entry: SwapEntry, nr: u64) -> bool {
        let mut has_cache = false;
        let mut e = entry;
        let mut left = nr;
        while left > 0 {
            let rest = self.cluster_slots - e.offset % self.cluster_slots;
            let n = left.min(rest);
            has_cache |= self.entries_put_map(e, n);
            e = e.plus(n);
            left -= n;
        }
        has_cache
    }

    /// `swap_entries_put_cache` / `put_swap_folio` / `swapcache_clear`:
    /// the cache reference of `nr` slots of one cluster dropped.
    pub fn put_cache(&mut self, entry: SwapEntry, nr: u64) {
        if self.devices[entry.ty as usize].only_has_cache(entry.offset, nr) {
            self.entries_free(entry, nr);
        } else {
            for i in 0..nr {
                self.entry_put(entry.plus(i), true);
            }
        }
    }

    /// `swap_duplicate` (fork): one more map reference.
    pub fn swap_duplicate(&mut self, entry: SwapEntry) -> Result<(), DupError> {
        let dev = &mut self.devices[entry.ty as usize];
        let byte = dev.map[entry.offset as usize];
        let count = byte & !SWAP_HAS_CACHE;
        if count == 0 && byte & SWAP_HAS_CACHE == 0 {
            return Err(DupError::NoEntry);
        }
        if count < SWAP_MAP_MAX {
            dev.map[entry.offset as usize] = byte + 1;
        } else {
            *dev.continued.entry(entry.offset).or_insert(0) += 1;
        }
        Ok(())
    }

    /// `swapcache_prepare`: the cache bit on `nr` slots, unless one has it
    /// already or is free.
    pub fn swapcache_prepare(&mut self, entry: SwapEntry, nr: u64) -> Result<(), DupError> {
        let dev = &mut self.devices[entry.ty as usize];
        for o in entry.offset..entry.offset + nr {
            let byte = dev.map[o as usize];
            if byte & SWAP_HAS_CACHE != 0 {
                return Err(DupError::Exists);
            }
            if byte == 0 {
                return Err(DupError::NoEntry);
            }
        }
        for o in entry.offset..entry.offset + nr {
            dev.map[o as usize] |= SWAP_HAS_CACHE;
        }
        Ok(())
    }

    /// One map reference for each of `nr` freshly allocated cache-only
    /// slots (`folio_dup_swap` as `try_to_unmap_one` installs a swap PTE).
    pub fn dup_for_unmap(&mut self, entry: SwapEntry) {
        self.swap_duplicate(entry)
            .unwrap_or_else(|e| unreachable!("a swap-cache slot refused a map reference: {e:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SwapKind, SwapSpec};
    use super::*;

    fn zram() -> Swap {
        let mut s = Swap::new(1, 9, 4096, false);
        s.swapon(SwapSpec {
            size_bytes: 64 << 20,
            kind: SwapKind::Zram,
        })
        .unwrap();
        s
    }

    #[test]
    fn a_slot_lives_while_a_map_or_cache_reference_holds_it() {
        let mut s = zram();
        let e = s.folio_alloc_swap(0, 0).unwrap();
        s.dup_for_unmap(e);
        s.put_cache(e, 1);
        assert_eq!(s.swap_count(e), 1);
        assert_eq!(s.free_pages(), s.total_pages() - 1);
        assert!(!s.swap_free_nr(e, 1));
        assert_eq!(s.free_pages(), s.total_pages());
        assert_eq!(s.devices[0].notify_free, 1);
        s.devices[0].check().unwrap();
    }

    #[test]
    fn freeing_a_whole_cluster_puts_it_at_the_tail_of_the_free_list() {
        let mut s = zram();
        let e = s.folio_alloc_swap(0, 9).unwrap();
        assert_eq!(e.offset, 512);
        for i in 0..512 {
            s.dup_for_unmap(e.plus(i));
        }
        s.put_cache(e, 512);
        assert!(!s.swap_free_nr(e, 512));
        s.devices[0].check().unwrap();
        // Cluster 1 went to the tail: the next PMD folio takes cluster 2.
        assert_eq!(s.folio_alloc_swap(0, 9).unwrap().offset, 1024);
    }

    #[test]
    fn a_fork_shares_a_slot_and_a_cache_pin_refuses_a_second_swapin() {
        let mut s = zram();
        let e = s.folio_alloc_swap(0, 0).unwrap();
        s.dup_for_unmap(e);
        s.put_cache(e, 1);
        s.swap_duplicate(e).unwrap();
        assert_eq!(s.swap_count(e), 2);
        s.swapcache_prepare(e, 1).unwrap();
        assert_eq!(s.swapcache_prepare(e, 1), Err(DupError::Exists));
        assert!(!s.swap_free_nr(e, 1));
        assert!(s.swap_free_nr(e, 1), "left with only the cache pin");
        s.put_cache(e, 1);
        assert_eq!(s.free_pages(), s.total_pages());
    }
}
