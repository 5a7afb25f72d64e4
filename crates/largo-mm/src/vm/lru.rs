//! The LRU lists (include/linux/mm_inline.h, mm/swap.c, v6.18 without
//! MGLRU): each lruvec (a node's memory of one memcg) keeps inactive and
//! active lists of anonymous (swap-backed: anon and shmem) and file
//! (here: lazyfree anon) folios, youngest at the head. New folios wait in
//! the cpu's `lru_add` batch until 31 are queued, a large folio comes, or
//! something drains it (`lru_add_drain`); then they join the head of the
//! list their flags choose. MADV_COLD and MADV_FREE queue folios already on
//! a list in the `lru_deactivate` and `lru_lazyfree` batches the same way.
//!
//! A batch holds a reference on its folios, as the kernel's does: a
//! folio unmapped and put while it waits in any of them is *released*
//! ([`LruState::released`]): still allocated and charged, its other
//! state gone, until the batch drains and frees it. (munmap and exit do
//! not drain in 6.18, so a memcg still counts up to 30 such pages a batch after
//! an unmap.) Every kernel path whose decision would see the reference
//! of a live folio drains the local batch first (reuse on a write fault,
//! reclaim, madvise), and the model drains at the same places.

use super::Vm;
use crate::memmap::PageFlags;
use crate::page_alloc::PageAlloc;

/// `PAGEVEC_SIZE`: the capacity of a cpu's folio batch.
pub const PAGEVEC_SIZE: usize = 31;

/// A folio the LRU can hold: an anonymous one (by its key in the anon
/// folio table) or a shmem one (by its key in the shmem folio table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FolioRef {
    Anon(usize),
    Shmem(usize),
}

impl FolioRef {
    /// An opaque token (the swap cache stores it).
    pub fn token(self) -> u64 {
        match self {
            FolioRef::Anon(k) => (k as u64) << 1,
            FolioRef::Shmem(k) => ((k as u64) << 1) | 1,
        }
    }

    pub fn from_token(t: u64) -> FolioRef {
        if t & 1 == 0 {
            FolioRef::Anon((t >> 1) as usize)
        } else {
            FolioRef::Shmem((t >> 1) as usize)
        }
    }
}

/// An LRU neighbour in one word, to keep folio records small (the zap
/// and the LRU walk read many of them): a [`FolioRef`]'s token, or
/// [`Link::NONE`] (the token no key reaches).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Link(u64);

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl Link {
    const NONE: Link = Link(u64::MAX);

    #[inline]
    fn of(r: Option<FolioRef>) -> Link {
        r.map_or(Link::NONE, |r| Link(r.token()))
    }

    #[inline]
    fn get(self) -> Option<FolioRef> {
        (self != Link::NONE).then(|| FolioRef::from_token(self.0))
    }
}

impl Default for Link {
    fn default() -> Link {
        Link::NONE
    }
}

/// `enum lru_list` (the evictable ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LruList {
    InactiveAnon = 0,
    ActiveAnon = 1,
    InactiveFile = 2,
    ActiveFile = 3,
}

impl LruList {
    pub const ALL: [LruList; 4] = [
        LruList::InactiveAnon,
        LruList::ActiveAnon,
        LruList::InactiveFile,
        LruList::ActiveFile,
    ];

    pub fn is_active(self) -> bool {
        matches!(self, LruList::ActiveAnon | LruList::ActiveFile)
    }

    pub fn is_file(self) -> bool {
        matches!(self, LruList::InactiveFile | LruList::ActiveFile)
    }

    /// The list of a folio with these flags (`folio_lru_list`).
    pub fn of(file: bool, active: bool) -> LruList {
        match (file, active) {
            (false, false) => LruList::InactiveAnon,
            (false, true) => LruList::ActiveAnon,
            (true, false) => LruList::InactiveFile,
            (true, true) => LruList::ActiveFile,
        }
    }

    /// The other list of the same type.
    pub fn toggled(self) -> LruList {
        LruList::of(self.is_file(), !self.is_active())
    }
}

/// A folio's LRU state: `PG_lru` (on a list), `PG_active`,
/// `PG_referenced`, `PG_workingset`, and its links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LruState {
    /// The list it is on; `None` when isolated, batched or not on an LRU.
    pub list: Option<LruList>,
    /// Towards the head (younger).
    prev: Link,
    /// Towards the tail (older).
    next: Link,
    pub active: bool,
    pub referenced: bool,
    pub workingset: bool,
    /// `PG_reclaim`: written back asynchronously on reclaim's behalf.
    pub reclaim: bool,
    /// Waiting in a cpu's `lru_add` batch.
    pub batched: bool,
    /// Batched, and the batch's reference is the only one left: freed
    /// when the batch drains.
    pub released: bool,
    /// Entries for it waiting in the cpus' `lru_lazyfree` batches (it is
    /// still on its anon list, still swap-backed; each entry holds a
    /// reference: two tasks on two cpus may queue it both).
    pub lazyfree_batched: u16,
    /// Entries for it waiting in the cpus' `lru_deactivate` batches (it
    /// is still active on its list; each entry holds a reference).
    pub deactivate_batched: u16,
    /// Entries for it waiting in the cpus' `activate` batches (it is still
    /// inactive on its list; each entry holds a reference).
    pub activate_batched: u16,
}

/// The per-cpu batches of folios already on a list.
#[derive(Clone, Copy, Debug)]
enum HeldBatch {
    Deactivate,
    Lazyfree,
    Activate,
}

impl HeldBatch {
    /// The folio's count of entries in these batches.
    fn flag(self, s: &mut LruState) -> &mut u16 {
        match self {
            HeldBatch::Deactivate => &mut s.deactivate_batched,
            HeldBatch::Lazyfree => &mut s.lazyfree_batched,
            HeldBatch::Activate => &mut s.activate_batched,
        }
    }
}

impl LruState {
    /// A cpu batch holds a reference on the folio: its last put leaves it
    /// to the batch ([`Vm::release_to_batch`]).
    pub fn held_by_batch(&self) -> bool {
        self.batched || self.lazyfree_batched > 0 || self.deactivate_batched > 0 || self.activate_batched > 0
    }
}

impl LruState {
    /// Off every list, with `PG_active` and `PG_workingset` as given.
    pub fn with_flags(active: bool, workingset: bool) -> LruState {
        LruState {
            active,
            workingset,
            ..LruState::default()
        }
    }

    /// The younger neighbour on the list.
    pub fn prev_link(&self) -> Option<FolioRef> {
        self.prev.get()
    }

    /// The older neighbour on the list.
    pub fn next_link(&self) -> Option<FolioRef> {
        self.next.get()
    }
}

/// One lruvec's lists: head (youngest) and tail (oldest) of each, and
/// the pages on each (`lru_zone_size` summed over the zones).
#[derive(Clone, Debug, Default)]
pub struct Lruvec {
    head: [Option<FolioRef>; 4],
    tail: [Option<FolioRef>; 4],
    pub nr_pages: [i64; 4],
    /// `anon_cost`, `file_cost`: reclaim's cost bookkeeping (`lru_note_cost`).
    pub anon_cost: u64,
    pub file_cost: u64,
    /// `refaults[]` snapshot of `WORKINGSET_ACTIVATE_ANON`/`_FILE`.
    pub refaults: [u64; 2],
    /// `nonresident_age`: evictions and activations so far.
    pub nonresident_age: u64,
    /// `WORKINGSET_ACTIVATE_ANON`/`_FILE` of this lruvec.
    pub workingset_activate: [u64; 2],
    /// The list sizes and activations as the memcg statistics show them:
    /// copied at the last rstat flush (`lruvec_page_state` reads these).
    pub flushed: FlushedStats,
    /// The "thp-deferred_split" shrinker's bit in this (memcg, node)'s
    /// `shrinker_info` map (`set_shrinker_bit` when `deferred_split_folio`
    /// queues a folio of the memcg on the node; `deferred_split_count`
    /// never reports `SHRINK_EMPTY`, so nothing clears it).
    pub deferred_split_shrinker_bit: bool,
    /// That shrinker's `nr_deferred` for this (memcg, node)
    /// (`xchg_nr_deferred_memcg` / `add_nr_deferred_memcg`).
    pub deferred_split_nr_deferred: u64,
}

/// A lruvec's statistics as of the last `mem_cgroup_flush_stats`: the
/// memcg counters (`lruvec_stats->state[]`) are per-cpu deltas folded in
/// only by a flush, every `FLUSH_TIME` by the periodic worker, so
/// reclaim's heuristics read values up to two seconds old (those of a
/// memcg made since are zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushedStats {
    pub nr_pages: [i64; 4],
    pub workingset_activate: [u64; 2],
}

/// `FLUSH_TIME`: the period of the memcg statistics flusher (2 s).
pub const STATS_FLUSH_NS: u64 = 2_000_000_000;

impl Lruvec {
    /// The oldest folio of a list.
    pub fn tail(&self, lru: LruList) -> Option<FolioRef> {
        self.tail[lru as usize]
    }

    pub fn head(&self, lru: LruList) -> Option<FolioRef> {
        self.head[lru as usize]
    }
}

impl Vm {
    #[inline]
    pub(crate) fn lru_state(&self, r: FolioRef) -> &LruState {
        match r {
            FolioRef::Anon(k) => &self.folios[k].lru,
            FolioRef::Shmem(k) => &self.shmem.folios[k].lru,
        }
    }

    #[inline]
    pub(crate) fn lru_state_mut(&mut self, r: FolioRef) -> &mut LruState {
        match r {
            FolioRef::Anon(k) => &mut self.folios[k].lru,
            FolioRef::Shmem(k) => &mut self.shmem.folios[k].lru,
        }
    }

    /// The head pfn and order of a folio.
    #[inline]
    pub(crate) fn folio_pfn_order(&self, r: FolioRef) -> (u64, u32) {
        match r {
            FolioRef::Anon(k) => (self.folios[k].pfn, self.folios[k].order),
            FolioRef::Shmem(k) => (self.shmem.folios[k].pfn, self.shmem.folios[k].order),
        }
    }

    #[inline]
    pub(crate) fn folio_nr_pages(&self, r: FolioRef) -> u64 {
        1 << self.folio_pfn_order(r).1
    }

    /// The memcg a folio is charged to (0: root).
    #[inline]
    pub(crate) fn folio_memcg(&self, r: FolioRef) -> usize {
        match r {
            FolioRef::Anon(k) => self.folios[k].memcg as usize,
            FolioRef::Shmem(k) => self.shmem.folios[k].memcg as usize,
        }
    }

    /// A file-LRU folio: lazyfree anonymous memory (no page cache is modelled).
    #[inline]
    pub(crate) fn folio_is_file_lru(&self, r: FolioRef) -> bool {
        match r {
            FolioRef::Anon(k) => self.folios[k].lazyfree,
            FolioRef::Shmem(_) => false,
        }
    }

    /// The index of the lruvec a folio belongs to (`folio_lruvec`).
    #[inline]
    pub(crate) fn folio_lruvec(&self, pa: &PageAlloc, r: FolioRef) -> usize {
        let (pfn, _) = self.folio_pfn_order(r);
        self.lruvec_index(self.node_of(pa, pfn), self.folio_memcg(r))
    }

    /// The lruvec of `memcg` on node `nid`.
    #[inline]
    pub(crate) fn lruvec_index(&self, nid: usize, memcg: usize) -> usize {
        memcg * self.node_stat.len() + nid
    }

    /// Grows the lruvec table to hold `nr_memcgs` memcgs.
    /// `flush_memcg_stats_dwork`: every lruvec's statistics brought up
    /// to date.
    pub fn flush_memcg_stats(&mut self) {
        for v in &mut self.lruvecs {
            v.flushed = FlushedStats {
                nr_pages: v.nr_pages,
                workingset_activate: v.workingset_activate,
            };
        }
    }

    pub(crate) fn ensure_lruvecs(&mut self, nr_memcgs: usize) {
        let want = nr_memcgs * self.node_stat.len();
        if self.lruvecs.len() < want {
            self.lruvecs.resize_with(want, Lruvec::default);
        }
    }

    /// Per-zone LRU counts follow a folio joining (+) or leaving (-) `lru`.
    #[inline]
    fn zone_lru_count(&mut self, pa: &PageAlloc, pfn: u64, lru: LruList, nr: i64) {
        let zi = pa.page_zone_index(pfn).expect("an LRU folio lies in a zone");
        self.zone_lru_count_in(zi, lru, nr);
    }

    /// [`Vm::zone_lru_count`] in the zone `zi` the caller found.
    #[inline]
    fn zone_lru_count_in(&mut self, zi: usize, lru: LruList, nr: i64) {
        let z = &mut self.zone_lru[zi];
        match lru {
            LruList::InactiveAnon => z.inactive_anon += nr,
            LruList::ActiveAnon => z.active_anon += nr,
            LruList::InactiveFile => z.inactive_file += nr,
            LruList::ActiveFile => z.active_file += nr,
        }
    }

    /// What the lruvec functions read of a folio, in one lookup of its
    /// record: its head pfn, its order, the list its flags choose
    /// (`folio_lru_list`) and its lruvec (`folio_lruvec`).
    #[inline(always)]
    fn lru_place(&self, pa: &PageAlloc, r: FolioRef) -> (u64, u32, LruList, usize) {
        let (pfn, order, file, active, memcg) = match r {
            FolioRef::Anon(k) => {
                let f = &self.folios[k];
                (f.pfn, f.order, f.lazyfree, f.lru.active, f.memcg)
            }
            FolioRef::Shmem(k) => {
                let f = &self.shmem.folios[k];
                (f.pfn, f.order, false, f.lru.active, f.memcg)
            }
        };
        let lv = self.lruvec_index(self.node_of(pa, pfn), memcg as usize);
        (pfn, order, LruList::of(file, active), lv)
    }

    /// A folio's LRU state with what places it ([`Vm::lru_place`]'s
    /// head pfn, order, list and lruvec), in one lookup of its record.
    #[inline(always)]
    fn lru_placed_mut(&mut self, pa: &PageAlloc, r: FolioRef) -> (&mut LruState, u64, u32, LruList, usize) {
        let nodes = self.node_stat.len();
        let (s, pfn, order, file, memcg) = match r {
            FolioRef::Anon(k) => {
                let f = &mut self.folios[k];
                (&mut f.lru, f.pfn, f.order, f.lazyfree, f.memcg)
            }
            FolioRef::Shmem(k) => {
                let f = &mut self.shmem.folios[k];
                (&mut f.lru, f.pfn, f.order, false, f.memcg)
            }
        };
        let lv = memcg as usize * nodes + super::node_of_pfn(pa, nodes, pfn);
        let lru = LruList::of(file, s.active);
        (s, pfn, order, lru, lv)
    }

    /// `lruvec_add_folio` (at the head) or `lruvec_add_folio_tail`: the
    /// folio joins the list its flags choose; `PG_lru` set.
    pub(crate) fn lruvec_add(&mut self, pa: &mut PageAlloc, r: FolioRef, at_tail: bool) {
        let (pfn, order, lru, lv) = self.lru_place(pa, r);
        let nr = 1i64 << order;
        let l = lru as usize;
        let (old_head, old_tail) = (self.lruvecs[lv].head[l], self.lruvecs[lv].tail[l]);
        {
            let s = self.lru_state_mut(r);
            debug_assert!(s.list.is_none(), "{r:?} is on an LRU list already");
            s.list = Some(lru);
            s.batched = false;
            if at_tail {
                s.prev = Link::of(old_tail);
                s.next = Link::NONE;
            } else {
                s.prev = Link::NONE;
                s.next = Link::of(old_head);
            }
        }
        if at_tail {
            match old_tail {
                Some(t) => self.lru_state_mut(t).next = Link::of(Some(r)),
                None => self.lruvecs[lv].head[l] = Some(r),
            }
            self.lruvecs[lv].tail[l] = Some(r);
        } else {
            match old_head {
                Some(h) => self.lru_state_mut(h).prev = Link::of(Some(r)),
                None => self.lruvecs[lv].tail[l] = Some(r),
            }
            self.lruvecs[lv].head[l] = Some(r);
        }
        self.lruvecs[lv].nr_pages[l] += nr;
        self.zone_lru_count(pa, pfn, lru, nr);
        pa.memmap.page_mut(pfn).insert_flags(PageFlags::LRU);
    }

    /// `lruvec_del_folio`: off its list (`PG_lru` cleared). Returns the list.
    pub(crate) fn lruvec_del(&mut self, pa: &mut PageAlloc, r: FolioRef) -> LruList {
        let (pfn, order, _, lv) = self.lru_place(pa, r);
        let s = *self.lru_state(r);
        let lru = s.list.expect("the folio is on an LRU list");
        let l = lru as usize;
        match s.prev.get() {
            Some(p) => self.lru_state_mut(p).next = s.next,
            None => self.lruvecs[lv].head[l] = s.next.get(),
        }
        match s.next.get() {
            Some(n) => self.lru_state_mut(n).prev = s.prev,
            None => self.lruvecs[lv].tail[l] = s.prev.get(),
        }
        {
            let st = self.lru_state_mut(r);
            st.list = None;
            st.prev = Link::NONE;
            st.next = Link::NONE;
        }
        let nr = 1i64 << order;
        self.lruvecs[lv].nr_pages[l] -= nr;
        self.zone_lru_count(pa, pfn, lru, -nr);
        pa.memmap.page_mut(pfn).remove_flags(PageFlags::LRU);
        lru
    }

    /// `lru_add_split_folio` for each piece of a split folio that was on
    /// a list, as 6.18's `__folio_split` calls it: every tail, in page
    /// order, just younger than the head, which keeps the folio's place
    /// (`younger` was its neighbour on the young side). So the head is the
    /// oldest piece, the last tail next, the first tail the youngest.
    /// `head` is `None` when the split freed the head page.
    pub(crate) fn lru_add_split_pieces(
        &mut self,
        pa: &mut PageAlloc,
        younger: Option<FolioRef>,
        head: Option<FolioRef>,
        tails: impl IntoIterator<Item = FolioRef>,
    ) {
        let mut anchor = younger;
        for t in tails {
            self.lruvec_insert_after(pa, t, anchor);
            anchor = Some(t);
        }
        if let Some(h) = head {
            self.lruvec_insert_after(pa, h, anchor);
        }
    }

    /// Puts `r` on the list just older than `younger` (at the head when
    /// `None`), the list being the one its flags choose.
    pub(crate) fn lruvec_insert_after(&mut self, pa: &mut PageAlloc, r: FolioRef, younger: Option<FolioRef>) {
        let Some(y) = younger else {
            return self.lruvec_add(pa, r, false);
        };
        let lru = LruList::of(self.folio_is_file_lru(r), self.lru_state(r).active);
        if self.lru_state(y).list != Some(lru) {
            return self.lruvec_add(pa, r, false);
        }
        let lv = self.folio_lruvec(pa, r);
        let (pfn, order) = self.folio_pfn_order(r);
        let older = self.lru_state(y).next.get();
        {
            let s = self.lru_state_mut(r);
            s.list = Some(lru);
            s.batched = false;
            s.prev = Link::of(Some(y));
            s.next = Link::of(older);
        }
        self.lru_state_mut(y).next = Link::of(Some(r));
        match older {
            Some(o) => self.lru_state_mut(o).prev = Link::of(Some(r)),
            None => self.lruvecs[lv].tail[lru as usize] = Some(r),
        }
        let nr = 1i64 << order;
        self.lruvecs[lv].nr_pages[lru as usize] += nr;
        self.zone_lru_count(pa, pfn, lru, nr);
        pa.memmap.page_mut(pfn).insert_flags(PageFlags::LRU);
    }

    /// One `folio_batch_move_lru` of `nr` folios takes the LRU lock once
    /// (none for an empty batch).
    fn lru_lock_batch(&mut self, nr: usize) {
        if nr > 0 {
            self.locks.lru += 1;
            self.locks.lru_folios += nr as u64;
        }
    }

    /// The folio towards the head of its list from `r` (younger).
    pub(crate) fn lru_prev(&self, r: FolioRef) -> Option<FolioRef> {
        self.lru_state(r).prev.get()
    }

    /// `folio_add_lru`: into `cpu`'s `lru_add` batch; the batch moves to
    /// the LRU when it is full or the folio is large
    /// (`folio_may_be_lru_cached`).
    /// Only that batch moves (`folio_batch_move_lru` of `lru_add`), not
    /// the cpu's other batches.
    pub(crate) fn folio_add_lru(&mut self, pa: &mut PageAlloc, cpu: usize, r: FolioRef) {
        let large = self.folio_pfn_order(r).1 > 0;
        if large && self.lru_batches[batch_cpu(cpu, self.lru_batches.len())].is_empty() {
            // The batch would hold this folio alone and move at once.
            self.lru_lock_batch(1);
            return self.lruvec_add(pa, r, false);
        }
        self.lru_state_mut(r).batched = true;
        self.lru_batch_push(pa, cpu, r, large);
    }

    /// The rest of [`Vm::folio_add_lru`] once the folio is marked
    /// batched: into the cpu's (`cpu` as [`batch_cpu`] gives it) `lru_add`
    /// batch, which moves when full or when the folio is large. A new
    /// order-0 folio made batched with its record comes here directly.
    #[inline]
    pub(crate) fn lru_batch_push(&mut self, pa: &mut PageAlloc, cpu: usize, r: FolioRef, large: bool) {
        debug_assert!(self.lru_state(r).batched);
        let cpu = batch_cpu(cpu, self.lru_batches.len());
        self.lru_batches[cpu].push(r);
        if large || self.lru_batches[cpu].len() >= PAGEVEC_SIZE {
            self.lru_add_batch_move(pa, cpu);
        }
    }

    /// When `cpu`'s `lru_add` batch holds a folio released while batched
    /// (freed when the batch moves): how many order-0 adds fill the batch
    /// and move it, the last included. `None` when it holds none.
    pub(crate) fn lru_adds_to_release(&self, cpu: usize) -> Option<u64> {
        let batch = &self.lru_batches[batch_cpu(cpu, self.lru_batches.len())];
        batch
            .iter()
            .any(|&r| self.lru_state(r).released)
            .then(|| PAGEVEC_SIZE.saturating_sub(batch.len()).max(1) as u64)
    }

    /// `lru_add_drain_cpu`: the `lru_add` batch joins the LRU in the order
    /// it was filled, then the `lru_deactivate`, `lru_lazyfree` and
    /// `activate` batches are applied (`folio_activate_drain` last).
    pub(crate) fn lru_add_drain_cpu(&mut self, pa: &mut PageAlloc, cpu: usize) {
        let cpu = batch_cpu(cpu, self.lru_batches.len());
        self.lru_add_batch_move(pa, cpu);
        self.held_batch_move(pa, cpu, HeldBatch::Deactivate);
        self.held_batch_move(pa, cpu, HeldBatch::Lazyfree);
        self.held_batch_move(pa, cpu, HeldBatch::Activate);
    }

    /// `folio_batch_move_lru` of the cpu's `lru_add` batch: its folios join
    /// the head of their lists in the order the batch was filled; those
    /// the batch held last are queued to be freed.
    ///
    /// Folios that follow one another in the batch and join the same list
    /// are linked to each other first and then put at the head of the
    /// list together ([`LruChain`]): the list ends as one
    /// [`Vm::lruvec_add`] after another would leave it, without the head's
    /// record written and read again for every folio.
    fn lru_add_batch_move(&mut self, pa: &mut PageAlloc, cpu: usize) {
        let mut batch = std::mem::take(&mut self.lru_batches[cpu]);
        self.lru_lock_batch(batch.len());
        let mut chain: Option<LruChain> = None;
        for &r in &batch {
            if !self.lru_chains && !self.lru_state(r).released {
                self.lruvec_add(pa, r, false);
                continue;
            }
            let (s, pfn, order, lru, lv) = self.lru_placed_mut(pa, r);
            if s.released {
                // folios_put: the batch's reference was the last.
                s.batched = false;
                self.lru_drained_dead.push(r);
                continue;
            }
            debug_assert!(s.list.is_none(), "{r:?} is on an LRU list already");
            let zi = pa.page_zone_index(pfn).expect("an LRU folio lies in a zone");
            let older = match chain {
                Some(c) if c.lv == lv && c.lru == lru && c.zi == zi => Some(c.youngest),
                _ => None,
            };
            s.list = Some(lru);
            s.batched = false;
            s.prev = Link::NONE;
            s.next = Link::of(older);
            if older.is_none() {
                if let Some(c) = chain.take() {
                    self.lru_chain_to_head(c);
                }
            }
            let nr = 1i64 << order;
            match (older, chain.as_mut()) {
                (Some(y), Some(c)) => {
                    self.lru_state_mut(y).prev = Link::of(Some(r));
                    c.youngest = r;
                    c.nr_pages += nr;
                }
                _ => {
                    chain = Some(LruChain {
                        lv,
                        lru,
                        zi,
                        youngest: r,
                        oldest: r,
                        nr_pages: nr,
                    })
                }
            }
            pa.memmap.page_mut(pfn).insert_flags(PageFlags::LRU);
        }
        if let Some(c) = chain {
            self.lru_chain_to_head(c);
        }
        // The emptied batch goes back with its capacity (the kernel's
        // folio_batch is a fixed array): no allocation per drain.
        batch.clear();
        if self.lru_batches[cpu].is_empty() {
            self.lru_batches[cpu] = batch;
        }
    }

    /// Whether a cpu's `lru_add` batch moves its folios to their lists
    /// linked together (the default) or one [`Vm::lruvec_add`] at a time:
    /// the two give the same lists, which a test checks.
    pub fn set_lru_chains(&mut self, on: bool) {
        self.lru_chains = on;
    }

    /// The head pfn of each folio on each list of each lruvec, youngest
    /// first: what a test compares to know two machines' LRU lists hold
    /// the same folios in the same order. Panics when a list read from its
    /// tail through the `prev` links is not the same list reversed.
    pub fn lru_order(&self) -> Vec<[Vec<u64>; 4]> {
        let walk = |from: Option<FolioRef>, older: bool| -> Vec<u64> {
            std::iter::successors(from, |&r| {
                let s = self.lru_state(r);
                if older {
                    s.next_link()
                } else {
                    s.prev_link()
                }
            })
            .map(|r| self.folio_pfn_order(r).0)
            .collect()
        };
        self.lruvecs
            .iter()
            .map(|v| {
                LruList::ALL.map(|lru| {
                    let from_head = walk(v.head(lru), true);
                    let mut from_tail = walk(v.tail(lru), false);
                    from_tail.reverse();
                    assert_eq!(
                        from_head, from_tail,
                        "{lru:?} read from its tail is not the list reversed"
                    );
                    from_head
                })
            })
            .collect()
    }

    /// Puts a chain of linked folios at the head of its list: its oldest
    /// before the list's old head (the end of [`Vm::lru_add_batch_move`]'s
    /// [`Vm::lruvec_add`]s).
    fn lru_chain_to_head(&mut self, c: LruChain) {
        let l = c.lru as usize;
        let old_head = self.lruvecs[c.lv].head[l];
        self.lru_state_mut(c.oldest).next = Link::of(old_head);
        match old_head {
            Some(h) => self.lru_state_mut(h).prev = Link::of(Some(c.oldest)),
            None => self.lruvecs[c.lv].tail[l] = Some(c.oldest),
        }
        self.lruvecs[c.lv].head[l] = Some(c.youngest);
        self.lruvecs[c.lv].nr_pages[l] += c.nr_pages;
        self.zone_lru_count_in(c.zi, c.lru, c.nr_pages);
    }

    /// `folio_deactivate`: an active folio on the LRU is queued in the
    /// cpu's `lru_deactivate` batch; the batch moves when full or when a
    /// large folio joins it.
    pub(crate) fn folio_deactivate(&mut self, pa: &mut PageAlloc, cpu: usize, r: FolioRef) {
        let s = self.lru_state(r);
        if s.list.is_none() || !s.active {
            return;
        }
        self.held_batch_add(pa, cpu, r, HeldBatch::Deactivate);
    }

    /// `folio_mark_accessed` (mm/swap.c, without MGLRU): the first use
    /// sets PG_referenced; a second one on an inactive folio activates it
    /// (`folio_activate` through the cpu's `activate` batch when it is on
    /// its list, at once when it still waits in this cpu's `lru_add`
    /// batch: `__lru_cache_activate_folio`), clears PG_referenced and ages
    /// the lruvec's non-resident clock (`workingset_activation`). The
    /// model has no unevictable list and no dropbehind folios.
    pub(crate) fn folio_mark_accessed(&mut self, pa: &mut PageAlloc, cpu: usize, r: FolioRef) {
        let s = self.lru_state(r);
        if !s.referenced {
            self.lru_state_mut(r).referenced = true;
            return;
        }
        if s.active {
            return;
        }
        if s.list.is_some() {
            self.held_batch_add(pa, cpu, r, HeldBatch::Activate);
        } else if s.batched && self.lru_batches[batch_cpu(cpu, self.lru_batches.len())].contains(&r) {
            self.lru_state_mut(r).active = true;
        }
        self.lru_state_mut(r).referenced = false;
        let (pfn, order) = self.folio_pfn_order(r);
        let nid = self.node_of(pa, pfn);
        self.workingset_age_nonresident(nid, self.folio_memcg(r), 1 << order);
    }

    /// `lru_activate`: an inactive folio still on its list goes to the
    /// head of the active one (`pgactivate`).
    fn lru_activate(&mut self, pa: &mut PageAlloc, r: FolioRef) {
        if !self.lru_is_present(r) {
            return;
        }
        let s = self.lru_state(r);
        if s.list.is_none() || s.active {
            return;
        }
        self.lruvec_del(pa, r);
        self.lru_state_mut(r).active = true;
        self.lruvec_add(pa, r, false);
        let nr = self.folio_nr_pages(r);
        pa.events.count(crate::stats::VmEvent::Pgactivate, nr);
    }

    /// `folio_mark_lazyfree` (mm/swap.c): a swap-backed anonymous folio on
    /// the LRU is queued in the cpu's `lru_lazyfree` batch, which takes a
    /// reference; the whole batch moves when it is full or the folio is
    /// large. Until then the folio stays swap-backed on its anon list.
    pub(crate) fn folio_mark_lazyfree_batch(&mut self, pa: &mut PageAlloc, cpu: usize, r: FolioRef) {
        if self.lru_state(r).list.is_none() {
            return;
        }
        self.held_batch_add(pa, cpu, r, HeldBatch::Lazyfree);
    }

    /// `folio_batch_add_and_move` for a folio already on a list: queued
    /// (counted, the entry's reference); the whole batch moves when it is
    /// full or the folio is large.
    fn held_batch_add(&mut self, pa: &mut PageAlloc, cpu: usize, r: FolioRef, which: HeldBatch) {
        let cpu = batch_cpu(cpu, self.held_batches(which).len());
        self.held_batches(which)[cpu].push(r);
        *which.flag(self.lru_state_mut(r)) += 1;
        let large = self.folio_pfn_order(r).1 > 0;
        if large || self.held_batches(which)[cpu].len() >= PAGEVEC_SIZE {
            self.held_batch_move(pa, cpu, which);
        }
    }

    /// `folio_batch_move_lru` of a batch of folios already on a list: each
    /// moves (`lru_deactivate`, `lru_lazyfree` or `lru_activate`), then the batch's
    /// references go, and a folio whose last reference was a batch's is
    /// queued to be freed. A folio queued twice is moved twice, the second
    /// time to no effect, as in the kernel; one that went away left every
    /// batch ([`Vm::lru_forget`]).
    fn held_batch_move(&mut self, pa: &mut PageAlloc, cpu: usize, which: HeldBatch) {
        let mut batch = std::mem::take(&mut self.held_batches(which)[cpu]);
        self.lru_lock_batch(batch.len());
        for &r in &batch {
            if !self.lru_is_present(r) || *which.flag(self.lru_state_mut(r)) == 0 {
                continue;
            }
            *which.flag(self.lru_state_mut(r)) -= 1;
            match which {
                HeldBatch::Deactivate => self.lru_deactivate(pa, r),
                HeldBatch::Lazyfree => self.lru_lazyfree(pa, r),
                HeldBatch::Activate => self.lru_activate(pa, r),
            }
            let s = self.lru_state(r);
            if s.released && !s.held_by_batch() {
                self.lru_drained_dead.push(r);
            }
        }
        batch.clear();
        let batches = self.held_batches(which);
        if batches[cpu].is_empty() {
            batches[cpu] = batch;
        }
    }

    fn held_batches(&mut self, which: HeldBatch) -> &mut Vec<Vec<FolioRef>> {
        match which {
            HeldBatch::Deactivate => &mut self.lru_deactivate_batches,
            HeldBatch::Lazyfree => &mut self.lru_lazyfree_batches,
            HeldBatch::Activate => &mut self.lru_activate_batches,
        }
    }

    /// `lru_lazyfree`: a swap-backed anonymous folio still on its list
    /// and not in the swap cache loses PG_swapbacked, PG_active and
    /// PG_referenced and goes to the head of the inactive file list, where
    /// reclaim may discard it while it stays clean (`pglazyfree`).
    fn lru_lazyfree(&mut self, pa: &mut PageAlloc, r: FolioRef) {
        let FolioRef::Anon(key) = r else {
            return;
        };
        let (pfn, nr) = (self.folios[key].pfn, self.folios[key].nr_pages());
        let swapbacked = pa.memmap.page(pfn).flags().contains(PageFlags::SWAPBACKED);
        if self.lru_state(r).list.is_none() || !swapbacked || self.folios[key].swap.is_some() {
            return;
        }
        self.lruvec_del(pa, r);
        pa.memmap.page_mut(pfn).remove_flags(PageFlags::SWAPBACKED);
        let f = &mut self.folios[key];
        f.lazyfree = true;
        f.lru.active = false;
        f.lru.referenced = false;
        self.lruvec_add(pa, r, false);
        pa.events.count(crate::stats::VmEvent::Pglazyfree, nr);
    }

    /// `lru_deactivate`: an active folio still on its list goes to the
    /// head of the inactive one, no longer referenced (`pgdeactivate`).
    fn lru_deactivate(&mut self, pa: &mut PageAlloc, r: FolioRef) {
        if !self.lru_is_present(r) {
            return;
        }
        let s = self.lru_state(r);
        if s.list.is_none() || !s.active {
            return;
        }
        self.lruvec_del(pa, r);
        let s = self.lru_state_mut(r);
        s.active = false;
        s.referenced = false;
        self.lruvec_add(pa, r, false);
        let nr = self.folio_nr_pages(r);
        pa.events.count(crate::stats::VmEvent::Pgdeactivate, nr);
    }

    /// The folio still exists (a batch may outlive it).
    fn lru_is_present(&self, r: FolioRef) -> bool {
        match r {
            FolioRef::Anon(k) => self.folios.contains(k),
            FolioRef::Shmem(k) => self.shmem.folios.contains(k),
        }
    }

    /// `lru_add_drain`: this cpu's batch, and the folios it held last
    /// are freed.
    pub(crate) fn lru_add_drain(&mut self, ctx: &mut super::Ctx) {
        self.lru_add_drain_cpu(ctx.pa, ctx.cpu);
        self.free_drained(ctx);
    }

    /// A folio put for the last time while its batch holds it: the batch
    /// keeps it (one reference) until it drains.
    pub(crate) fn release_to_batch(&mut self, pa: &mut PageAlloc, r: FolioRef) {
        let (pfn, _) = self.folio_pfn_order(r);
        pa.memmap.page_mut(pfn).set_refcount(1);
        self.lru_state_mut(r).released = true;
    }

    /// Frees the folios drains found released (uncharged, pages given
    /// back), in drain order.
    pub(crate) fn free_drained(&mut self, ctx: &mut super::Ctx) {
        for r in std::mem::take(&mut self.lru_drained_dead) {
            let (pfn, _) = self.folio_pfn_order(r);
            ctx.pa.memmap.page_mut(pfn).set_refcount(0);
            self.lru_state_mut(r).released = false;
            match r {
                FolioRef::Anon(k) => self.free_anon_folio(ctx, k),
                FolioRef::Shmem(k) => self.free_shmem_folio(ctx, k),
            }
        }
    }

    /// `lru_add_drain_all`: every cpu's batch (the folios they held last
    /// are freed at the next [`Vm::free_drained`]).
    pub(crate) fn lru_add_drain_all(&mut self, pa: &mut PageAlloc) {
        for cpu in 0..self.lru_batches.len() {
            self.lru_add_drain_cpu(pa, cpu);
        }
    }

    /// A folio that is going away leaves the LRU or its batch.
    pub(crate) fn lru_forget(&mut self, pa: &mut PageAlloc, r: FolioRef) {
        let (on_list, batched, lazyfree_batched, deactivate_batched, activate_batched) = {
            let s = self.lru_state(r);
            (
                s.list.is_some(),
                s.batched,
                s.lazyfree_batched,
                s.deactivate_batched,
                s.activate_batched,
            )
        };
        if on_list {
            self.lru_forget_listed(pa, r);
        } else if batched {
            for b in &mut self.lru_batches {
                b.retain(|&x| x != r);
            }
            self.lru_state_mut(r).batched = false;
        }
        if (deactivate_batched | lazyfree_batched | activate_batched) == 0 {
            return;
        }
        if deactivate_batched > 0 {
            for b in &mut self.lru_deactivate_batches {
                b.retain(|&x| x != r);
            }
            self.lru_state_mut(r).deactivate_batched = 0;
        }
        if lazyfree_batched > 0 {
            for b in &mut self.lru_lazyfree_batches {
                b.retain(|&x| x != r);
            }
            self.lru_state_mut(r).lazyfree_batched = 0;
        }
        if activate_batched > 0 {
            for b in &mut self.lru_activate_batches {
                b.retain(|&x| x != r);
            }
            self.lru_state_mut(r).activate_batched = 0;
        }
    }

    /// [`Vm::lru_forget`] of a folio on an LRU list: off it, the lruvec
    /// lock taken once per `PAGEVEC_SIZE` folios freed (`folios_put_refs`
    /// releasing a batch under one lock).
    pub(crate) fn lru_forget_listed(&mut self, pa: &mut PageAlloc, r: FolioRef) {
        self.lru_lock_for_free();
        self.lruvec_del(pa, r);
    }

    /// The lruvec lock of a folio freed off its list: taken by the first
    /// of each `PAGEVEC_SIZE` frees (`folios_put_refs`' batch).
    #[inline]
    fn lru_lock_for_free(&mut self) {
        self.lru_lock_for_frees(1);
    }

    /// [`Vm::lru_lock_for_free`] of `nr` frees one after another: every
    /// `PAGEVEC_SIZE`-th from the first of a batch takes the lock.
    pub(crate) fn lru_lock_for_frees(&mut self, nr: u64) {
        let batch = PAGEVEC_SIZE as u64;
        let pending = self.locks.lru_free_pending;
        // The frees that find the batch empty: the first at the
        // (batch - pending) % batch-th, then every batch-th.
        let first = (batch - pending) % batch;
        if nr > first {
            self.locks.lru += 1 + (nr - 1 - first) / batch;
        }
        self.locks.lru_folios += nr;
        self.locks.lru_free_pending = (pending + nr) % batch;
    }

    /// [`Vm::lru_forget_listed`] of one of the order-0 folios a zap run
    /// frees one after another: the folio leaves its list at once, but the
    /// neighbours outside the stretch of the list that the run's folios
    /// have left so far (`cut`) are joined only when the stretch ends
    /// ([`Vm::lru_cut_close`]): where the run frees neighbours on the list
    /// one after another (the order a run of faults added them), nothing
    /// is written into a record that leaves next. The caller read the
    /// folio's record (`s`, its LRU state; `lv`, its lruvec; `zi`, its
    /// zone) and takes the record away right after, so a folio that grows
    /// the cut is not looked up again, and its links are left as they
    /// are: nothing reads them. One that begins a cut is read again after
    /// the cut before it closes (the close may have joined it to the
    /// neighbour beyond). The caller closes the cut before anything reads
    /// the lists, clears the page's `PG_lru` (a zap run clears its whole
    /// record) and counts the lru lock ([`Vm::lru_lock_for_frees`]).
    #[inline]
    pub(crate) fn lru_forget_order0_going(
        &mut self,
        r: FolioRef,
        s: &LruState,
        lv: usize,
        zi: usize,
        cut: &mut Option<LruCut>,
    ) {
        let lru = s.list.expect("the folio is on an LRU list");
        match cut.as_mut() {
            Some(c) if c.lv == lv && c.lru == lru && c.zi == zi && c.younger == Some(r) => {
                c.younger = s.prev.get();
                c.nr_pages += 1;
                return;
            }
            Some(c) if c.lv == lv && c.lru == lru && c.zi == zi && c.older == Some(r) => {
                c.older = s.next.get();
                c.nr_pages += 1;
                return;
            }
            _ => {}
        }
        if let Some(c) = cut.take() {
            self.lru_cut_close(c);
        }
        let s = *self.lru_state(r);
        *cut = Some(LruCut {
            lv,
            lru,
            zi,
            younger: s.prev.get(),
            older: s.next.get(),
            nr_pages: 1,
        });
    }

    /// Ends a stretch of a list that folios left one after another: its
    /// neighbours are joined and the list's size drops by its pages, as
    /// [`Vm::lruvec_del`] of each would have left them.
    pub(crate) fn lru_cut_close(&mut self, c: LruCut) {
        let l = c.lru as usize;
        match c.younger {
            Some(p) => self.lru_state_mut(p).next = Link::of(c.older),
            None => self.lruvecs[c.lv].head[l] = c.older,
        }
        match c.older {
            Some(n) => self.lru_state_mut(n).prev = Link::of(c.younger),
            None => self.lruvecs[c.lv].tail[l] = c.younger,
        }
        self.lruvecs[c.lv].nr_pages[l] -= c.nr_pages;
        self.zone_lru_count_in(c.zi, c.lru, -c.nr_pages);
    }

    /// A folio that moved between metadata keys or frames keeps its place:
    /// it leaves under its old identity and joins again under the new one
    /// (the caller replaces the metadata in between).
    pub(crate) fn lru_is_on(&self, r: FolioRef) -> bool {
        let s = self.lru_state(r);
        s.list.is_some() || s.batched
    }
}

/// Folios of one `lru_add` batch move linked to each other before they
/// join their list: youngest (the last added) to oldest, all of lruvec
/// `lv`'s list `lru`, `nr_pages` pages together. The oldest's `next`
/// is set when the chain joins the list.
#[derive(Clone, Copy)]
struct LruChain {
    lv: usize,
    lru: LruList,
    /// The zone of its folios (a folio of another zone starts another
    /// chain), whose list size grows by its pages when it joins.
    zi: usize,
    youngest: FolioRef,
    oldest: FolioRef,
    nr_pages: i64,
}

/// A stretch of lruvec `lv`'s list `lru` that folios left one after
/// another ([`Vm::lru_forget_order0_going`]), `nr_pages` pages together:
/// `younger` and `older` are its neighbours still on the list (`None`:
/// it reaches the head or the tail), not yet joined to each other.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LruCut {
    lv: usize,
    lru: LruList,
    /// The zone of its folios (a folio of another zone ends the stretch),
    /// whose list size drops by its pages when it closes.
    zi: usize,
    younger: Option<FolioRef>,
    older: Option<FolioRef>,
    nr_pages: i64,
}

/// The batch of `cpu` among `nr` per-cpu batches: `cpu % nr`, without a
/// division for the cpus that have a batch of their own (every fault
/// adds a folio to one).
#[inline(always)]
fn batch_cpu(cpu: usize, nr: usize) -> usize {
    if cpu < nr {
        cpu
    } else {
        cpu % nr
    }
}
