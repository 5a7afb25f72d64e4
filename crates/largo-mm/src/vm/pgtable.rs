//! Page tables: a radix tree per address space with the geometry's levels
//! (x86_64 and arm64 4K/16K: 4; arm64 64K: 3). Every table is a page of the
//! modelled memory (an unmovable order-0 allocation, as `pte_alloc_one`
//! makes it); its entries live in a slab, found from the entry above.

use largo_types::{Arch, Geometry};
use slab::Slab;
use std::cell::Cell;

/// One page-table entry. Leaf entries hold a pfn; table entries the slab
/// index of the next-level table. Zero is `pte_none`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pte(pub u64);

impl Pte {
    pub const NONE: Pte = Pte(0);
    pub const PRESENT: u64 = 1 << 0;
    /// Points to a lower-level table (upper levels only).
    pub const TABLE: u64 = 1 << 1;
    pub const WRITE: u64 = 1 << 2;
    pub const DIRTY: u64 = 1 << 3;
    pub const YOUNG: u64 = 1 << 4;
    /// A leaf above the PTE level (`pmd_trans_huge`).
    pub const HUGE: u64 = 1 << 5;
    /// Maps the zero page (`pte_special` / `is_zero_pfn`).
    pub const SPECIAL: u64 = 1 << 6;
    /// A swap entry (`is_swap_pte`: not present, not none); its value is
    /// the slot offset with the swap type above it.
    pub const SWAP: u64 = 1 << 7;
    /// `pte_swp_exclusive`: the page was exclusive when it was unmapped.
    pub const SWP_EXCLUSIVE: u64 = 1 << 8;
    const VALUE_SHIFT: u32 = 12;
    /// Where the swap type sits in a swap entry's value.
    const SWP_TYPE_SHIFT: u32 = 44;

    #[inline]
    pub fn leaf(pfn: u64, flags: u64) -> Pte {
        Pte((pfn << Self::VALUE_SHIFT) | flags | Self::PRESENT)
    }

    /// `swp_entry_to_pte`.
    #[inline]
    pub fn swap(entry: crate::swap::SwapEntry, exclusive: bool) -> Pte {
        let value = ((entry.ty as u64) << Self::SWP_TYPE_SHIFT) | entry.offset;
        let excl = if exclusive { Self::SWP_EXCLUSIVE } else { 0 };
        Pte((value << Self::VALUE_SHIFT) | Self::SWAP | excl)
    }

    /// `is_swap_pte`.
    #[inline]
    pub fn is_swap(self) -> bool {
        self.0 & Self::SWAP != 0
    }

    /// `pte_to_swp_entry`.
    #[inline]
    pub fn swap_entry(self) -> crate::swap::SwapEntry {
        let value = self.0 >> Self::VALUE_SHIFT;
        crate::swap::SwapEntry::new(
            (value >> Self::SWP_TYPE_SHIFT) as u8,
            value & ((1 << Self::SWP_TYPE_SHIFT) - 1),
        )
    }

    /// `pte_swp_exclusive`.
    #[inline]
    pub fn swp_exclusive(self) -> bool {
        self.0 & Self::SWP_EXCLUSIVE != 0
    }

    #[inline]
    pub fn table(idx: usize) -> Pte {
        Pte(((idx as u64) << Self::VALUE_SHIFT) | Self::TABLE | Self::PRESENT)
    }

    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    #[inline]
    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }

    #[inline]
    pub fn is_table(self) -> bool {
        self.0 & Self::TABLE != 0
    }

    #[inline]
    pub fn is_huge(self) -> bool {
        self.0 & Self::HUGE != 0
    }

    #[inline]
    pub fn is_special(self) -> bool {
        self.0 & Self::SPECIAL != 0
    }

    #[inline]
    pub fn writable(self) -> bool {
        self.0 & Self::WRITE != 0
    }

    /// Whether any of the bits of `flag` is set.
    #[inline]
    pub fn has(self, flag: u64) -> bool {
        self.0 & flag != 0
    }

    /// Whether every bit of `flags` is set.
    #[inline]
    pub fn has_all(self, flags: u64) -> bool {
        self.0 & flags == flags
    }

    #[inline]
    pub fn with(self, flag: u64) -> Pte {
        Pte(self.0 | flag)
    }

    #[inline]
    pub fn without(self, flag: u64) -> Pte {
        Pte(self.0 & !flag)
    }

    /// The same entry mapping `pfn` (flags kept).
    #[inline]
    pub fn with_pfn(self, pfn: u64) -> Pte {
        Pte((self.0 & ((1 << Self::VALUE_SHIFT) - 1)) | (pfn << Self::VALUE_SHIFT))
    }

    /// The mapped pfn of a leaf.
    #[inline]
    pub fn pfn(self) -> u64 {
        self.0 >> Self::VALUE_SHIFT
    }

    /// The slab index of the table a table entry points to.
    #[inline]
    pub fn table_idx(self) -> usize {
        (self.0 >> Self::VALUE_SHIFT) as usize
    }
}

/// One entry of one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The table's slab index.
    pub table: usize,
    /// The entry's index in it.
    pub index: usize,
}

/// One page-table page.
#[derive(Debug)]
pub struct PtPage {
    /// The page of modelled memory that holds this table.
    pub pfn: u64,
    /// 0 = PTE table, 1 = PMD table, ... up to the root.
    pub level: u8,
    pub entries: Box<[Pte]>,
    /// Entries that are not none.
    pub nr_used: u32,
    /// The memcg the page is charged to (0: the root).
    pub memcg: u16,
}

/// The shape of the tree for a geometry.
#[derive(Clone, Copy, Debug)]
pub struct PtShape {
    pub page_shift: u32,
    pub bits_per_level: u32,
    pub levels: u32,
    /// Entries of the root table (user half only).
    pub top_entries: usize,
    /// One past the highest user address (`TASK_SIZE`).
    pub task_size: u64,
    /// `level_shift` and `entries_at - 1` of each level, computed once:
    /// every walk reads them.
    shift: [u32; MAX_LEVELS],
    mask: [usize; MAX_LEVELS],
}

/// Page-table levels a geometry may have (five-level paging included).
const MAX_LEVELS: usize = 5;

impl PtShape {
    pub fn new(geo: &Geometry) -> PtShape {
        let bits_per_level = geo.page_shift - 3;
        let levels = geo.pgtable_levels;
        // x86_64 4-level: 47-bit user space; arm64: 48-bit.
        let va_bits = match geo.arch {
            Arch::X86_64 => 47,
            Arch::Arm64 => 48,
        };
        let below_top = geo.page_shift + (levels - 1) * bits_per_level;
        let task_size = match geo.arch {
            Arch::X86_64 => (1u64 << va_bits) - geo.page_size(),
            Arch::Arm64 => 1u64 << va_bits,
        };
        let top_entries = 1 << (va_bits - below_top);
        assert!(levels as usize <= MAX_LEVELS, "{levels} page-table levels");
        let entries = |level: u32| {
            if level == levels - 1 {
                top_entries
            } else {
                1usize << bits_per_level
            }
        };
        PtShape {
            page_shift: geo.page_shift,
            bits_per_level,
            levels,
            top_entries,
            task_size,
            shift: std::array::from_fn(|l| geo.page_shift + l as u32 * bits_per_level),
            mask: std::array::from_fn(|l| entries(l as u32).wrapping_sub(1)),
        }
    }

    #[inline]
    pub fn entries_at(&self, level: u32) -> usize {
        self.mask[level as usize] + 1
    }

    /// Address bits one entry at `level` maps.
    #[inline]
    pub fn level_shift(&self, level: u32) -> u32 {
        self.shift[level as usize]
    }

    #[inline]
    pub fn index(&self, level: u32, va: u64) -> usize {
        ((va >> self.shift[level as usize]) as usize) & self.mask[level as usize]
    }
}

/// Entry writes the kernel makes, by level (the hardware's accessed and
/// dirty bit updates on a TLB miss are not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PtWork {
    /// PTEs made non-none or changed (`set_ptes`, `ptep_set_wrprotect`, ...).
    pub pte_set: u64,
    /// PTEs cleared (`ptep_get_and_clear` in zaps).
    pub pte_clear: u64,
    /// PMD entries set or changed (huge leaves and table links).
    pub pmd_set: u64,
    pub pmd_clear: u64,
}

/// The last walk down to a PMD table: the model's paging-structure
/// cache. Valid while no entry above the PMD level changes and no table
/// is freed; [`PageTables`] drops it on both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PmdWalk {
    root: usize,
    /// `va >> level_shift(2)`: the PUD entry's range.
    key: u64,
    table: usize,
}

/// A walk down to a PTE table: valid while no entry at the PMD level or
/// above changes and no table is freed; [`PageTables`] drops them all on
/// both. Sequential faults and zaps stay in one PTE table for 512 pages,
/// and a program's accesses mostly fall in a few PMD ranges at a time
/// (heap, stack, libraries), so most walks end in one of
/// [`PTE_WALK_SLOTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PteWalk {
    root: usize,
    /// `va >> level_shift(1)`: the PMD entry's range.
    key: u64,
    table: usize,
}

/// The PTE-table walks remembered, direct-mapped by PMD range.
const PTE_WALK_SLOTS: usize = 16;

/// Every page table of every address space.
#[derive(Debug)]
pub struct PageTables {
    /// Read-only outside this file: tables are freed with
    /// [`PageTables::remove`], entries written with [`PageTables::set`].
    pub pages: Slab<PtPage>,
    pub shape: PtShape,
    pub work: PtWork,
    pmd_walk: Cell<Option<PmdWalk>>,
    pte_walk: [Cell<Option<PteWalk>>; PTE_WALK_SLOTS],
    /// The entry arrays of freed empty tables, by level, reused by the
    /// next tables of that level (host memory only: no modelled state).
    /// Invariant: every array here is all none and as long as its level's
    /// tables; at most [`SPARE_TABLES`] per level.
    spare: Vec<Vec<Box<[Pte]>>>,
}

/// How many freed entry arrays each level keeps for reuse.
const SPARE_TABLES: usize = 64;

impl PageTables {
    pub fn new(geo: &Geometry) -> PageTables {
        let shape = PtShape::new(geo);
        PageTables {
            pages: Slab::new(),
            shape,
            work: PtWork::default(),
            pmd_walk: Cell::new(None),
            pte_walk: Default::default(),
            spare: vec![Vec::new(); shape.levels as usize],
        }
    }

    /// Frees table `idx` from the slab (its parent entry is cleared by
    /// the caller). The returned page's entries are empty when they were
    /// all none: the array is kept for a later table.
    pub fn remove(&mut self, idx: usize) -> PtPage {
        self.pmd_walk.set(None);
        self.forget_pte_walks();
        let mut page = self.pages.remove(idx);
        let spare = &mut self.spare[page.level as usize];
        if page.nr_used == 0 && spare.len() < SPARE_TABLES {
            debug_assert!(page.entries.iter().all(|e| e.is_none()), "an empty table holds entries");
            spare.push(std::mem::take(&mut page.entries));
        }
        page
    }

    /// The PMD table (level 1) for `va` under `root`, walking only when
    /// the last walk was for another PUD range; `None` if an entry above
    /// is none or a huge leaf.
    #[inline]
    pub fn pmd_table(&self, root: usize, va: u64) -> Option<usize> {
        let key = va >> self.shape.level_shift(2);
        if let Some(w) = self.pmd_walk.get() {
            if w.root == root && w.key == key {
                return Some(w.table);
            }
        }
        let table = self.walk_down(root, va, 1)?;
        self.pmd_walk.set(Some(PmdWalk { root, key, table }));
        Some(table)
    }

    /// The PTE table (level 0) for `va` under `root`, walking only when
    /// the last walk that found one was for another PMD range; `None` if
    /// the PMD entry (or one above) is none or a huge leaf.
    #[inline]
    pub fn pte_table(&self, root: usize, va: u64) -> Option<usize> {
        let key = va >> self.shape.level_shift(1);
        if let Some(table) = self.pte_walk_hit(root, key) {
            return Some(table);
        }
        let pmd = self.pmd_table(root, va)?;
        let e = self.get(pmd, self.shape.index(1, va));
        if !e.is_table() {
            return None;
        }
        let table = e.table_idx();
        self.remember_pte_walk(root, key, table);
        Some(table)
    }

    /// The remembered PTE table of PMD range `key` under `root`.
    #[inline]
    fn pte_walk_hit(&self, root: usize, key: u64) -> Option<usize> {
        let w = self.pte_walk[key as usize % PTE_WALK_SLOTS].get()?;
        (w.root == root && w.key == key).then_some(w.table)
    }

    #[inline]
    fn remember_pte_walk(&self, root: usize, key: u64, table: usize) {
        self.pte_walk[key as usize % PTE_WALK_SLOTS].set(Some(PteWalk { root, key, table }));
    }

    fn forget_pte_walks(&self) {
        for w in &self.pte_walk {
            w.set(None);
        }
    }

    /// Registers a table held in page `pfn`; returns its index.
    pub fn insert(&mut self, pfn: u64, level: u32) -> usize {
        let n = self.shape.entries_at(level);
        let entries = self.spare[level as usize]
            .pop()
            .unwrap_or_else(|| vec![Pte::NONE; n].into_boxed_slice());
        debug_assert_eq!(entries.len(), n, "a spare table of another size");
        self.pages.insert(PtPage {
            pfn,
            level: level as u8,
            entries,
            nr_used: 0,
            memcg: 0,
        })
    }

    #[inline]
    pub fn get(&self, table: usize, index: usize) -> Pte {
        self.pages[table].entries[index]
    }

    #[inline]
    pub fn entry(&self, slot: Slot) -> Pte {
        self.get(slot.table, slot.index)
    }

    #[inline]
    pub fn set_slot(&mut self, slot: Slot, pte: Pte) {
        self.set(slot.table, slot.index, pte)
    }

    /// Sets an entry, keeping `nr_used` right, counting the write.
    #[inline]
    pub fn set(&mut self, table: usize, index: usize, pte: Pte) {
        let level = self.pages[table].level;
        let w = &mut self.work;
        match (level, pte.is_none()) {
            (0, false) => w.pte_set += 1,
            (0, true) => w.pte_clear += 1,
            (1, false) => w.pmd_set += 1,
            (1, true) => w.pmd_clear += 1,
            _ => {}
        }
        self.set_hw(table, index, pte);
    }

    /// Sets an entry the way the MMU does (accessed/dirty bits): not
    /// counted as kernel work.
    #[inline]
    pub fn set_hw(&mut self, table: usize, index: usize, pte: Pte) {
        let level = self.pages[table].level;
        if level >= 1 {
            self.forget_pte_walks();
            if level >= 2 {
                self.pmd_walk.set(None);
            }
        }
        let page = &mut self.pages[table];
        let old = page.entries[index];
        page.entries[index] = pte;
        match (old.is_none(), pte.is_none()) {
            (true, false) => page.nr_used += 1,
            (false, true) => page.nr_used -= 1,
            _ => {}
        }
    }

    /// The MMU's hits through consecutive entries of the PTE table `table`,
    /// from `first` for at most `max` entries: each present entry
    /// (writable, for a write) gets the access bits `bits` it lacks, as
    /// [`PageTables::set_hw`] sets them, until the first entry that would
    /// fault. `hit` sees each hit entry as it was read. Returns the hits.
    #[inline]
    pub fn hit_ptes(
        &mut self,
        table: usize,
        first: usize,
        max: usize,
        write: bool,
        bits: u64,
        mut hit: impl FnMut(Pte),
    ) -> usize {
        let page = &mut self.pages[table];
        debug_assert_eq!(page.level, 0, "hit_ptes walks PTEs");
        let end = (first + max).min(page.entries.len());
        let mut n = 0;
        for e in &mut page.entries[first..end] {
            let pte = *e;
            if !pte.present() || (write && !pte.writable()) {
                break;
            }
            if !pte.has_all(bits) {
                // Present before and after: `nr_used` does not move.
                *e = pte.with(bits);
            }
            hit(pte);
            n += 1;
        }
        n
    }

    /// Of the `nr` PTEs from `first` of the PTE table `table`: how many
    /// are present and not special (map a page of their own), and whether
    /// any is neither none, special nor present (a swap or migration
    /// entry).
    pub fn block_census(&self, table: usize, first: usize, nr: usize) -> (u64, bool) {
        let mut present = 0;
        let mut other = false;
        for e in &self.pages[table].entries[first..first + nr] {
            if e.is_none() || e.is_special() {
                continue;
            }
            present += u64::from(e.present());
            other |= !e.present();
        }
        (present, other)
    }

    /// `set_ptes`: `nr` consecutive PTEs from `first` of the PTE table
    /// `table` map `nr` consecutive pages from `pfn`, each with `flags`.
    /// The same as `nr` calls of [`PageTables::set`], counted at once.
    pub fn set_ptes(&mut self, table: usize, first: usize, pfn: u64, nr: usize, flags: u64) {
        debug_assert_eq!(self.pages[table].level, 0, "set_ptes writes PTEs");
        let page = &mut self.pages[table];
        let mut filled = 0;
        for (i, e) in page.entries[first..first + nr].iter_mut().enumerate() {
            filled += u32::from(e.is_none());
            *e = Pte::leaf(pfn + i as u64, flags);
        }
        page.nr_used += filled;
        self.work.pte_set += nr as u64;
    }

    /// `clear_full_ptes`: `nr` consecutive PTEs from `first` of the PTE
    /// table `table` become none. The same as `nr` calls of
    /// [`PageTables::set`] with [`Pte::NONE`], counted at once.
    pub fn clear_ptes(&mut self, table: usize, first: usize, nr: usize) {
        debug_assert_eq!(self.pages[table].level, 0, "clear_ptes writes PTEs");
        let page = &mut self.pages[table];
        let mut emptied = 0;
        for e in &mut page.entries[first..first + nr] {
            emptied += u32::from(!e.is_none());
            *e = Pte::NONE;
        }
        page.nr_used -= emptied;
        self.work.pte_clear += nr as u64;
    }

    /// `folio_pte_batch`: how many entries from `index` (stopping before
    /// `limit`) map consecutive pages starting at `pfn`, without passing
    /// `folio_end` (the folio's end pfn). Dirty, young and write bits are
    /// ignored. At least 1: the entry at `index` maps `pfn`.
    pub fn folio_pte_batch(&self, table: usize, index: usize, limit: usize, pfn: u64, folio_end: u64) -> usize {
        let end = limit
            .min(index.saturating_add((folio_end - pfn) as usize))
            .max(index + 1);
        let rest = &self.pages[table].entries[index + 1..end];
        // Present, not special, mapping the next pfn: one masked compare
        // an entry (the other flag bits are ignored).
        let step = 1u64 << Pte::VALUE_SHIFT;
        let mask = !(step - 1) | Pte::PRESENT | Pte::SPECIAL;
        let mut want = ((pfn + 1) << Pte::VALUE_SHIFT) | Pte::PRESENT;
        let mut n = 1;
        for e in rest {
            if e.0 & mask != want {
                break;
            }
            want += step;
            n += 1;
        }
        n
    }

    /// Walks from `root` down to the table at `level` for `va` without
    /// allocating. `None` if an entry above is none or a huge leaf.
    #[inline]
    pub fn lookup(&self, root: usize, va: u64, level: u32) -> Option<usize> {
        match level {
            0 => self.pte_table(root, va),
            1 => self.pmd_table(root, va),
            _ => self.walk_down(root, va, level),
        }
    }

    /// [`PageTables::lookup`] without the walk cache.
    fn walk_down(&self, root: usize, va: u64, level: u32) -> Option<usize> {
        let mut table = root;
        for l in (level + 1..self.shape.levels).rev() {
            let e = self.get(table, self.shape.index(l, va));
            if !e.is_table() {
                return None;
            }
            table = e.table_idx();
        }
        Some(table)
    }

    /// The leaf mapping `va`: (table, index, level) of a present leaf
    /// entry, the PTE slot if the PTE table exists, or `None`.
    #[inline]
    pub fn leaf(&self, root: usize, va: u64) -> Option<(usize, usize, u32)> {
        if self.shape.levels > 2 {
            if let Some(table) = self.pte_walk_hit(root, va >> self.shape.level_shift(1)) {
                return Some((table, self.shape.index(0, va), 0));
            }
            let Some(pmd) = self.pmd_table(root, va) else {
                // Something above the PMD level is a leaf or none.
                return self.leaf_walk(root, va);
            };
            let idx = self.shape.index(1, va);
            let e = self.get(pmd, idx);
            return if e.is_table() {
                let table = e.table_idx();
                self.remember_pte_walk(root, va >> self.shape.level_shift(1), table);
                Some((table, self.shape.index(0, va), 0))
            } else if e.present() {
                Some((pmd, idx, 1))
            } else {
                None
            };
        }
        self.leaf_walk(root, va)
    }

    /// The base pages of present leaves in `[start, end)` (a huge leaf
    /// gives each of its base pages), in address order. The walk skips
    /// empty entries at every level, so its cost follows what is mapped,
    /// not the length of the range (`walk_page_range` over present pages).
    pub fn present_pages(&self, root: usize, start: u64, end: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let end = end.min(self.shape.task_size);
        if start < end {
            self.present_in(root, self.shape.levels - 1, 0, start, end, &mut out);
        }
        out
    }

    fn present_in(&self, table: usize, level: u32, base: u64, start: u64, end: u64, out: &mut Vec<u64>) {
        let shift = self.shape.level_shift(level);
        let span = 1u64 << shift;
        let first = if start > base {
            ((start - base) >> shift) as usize
        } else {
            0
        };
        for i in first..self.shape.entries_at(level) {
            let lo = base + ((i as u64) << shift);
            if lo >= end {
                break;
            }
            let e = self.get(table, i);
            if e.is_table() && level > 0 {
                self.present_in(e.table_idx(), level - 1, lo, start.max(lo), end, out);
            } else if e.present() {
                let page = 1u64 << self.shape.page_shift;
                let mut a = start.max(lo) & !(page - 1);
                while a < end.min(lo + span) {
                    out.push(a);
                    a += page;
                }
            }
        }
    }

    /// [`PageTables::leaf`] without the walk cache.
    fn leaf_walk(&self, root: usize, va: u64) -> Option<(usize, usize, u32)> {
        let mut table = root;
        for l in (1..self.shape.levels).rev() {
            let idx = self.shape.index(l, va);
            let e = self.get(table, idx);
            if e.is_table() {
                table = e.table_idx();
            } else if e.present() {
                return Some((table, idx, l));
            } else {
                return None;
            }
        }
        Some((table, self.shape.index(0, va), 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use largo_types::Preset;

    #[test]
    fn shapes_of_every_preset() {
        let s = PtShape::new(&Preset::X86_64.geometry());
        assert_eq!((s.levels, s.top_entries, s.entries_at(0)), (4, 256, 512));
        assert_eq!(s.task_size, 0x7ffffffff000);
        let s = PtShape::new(&Preset::Arm64_16k.geometry());
        assert_eq!((s.levels, s.top_entries, s.entries_at(0)), (4, 2, 2048));
        let s = PtShape::new(&Preset::Arm64_64k.geometry());
        assert_eq!((s.levels, s.top_entries, s.entries_at(0)), (3, 64, 8192));
        assert_eq!(s.level_shift(1), 29, "a 64K-granule PMD maps 512 MiB");
    }

    /// Tables from `root` down to a PTE table for `va`; returns (pmd, pte).
    fn chain(pt: &mut PageTables, root: usize, va: u64) -> (usize, usize) {
        let mut table = root;
        for level in (1..pt.shape.levels).rev() {
            let next = pt.insert(100 + u64::from(level), level - 1);
            pt.set(table, pt.shape.index(level, va), Pte::table(next));
            if level == 1 {
                return (table, next);
            }
            table = next;
        }
        unreachable!("a tree has a PMD level")
    }

    #[test]
    fn walk_caches_forget_changed_and_freed_tables() {
        for preset in [Preset::X86_64, Preset::Arm64_16k, Preset::Arm64_64k] {
            let mut pt = PageTables::new(&preset.geometry());
            let root = pt.insert(0, pt.shape.levels - 1);
            let pmd_span = 1u64 << pt.shape.level_shift(1);
            let va = 3 * pmd_span + (5 << pt.shape.page_shift);
            let (pmd, pte) = chain(&mut pt, root, va);
            let slot = pt.shape.index(1, va);
            assert_eq!(pt.lookup(root, va, 0), Some(pte), "{preset:?}");
            assert_eq!(pt.leaf(root, va), Some((pte, pt.shape.index(0, va), 0)));
            // Another PTE table under the same PMD entry: the next walk finds it.
            let other = pt.insert(4, 0);
            pt.set(pmd, slot, Pte::table(other));
            assert_eq!(pt.lookup(root, va, 0), Some(other), "{preset:?}");
            // A huge leaf there: no PTE table, the PMD slot is the leaf.
            pt.set(pmd, slot, Pte::leaf(512, Pte::HUGE));
            assert_eq!(pt.lookup(root, va, 0), None, "{preset:?}");
            assert_eq!(pt.leaf(root, va), Some((pmd, slot, 1)));
            // The PMD entry cleared and its PTE table freed: no table any more.
            pt.set(pmd, slot, Pte::table(other));
            assert_eq!(pt.lookup(root, va, 0), Some(other));
            pt.set(pmd, slot, Pte::NONE);
            pt.remove(other);
            assert_eq!(pt.lookup(root, va, 0), None, "{preset:?}");
            // Seventeen PMD ranges through sixteen slots, twice over: every
            // walk still ends at its own table.
            let vas: Vec<u64> = (0..17).map(|i| va + i * pmd_span).collect();
            let tables: Vec<usize> = vas
                .iter()
                .map(|&a| {
                    let t = pt.insert(200, 0);
                    pt.set(pmd, pt.shape.index(1, a), Pte::table(t));
                    t
                })
                .collect();
            for _ in 0..2 {
                for (a, t) in vas.iter().zip(&tables) {
                    assert_eq!(pt.lookup(root, *a, 0), Some(*t), "{preset:?}");
                    assert_eq!(pt.leaf(root, *a).map(|l| l.0), Some(*t));
                }
            }
        }
    }

    /// `set_ptes` and `clear_ptes` leave entries, `nr_used` and the work
    /// counts exactly as the same writes made one `set` at a time, over a
    /// table that already holds some entries.
    #[test]
    fn batched_pte_writes_match_single_writes() {
        let geo = Preset::X86_64.geometry();
        let (mut one, mut batch) = (PageTables::new(&geo), PageTables::new(&geo));
        let (t1, t2) = (one.insert(9, 0), batch.insert(9, 0));
        for (pt, t) in [(&mut one, t1), (&mut batch, t2)] {
            pt.set(t, 12, Pte::leaf(500, Pte::WRITE));
            pt.set(t, 40, Pte::swap(crate::swap::SwapEntry::new(0, 7), false));
        }
        let flags = Pte::WRITE | Pte::DIRTY | Pte::YOUNG;
        for i in 0..32 {
            one.set(t1, 10 + i, Pte::leaf(1000 + i as u64, flags));
        }
        batch.set_ptes(t2, 10, 1000, 32, flags);
        for i in 0..24 {
            one.set(t1, 30 + i, Pte::NONE);
        }
        batch.clear_ptes(t2, 30, 24);
        assert_eq!(one.pages[t1].entries, batch.pages[t2].entries);
        assert_eq!(one.pages[t1].nr_used, batch.pages[t2].nr_used);
        assert_eq!(batch.pages[t2].nr_used, 20, "10..30 mapped; 12 was already");
        assert_eq!(one.work, batch.work);
        assert_eq!((batch.work.pte_set, batch.work.pte_clear), (34, 24));
    }

    #[test]
    fn entries_round_trip() {
        let e = Pte::leaf(0x1234, Pte::WRITE | Pte::DIRTY);
        assert!(e.present() && e.writable() && !e.is_table() && !e.is_huge() && !e.is_swap());
        let entry = crate::swap::SwapEntry::new(3, 0x12345678);
        let s = Pte::swap(entry, true);
        assert!(!s.present() && !s.is_none() && s.is_swap() && s.swp_exclusive());
        assert_eq!(s.swap_entry(), entry);
        assert!(!Pte::swap(entry, false).swp_exclusive());
        assert_eq!(e.pfn(), 0x1234);
        assert_eq!(Pte::table(77).table_idx(), 77);
        assert!(Pte::NONE.is_none());
    }
}
