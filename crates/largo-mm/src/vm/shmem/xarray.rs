//! The kernel memory a shmem file costs its memcg: the inode, dentry and
//! file made with it (`shmem_inode_cache`, `dentry`, `filp`: SLAB_ACCOUNT
//! caches) and the nodes of its page cache's xarray (`i_pages` is
//! `XA_FLAGS_ACCOUNT`: each `xa_node` from `radix_tree_node` is charged
//! to the task whose store needed it). Measured on this host with the
//! `kmem:kmem_cache_alloc` tracepoint (`accounted`): a memfd or a shared
//! anonymous mapping makes one of each of the three, and a 1 MiB memfd
//! written whole four leaf nodes and a root.
//!
//! The xarray (lib/xarray.c): 64 slots a node; an entry of order `o` sits
//! in a node of level `o / 6` (its sibling slots beside it) with every
//! ancestor up to the root, whose level covers the highest index
//! (`xas_max`); a lone order-0 entry at index 0 needs no node (`xa_head`
//! holds it).
//!
//! Each inode counts, per node position, the entries beneath it
//! ([`ShmemInode::xa_count`], and [`ShmemInode::xa_edge_count`] for the
//! left-edge node of each level, which every small index shares); a
//! change of entries marks its index, and [`Vm::shmem_xa_update`] settles
//! the nodes on the paths it marked (and the root's, where the height
//! changes), at the levels the tree has or had: the work is per change,
//! not per entry of the file. A page added to the cache alone, the common
//! change, settles through [`Vm::shmem_xa_add_one`], which skips that
//! walk when the tree keeps its height ([`ShmemInode::xa_settle_one_add`]).

use super::super::Vm;
use super::ShmemInode;
use crate::memcg::SlabCache;

/// `XA_CHUNK_SHIFT`: 64 slots a node.
const XA_CHUNK_SHIFT: u32 = 6;
/// Levels enough for any 64-bit index.
pub(crate) const XA_LEVELS: u32 = 11;

/// The node at `level` above page `index`.
fn node_at(level: u32, index: u64) -> (u32, u64) {
    let shift = XA_CHUNK_SHIFT * (level + 1);
    (level, if shift >= 64 { 0 } else { index >> shift })
}

impl ShmemInode {
    /// An entry of `order` at `index` enters (`delta` 1) or leaves (-1)
    /// the page cache's xarray (a folio or a swap entry).
    pub(crate) fn xa_count_entry(&mut self, index: u64, order: u32, delta: i32) {
        let leaves_once = "an xarray entry leaves only once";
        for level in order / XA_CHUNK_SHIFT..XA_LEVELS {
            let node = node_at(level, index);
            if node.1 == 0 {
                // The left edge from here up: every higher level's node
                // on this path is its edge node too.
                for n in &mut self.xa_edge_count[level as usize..] {
                    *n = n.checked_add_signed(delta).expect(leaves_once);
                }
                break;
            }
            let n = self.xa_count.entry(node).or_default();
            *n = n.checked_add_signed(delta).expect(leaves_once);
            if *n == 0 {
                self.xa_count.remove(&node);
            }
        }
        self.xa_touched.push(index);
    }

    /// Some entry lies beneath the node (`level`, `key`).
    fn xa_node_used(&self, (level, key): (u32, u64)) -> bool {
        if key == 0 {
            self.xa_edge_count[level as usize] > 0
        } else {
            self.xa_count.contains_key(&(level, key))
        }
    }

    /// The levels that have nodes: the height the tree had when its nodes
    /// were last settled (its top node is the root).
    fn xa_settled_height(&self) -> u32 {
        (0..XA_LEVELS)
            .rev()
            .find(|&l| self.xa_nodes_per_level[l as usize] > 0)
            .map_or(0, |top| top + 1)
    }

    /// The tree's height (`xas_max` of its entries), 0 when it needs no
    /// node (empty, or a lone order-0 entry at index 0 in `xa_head`).
    fn xa_height(&self, folio_order: impl Fn(usize) -> u32) -> u32 {
        let ends = [
            self.cache
                .last_key_value()
                .map(|(&i, &k)| entry_last(i, folio_order(k))),
            self.cache
                .first_key_value()
                .map(|(&i, &k)| entry_last(i, folio_order(k))),
            self.swapped.last_key_value().map(|(&i, &(_, o))| entry_last(i, o)),
            self.swapped.first_key_value().map(|(&i, &(_, o))| entry_last(i, o)),
        ];
        let Some(max_index) = ends.into_iter().flatten().max() else {
            return 0;
        };
        if max_index == 0 && self.cache.len() + self.swapped.len() == 1 {
            return 0;
        }
        height_for(max_index)
    }
}

impl ShmemInode {
    /// Settles the nodes after the changes marked since the last settling:
    /// nodes now needed are made (owned by `memcg`, the task storing),
    /// nodes gone are dropped. Returns how many were made and the owner of
    /// each dropped. `folio_order` gives a page cache key's folio order.
    fn xa_settle(&mut self, memcg: u16, folio_order: impl Fn(usize) -> u32) -> (usize, Vec<u16>) {
        if self.xa_touched.is_empty() {
            return (0, Vec::new());
        }
        let mut touched = std::mem::take(&mut self.xa_touched);
        let height = self.xa_height(folio_order);
        // Nodes exist only below the height the tree had at the last
        // settling (its top node is the highest), and are needed only
        // below the height it has now: no level above both can change.
        let levels = height.max(self.xa_settled_height());
        // The paths of the touched indices and of index 0 (the root's,
        // where the height changed), node by node in (level, key) order:
        // sorted indices give each level's keys in order, repeats adjacent.
        touched.push(0);
        touched.sort_unstable();
        touched.dedup();
        let mut frees = Vec::new();
        let mut allocs = 0;
        for level in 0..levels {
            let mut last_key = None;
            for &index in &touched {
                let node = node_at(level, index);
                if last_key == Some(node.1) {
                    continue;
                }
                last_key = Some(node.1);
                let needed = level < height && self.xa_node_used(node);
                match (needed, self.xa_nodes.get(&node).copied()) {
                    (false, Some(owner)) => {
                        self.xa_nodes.remove(&node);
                        self.xa_nodes_per_level[level as usize] -= 1;
                        frees.push(owner);
                    }
                    (true, None) => {
                        self.xa_nodes.insert(node, memcg);
                        self.xa_nodes_per_level[level as usize] += 1;
                        allocs += 1;
                    }
                    _ => {}
                }
            }
        }
        // The buffer goes back with its capacity for the next change.
        touched.clear();
        self.xa_touched = touched;
        (allocs, frees)
    }

    /// [`ShmemInode::xa_settle`] after one change, an entry of `order`
    /// added at `index`, without the walk of every level, when the answer
    /// is plain: this entry is the only change since the last settling
    /// and the tree keeps its height (it had nodes, and the entry lies
    /// within their reach). Then no node becomes unneeded, the root's path
    /// is as it was, and the nodes to make are those missing on the
    /// entry's path from its own level up. Returns how many were made, or
    /// `None` (nothing done) when the walk is needed.
    fn xa_settle_one_add(&mut self, index: u64, order: u32, memcg: u16) -> Option<usize> {
        let had = self.xa_settled_height();
        let only_change = self.xa_touched.len() == 1 && self.xa_touched[0] == index;
        // A tree without nodes (`had` 0) is never within reach: every
        // entry needs a height of at least 1.
        if !only_change || height_for(entry_last(index, order)) > had {
            return None;
        }
        self.xa_touched.clear();
        let mut allocs = 0;
        for level in order / XA_CHUNK_SHIFT..had {
            let node = node_at(level, index);
            if let std::collections::hash_map::Entry::Vacant(slot) = self.xa_nodes.entry(node) {
                slot.insert(memcg);
                self.xa_nodes_per_level[level as usize] += 1;
                allocs += 1;
            }
        }
        Some(allocs)
    }
}

/// The last index an entry of `order` at `index` makes the tree cover
/// (`xas_max`: one more for a multi-index entry at index 0, which
/// `xa_head` cannot hold).
fn entry_last(index: u64, order: u32) -> u64 {
    let mask = (1u64 << order) - 1;
    let last = index | mask;
    if order > 0 && last == mask {
        last + 1
    } else {
        last
    }
}

/// The height of a tree whose highest index is `max_index` (at least 1).
fn height_for(max_index: u64) -> u32 {
    let mut height = 1;
    while height < XA_LEVELS && max_index >> (XA_CHUNK_SHIFT * height) != 0 {
        height += 1;
    }
    height
}

impl Vm {
    /// The nodes `inode`'s entries need, worked out from all of them (for
    /// the checker: [`Vm::shmem_xa_update`] keeps them incrementally).
    pub(crate) fn xa_nodes_expected(&self, inode: usize) -> std::collections::BTreeSet<(u32, u64)> {
        let i = &self.shmem.inodes[inode];
        let height = i.xa_height(|k| self.shmem.folios[k].order);
        let entries = i
            .cache
            .iter()
            .map(|(&index, &k)| (index, self.shmem.folios[k].order))
            .chain(i.swapped.iter().map(|(&index, &(_, order))| (index, order)));
        entries
            .flat_map(|(index, order)| (order / XA_CHUNK_SHIFT..height).map(move |l| node_at(l, index)))
            .collect()
    }

    /// After `inode`'s entries changed: nodes now needed are charged to
    /// `memcg` (the task storing), nodes gone are uncharged from the memcg
    /// they were charged to.
    pub(crate) fn shmem_xa_update(&mut self, inode: usize, memcg: usize) {
        let folios = &self.shmem.folios;
        let (allocs, frees) = self.shmem.inodes[inode].xa_settle(memcg as u16, |k| folios[k].order);
        self.xa_charge(memcg, allocs, frees);
    }

    /// An entry of `order` at `index` joined `inode`'s page cache (its
    /// count already taken, [`ShmemInode::xa_count_entry`]): the nodes
    /// settled as [`Vm::shmem_xa_update`] settles them, through
    /// [`ShmemInode::xa_settle_one_add`] when that applies.
    pub(crate) fn shmem_xa_add_one(&mut self, inode: usize, index: u64, order: u32, memcg: usize) {
        match self.shmem.inodes[inode].xa_settle_one_add(index, order, memcg as u16) {
            Some(allocs) => self.xa_charge(memcg, allocs, Vec::new()),
            None => self.shmem_xa_update(inode, memcg),
        }
    }

    /// The slab objects of settled nodes: `allocs` new ones charged to
    /// `memcg`, and one freed from each owner in `frees`.
    fn xa_charge(&mut self, memcg: usize, allocs: usize, frees: Vec<u16>) {
        for owner in frees {
            self.slab_free(owner, SlabCache::RadixTreeNode, 1);
        }
        self.slab_alloc_memcg(memcg as u16, SlabCache::RadixTreeNode, allocs);
    }

    /// The inode, dentry and file a new shmem file costs `memcg`.
    pub(crate) fn shmem_file_objects_alloc(&mut self, memcg: u16) {
        for cache in [SlabCache::ShmemInode, SlabCache::Dentry, SlabCache::Filp] {
            self.slab_alloc_memcg(memcg, cache, 1);
        }
    }

    /// ... given back when the inode goes.
    pub(crate) fn shmem_file_objects_free(&mut self, memcg: u16) {
        for cache in [SlabCache::Filp, SlabCache::Dentry, SlabCache::ShmemInode] {
            self.slab_free(memcg, cache, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ShmemInode;
    use proptest::prelude::*;

    fn empty_inode() -> ShmemInode {
        ShmemInode::empty(0, true, 0)
    }

    /// A change of entries: an entry of `order` added at (or the entry
    /// covering) page `index`, to the page cache or, `swap`, among the
    /// swapped-out ranges; settled now or left for the next change.
    #[derive(Clone, Debug)]
    struct Change {
        index: u64,
        order: u32,
        remove: bool,
        swap: bool,
        settle: bool,
        memcg: u16,
    }

    fn change() -> impl Strategy<Value = Change> {
        let index = prop_oneof![0u64..64, 0u64..5000, 0u64..300_000, Just(0u64), 0u64..(1 << 40)];
        let order = prop_oneof![Just(0u32), 0u32..10, 10u32..14];
        let swap = prop::bool::weighted(0.25);
        (index, order, any::<bool>(), swap, prop::bool::weighted(0.8), 1u16..4).prop_map(
            |(index, order, remove, swap, settle, memcg)| Change {
                index,
                order,
                remove,
                swap,
                settle,
                memcg,
            },
        )
    }

    /// The entry covering page `index` among `inode`'s cache (the keys
    /// are the folio orders here) and swapped ranges: (first, order).
    fn covering(i: &ShmemInode, index: u64) -> Option<(u64, u32, bool)> {
        let cached = i.cache.range(..=index).next_back().map(|(&f, &o)| (f, o as u32, false));
        let swapped = i.swapped.range(..=index).next_back().map(|(&f, &(_, o))| (f, o, true));
        [cached, swapped]
            .into_iter()
            .flatten()
            .find(|&(first, order, _)| index < first + (1 << order))
    }

    /// Applies `c` to the inode's entries; returns the entry that changed
    /// (first, order, added), if any.
    fn apply(i: &mut ShmemInode, c: &Change) -> Option<(u64, u32, bool)> {
        if c.remove {
            let (first, order, swapped) = covering(i, c.index)?;
            if swapped {
                i.swapped.remove(&first);
            } else {
                i.cache.remove(&first);
            }
            i.xa_count_entry(first, order, -1);
            return Some((first, order, false));
        }
        let first = c.index & !((1u64 << c.order) - 1);
        let end = first + (1 << c.order);
        let overlaps = |m: Option<(u64, u32)>| m.is_some_and(|(f, o)| f + (1 << o) > first);
        if overlaps(i.cache.range(..end).next_back().map(|(&f, &o)| (f, o as u32)))
            || overlaps(i.swapped.range(..end).next_back().map(|(&f, &(_, o))| (f, o)))
        {
            return None;
        }
        if c.swap {
            i.swapped.insert(first, (crate::swap::SwapEntry::new(0, 1), c.order));
        } else {
            i.cache.insert(first, c.order as usize);
        }
        i.xa_count_entry(first, c.order, 1);
        Some((first, c.order, true))
    }

    proptest! {
        /// The one-add settling makes and charges exactly the nodes the
        /// walk of every level would, in every state it accepts, and
        /// declines (changing nothing) in every other.
        #[test]
        fn settling_one_add_matches_the_walk(changes in prop::collection::vec(change(), 1..120)) {
            let (mut fast, mut walk) = (empty_inode(), empty_inode());
            let mut taken = 0;
            for c in &changes {
                let done = apply(&mut fast, c);
                prop_assert_eq!(done, apply(&mut walk, c));
                if !c.settle {
                    continue;
                }
                let by_walk = walk.xa_settle(c.memcg, |order| order as u32);
                let by_fast = match done {
                    // The page cache's adds take the short way; a swapped
                    // range's are settled by the walk in the model.
                    Some((first, order, true)) if !c.swap => {
                        let before = fast.clone();
                        match fast.xa_settle_one_add(first, order, c.memcg) {
                            Some(allocs) => {
                                taken += 1;
                                (allocs, Vec::new())
                            }
                            None => {
                                prop_assert_eq!(&fast.xa_nodes, &before.xa_nodes, "a declined settling changed nodes");
                                prop_assert_eq!(&fast.xa_touched, &before.xa_touched);
                                fast.xa_settle(c.memcg, |order| order as u32)
                            }
                        }
                    }
                    _ => fast.xa_settle(c.memcg, |order| order as u32),
                };
                prop_assert_eq!(by_fast, by_walk, "{:?}", c);
                prop_assert_eq!(&fast.xa_nodes, &walk.xa_nodes, "{:?}", c);
                prop_assert_eq!(fast.xa_nodes_per_level, walk.xa_nodes_per_level);
            }
            // Most adds into a tree with nodes take the short way.
            let adds = changes.iter().filter(|c| !c.remove && c.settle).count();
            prop_assert!(adds < 20 || taken > 0, "{adds} settled adds, none the short way");
        }
    }
}
