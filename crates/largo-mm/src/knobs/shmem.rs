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
    pub per_size: BTreeMap<u32, ShmemSizeEnabled>,
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
        ShmemKnobs {
            enabled: ShmemEnabled::Never,
            per_size,
        }
    }

    /// `huge_shmem_orders_<mode>` as a bit mask of orders.
    pub fn orders(&self, mode: ShmemSizeEnabled) -> u64 {
        self.per_size
            .iter()
            .filter(|(_, &m)| m == mode)
            .fold(0, |acc, (&o, _)| acc | 1 << o)
    }
}
