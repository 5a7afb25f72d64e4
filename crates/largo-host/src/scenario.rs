//! The scenario suite: hand-written traces (crates/largo-host/scenarios)
//! covering the anonymous fault path's behaviours (docs/ARCHITECTURE.md section 4),
//! each run on the model and natively under the standard configurations
//! plus those its `@config` lines add. Every counter and the final folio
//! layout must be equal.

use largo_mm::MachineConfig;
use largo_trace::{parse_bytes, Trace, TraceError};
use largo_workloads::policy::{policy_knobs, PolicyError};

/// The configurations every scenario runs under: base pages only; one
/// mTHP size; the seed paper's 16K+32K+64K; every size always (PMD
/// included); every size only where MADV_HUGEPAGE was given.
pub const STANDARD_CONFIGS: &[(&str, &str)] = &[
    ("4K", ""),
    ("64K", "--thp 64K"),
    ("16K+32K+64K", "--thp 16K,32K,64K"),
    ("all-always", "--thp 16K,32K,64K,128K,256K,512K,1M,2M"),
    ("all-madvise", "--thp 16K,32K,64K,128K,256K,512K,1M,2M=madvise"),
];

/// The built-in scenarios: (name, text).
pub const SCENARIOS: &[(&str, &str)] = &[
    ("beside-full", include_str!("../scenarios/beside-full.trace")),
    (
        "collapse-after-fork",
        include_str!("../scenarios/collapse-after-fork.trace"),
    ),
    (
        "collapse-piece-without-pmd",
        include_str!("../scenarios/collapse-piece-without-pmd.trace"),
    ),
    (
        "collapse-read-only",
        include_str!("../scenarios/collapse-read-only.trace"),
    ),
    ("collapse-sparse", include_str!("../scenarios/collapse-sparse.trace")),
    (
        "collapse-stops-at-empty-pmd",
        include_str!("../scenarios/collapse-stops-at-empty-pmd.trace"),
    ),
    ("collapse-swapped", include_str!("../scenarios/collapse-swapped.trace")),
    (
        "collapse-then-shrink",
        include_str!("../scenarios/collapse-then-shrink.trace"),
    ),
    (
        "collapse-unaligned-range",
        include_str!("../scenarios/collapse-unaligned-range.trace"),
    ),
    (
        "collapse-zero-range",
        include_str!("../scenarios/collapse-zero-range.trace"),
    ),
    ("edge-ragged-end", include_str!("../scenarios/edge-ragged-end.trace")),
    ("edge-short-vma", include_str!("../scenarios/edge-short-vma.trace")),
    (
        "edge-unaligned-start",
        include_str!("../scenarios/edge-unaligned-start.trace"),
    ),
    (
        "fork-child-exits-parent-writes",
        include_str!("../scenarios/fork-child-exits-parent-writes.trace"),
    ),
    (
        "fork-child-unmaps-half",
        include_str!("../scenarios/fork-child-unmaps-half.trace"),
    ),
    (
        "fork-child-writes",
        include_str!("../scenarios/fork-child-writes.trace"),
    ),
    ("fork-pmd-cow", include_str!("../scenarios/fork-pmd-cow.trace")),
    (
        "fork-then-fault-new",
        include_str!("../scenarios/fork-then-fault-new.trace"),
    ),
    (
        "huge-zero-partial-unmap",
        include_str!("../scenarios/huge-zero-partial-unmap.trace"),
    ),
    (
        "huge-zero-then-write",
        include_str!("../scenarios/huge-zero-then-write.trace"),
    ),
    (
        "khugepaged-collapse",
        include_str!("../scenarios/khugepaged-collapse.trace"),
    ),
    (
        "khugepaged-max-ptes-none",
        include_str!("../scenarios/khugepaged-max-ptes-none.trace"),
    ),
    (
        "khugepaged-max-ptes-swap",
        include_str!("../scenarios/khugepaged-max-ptes-swap.trace"),
    ),
    (
        "khugepaged-shared-after-fork",
        include_str!("../scenarios/khugepaged-shared-after-fork.trace"),
    ),
    (
        "khugepaged-zero-pages",
        include_str!("../scenarios/khugepaged-zero-pages.trace"),
    ),
    (
        "madv-cold-batch-unmap",
        include_str!("../scenarios/madv-cold-batch-unmap.trace"),
    ),
    (
        "madv-dontneed-holes",
        include_str!("../scenarios/madv-dontneed-holes.trace"),
    ),
    (
        "madv-dontneed-pmd-part",
        include_str!("../scenarios/madv-dontneed-pmd-part.trace"),
    ),
    (
        "madv-dontneed-whole",
        include_str!("../scenarios/madv-dontneed-whole.trace"),
    ),
    (
        "madv-free-batch-unmap",
        include_str!("../scenarios/madv-free-batch-unmap.trace"),
    ),
    (
        "madv-free-read-write-reclaim",
        include_str!("../scenarios/madv-free-read-write-reclaim.trace"),
    ),
    (
        "madv-free-then-write",
        include_str!("../scenarios/madv-free-then-write.trace"),
    ),
    (
        "madv-hugepage-part",
        include_str!("../scenarios/madv-hugepage-part.trace"),
    ),
    (
        "madv-nohugepage-middle",
        include_str!("../scenarios/madv-nohugepage-middle.trace"),
    ),
    (
        "memcg-deferred-split-shrinker",
        include_str!("../scenarios/memcg-deferred-split-shrinker.trace"),
    ),
    (
        "memcg-leave-at-limit",
        include_str!("../scenarios/memcg-leave-at-limit.trace"),
    ),
    ("memcg-munmap-all", include_str!("../scenarios/memcg-munmap-all.trace")),
    (
        "memcg-pgtable-rcu-free",
        include_str!("../scenarios/memcg-pgtable-rcu-free.trace"),
    ),
    (
        "memcg-rcu-freed-nodes",
        include_str!("../scenarios/memcg-rcu-freed-nodes.trace"),
    ),
    (
        "memfd-cold-partial",
        include_str!("../scenarios/memfd-cold-partial.trace"),
    ),
    (
        "memfd-fault-around-whole",
        include_str!("../scenarios/memfd-fault-around-whole.trace"),
    ),
    ("memfd-fork", include_str!("../scenarios/memfd-fork.trace")),
    (
        "memfd-ftruncate-same-size",
        include_str!("../scenarios/memfd-ftruncate-same-size.trace"),
    ),
    (
        "memfd-madv-remove",
        include_str!("../scenarios/memfd-madv-remove.trace"),
    ),
    ("memfd-pmd-split", include_str!("../scenarios/memfd-pmd-split.trace")),
    ("memfd-punch-hole", include_str!("../scenarios/memfd-punch-hole.trace")),
    (
        "memfd-punch-partial",
        include_str!("../scenarios/memfd-punch-partial.trace"),
    ),
    (
        "memfd-punch-subpage-at-zero",
        include_str!("../scenarios/memfd-punch-subpage-at-zero.trace"),
    ),
    (
        "memfd-punch-swapped",
        include_str!("../scenarios/memfd-punch-swapped.trace"),
    ),
    (
        "memfd-punch-swapped-trunc",
        include_str!("../scenarios/memfd-punch-swapped-trunc.trace"),
    ),
    (
        "memfd-shared-anon-64k",
        include_str!("../scenarios/memfd-shared-anon-64k.trace"),
    ),
    ("memfd-split-kmem", include_str!("../scenarios/memfd-split-kmem.trace")),
    ("memfd-truncate", include_str!("../scenarios/memfd-truncate.trace")),
    (
        "memfd-unaligned-offset",
        include_str!("../scenarios/memfd-unaligned-offset.trace"),
    ),
    ("memfd-write", include_str!("../scenarios/memfd-write.trace")),
    (
        "misaligned-32k-start",
        include_str!("../scenarios/misaligned-32k-start.trace"),
    ),
    (
        "mprotect-ro-then-rw",
        include_str!("../scenarios/mprotect-ro-then-rw.trace"),
    ),
    ("mprotect-split", include_str!("../scenarios/mprotect-split.trace")),
    (
        "mprotect-unchanged",
        include_str!("../scenarios/mprotect-unchanged.trace"),
    ),
    ("mremap-grow", include_str!("../scenarios/mremap-grow.trace")),
    (
        "mremap-move-aligned",
        include_str!("../scenarios/mremap-move-aligned.trace"),
    ),
    (
        "mremap-move-unaligned",
        include_str!("../scenarios/mremap-move-unaligned.trace"),
    ),
    ("mremap-shrink", include_str!("../scenarios/mremap-shrink.trace")),
    (
        "munmap-holes-drop-caches",
        include_str!("../scenarios/munmap-holes-drop-caches.trace"),
    ),
    (
        "munmap-middle-of-pmd",
        include_str!("../scenarios/munmap-middle-of-pmd.trace"),
    ),
    (
        "munmap-then-remap",
        include_str!("../scenarios/munmap-then-remap.trace"),
    ),
    (
        "munmap-whole-blocks",
        include_str!("../scenarios/munmap-whole-blocks.trace"),
    ),
    ("no-zero-page", include_str!("../scenarios/no-zero-page.trace")),
    (
        "populated-neighbour",
        include_str!("../scenarios/populated-neighbour.trace"),
    ),
    ("prctl-disable", include_str!("../scenarios/prctl-disable.trace")),
    (
        "prctl-except-advised",
        include_str!("../scenarios/prctl-except-advised.trace"),
    ),
    ("random-touch", include_str!("../scenarios/random-touch.trace")),
    (
        "read-half-write-half",
        include_str!("../scenarios/read-half-write-half.trace"),
    ),
    ("read-then-write", include_str!("../scenarios/read-then-write.trace")),
    ("reverse-touch", include_str!("../scenarios/reverse-touch.trace")),
    ("scattered-writes", include_str!("../scenarios/scattered-writes.trace")),
    (
        "shmem-anon-advise",
        include_str!("../scenarios/shmem-anon-advise.trace"),
    ),
    ("shmem-anon-fork", include_str!("../scenarios/shmem-anon-fork.trace")),
    (
        "shmem-anon-mprotect",
        include_str!("../scenarios/shmem-anon-mprotect.trace"),
    ),
    (
        "shmem-anon-munmap-part",
        include_str!("../scenarios/shmem-anon-munmap-part.trace"),
    ),
    (
        "shmem-anon-read-first",
        include_str!("../scenarios/shmem-anon-read-first.trace"),
    ),
    (
        "shmem-anon-unaligned",
        include_str!("../scenarios/shmem-anon-unaligned.trace"),
    ),
    (
        "shmem-anon-within-size",
        include_str!("../scenarios/shmem-anon-within-size.trace"),
    ),
    ("shmem-anon-write", include_str!("../scenarios/shmem-anon-write.trace")),
    (
        "shmem-punch-split-referenced",
        include_str!("../scenarios/shmem-punch-split-referenced.trace"),
    ),
    ("shmem-swap-memcg", include_str!("../scenarios/shmem-swap-memcg.trace")),
    (
        "shmem-swap-read-back",
        include_str!("../scenarios/shmem-swap-read-back.trace"),
    ),
    (
        "shmem-zap-recency",
        include_str!("../scenarios/shmem-zap-recency.trace"),
    ),
    (
        "split-pieces-lru-order",
        include_str!("../scenarios/split-pieces-lru-order.trace"),
    ),
    (
        "swap-cold-then-limit",
        include_str!("../scenarios/swap-cold-then-limit.trace"),
    ),
    (
        "swap-fork-after-pageout",
        include_str!("../scenarios/swap-fork-after-pageout.trace"),
    ),
    ("swap-memcg-limit", include_str!("../scenarios/swap-memcg-limit.trace")),
    (
        "swap-memcg-munmap",
        include_str!("../scenarios/swap-memcg-munmap.trace"),
    ),
    (
        "swap-memcg-refault",
        include_str!("../scenarios/swap-memcg-refault.trace"),
    ),
    (
        "swap-mremap-swapped",
        include_str!("../scenarios/swap-mremap-swapped.trace"),
    ),
    (
        "swap-pageout-after-fork",
        include_str!("../scenarios/swap-pageout-after-fork.trace"),
    ),
    (
        "swap-pageout-partial",
        include_str!("../scenarios/swap-pageout-partial.trace"),
    ),
    (
        "swap-pageout-read-half",
        include_str!("../scenarios/swap-pageout-read-half.trace"),
    ),
    (
        "swap-pageout-write-back",
        include_str!("../scenarios/swap-pageout-write-back.trace"),
    ),
    (
        "swap-unmap-swapped",
        include_str!("../scenarios/swap-unmap-swapped.trace"),
    ),
    ("sysv-shm-attach", include_str!("../scenarios/sysv-shm-attach.trace")),
    (
        "sysv-shm-fork-rmid",
        include_str!("../scenarios/sysv-shm-fork-rmid.trace"),
    ),
    ("sysv-shm-persist", include_str!("../scenarios/sysv-shm-persist.trace")),
    ("underused-thp", include_str!("../scenarios/underused-thp.trace")),
    (
        "vma-end-inside-pmd",
        include_str!("../scenarios/vma-end-inside-pmd.trace"),
    ),
];

/// A scenario that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{name}: {message}")]
    Machine { name: String, message: String },
    #[error("{name}: {source}")]
    Trace { name: String, source: TraceError },
    #[error("{name}: @config '{line}' is not NAME:FLAGS")]
    ConfigLine { name: String, line: String },
    #[error("{name}: @config {config}: {source}")]
    Config {
        name: String,
        config: String,
        source: PolicyError,
    },
}

/// A parsed scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub describe: String,
    pub trace: Trace,
    /// (name, flags) of every configuration to run it under: policy
    /// flags and machine flags ([`MACHINE_FLAGS`]).
    pub configs: Vec<(String, String)>,
    /// Machine flags of every configuration (`@machine FLAGS`).
    pub machine_flags: String,
}

/// The flags of a scenario that shape its machine rather than its THP
/// policy: `--swap SIZE[:zram|:disk]` (repeatable), `--zswap`,
/// `--memcg-max SIZE`.
pub const MACHINE_FLAGS: &[&str] = &["--swap", "--zswap", "--memcg-max"];

/// Splits `flags` into machine settings applied to `config` and the rest
/// (policy flags), returned.
pub fn apply_machine_flags(flags: &str, config: &mut MachineConfig) -> Result<String, String> {
    let mut rest = Vec::new();
    let mut it = flags.split_whitespace();
    while let Some(flag) = it.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (flag, None),
        };
        if !MACHINE_FLAGS.contains(&name) {
            rest.push(flag);
            continue;
        }
        if name == "--zswap" {
            config.zswap = true;
            continue;
        }
        let value = inline
            .or_else(|| it.next().map(str::to_string))
            .ok_or_else(|| format!("{name} needs a value"))?;
        match name {
            "--swap" => config.swap.push(largo_mm::swap::SwapSpec::parse(&value)?),
            _ => {
                let bytes = largo_types::parse_size(&value).map_err(|e| format!("--memcg-max '{value}': {e}"))?;
                config.memcg_max_bytes = Some(bytes);
            }
        }
    }
    Ok(rest.join(" "))
}

impl Scenario {
    /// Parses a scenario: a text trace with `@scenario NAME`,
    /// `@describe TEXT` and any number of `@config NAME:FLAGS` lines.
    pub fn parse(text: &str, fallback_name: &str) -> Result<Scenario, ScenarioError> {
        let trace = parse_bytes(text.as_bytes()).map_err(|source| ScenarioError::Trace {
            name: fallback_name.to_string(),
            source,
        })?;
        let h = &trace.header;
        let name = h.get("scenario").unwrap_or(fallback_name).to_string();
        let describe = h.get("describe").unwrap_or("").to_string();
        let machine_flags = h.all("machine").collect::<Vec<_>>().join(" ");
        apply_machine_flags(&machine_flags, &mut MachineConfig::default()).map_err(|message| {
            ScenarioError::Machine {
                name: name.clone(),
                message,
            }
        })?;
        let mut configs: Vec<(String, String)> = STANDARD_CONFIGS
            .iter()
            .map(|(n, f)| (n.to_string(), f.to_string()))
            .collect();
        for c in h.all("config") {
            let (n, f) = c.split_once(':').ok_or_else(|| ScenarioError::ConfigLine {
                name: name.clone(),
                line: c.to_string(),
            })?;
            let policy =
                apply_machine_flags(f, &mut MachineConfig::default()).map_err(|message| ScenarioError::Machine {
                    name: name.clone(),
                    message,
                })?;
            policy_knobs(&policy).map_err(|source| ScenarioError::Config {
                name: name.clone(),
                config: n.to_string(),
                source,
            })?;
            configs.push((n.trim().to_string(), f.trim().to_string()));
        }
        Ok(Scenario {
            name,
            describe,
            trace,
            configs,
            machine_flags,
        })
    }

    /// The machine of a configuration (the default machine, its THP
    /// knobs from the policy flags; machine flags set swap and memcg).
    pub fn machine(flags: &str) -> Result<MachineConfig, PolicyError> {
        let mut config = MachineConfig::default();
        let policy = apply_machine_flags(flags, &mut config).map_err(PolicyError::Machine)?;
        config.knobs = policy_knobs(&policy)?;
        Ok(config)
    }

    /// The machine of this scenario under configuration flags `flags`.
    pub fn machine_for(&self, flags: &str) -> Result<MachineConfig, PolicyError> {
        Self::machine(&format!("{} {flags}", self.machine_flags))
    }
}

/// Every built-in scenario, parsed.
pub fn builtin() -> Vec<Scenario> {
    SCENARIOS
        .iter()
        .map(|(n, t)| Scenario::parse(t, n).unwrap_or_else(|e| panic!("built-in scenario {n}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_file_is_built_in_and_parses() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .trim_end_matches(".trace")
                    .to_string()
            })
            .collect();
        files.sort();
        let built: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
        assert_eq!(files, built, "scenarios/ and SCENARIOS differ");
        let all = builtin();
        assert!(all.len() >= 30);
        for s in &all {
            assert!(!s.describe.is_empty(), "{} has no @describe", s.name);
            assert!(s.configs.len() >= STANDARD_CONFIGS.len());
        }
    }
}
