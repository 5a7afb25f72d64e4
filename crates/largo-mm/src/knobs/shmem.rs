//! The shmem THP settings (mm/shmem.c, v6.18): the top-level
//! `transparent_hugepage/shmem_enabled` (the `huge=` policy of the
//! internal mount that shared anonymous memory and memfds live on) and
//! the per-size `hugepages-<size>kB/shmem_enabled` of anonymous shmem.

use std::collections::BTreeMap;

/// Top-level `shmem_enabled` (`SHMEM_HUGE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmemEnabled {
    Always,
    WithinSize,
    Advise,
    Never,
    /// Off for every mount, and anonymous shmem too.
    Deny,
    /// PMD-sized folios everywhere (testing).
    Force,
}

/// Per-size `hugepages-<size>kB/shmem_enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmemSizeEnabled {
    Always,
    /// Follows the top-level value.
    Inherit,
    WithinSize,
    Advise,
    Never,
}

pub const SHMEM_ENABLED_CHOICES: [(&str, ShmemEnabled); 6] = [
    ("always", ShmemEnabled::Always),
    ("within_size", ShmemEnabled::WithinSize),
    ("advise", ShmemEnabled::Advise),
    ("never", ShmemEnabled::Never),
    ("deny", ShmemEnabled::Deny),
    ("force", ShmemEnabled::Force),
];

pub const SHMEM_SIZE_CHOICES: [(&str, ShmemSizeEnabled); 5] = [
    ("always", ShmemSizeEnabled::Always),
    ("inherit", ShmemSizeEnabled::Inherit),
    ("within_size", ShmemSizeEnabled::WithinSize),
    ("advise", ShmemSizeEnabled::Advise),
    ("never", ShmemSizeEnabled::Never),
];

/// The shmem THP state (`shmem_huge` and the `huge_shmem_orders_*` masks).
/// Invariant: `per_size` holds every order 1..=PMD order (the file THP
/// orders, `THP_ORDERS_ALL_FILE_DEFAULT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmemKnobs {
    pub enabled: ShmemEnabled,
    /// Written only through [`ShmemKnobs::set_size`], which keeps
    /// `masks` in step.
    per_size: BTreeMap<u32, ShmemSizeEnabled>,
    /// The orders of `per_size` in each mode, indexed by the mode (its
    /// discriminant; one slot per [`SHMEM_SIZE_CHOICES`] entry) (the kernel's `huge_shmem_orders_always`,
    /// `_inherit`, `_within_size`, `_madvise` bitmaps, which the fault
    /// path reads instead of the sysfs state).
    masks: [u64; SHMEM_SIZE_CHOICES.len()],
}

impl ShmemKnobs {
    /// Boot defaults: top level `never`, the PMD size `inherit`, others `never`.
    pub fn defaults(pmd_order: u32) -> ShmemKnobs {
        let per_size = (1..=pmd_order)
            .map(|o| {
                let mode = if o == pmd_order {
                    ShmemSizeEnabled::Inherit
                } else {
                    ShmemSizeEnabled::Never
                };
                (o, mode)
            })
            .collect();
        let mut knobs = ShmemKnobs {
            enabled: ShmemEnabled::Never,
            per_size,
            masks: [0; SHMEM_SIZE_CHOICES.len()],
        };
        knobs.masks = knobs.masks_of_sizes();
        knobs
    }

    /// Every size's setting, by order.
    pub fn per_size(&self) -> &BTreeMap<u32, ShmemSizeEnabled> {
        &self.per_size
    }

    /// `hugepages-<size>/shmem_enabled` of `order` (1..=PMD order).
    pub fn set_size(&mut self, order: u32, mode: ShmemSizeEnabled) {
        self.per_size.insert(order, mode);
        self.masks = self.masks_of_sizes();
    }

    /// `huge_shmem_orders_<mode>` as a bit mask of orders.
    #[inline]
    pub fn orders(&self, mode: ShmemSizeEnabled) -> u64 {
        self.masks[mode as usize]
    }

    /// The masks worked out from `per_size`.
    fn masks_of_sizes(&self) -> [u64; SHMEM_SIZE_CHOICES.len()] {
        let mut masks = [0; SHMEM_SIZE_CHOICES.len()];
        for (&order, &mode) in &self.per_size {
            masks[mode as usize] |= 1 << order;
        }
        masks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mode's mask holds exactly the orders set to it, after any
    /// sequence of writes.
    #[test]
    fn masks_follow_every_write() {
        let mut k = ShmemKnobs::defaults(9);
        let writes = [(4, 0), (9, 3), (2, 2), (4, 1), (1, 0), (9, 4), (4, 4)];
        for (order, choice) in writes {
            k.set_size(order, SHMEM_SIZE_CHOICES[choice].1);
            for (_, mode) in SHMEM_SIZE_CHOICES {
                let want = k
                    .per_size()
                    .iter()
                    .filter(|(_, &m)| m == mode)
                    .fold(0, |acc, (&o, _)| acc | 1 << o);
                assert_eq!(k.orders(mode), want, "{mode:?} after order {order} set to {choice}");
            }
        }
        assert_eq!(k.orders(ShmemSizeEnabled::Always), 1 << 1);
        assert_eq!(k.orders(ShmemSizeEnabled::WithinSize), 1 << 2);
    }
}
