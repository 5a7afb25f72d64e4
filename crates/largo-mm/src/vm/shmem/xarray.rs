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
//! ancestor up to the root, whose level covers the highest index; a lone
//! order-0 entry at index 0 needs no node (`xa_head` holds it).

use std::collections::BTreeSet;

use super::super::Vm;
use crate::memcg::SlabCache;

/// `XA_CHUNK_SHIFT`: 64 slots a node.
const XA_CHUNK_SHIFT: u32 = 6;

impl Vm {
    /// The nodes `inode`'s entries (folios and swap entries) need, as
    /// (level, first index >> (6 * (level + 1))).
    fn xa_nodes_needed(&self, inode: usize) -> BTreeSet<(u32, u64)> {
        let i = &self.shmem.inodes[inode];
        let entries: Vec<(u64, u32)> = i
            .cache
            .iter()
            .map(|(&index, &k)| (index, self.shmem.folios[k].order))
            .chain(i.swapped.iter().map(|(&index, &(_, order))| (index, order)))
            .collect();
        let mut need = BTreeSet::new();
        let lone_head = entries.len() == 1 && entries[0] == (0, 0);
        if entries.is_empty() || lone_head {
            return need;
        }
        // xas_max: a multi-index entry's last index, one more for one
        // that starts at 0 (`mask == max`).
        let max_index = entries
            .iter()
            .map(|&(index, order)| {
                let mask = (1u64 << order) - 1;
                let last = index | mask;
                if order > 0 && last == mask {
                    last + 1
                } else {
                    last
                }
            })
            .max()
            .unwrap_or(0);
        // Levels: the root's covers max_index.
        let mut height = 1;
        while height < 11 && max_index >> (XA_CHUNK_SHIFT * height) != 0 {
            height += 1;
        }
        for (index, order) in entries {
            for level in order / XA_CHUNK_SHIFT..height {
                need.insert((level, index >> (XA_CHUNK_SHIFT * (level + 1))));
            }
        }
        need
    }

    /// After `inode`'s entries changed: nodes now needed are charged to
    /// `memcg` (the task storing), nodes gone are uncharged from the memcg
    /// they were charged to.
    pub(crate) fn shmem_xa_update(&mut self, inode: usize, memcg: usize) {
        let need = self.xa_nodes_needed(inode);
        let have: Vec<((u32, u64), u16)> = self.shmem.inodes[inode]
            .xa_nodes
            .iter()
            .map(|(&n, &m)| (n, m))
            .collect();
        for (node, owner) in have {
            if !need.contains(&node) {
                self.shmem.inodes[inode].xa_nodes.remove(&node);
                self.slab_free(owner, SlabCache::RadixTreeNode, 1);
            }
        }
        for node in need {
            if !self.shmem.inodes[inode].xa_nodes.contains_key(&node) {
                self.shmem.inodes[inode].xa_nodes.insert(node, memcg as u16);
                self.slab_alloc_memcg(memcg as u16, SlabCache::RadixTreeNode, 1);
            }
        }
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
