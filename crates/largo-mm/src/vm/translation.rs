//! The translations a TLB would hold for a range of a task's address
//! space: for each base page, the unit one TLB entry covers (a PMD
//! mapping, an arm64 contiguous-bit range, an x86 coalesced group of PTEs,
//! or the page alone), read from the page tables as the hardware sees
//! them.

use super::types::Pid;
use super::Vm;
use crate::page_alloc::PageAlloc;

/// A TLB entry's reach: its first virtual address and its size as a shift.
/// Encoded in one `u64` key: `(start >> 12) << 6 | shift`.
pub type UnitKey = u64;

pub fn unit_key(start: u64, shift: u32) -> UnitKey {
    ((start >> 12) << 6) | shift as u64
}

/// The shift of a unit key.
pub fn unit_shift(key: UnitKey) -> u32 {
    (key & 63) as u32
}

/// The start address of a unit key.
pub fn unit_start(key: UnitKey) -> u64 {
    (key >> 6) << 12
}

/// How PTEs may share a TLB entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contiguity {
    /// arm64: the contiguous-bit range, as an order (`cont_pte_order`);
    /// the kernel sets the bit on PTEs of one large folio covering it.
    pub cont_order: Option<u32>,
    /// x86 AMD coalescing or arm64 HPA: this many (as an order) aligned
    /// PTEs mapping physically contiguous pages of one folio share an entry.
    pub coalesce_order: u32,
}

impl Vm {
    /// For each base page of `[start, start + len)` of `pid`'s address
    /// space, the TLB unit that translates it; `None` for a page without a
    /// present translation.
    pub fn translation_units(
        &self,
        pa: &PageAlloc,
        pid: Pid,
        start: u64,
        len: u64,
        contiguity: Contiguity,
    ) -> Vec<Option<UnitKey>> {
        let Some(task) = self.tasks.get(&pid) else {
            return Vec::new();
        };
        let root = self.mms[task.mm].pgd;
        let shift = self.page_shift();
        let nr = (len >> shift) as usize;
        let mut out = Vec::with_capacity(nr);
        for i in 0..nr {
            let addr = start + ((i as u64) << shift);
            out.push(self.unit_of(pa, root, addr, contiguity));
        }
        out
    }

    fn unit_of(&self, pa: &PageAlloc, root: usize, addr: u64, c: Contiguity) -> Option<UnitKey> {
        let shift = self.page_shift();
        let (table, index, level) = self.pt.leaf(root, addr)?;
        let e = self.pt.get(table, index);
        if !e.present() {
            return None;
        }
        if level > 0 {
            let s = shift + level * self.pt.shape.bits_per_level;
            return Some(unit_key(addr & !((1u64 << s) - 1), s));
        }
        // The aligned group of `order` PTEs around `index` maps physically
        // contiguous pages starting at an aligned pfn (and, for contpte,
        // one folio).
        let group = |order: u32, same_folio: bool| -> bool {
            let n = 1usize << order;
            let first = index & !(n - 1);
            let pte0 = self.pt.get(table, first);
            if !pte0.present() || !pte0.pfn().is_multiple_of(n as u64) {
                return false;
            }
            let folio = same_folio.then(|| pa.memmap.folio_head(pte0.pfn()));
            (0..n).all(|k| {
                let p = self.pt.get(table, first + k);
                p.present()
                    && p.pfn() == pte0.pfn() + k as u64
                    && folio.is_none_or(|f| pa.memmap.folio_head(p.pfn()) == f)
            })
        };
        if let Some(order) = c.cont_order.filter(|&o| group(o, true)) {
            let s = shift + order;
            return Some(unit_key(addr & !((1u64 << s) - 1), s));
        }
        // The hardware coalesces any contiguous run, but a model machine
        // boots fresh and hands faults consecutive pages, where a host that
        // has run a while hands 4K faults scattered ones (measured: 4K
        // pages gain nothing from coalescing, 16K folios do); only runs
        // inside one large folio are counted.
        if c.coalesce_order > 0 && group(c.coalesce_order, true) {
            let s = shift + c.coalesce_order;
            return Some(unit_key(addr & !((1u64 << s) - 1), s));
        }
        Some(unit_key(addr & !((1u64 << shift) - 1), shift))
    }
}
