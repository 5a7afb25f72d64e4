//! Writing a swap-cache folio out (mm/page_io.c `swap_writeout`,
//! `__swap_writepage`, `count_swpout_vm_event`, v6.18): a folio whose
//! slots nothing references any more just leaves the swap cache; an
//! all-zero folio only sets the swap zero map (`swpout_zero`); zswap may
//! take it (`zswpout`); otherwise the device writes it (`pswpout`, the
//! per-size `swpout`, `thp_swpout`). zram writes synchronously; a disk
//! leaves the folio under writeback until the reclaim pass ends.

use largo_physmem::BackingKind;

use super::super::stats::MthpStat;
use super::super::{Ctx, Vm};
use crate::memmap::PageFlags;
use crate::stats::VmEvent;

/// How `pageout` of a swap-cache folio ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pageout {
    /// Written (to the zero map, zswap or a synchronous device): clean,
    /// ready to be freed.
    Done,
    /// An asynchronous write is in flight (`PG_writeback`).
    Writeback,
    /// No slot was referenced: dropped from the swap cache, dirty again.
    SwapFreed,
}

impl Vm {
    /// `pageout` -> `swap_writeout` of anonymous folio `key`.
    pub(crate) fn swap_writeout(&mut self, ctx: &mut Ctx, key: usize) -> Pageout {
        let (pfn, order) = (self.folios[key].pfn, self.folios[key].order);
        let nr = 1u64 << order;
        ctx.pa.memmap.page_mut(pfn).remove_flags(PageFlags::DIRTY);
        let nid = self.node_of(ctx.pa, pfn);
        if self.folio_free_swap(ctx, key) {
            self.node_stat[nid].vmscan_write += nr as i64;
            return Pageout::SwapFreed;
        }
        let entry = self.folios[key].swap.expect("a swap-cache folio");
        self.node_stat[nid].vmscan_write += nr as i64;
        let zero = (0..nr).all(|i| self.page_is_zero(ctx.pa, &*ctx.backing, pfn + i));
        if zero {
            for i in 0..nr {
                self.swap.device_mut(entry).set_zeromap(entry.offset + i, true);
            }
            ctx.pa.events.count(VmEvent::SwpoutZero, nr);
            return Pageout::Done;
        }
        self.save_swap_contents(ctx, pfn, entry, nr);
        let totalram = ctx.pa.managed_pages();
        if self.swap.zswap.store(entry, nr, totalram) {
            self.reclaim_work_mut().swapout_pages += nr;
            ctx.pa.events.count(VmEvent::Zswpout, nr);
            self.mthp.add(order, MthpStat::Zswpout, 1);
            return Pageout::Done;
        }
        // count_swpout_vm_event, before the I/O.
        if order == self.pmd_order() {
            ctx.pa.events.count(VmEvent::ThpSwpout, 1);
        }
        self.mthp.add(order, MthpStat::Swpout, 1);
        self.reclaim_work_mut().swapout_pages += nr;
        ctx.pa.events.count(VmEvent::Pswpout, nr);
        ctx.pa.events.count(VmEvent::Pgpgout, nr * (self.page_size() >> 10));
        self.swap.device_mut(entry).writes += nr;
        if self.swap.synchronous(entry) {
            self.node_stat[nid].written += nr as i64;
            return Pageout::Done;
        }
        self.folios[key].writeback = true;
        self.folios[key].lru.reclaim = true;
        Pageout::Writeback
    }

    /// What the slots now hold: on both backings whether the user wrote
    /// each page (the sim backing's stand-in for its bytes), and on ram
    /// the bytes themselves.
    fn save_swap_contents(&mut self, ctx: &mut Ctx, pfn: u64, entry: crate::swap::SwapEntry, nr: u64) {
        let page_size = self.page_size() as usize;
        for i in 0..nr {
            let p = pfn + i;
            let written = ctx.pa.memmap.page(p).flags().contains(PageFlags::USER_WRITTEN);
            let dev = self.swap.device_mut(entry);
            dev.set_zeromap(entry.offset + i, false);
            dev.set_written(entry.offset + i, written);
            if ctx.backing.kind() == BackingKind::Ram {
                let mut buf = vec![0u8; page_size].into_boxed_slice();
                ctx.backing
                    .read(largo_types::Pfn(p), 0, &mut buf)
                    .unwrap_or_else(|e| unreachable!("swap-cache page outside the backing: {e}"));
                self.swap.device_mut(entry).data.insert(entry.offset + i, buf);
            }
        }
    }

    /// The end of an asynchronous write (`folio_end_writeback`): the folio
    /// is clean; one reclaim marked (`PG_reclaim`) moves to the tail of the
    /// inactive list if it is on it (`folio_rotate_reclaimable`, `pgrotated`).
    pub(crate) fn end_swap_writeback(&mut self, ctx: &mut Ctx, key: usize) {
        if !self.folios.contains(key) || !self.folios[key].writeback {
            return;
        }
        self.folios[key].writeback = false;
        let nr = self.folios[key].nr_pages();
        let nid = self.node_of(ctx.pa, self.folios[key].pfn);
        self.node_stat[nid].written += nr as i64;
        let r = super::super::lru::FolioRef::Anon(key);
        if std::mem::replace(&mut self.folios[key].lru.reclaim, false) && self.lru_state(r).list.is_some() {
            self.lruvec_del(ctx.pa, r);
            self.lruvec_add(ctx.pa, r, true);
            ctx.pa.events.count(VmEvent::Pgrotated, nr);
        }
    }
}
