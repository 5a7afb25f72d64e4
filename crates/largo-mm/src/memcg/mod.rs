//! Memory cgroups, cgroup v1 as the host mounts them (mm/memcontrol.c,
//! mm/memcontrol-v1.c, mm/page_counter.c, v6.18): per memcg a memory
//! page counter with its limit, watermark (`max_usage_in_bytes`) and
//! `failcnt`, the memsw counter (memory plus swap), the per-cpu charge
//! stock, swap records, the v1 `memory.stat` events and OOM kills.
//!
//! Memcg 0 is the root: nothing is charged to it. The charge path with
//! its reclaim lives with the VM (`vm/memcg.rs`), which owns reclaim.

mod counter;
mod objstock;
mod stat;

pub use counter::PageCounter;
pub use objstock::{ObjStocks, SlabCache, SlabOp, Unchargeable};
pub use stat::MemcgStat;

/// `MEMCG_CHARGE_BATCH`: pages a charge takes beyond its need into the
/// cpu's stock when the limit allows.
pub const MEMCG_CHARGE_BATCH: u64 = 64;

/// One memory cgroup.
#[derive(Clone, Debug)]
pub struct Memcg {
    /// `memory.limit_in_bytes` and the usage it bounds.
    pub memory: PageCounter,
    /// `memsw.max_usage_in_bytes`'s watermark, in pages.
    pub memsw_watermark: u64,
    /// `memory.kmem.usage_in_bytes`: page tables and the pages charged
    /// for accounted slab objects (pages).
    pub kmem_pages: u64,
    /// `memory.swappiness` (copied from `vm.swappiness` at creation).
    pub swappiness: u64,
    /// `memory.oom_control`'s `oom_kill`.
    pub oom_kill: u64,
    /// The highest usage (memory) seen, for reports (the watermark).
    pub stat: MemcgStat,
}

/// Every memcg of the machine and each cpu's charge stock.
#[derive(Clone, Debug)]
pub struct Memcgs {
    /// By id; 0 is the root.
    groups: Vec<Memcg>,
    /// Per cpu: the memcg whose pages the stock holds, and how many.
    stock: Vec<Option<(usize, u64)>>,
    /// Per cpu: the bytes charged ahead for slab objects.
    pub obj: ObjStocks,
}

impl Memcgs {
    pub fn new(nr_cpus: usize) -> Memcgs {
        Memcgs {
            groups: vec![Memcg::new(u64::MAX, 60)],
            stock: vec![None; nr_cpus.max(1)],
            obj: ObjStocks::new(nr_cpus),
        }
    }

    /// `mkdir` of a memcg with a limit of `limit_pages` and the current
    /// `vm.swappiness`; returns its id.
    pub fn create(&mut self, limit_pages: u64, swappiness: u64) -> usize {
        self.groups.push(Memcg::new(limit_pages, swappiness));
        self.groups.len() - 1
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn exists(&self, id: usize) -> bool {
        id < self.groups.len()
    }

    pub fn get(&self, id: usize) -> &Memcg {
        &self.groups[id]
    }

    pub fn get_mut(&mut self, id: usize) -> &mut Memcg {
        &mut self.groups[id]
    }

    /// The memcgs other than the root.
    pub fn children(&self) -> impl Iterator<Item = (usize, &Memcg)> {
        self.groups.iter().enumerate().skip(1)
    }

    pub fn swappiness(&self, id: usize) -> Option<u64> {
        (id != 0).then(|| self.groups[id].swappiness)
    }

    /// `consume_stock`: the cpu's stock pays for `nr` pages of `id` if it
    /// holds that many of `id`'s.
    pub fn consume_stock(&mut self, cpu: usize, id: usize, nr: u64) -> bool {
        let cpu = cpu % self.stock.len();
        match &mut self.stock[cpu] {
            Some((m, n)) if *m == id && *n >= nr && nr <= MEMCG_CHARGE_BATCH => {
                *n -= nr;
                true
            }
            _ => false,
        }
    }

    /// `refill_stock`: pages charged ahead go to the cpu's stock; a stock
    /// of another memcg is drained first; over a batch, it all goes back.
    pub fn refill_stock(&mut self, cpu: usize, id: usize, nr: u64) {
        let cpu = cpu % self.stock.len();
        if nr > MEMCG_CHARGE_BATCH {
            self.groups[id].memory.uncharge(nr);
            return;
        }
        match self.stock[cpu] {
            Some((m, _)) if m == id => {}
            _ => self.drain_stock(cpu),
        }
        let total = self.stock[cpu].map_or(0, |(_, n)| n) + nr;
        if total > MEMCG_CHARGE_BATCH {
            self.groups[id].memory.uncharge(total);
            self.stock[cpu] = Some((id, 0));
        } else {
            self.stock[cpu] = Some((id, total));
        }
    }

    /// `drain_stock` of one cpu.
    pub fn drain_stock(&mut self, cpu: usize) {
        if let Some((m, n)) = self.stock[cpu].take() {
            self.groups[m].memory.uncharge(n);
        }
    }

    /// `drain_all_stock` for memcg `id`.
    pub fn drain_all_stock(&mut self, id: usize) {
        for cpu in 0..self.stock.len() {
            if self.stock[cpu].is_some_and(|(m, _)| m == id) {
                self.drain_stock(cpu);
            }
        }
    }

    /// Pages of `id` held in stocks.
    pub fn stocked(&self, id: usize) -> u64 {
        self.stock
            .iter()
            .flatten()
            .filter(|(m, _)| *m == id)
            .map(|(_, n)| n)
            .sum()
    }

    /// A folio of `nr` pages swapped out: its memory charge goes (the
    /// caller records its slots to the memcg: `memcg1_swapout`); memsw
    /// (`swap_pages` recorded now) may peak.
    pub fn uncharge_folio_to_swap(&mut self, id: usize, nr: u64, swap_pages: u64) {
        if id == 0 {
            return;
        }
        let g = &mut self.groups[id];
        g.memory.uncharge(nr);
        g.memsw_watermark = g.memsw_watermark.max(g.memory.usage + swap_pages);
        g.stat.pgpgout += 1;
    }
}

impl Memcg {
    fn new(limit: u64, swappiness: u64) -> Memcg {
        Memcg {
            memory: PageCounter::new(limit),
            memsw_watermark: 0,
            kmem_pages: 0,
            swappiness,
            oom_kill: 0,
            stat: MemcgStat::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stock_holds_a_batch_ahead_and_gives_back_what_overflows() {
        let mut m = Memcgs::new(2);
        let id = m.create(1000, 60);
        assert!(m.get_mut(id).memory.try_charge(64));
        m.refill_stock(0, id, 63);
        assert!(m.consume_stock(0, id, 1));
        assert!(!m.consume_stock(1, id, 1), "another cpu's stock is its own");
        assert_eq!(m.stocked(id), 62);
        // Two pages are in use; ten more charged ahead overflow the stock.
        assert!(m.get_mut(id).memory.try_charge(10));
        m.refill_stock(0, id, 10);
        assert_eq!(m.stocked(id), 0, "over a batch, the whole stock is uncharged");
        assert_eq!(m.get(id).memory.usage, 2);
        assert_eq!(m.get(id).memory.watermark, 74);
    }
}
