//! The shmem page fault (mm/memory.c v6.18 `do_read_fault`,
//! `do_fault_around`, `do_shared_fault`, `finish_fault`, `do_set_pmd`,
//! `wp_page_shared`; mm/filemap.c `filemap_map_pages`; mm/shmem.c
//! `shmem_fault`, `shmem_get_folio_gfp`, `shmem_alloc_and_add_folio`).
//!
//! A read fault first maps what the page cache already holds around the
//! address (fault-around, 64 KiB by default); otherwise the folio at the
//! index is looked up or allocated (shmem has no zero page), and mapped
//! whole when it fits the VMA and page table, else page by page.

use super::super::fault::{access_bits, Fault, VmFault};
use super::super::order::highest_order;
use super::super::pgtable::{Pte, Slot};
use super::super::stats::MthpStat;
use super::super::{Ctx, Vm};
use crate::stats::VmEvent;

/// `fault_around_bytes` default.
const FAULT_AROUND_BYTES: u64 = 64 << 10;

impl Vm {
    /// `__handle_mm_fault` -> `handle_pte_fault` for a shmem VMA.
    pub(crate) fn handle_shmem_fault(&mut self, ctx: &mut Ctx, vmf: &VmFault) -> Fault {
        let Some(table) = self.table_for(ctx, vmf.mm, vmf.address, 1) else {
            return Fault::Oom;
        };
        let pmd = Slot {
            table,
            index: self.pt.shape.index(1, vmf.address),
        };
        let entry = self.pt.entry(pmd);
        if entry.present() && entry.is_huge() {
            // A write to a write-protected PMD of a shared mapping is made
            // writable in place (`do_huge_pmd_wp_page` -> `wp_huge_pmd`
            // has no page_mkwrite for shmem: the PMD is just upgraded).
            let bits = access_bits(vmf.write) | if vmf.write { self.vma_write_bit(vmf.vma) } else { 0 };
            self.pt.set_slot(pmd, entry.with(bits));
            if vmf.write {
                self.shmem_dirty_pfn(ctx, entry.pfn());
            }
            return Fault::Done;
        }
        if entry.is_table() {
            let pte = Slot {
                table: entry.table_idx(),
                index: self.pt.shape.index(0, vmf.address),
            };
            let e = self.pt.entry(pte);
            if e.present() {
                // wp_page_shared -> wp_page_reuse (fault_dirty_shared_page).
                let bits = access_bits(vmf.write) | if vmf.write { self.vma_write_bit(vmf.vma) } else { 0 };
                self.pt.set_slot(pte, e.with(bits));
                if vmf.write {
                    self.shmem_dirty_pfn(ctx, e.pfn());
                }
                return Fault::Done;
            }
        }
        if !vmf.write && self.fault_around_pages() > 1 && self.do_fault_around(ctx, vmf) {
            return Fault::Done;
        }
        self.shmem_do_fault(ctx, vmf)
    }

    /// The shmem folio holding `pfn` is dirtied.
    fn shmem_dirty_pfn(&self, ctx: &mut Ctx, pfn: u64) {
        if let Some(key) = self.shmem_key_of_pfn(ctx.pa, pfn) {
            self.shmem_mark_dirty(ctx.pa, key);
        }
    }

    /// `fault_around_pages`.
    fn fault_around_pages(&self) -> u64 {
        (FAULT_AROUND_BYTES >> self.page_shift()).max(1)
    }

    /// `__do_fault` (`shmem_fault`) then `finish_fault`.
    fn shmem_do_fault(&mut self, ctx: &mut Ctx, vmf: &VmFault) -> Fault {
        let inode = self.vmas[vmf.vma].shmem.expect("a shmem VMA has its inode");
        let index = self.vmas[vmf.vma].page_index(vmf.address, self.page_shift());
        let size_pages = self.shmem.inodes[inode].size_bytes.div_ceil(self.page_size());
        if index >= size_pages {
            return Fault::Sigbus;
        }
        // shmem_get_folio_gfp: a large folio that lost its range to an
        // entry reclaim left while it was allocated (`-EEXIST`) sends the
        // fault back to the lookup (`goto repeat`).
        let key = loop {
            if let Some(key) = self.shmem_lookup(inode, index) {
                // filemap_get_entry's reference, which the mapping keeps.
                self.folio_ref_add_shmem(ctx, key, 1);
                break key;
            }
            let got = match self.shmem_swapped_at(inode, index) {
                Some(swapped) => {
                    let by = super::swap::SwapinBy {
                        mm: vmf.mm,
                        vma: Some(vmf.vma),
                    };
                    self.shmem_swapin(ctx, by, inode, index, swapped).into()
                }
                None => self.shmem_alloc_folio(ctx, vmf, inode, index),
            };
            match got {
                ShmemGot::Folio(key) => break key,
                ShmemGot::NoMemory => return Fault::Oom,
                ShmemGot::Raced => continue,
            }
        };
        if vmf.write {
            // do_shared_fault -> fault_dirty_shared_page.
            self.shmem_mark_dirty(ctx.pa, key);
        }
        self.shmem_finish_fault(ctx, vmf, key, index)
    }

    /// `shmem_alloc_and_add_folio` at a hole: the allowed, suitable
    /// orders from the highest down (each failed allocation counted in
    /// `shmem_fallback`, `thp_file_fallback` at the PMD order), order 0
    /// last. A large folio whose range holds an entry once it is
    /// allocated (reclaim ran meanwhile) is dropped: `Raced`, with no
    /// fallback counted. The folio is cleared and enters the page cache.
    fn shmem_alloc_folio(&mut self, ctx: &mut Ctx, vmf: &VmFault, inode: usize, index: u64) -> ShmemGot {
        let mut orders = self.shmem_allowable_orders(inode, index, vmf.vma);
        if orders != 0 {
            orders = self.shmem_suitable_orders(inode, vmf.vma, vmf.address, index, orders);
        }
        // vma_thp_gfp_mask limited by the mapping's GFP_HIGHUSER_MOVABLE
        // (`limit_gfp_mask` keeps it as it is).
        let gfp = self.thp_gfp_mask(vmf.vma);
        let memcg = self.mm_memcg(vmf.mm);
        while orders != 0 {
            let order = highest_order(orders);
            orders &= !(1 << order);
            let first = index & !((1 << order) - 1);
            if let Some(folio) = self.alloc_folio(ctx, gfp, order) {
                if !self.shmem_charge_large(ctx, folio, memcg, gfp) {
                    self.free_unused_folio(ctx, folio);
                    if self.shmem_range_present(inode, first, 1 << order) {
                        return ShmemGot::Raced;
                    }
                    // A failed charge goes straight to order 0.
                    if order == self.pmd_order() {
                        ctx.pa.events.count(VmEvent::ThpFileFallback, 1);
                        ctx.pa.events.count(VmEvent::ThpFileFallbackCharge, 1);
                    }
                    self.mthp.add(order, MthpStat::ShmemFallback, 1);
                    self.mthp.add(order, MthpStat::ShmemFallbackCharge, 1);
                    break;
                }
                if self.shmem_range_present(inode, first, 1 << order) {
                    // shmem_add_to_page_cache's conflict: the charge goes
                    // with the folio.
                    self.mem_cgroup_uncharge(ctx, memcg, 1 << order);
                    self.free_unused_folio(ctx, folio);
                    return ShmemGot::Raced;
                }
                self.zero_folio(ctx, folio);
                if order == self.pmd_order() {
                    ctx.pa.events.count(VmEvent::ThpFileAlloc, 1);
                }
                self.mthp.add(order, MthpStat::ShmemAlloc, 1);
                return ShmemGot::Folio(self.shmem_add_to_page_cache(ctx, folio, inode, first, memcg, (false, false)));
            }
            if order == self.pmd_order() {
                ctx.pa.events.count(VmEvent::ThpFileFallback, 1);
            }
            self.mthp.add(order, MthpStat::ShmemFallback, 1);
        }
        match self.folio_prealloc(ctx, memcg, true) {
            Some(folio) => {
                ShmemGot::Folio(self.shmem_add_to_page_cache(ctx, folio, inode, index, memcg, (false, false)))
            }
            None => ShmemGot::NoMemory,
        }
    }

    /// `mem_cgroup_charge` of a large shmem folio with its THP gfp masked
    /// by `GFP_RECLAIM_MASK` (`shmem_alloc_and_add_folio`): without a
    /// reclaim bit (`GFP_TRANSHUGE_LIGHT`) `gfpflags_allow_spinning` is
    /// false, so `try_charge_memcg` takes the cpu's stock or exactly the
    /// folio's pages (no batch, one `failcnt` when refused) and never
    /// reclaims. Measured on this host: a 24M memfd of 64K folios in a 16M
    /// memcg counts `failcnt` 1167, as this charges; charged like an
    /// anonymous THP (batch first, two failures each) it would count 1297.
    pub(crate) fn shmem_charge_large(
        &mut self,
        ctx: &mut Ctx,
        folio: crate::memmap::Folio,
        memcg: usize,
        gfp: crate::page_alloc::gfp::Gfp,
    ) -> bool {
        use crate::page_alloc::gfp::Gfp;
        if memcg == 0 || gfp.intersects(Gfp::DIRECT_RECLAIM | Gfp::KSWAPD_RECLAIM) {
            return self.mem_cgroup_charge(ctx, folio, memcg, gfp);
        }
        self.flush_slab_ops(ctx);
        self.free_drained(ctx);
        // The counter counts the refusal (`failcnt`).
        if !self.memcg.consume_stock(ctx.cpu, memcg, folio.nr_pages())
            && !self.memcg.get_mut(memcg).memory.try_charge(folio.nr_pages())
        {
            return false;
        }
        let swapped = self.swap.cgroup_pages(memcg as u16);
        let g = self.memcg.get_mut(memcg);
        g.memsw_watermark = g.memsw_watermark.max(g.memory.usage + swapped);
        g.stat.pgpgin += 1;
        true
    }

    /// `finish_fault` for the page `index` of folio `key`: a PMD-sized
    /// folio is mapped by the PMD when it fits (`do_set_pmd`); otherwise
    /// the whole folio by PTEs when it lies inside the VMA and the page
    /// table, its file offset is aligned in the VMA and every entry is
    /// none; else just the page.
    fn shmem_finish_fault(&mut self, ctx: &mut Ctx, vmf: &VmFault, key: usize, index: u64) -> Fault {
        let pmd = Slot {
            table: self.table_for(ctx, vmf.mm, vmf.address, 1).expect("made by the fault"),
            index: self.pt.shape.index(1, vmf.address),
        };
        if self.pt.entry(pmd).is_none() && self.do_set_pmd(ctx, vmf, pmd, key) {
            // The lookup's reference became the mapping's.
            return Fault::Done;
        }
        let Some(pte_table) = self.table_for(ctx, vmf.mm, vmf.address, 0) else {
            // No page table: the fault's reference goes back.
            self.shmem_folio_put_refs(ctx, key, 1);
            return Fault::Oom;
        };
        let shift = self.page_shift();
        let f = &self.shmem.folios[key];
        let (nr, idx) = (f.nr_pages(), index - f.index);
        let v = &self.vmas[vmf.vma];
        let vma_off = index - v.pgoff;
        let vma_pages = (v.end - v.start) >> shift;
        let pte_off = self.pt.shape.index(0, vmf.address) as u64;
        let ptrs = self.pt.shape.entries_at(0) as u64;
        let whole = nr > 1
            && vma_off >= idx
            && vma_off + (nr - idx) <= vma_pages
            && pte_off >= idx
            && pte_off + (nr - idx) <= ptrs
            && ((v.start >> shift).wrapping_sub(v.pgoff)) % nr == 0;
        let (first_pte, first_pfn, count) = if whole && self.pte_span_none(pte_table, (pte_off - idx) as usize, nr) {
            ((pte_off - idx) as usize, f.pfn, nr)
        } else {
            (pte_off as usize, f.pfn + idx, 1)
        };
        self.folio_ref_add_shmem(ctx, key, count as u32 - 1);
        self.shmem_map_ptes(ctx, vmf, pte_table, first_pte, key, first_pfn, count, vmf.write);
        Fault::Done
    }

    /// `pte_range_none` over `nr` entries from `first`.
    fn pte_span_none(&self, table: usize, first: usize, nr: u64) -> bool {
        self.pt.pages[table].entries[first..first + nr as usize]
            .iter()
            .all(|e| e.is_none())
    }

    /// `set_pte_range` + `folio_add_file_rmap_ptes` + the MM_SHMEMPAGES
    /// count for `nr` pages from `first_pfn` (the caller holds a folio
    /// reference for each). A prefaulted range (fault-around, the faulting
    /// address outside it) is mapped old on arm64, whose cpus set the
    /// access flag in hardware (`arch_wants_old_prefaulted_pte`), young on
    /// x86.
    #[allow(clippy::too_many_arguments)]
    fn shmem_map_ptes(
        &mut self,
        ctx: &mut Ctx,
        vmf: &VmFault,
        table: usize,
        first: usize,
        key: usize,
        first_pfn: u64,
        nr: u64,
        write: bool,
    ) {
        let page = self.page_size();
        let start = (vmf.address & !(self.pmd_size() - 1)) + first as u64 * page;
        let prefault = !(start..start + nr * page).contains(&vmf.address);
        let mut flags = self.vma_write_bit(vmf.vma) | access_bits(write);
        if prefault && self.geo.arch == largo_types::Arch::Arm64 {
            flags &= !Pte::YOUNG;
        }
        for i in 0..nr {
            self.pt.set(table, first + i as usize, Pte::leaf(first_pfn + i, flags));
        }
        self.add_file_rmap_ptes(ctx.pa, key, first_pfn, nr);
        self.mms[vmf.mm].rss_shmem += nr;
    }

    /// `do_set_pmd`: a PMD-sized folio mapped by the PMD where THPs are
    /// not disabled for the VMA and the aligned block fits it.
    fn do_set_pmd(&mut self, ctx: &mut Ctx, vmf: &VmFault, pmd: Slot, key: usize) -> bool {
        let pmd_order = self.pmd_order();
        let haddr = vmf.address & !(self.pmd_size() - 1);
        if self.shmem.folios[key].order != pmd_order
            || self.thp_disabled(vmf.vma)
            || !self.shmem_suitable_order(vmf.vma, haddr, pmd_order)
        {
            return false;
        }
        let flags = Pte::HUGE | self.vma_write_bit(vmf.vma) | access_bits(vmf.write);
        self.pt.set_slot(pmd, Pte::leaf(self.shmem.folios[key].pfn, flags));
        self.add_file_rmap_pmd(ctx.pa, key);
        self.mms[vmf.mm].rss_shmem += 1 << pmd_order;
        ctx.pa.events.count(VmEvent::ThpFileMapped, 1);
        true
    }

    /// `do_fault_around` + `filemap_map_pages`: maps the folios already in
    /// the page cache within the fault-around window (a PMD-sized one by
    /// its PMD; since 6.18 a large one whole where it lies inside the VMA
    /// and one page table), page by page where the entries are none. True
    /// if the faulting page got mapped.
    fn do_fault_around(&mut self, ctx: &mut Ctx, vmf: &VmFault) -> bool {
        let shift = self.page_shift();
        let nr = self.fault_around_pages();
        let v = &self.vmas[vmf.vma];
        let inode = v.shmem.expect("a shmem VMA has its inode");
        let pgoff = v.page_index(vmf.address, shift);
        let vma_off = pgoff - v.pgoff;
        let vma_pages = (v.end - v.start) >> shift;
        let pte_off = self.pt.shape.index(0, vmf.address) as u64;
        let ptrs = self.pt.shape.entries_at(0) as u64;
        let from = (pte_off & !(nr - 1)).max(pte_off - pte_off.min(vma_off));
        let to = (from + nr).min(ptrs).min(pte_off + vma_pages - vma_off) - 1;
        let size_pages = self.shmem.inodes[inode].size_bytes.div_ceil(self.page_size());
        if size_pages == 0 {
            return false;
        }
        let start_pgoff = pgoff + from - pte_off;
        let end_pgoff = (pgoff + to - pte_off).min(size_pages - 1);
        if start_pgoff > end_pgoff {
            return false;
        }
        let folios = self.cache_folios_in(inode, start_pgoff, end_pgoff);
        let Some(&first) = folios.first() else {
            return false;
        };
        let pmd = Slot {
            table: self.table_for(ctx, vmf.mm, vmf.address, 1).expect("made by the fault"),
            index: self.pt.shape.index(1, vmf.address),
        };
        // filemap_map_pmd: the first folio, if PMD-sized, maps the PMD.
        if self.pt.entry(pmd).is_none() && self.map_pmd_around(ctx, vmf, pmd, first) {
            return true;
        }
        let Some(table) = self.table_for(ctx, vmf.mm, vmf.address, 0) else {
            return false;
        };
        let mut mapped_fault = false;
        let addr_of = |idx: u64| (pte_off as i64 + idx as i64 - pgoff as i64) as usize;
        let (vma_start, vma_end, vma_pgoff) = {
            let v = &self.vmas[vmf.vma];
            (v.start, v.end, v.pgoff)
        };
        let pmd_shift = self.pt.shape.level_shift(1);
        for key in folios {
            let f = &self.shmem.folios[key];
            // 6.18 maps a large folio whole where it lies inside the VMA
            // and one page table (`filemap_map_folio_range`), else the
            // part inside the window.
            let va0 = (f.index >= vma_pgoff).then(|| vma_start + ((f.index - vma_pgoff) << shift));
            let whole = va0.is_some_and(|va0| {
                let last = va0 + (f.nr_pages() << shift) - 1;
                last < vma_end && va0 >> pmd_shift == last >> pmd_shift
            });
            let (lo, hi) = if whole {
                (f.index, f.index + f.nr_pages() - 1)
            } else {
                (f.index.max(start_pgoff), (f.index + f.nr_pages() - 1).min(end_pgoff))
            };
            let (fpfn, findex) = (f.pfn, f.index);
            let mut idx = lo;
            while idx <= hi {
                // A run of none entries, mapped as one batch.
                let mut n = 0;
                while idx + n <= hi && self.pt.get(table, addr_of(idx + n)).is_none() {
                    n += 1;
                }
                if n > 0 {
                    mapped_fault |= (idx..idx + n).contains(&pgoff);
                    self.folio_ref_add_shmem(ctx, key, n as u32);
                    let ro = VmFault { write: false, ..*vmf };
                    self.shmem_map_ptes(ctx, &ro, table, addr_of(idx), key, fpfn + (idx - findex), n, false);
                }
                idx += n + 1;
            }
        }
        mapped_fault
    }

    /// The folios of `inode`'s page cache with a page in `[first, last]`.
    fn cache_folios_in(&self, inode: usize, first: u64, last: u64) -> Vec<usize> {
        let start = self.shmem_lookup(inode, first);
        let cache = &self.shmem.inodes[inode].cache;
        start
            .into_iter()
            .chain(cache.range(first..=last).map(|(_, &k)| k))
            .fold(Vec::new(), |mut v, k| {
                if v.last() != Some(&k) {
                    v.push(k);
                }
                v
            })
    }

    /// `filemap_map_pmd` with `do_set_pmd`; the mapping takes a reference.
    fn map_pmd_around(&mut self, ctx: &mut Ctx, vmf: &VmFault, pmd: Slot, key: usize) -> bool {
        let ro = VmFault { write: false, ..*vmf };
        if self.do_set_pmd(ctx, &ro, pmd, key) {
            self.folio_ref_add_shmem(ctx, key, 1);
            return true;
        }
        false
    }

    fn folio_ref_add_shmem(&self, ctx: &mut Ctx, key: usize, n: u32) {
        let page = ctx.pa.memmap.page_mut(self.shmem.folios[key].pfn);
        page.set_refcount(page.refcount() + n);
    }
}

/// What a shmem fault's trip to the page cache's missing page brought.
enum ShmemGot {
    /// The folio now in the page cache holding the page (with the
    /// fault's reference).
    Folio(usize),
    /// No memory for it (OOM).
    NoMemory,
    /// A large folio found its range taken once allocated (`-EEXIST`):
    /// look the page up again.
    Raced,
}

impl From<Option<usize>> for ShmemGot {
    fn from(key: Option<usize>) -> ShmemGot {
        key.map_or(ShmemGot::NoMemory, ShmemGot::Folio)
    }
}
