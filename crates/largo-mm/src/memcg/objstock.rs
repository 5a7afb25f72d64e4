//! Kernel objects charged to a memcg by the byte (`SLAB_ACCOUNT`
//! caches): each cpu's object stock (`struct obj_stock_pcp`) holds bytes
//! already charged for one memcg, refilled a page at a time; bytes left
//! when the stock changes hands wait in the memcg (`nr_charged_bytes`).
//! Mirrors `obj_cgroup_charge_account`, `refill_obj_stock` and
//! `drain_obj_stock` (mm/memcontrol.c, v6.18); the page charges
//! themselves go through the VM's `try_charge_memcg`.

/// An accounted slab cache the model allocates from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlabCache {
    /// `vm_area_struct` (mm/vma_init.c).
    VmArea,
    /// `anon_vma` and `anon_vma_chain` (mm/rmap.c).
    AnonVma,
    AnonVmaChain,
    /// `xa_node` of a page cache (lib/radix-tree.c `radix_tree_node`).
    RadixTreeNode,
    /// A shmem file's inode, dentry and file (mm/shmem.c, fs/dcache.c,
    /// fs/file_table.c).
    ShmemInode,
    Dentry,
    Filp,
}

impl SlabCache {
    /// Freed through RCU: the kernel's free (and so its memcg free hook,
    /// `refill_obj_stock`) runs in a callback once a grace period has
    /// passed, on the cpu that queued it. `xa_node_free` and a shmem
    /// inode's `destroy_inode` use `call_rcu`; the other caches free at
    /// once (`vm_area_struct`, `anon_vma`, `filp` are
    /// `SLAB_TYPESAFE_BY_RCU`, a memfd's dentry is `DCACHE_NORCU`).
    pub fn freed_by_rcu(self) -> bool {
        matches!(self, SlabCache::RadixTreeNode | SlabCache::ShmemInode)
    }

    /// `obj_full_size`: the slab object size plus the `obj_cgroup`
    /// pointer kept beside it. Object sizes of x86_64 v6.18 SLUB
    /// (`/sys/kernel/slab/<cache>/slab_size` on the validation host).
    pub fn charged_bytes(self) -> u64 {
        let ptr = 8;
        ptr + match self {
            SlabCache::VmArea => 192,
            SlabCache::AnonVma => 104,
            SlabCache::AnonVmaChain => 64,
            SlabCache::RadixTreeNode => 584,
            SlabCache::ShmemInode => 752,
            SlabCache::Dentry | SlabCache::Filp => 192,
        }
    }
}

/// A charge or uncharge waiting for the charge path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabOp {
    pub memcg: u16,
    pub cache: SlabCache,
    pub alloc: bool,
}

/// Every cpu's object stock and the memcgs' parked bytes.
///
/// Invariant: a stock's bytes belong to the memcg it names; bytes of a
/// memcg are charged pages (the sum over stocks and `nr_charged_bytes`
/// plus live objects is a whole number of pages counted in `kmem`).
#[derive(Clone, Debug, Default)]
pub struct ObjStocks {
    /// Per cpu: (memcg, bytes).
    stock: Vec<Option<(usize, u64)>>,
    /// `objcg->nr_charged_bytes` by memcg id.
    parked: Vec<u64>,
}

/// What a refill or drain hands back: whole pages of a memcg to
/// uncharge, through its stock (`obj_cgroup_uncharge_pages`) or straight
/// from the counter (`drain_obj_stock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unchargeable {
    pub memcg: usize,
    pub nr_pages: u64,
}

impl ObjStocks {
    pub fn new(nr_cpus: usize) -> ObjStocks {
        ObjStocks {
            stock: vec![None; nr_cpus.max(1)],
            parked: Vec::new(),
        }
    }

    /// `consume_obj_stock`.
    pub fn consume(&mut self, cpu: usize, memcg: usize, bytes: u64) -> bool {
        let cpu = cpu % self.stock.len();
        match &mut self.stock[cpu] {
            Some((m, n)) if *m == memcg && *n >= bytes => {
                *n -= bytes;
                true
            }
            _ => false,
        }
    }

    fn parked_mut(&mut self, memcg: usize) -> &mut u64 {
        if self.parked.len() <= memcg {
            self.parked.resize(memcg + 1, 0);
        }
        &mut self.parked[memcg]
    }

    /// `refill_obj_stock`: `bytes` of `memcg` into the cpu's stock (a
    /// stock of another memcg is drained first, taking the memcg's parked
    /// bytes, and may then give pages back); with `allow_uncharge`, whole
    /// pages over a page go back. Returns the pages to uncharge from a
    /// drained memcg's counter and those to uncharge through `memcg`'s
    /// charge stock.
    pub fn refill(
        &mut self,
        cpu: usize,
        memcg: usize,
        bytes: u64,
        mut allow_uncharge: bool,
        page_bytes: u64,
    ) -> (Option<Unchargeable>, Option<Unchargeable>) {
        let cpu = cpu % self.stock.len();
        let mut drained = None;
        if self.stock[cpu].map(|(m, _)| m) != Some(memcg) {
            drained = self.drain_cpu_with(cpu, page_bytes);
            let parked = std::mem::take(self.parked_mut(memcg));
            self.stock[cpu] = Some((memcg, parked));
            allow_uncharge = true;
        }
        let Some((_, n)) = &mut self.stock[cpu] else {
            unreachable!("the stock was just set");
        };
        *n += bytes;
        let mut back = None;
        if allow_uncharge && *n > page_bytes {
            back = Some(Unchargeable {
                memcg,
                nr_pages: *n / page_bytes,
            });
            *n %= page_bytes;
        }
        (drained, back)
    }

    /// `drain_obj_stock` of one cpu: the whole pages are returned (to
    /// uncharge from the memcg's counter), the rest parked.
    fn drain_cpu_with(&mut self, cpu: usize, page_bytes: u64) -> Option<Unchargeable> {
        let (memcg, bytes) = self.stock[cpu].take()?;
        *self.parked_mut(memcg) += bytes % page_bytes;
        (bytes >= page_bytes).then_some(Unchargeable {
            memcg,
            nr_pages: bytes / page_bytes,
        })
    }

    /// `drain_obj_stock` of `cpu`, as a free of another cgroup's object
    /// there does (`refill_obj_stock` switching the stock).
    pub fn drain_cpu(&mut self, cpu: usize, page_bytes: u64) -> Option<Unchargeable> {
        let cpu = cpu % self.stock.len();
        self.drain_cpu_with(cpu, page_bytes)
    }

    /// The object stocks `drain_all_stock(memcg)` flushes: those of every
    /// cpu caching `memcg`.
    pub fn drain_all(&mut self, memcg: usize, page_bytes: u64) -> Vec<Unchargeable> {
        let cpus: Vec<usize> = (0..self.stock.len())
            .filter(|&c| self.stock[c].is_some_and(|(m, _)| m == memcg))
            .collect();
        cpus.into_iter()
            .filter_map(|c| self.drain_cpu_with(c, page_bytes))
            .collect()
    }

    /// Bytes of `memcg` held in stocks and parked (for checks).
    pub fn held_bytes(&self, memcg: usize) -> u64 {
        let stocked: u64 = self
            .stock
            .iter()
            .flatten()
            .filter(|(m, _)| *m == memcg)
            .map(|(_, n)| n)
            .sum();
        stocked + self.parked.get(memcg).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_of_another_memcg_drains_and_parks_the_rest() {
        let mut s = ObjStocks::new(1);
        assert!(!s.consume(0, 1, 200));
        assert_eq!(s.refill(0, 1, 4096 - 200, false, 4096), (None, None));
        assert!(s.consume(0, 1, 200));
        assert_eq!(s.held_bytes(1), 4096 - 400);
        // Memcg 2 takes the stock: memcg 1's bytes (under a page) park.
        assert_eq!(s.refill(0, 2, 100, false, 4096), (None, None));
        assert_eq!(s.held_bytes(1), 4096 - 400);
        // Back to memcg 1: its parked bytes return, and with the freed
        // object's bytes it holds more than a page: one goes back.
        let (drained, back) = s.refill(0, 1, 600, true, 4096);
        assert_eq!(drained, None);
        assert_eq!(back, Some(Unchargeable { memcg: 1, nr_pages: 1 }));
        assert_eq!(s.held_bytes(1), 200);
        assert_eq!(s.held_bytes(2), 100);
    }

    #[test]
    fn drain_all_returns_whole_pages_and_parks_bytes() {
        let mut s = ObjStocks::new(2);
        // Taking the stock allows an uncharge over a page...
        let (_, back) = s.refill(0, 1, 4096 + 300, false, 4096);
        assert_eq!(back, Some(Unchargeable { memcg: 1, nr_pages: 1 }));
        // ...refilling it without that leaves more than a page stocked.
        assert_eq!(s.refill(0, 1, 4096, false, 4096), (None, None));
        let back = s.drain_all(1, 4096);
        assert_eq!(back, vec![Unchargeable { memcg: 1, nr_pages: 1 }]);
        assert_eq!(s.held_bytes(1), 300);
    }
}
