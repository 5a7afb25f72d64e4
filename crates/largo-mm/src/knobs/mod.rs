//! Kernel knobs by their sysfs/sysctl path (relative to /sys/kernel/mm or
//! /proc/sys), with the values the kernel accepts: the THP settings, the
//! parsers and printers of knob values, and ([`registry`]) the table of
//! every knob.

mod khugepaged;
mod registry;
mod shmem;

use std::collections::BTreeMap;
use std::fmt;

pub use khugepaged::KhugepagedKnobs;
pub use registry::{KnobDef, KnobPath, REGISTRY, TRIGGER_CHOICES};
pub use shmem::{ShmemEnabled, ShmemKnobs, ShmemSizeEnabled, SHMEM_ENABLED_CHOICES, SHMEM_SIZE_CHOICES};

/// Top-level `transparent_hugepage/enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

/// Per-size `transparent_hugepage/hugepages-<size>kB/enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpSizeEnabled {
    Always,
    Inherit,
    Madvise,
    Never,
}

/// `transparent_hugepage/defrag`: how hard a THP or mTHP fault allocation
/// may try (`vma_thp_gfp_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpDefrag {
    Always,
    Defer,
    DeferMadvise,
    Madvise,
    Never,
}

/// The THP settings of the machine (mm/huge_memory.c defaults: top level
/// from Kconfig, madvise on the host; PMD size `inherit`, other sizes
/// `never`; defrag madvise; the zero page on; underused splitting on;
/// `max_ptes_none` HPAGE_PMD_NR - 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThpKnobs {
    pub enabled: ThpEnabled,
    /// Keyed by order, for the anon orders 2..=PMD order. Written only
    /// through [`ThpKnobs::set_size`], which keeps `size_masks` in step.
    per_size: BTreeMap<u32, ThpSizeEnabled>,
    /// The orders of `per_size` set always, madvise and inherit, in that
    /// order (the kernel's `huge_anon_orders_always`/`_madvise`/`_inherit`
    /// bitmaps, which the fault path reads instead of the sysfs state).
    size_masks: [u64; 3],
    pub pmd_order: u32,
    pub defrag: ThpDefrag,
    /// `use_zero_page`: read faults may map the huge zero page.
    pub use_zero_page: bool,
    /// `shrink_underused` (`split_underused_thp`).
    pub shrink_underused: bool,
    /// `khugepaged/max_ptes_none`.
    pub max_ptes_none: u32,
    /// `anon_beside_full`: a knob of the host kernel build (not mainline):
    /// an mTHP order is used only beside a fully populated block of the
    /// same size in the same page table; otherwise it is declined
    /// (`anon_fault_declined`). Off by default.
    pub anon_beside_full: bool,
    /// `largo/memcg_thp_charge_batch`: a memcg charge whose gfp has no
    /// reclaim bits (an mTHP fault's `GFP_TRANSHUGE_LIGHT` under
    /// `defrag=madvise`) tries the 64-page batch first and refills the
    /// stock, as the 6.18.44-fc-v769 host build does. Off (the default):
    /// it charges exactly its pages, as 6.18's `try_charge_memcg` does
    /// (`gfpflags_allow_spinning`) and the 6.18.44-fc-v595 build. Not a
    /// kernel knob: it selects between two measured kernel builds.
    pub memcg_thp_charge_batch: bool,
    /// `largo/thp_policy`: the order policy of anonymous write faults
    /// (not a kernel knob; `static` is the kernel).
    pub policy: crate::vm::policy::ThpPolicy,
    /// The shmem THP settings.
    pub shmem: ShmemKnobs,
    /// The khugepaged tunables.
    pub khugepaged: KhugepagedKnobs,
}

impl ThpKnobs {
    pub fn defaults(pmd_order: u32) -> ThpKnobs {
        let per_size = (2..=pmd_order)
            .map(|order| {
                let mode = if order == pmd_order {
                    ThpSizeEnabled::Inherit
                } else {
                    ThpSizeEnabled::Never
                };
                (order, mode)
            })
            .collect();
        let mut thp = ThpKnobs {
            enabled: ThpEnabled::Madvise,
            per_size,
            size_masks: [0; 3],
            pmd_order,
            defrag: ThpDefrag::Madvise,
            use_zero_page: true,
            shrink_underused: true,
            max_ptes_none: (1 << pmd_order) - 1,
            anon_beside_full: false,
            memcg_thp_charge_batch: false,
            policy: Default::default(),
            shmem: ShmemKnobs::defaults(pmd_order),
            khugepaged: KhugepagedKnobs::defaults(pmd_order),
        };
        thp.size_masks = thp.masks_of_sizes();
        thp
    }

    /// Every anonymous size's setting, by order.
    pub fn per_size(&self) -> &BTreeMap<u32, ThpSizeEnabled> {
        &self.per_size
    }

    /// `hugepages-<size>/enabled` of `order` (an anon order 2..=PMD order).
    pub fn set_size(&mut self, order: u32, mode: ThpSizeEnabled) {
        self.per_size.insert(order, mode);
        self.size_masks = self.masks_of_sizes();
    }

    /// The orders set always, madvise and inherit (see `size_masks`).
    #[inline]
    pub fn size_masks(&self) -> [u64; 3] {
        self.size_masks
    }

    fn masks_of_sizes(&self) -> [u64; 3] {
        let mut masks = [0u64; 3];
        for (&order, &mode) in &self.per_size {
            let slot = match mode {
                ThpSizeEnabled::Always => 0,
                ThpSizeEnabled::Madvise => 1,
                ThpSizeEnabled::Inherit => 2,
                ThpSizeEnabled::Never => continue,
            };
            masks[slot] |= 1 << order;
        }
        masks
    }

    /// `hugepage_global_always`.
    pub fn global_always(&self) -> bool {
        self.enabled == ThpEnabled::Always
    }

    /// `hugepage_global_enabled`.
    pub fn global_enabled(&self) -> bool {
        self.enabled != ThpEnabled::Never
    }

    /// `hugepage_pmd_enabled`: PMD THP can be used by some anonymous VMA
    /// or by shmem (`shmem_hpage_pmd_enabled`).
    pub fn pmd_enabled(&self) -> bool {
        let anon = match self.per_size[&self.pmd_order] {
            ThpSizeEnabled::Always | ThpSizeEnabled::Madvise => true,
            ThpSizeEnabled::Inherit => self.global_enabled(),
            ThpSizeEnabled::Never => false,
        };
        anon || self.shmem_pmd_enabled()
    }

    /// `shmem_hpage_pmd_enabled`.
    pub fn shmem_pmd_enabled(&self) -> bool {
        if self.shmem.enabled == ShmemEnabled::Deny {
            return false;
        }
        match self.shmem.per_size()[&self.pmd_order] {
            ShmemSizeEnabled::Always | ShmemSizeEnabled::Advise | ShmemSizeEnabled::WithinSize => true,
            ShmemSizeEnabled::Inherit => self.shmem.enabled != ShmemEnabled::Never,
            ShmemSizeEnabled::Never => false,
        }
    }
}

/// A knob write the kernel would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobError {
    #[error("unknown knob '{path}'; `largo list knobs` shows the accepted paths")]
    Unknown { path: String },
    #[error("invalid value '{value}' for {path}: expected {expected}")]
    BadValue {
        path: String,
        value: String,
        expected: String,
    },
    #[error("malformed knob write '{0}': expected KNOB=VALUE, e.g. vm/min_free_kbytes=65536")]
    Malformed(String),
}

/// Splits `KNOB=VALUE`.
pub fn parse_assignment(s: &str) -> Result<(String, String), KnobError> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(KnobError::Malformed(s.to_string())),
    }
}

/// Renders a choice the way sysfs does: `always [madvise] never`.
pub fn sysfs_choice<T: PartialEq + Copy>(options: &[(&str, T)], current: T) -> String {
    options
        .iter()
        .map(|(name, v)| {
            if *v == current {
                format!("[{name}]")
            } else {
                name.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub const THP_ENABLED_CHOICES: [(&str, ThpEnabled); 3] = [
    ("always", ThpEnabled::Always),
    ("madvise", ThpEnabled::Madvise),
    ("never", ThpEnabled::Never),
];

pub const THP_DEFRAG_CHOICES: [(&str, ThpDefrag); 5] = [
    ("always", ThpDefrag::Always),
    ("defer", ThpDefrag::Defer),
    ("defer+madvise", ThpDefrag::DeferMadvise),
    ("madvise", ThpDefrag::Madvise),
    ("never", ThpDefrag::Never),
];

pub const THP_SIZE_CHOICES: [(&str, ThpSizeEnabled); 4] = [
    ("always", ThpSizeEnabled::Always),
    ("inherit", ThpSizeEnabled::Inherit),
    ("madvise", ThpSizeEnabled::Madvise),
    ("never", ThpSizeEnabled::Never),
];

/// Parses one of `choices` by name.
pub fn parse_choice<T: Copy>(path: &str, value: &str, choices: &[(&str, T)]) -> Result<T, KnobError> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| KnobError::BadValue {
            path: path.to_string(),
            value: value.to_string(),
            expected: choices.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        })
}

/// Parses an integer in `min..=max`.
pub fn parse_int(path: &str, value: &str, min: u64, max: u64) -> Result<u64, KnobError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| KnobError::BadValue {
            path: path.to_string(),
            value: value.to_string(),
            expected: format!("an integer in {min}..={max}"),
        })
}

/// A knob as `largo list knobs` shows it.
#[derive(Clone, Debug)]
pub struct KnobInfo {
    pub path: String,
    pub value: String,
    pub help: &'static str,
}

impl fmt::Display for KnobInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.path, self.value)
    }
}

/// The sysfs directory name of an mTHP size (`hugepages-64kB`).
pub fn size_dir(page_shift: u32, order: u32) -> String {
    format!("hugepages-{}kB", (1u64 << (page_shift + order)) >> 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmd_enabled_follows_the_truth_table() {
        let mut thp = ThpKnobs::defaults(9);
        assert!(thp.pmd_enabled(), "host default: 2M inherit + madvise");
        thp.enabled = ThpEnabled::Never;
        assert!(!thp.pmd_enabled());
        thp.set_size(9, ThpSizeEnabled::Madvise);
        assert!(thp.pmd_enabled());
        thp.set_size(9, ThpSizeEnabled::Never);
        thp.enabled = ThpEnabled::Always;
        assert!(!thp.pmd_enabled());
    }

    #[test]
    fn sysfs_rendering_and_parsing() {
        assert_eq!(
            sysfs_choice(&THP_ENABLED_CHOICES, ThpEnabled::Madvise),
            "always [madvise] never"
        );
        assert_eq!(
            parse_choice("x", "inherit", &THP_SIZE_CHOICES),
            Ok(ThpSizeEnabled::Inherit)
        );
        assert!(parse_choice("x", "sometimes", &THP_SIZE_CHOICES).is_err());
        assert!(parse_int("vm/x", "-1", 0, 10).is_err());
        assert_eq!(size_dir(12, 4), "hugepages-64kB");
        assert_eq!(size_dir(16, 13), "hugepages-524288kB");
        assert!(parse_assignment("novalue").is_err());
    }
}
