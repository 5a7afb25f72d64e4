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
//! ([`ShmemInode::xa_count`]); a change of entries marks its index, and
//! [`Vm::shmem_xa_update`] settles the nodes on the paths it marked (and
//! the root's, where the height changes): the work is per change, not
//! per entry of the file.

use super::super::Vm;
use super::ShmemInode;
use crate::memcg::SlabCache;

/// `XA_CHUNK_SHIFT`: 64 slots a node.
const XA_CHUNK_SHIFT: u32 = 6;
/// Levels enough for any 64-bit index.
const XA_LEVELS: u32 = 11;

/// The node at `level` above page `index`.
fn node_at(level: u32, index: u64) -> (u32, u64) {
    let shift = XA_CHUNK_SHIFT * (level + 1);
    (level, if shift >= 64 { 0 } else { index >> shift })
}

impl ShmemInode {
    /// An entry of `order` at `index` enters (`delta` 1) or leaves (-1)
    /// the page cache's xarray (a folio or a swap entry).
    pub(crate) fn xa_count_entry(&mut self, index: u64, order: u32, delta: i32) {
        for level in order / XA_CHUNK_SHIFT..XA_LEVELS {
            let n = self.xa_count.entry(node_at(level, index)).or_default();
            *n = n.checked_add_signed(delta).expect("an xarray entry leaves only once");
            if *n == 0 {
                self.xa_count.remove(&node_at(level, index));
            }
        }
        self.xa_touched.push(index);
    }

    /// The tree's height (`xas_max` of its entries), 0 when it needs no
    /// node (empty, or a lone order-0 entry at index 0 in `xa_head`).
    fn xa_height(&self, folio_order: impl Fn(usize) -> u32) -> u32 {
        let last = |index: u64, order: u32| {
            let mask = (1u64 << order) - 1;
            let last = index | mask;
            if order > 0 && last == mask {
                last + 1
            } else {
                last
            }
        };
        let ends = [
            self.cache.last_key_value().map(|(&i, &k)| last(i, folio_order(k))),
            self.cache.first_key_value().map(|(&i, &k)| last(i, folio_order(k))),
            self.swapped.last_key_value().map(|(&i, &(_, o))| last(i, o)),
            self.swapped.first_key_value().map(|(&i, &(_, o))| last(i, o)),
        ];
        let Some(max_index) = ends.into_iter().flatten().max() else {
            return 0;
        };
        if max_index == 0 && self.cache.len() + self.swapped.len() == 1 {
            return 0;
        }
        let mut height = 1;
        while height < XA_LEVELS && max_index >> (XA_CHUNK_SHIFT * height) != 0 {
            height += 1;
        }
        height
    }
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
        let i = &mut self.shmem.inodes[inode];
        let touched = std::mem::take(&mut i.xa_touched);
        if touched.is_empty() {
            return;
        }
        let height = i.xa_height(|k| folios[k].order);
        let mut candidates: Vec<(u32, u64)> = touched
            .iter()
            .chain(std::iter::once(&0))
            .flat_map(|&index| (0..XA_LEVELS).map(move |l| node_at(l, index)))
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let mut frees = Vec::new();
        let mut allocs = 0;
        for node in candidates {
            let needed = node.0 < height && i.xa_count.contains_key(&node);
            match (needed, i.xa_nodes.get(&node).copied()) {
                (false, Some(owner)) => {
                    i.xa_nodes.remove(&node);
                    frees.push(owner);
                }
                (true, None) => {
                    i.xa_nodes.insert(node, memcg as u16);
                    allocs += 1;
                }
                _ => {}
            }
        }
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
