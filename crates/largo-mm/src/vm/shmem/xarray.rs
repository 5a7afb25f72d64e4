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
//! not per entry of the file.

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
        if i.xa_touched.is_empty() {
            return;
        }
        let mut touched = std::mem::take(&mut i.xa_touched);
        let height = i.xa_height(|k| folios[k].order);
        // Nodes exist only below the height the tree had at the last
        // settling (its top node is the highest), and are needed only
        // below the height it has now: no level above both can change.
        let had = (0..XA_LEVELS)
            .rev()
            .find(|&l| i.xa_nodes_per_level[l as usize] > 0)
            .map_or(0, |top| top + 1);
        let levels = height.max(had);
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
                let needed = level < height && i.xa_node_used(node);
                match (needed, i.xa_nodes.get(&node).copied()) {
                    (false, Some(owner)) => {
                        i.xa_nodes.remove(&node);
                        i.xa_nodes_per_level[level as usize] -= 1;
                        frees.push(owner);
                    }
                    (true, None) => {
                        i.xa_nodes.insert(node, memcg as u16);
                        i.xa_nodes_per_level[level as usize] += 1;
                        allocs += 1;
                    }
                    _ => {}
                }
            }
        }
        // The buffer goes back with its capacity for the next change.
        touched.clear();
        i.xa_touched = touched;
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
