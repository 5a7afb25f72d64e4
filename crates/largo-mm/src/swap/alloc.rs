//! `folio_alloc_swap` (mm/swapfile.c, v6.18): slots for a folio of any
//! order up to the cluster size, from this cpu's cluster first
//! (`swap_alloc_fast`), then from the devices in priority order
//! (`swap_alloc_slow`, which tries only the first device for a large
//! folio). The slots get `SWAP_HAS_CACHE`; the caller adds the folio to
//! the swap cache.

use super::{Swap, SwapEntry};

impl Swap {
    /// Allocates `1 << order` naturally aligned slots on `cpu`'s behalf.
    /// `None` when no device can give them (a large folio is then split
    /// by the caller).
    pub fn folio_alloc_swap(&mut self, cpu: usize, order: u32) -> Option<SwapEntry> {
        if (1u64 << order) > self.cluster_slots {
            return None;
        }
        let cpu = cpu % self.percpu.len();
        self.alloc_fast(cpu, order).or_else(|| self.alloc_slow(cpu, order))
    }

    /// `swap_alloc_fast`: continue in the cluster this cpu last used for
    /// this order, if it still serves the order.
    fn alloc_fast(&mut self, cpu: usize, order: u32) -> Option<SwapEntry> {
        let (ty, offset) = self.percpu[cpu][order as usize]?;
        let dev = &mut self.devices[ty];
        let ci = dev.cluster_of(offset);
        if !dev.cluster_usable(ci, order) {
            return None;
        }
        let from = if dev.clusters[ci as usize].count == 0 {
            dev.cluster_offset(ci)
        } else {
            offset
        };
        dev.last_scan_next = None;
        let (found, _) = dev.alloc_scan_cluster(ci, from, order);
        self.note_pointer(cpu, ty, order);
        found.map(|o| SwapEntry::new(ty as u8, o))
    }

    /// `swap_alloc_slow`: the devices with free slots by priority; a large
    /// folio gives up after the first.
    fn alloc_slow(&mut self, cpu: usize, order: u32) -> Option<SwapEntry> {
        let pmd_order = self.cluster_slots.trailing_zeros();
        let mut order_of_devices: Vec<usize> = (0..self.devices.len())
            .filter(|&t| self.devices[t].inuse_pages < self.devices[t].pages)
            .collect();
        order_of_devices.sort_by_key(|&t| std::cmp::Reverse(self.devices[t].prio));
        for ty in order_of_devices {
            let dev = &mut self.devices[ty];
            dev.last_scan_next = None;
            let (found, _) = dev.cluster_alloc_swap_entry(order, pmd_order);
            self.note_pointer(cpu, ty, order);
            if let Some(offset) = found {
                return Some(SwapEntry::new(ty as u8, offset));
            }
            if order > 0 {
                return None;
            }
        }
        None
    }

    /// Where the last scan left the cluster pointer: this cpu's for a
    /// solid-state device, the device's global one otherwise.
    fn note_pointer(&mut self, cpu: usize, ty: usize, order: u32) {
        let dev = &mut self.devices[ty];
        let Some(next) = dev.last_scan_next.take() else {
            return;
        };
        if dev.solidstate() {
            self.percpu[cpu][order as usize] = next.map(|o| (ty, o));
        } else {
            dev.global_next[order as usize] = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SwapKind, SwapSpec};
    use super::*;

    fn zram(size: &str) -> Swap {
        let mut s = Swap::new(2, 9, 4096, false);
        s.swapon(SwapSpec {
            size_bytes: largo_types::parse_size(size).unwrap(),
            kind: SwapKind::Zram,
        })
        .unwrap();
        s
    }

    #[test]
    fn a_fresh_device_gives_order_0_from_slot_1_and_large_folios_from_the_first_free_cluster() {
        let mut s = zram("64M");
        let small: Vec<u64> = (0..3).map(|_| s.folio_alloc_swap(0, 0).unwrap().offset).collect();
        assert_eq!(small, [1, 2, 3]);
        let large: Vec<u64> = (0..3).map(|_| s.folio_alloc_swap(0, 4).unwrap().offset).collect();
        assert_eq!(large, [512, 528, 544], "64K folios take cluster 1, naturally aligned");
        assert_eq!(
            s.folio_alloc_swap(0, 9).unwrap().offset,
            1024,
            "a PMD folio takes a whole free cluster"
        );
        assert_eq!(s.devices[0].inuse_pages, 3 + 48 + 512);
        s.devices[0].check().unwrap();
    }

    #[test]
    fn each_cpu_continues_in_its_own_cluster() {
        let mut s = zram("64M");
        assert_eq!(s.folio_alloc_swap(0, 4).unwrap().offset, 512);
        assert_eq!(
            s.folio_alloc_swap(1, 4).unwrap().offset,
            1024,
            "cpu 1 isolates a cluster of its own"
        );
        assert_eq!(s.folio_alloc_swap(0, 4).unwrap().offset, 528);
    }

    #[test]
    fn large_folios_fail_once_no_cluster_can_serve_them() {
        // 4 clusters: cluster 0 holds the header, so three can take a 2M folio.
        let mut s = zram("8M");
        for _ in 0..3 {
            assert!(s.folio_alloc_swap(0, 9).is_some());
        }
        assert!(s.folio_alloc_swap(0, 9).is_none());
        // Order 0 still fits in the header's cluster.
        assert_eq!(s.folio_alloc_swap(0, 0).unwrap().offset, 1);
        s.devices[0].check().unwrap();
    }

    #[test]
    fn a_device_fills_up_completely_with_small_folios() {
        let mut s = zram("4M");
        let mut n = 0;
        while s.folio_alloc_swap(0, 0).is_some() {
            n += 1;
        }
        assert_eq!(n, 1023);
        assert_eq!(s.free_pages(), 0);
        s.devices[0].check().unwrap();
    }
}
