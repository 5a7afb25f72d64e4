//! The built-in workloads (will-it-scale and vm-scalability style), each a function from its
//! parameters to one task's script.

mod lifecycle;
mod memlife;
mod vmscalability;
mod willitscale;

use crate::op::Op;
use crate::spec::{ParamDef, ParamKind, SpecError, WorkloadSpec};

/// What a script builder knows about the run.
#[derive(Clone, Copy, Debug)]
pub struct BuildCtx {
    /// Base page size of the machine (touches write one byte per page).
    pub page_size: u64,
    /// This task's index and the number of tasks.
    pub task: usize,
    pub nr_tasks: usize,
    /// The run's seed, for random orders.
    pub seed: u64,
}

/// A built-in workload.
#[derive(Debug)]
pub struct WorkloadDef {
    pub name: &'static str,
    /// What it does and which suite it mirrors.
    pub summary: &'static str,
    pub params: &'static [ParamDef],
    /// In the default suite of `largo run`.
    pub default_suite: bool,
    pub build: fn(&WorkloadSpec, &BuildCtx) -> Vec<Op>,
}

impl WorkloadDef {
    /// Parses a specification of this workload.
    pub fn parse(&'static self, text: &str) -> Result<WorkloadSpec, SpecError> {
        WorkloadSpec::parse(text, self.params, self.name)
    }

    /// The script of one task.
    pub fn script(&self, spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
        (self.build)(spec, ctx)
    }
}

/// Every built-in workload, in listing order.
pub fn catalog() -> &'static [WorkloadDef] {
    &CATALOG
}

static CATALOG: [WorkloadDef; 19] = [
    willitscale::PAGE_FAULT1,
    willitscale::MALLOC1,
    willitscale::MMAP1,
    vmscalability::ANON_W_SEQ,
    vmscalability::ANON_W_RAND,
    vmscalability::ANON_CHASE,
    vmscalability::ANON_R_SEQ,
    vmscalability::ANON_RW_SEQ,
    vmscalability::ANON_COW_SEQ,
    vmscalability::SHMEM_W_SEQ,
    lifecycle::SPARSE,
    lifecycle::MEMHOG,
    lifecycle::CHURN,
    lifecycle::MOVE_PAGES,
    lifecycle::MUNMAP_PARTIAL,
    lifecycle::FRAGMENT,
    memlife::MEMFD_W_SEQ,
    memlife::SWAP_PRESSURE,
    memlife::COLLAPSE,
];

/// The workload a specification names.
pub fn find(text: &str) -> Result<&'static WorkloadDef, SpecError> {
    let name = WorkloadSpec::workload_name(text);
    catalog()
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| SpecError::UnknownWorkload {
            name: name.to_string(),
            available: format!(
                "built-in workloads: {}",
                catalog().iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
            ),
        })
}

/// Parses a full specification, `NAME[:K=V,...]`.
pub fn parse(text: &str) -> Result<(&'static WorkloadDef, WorkloadSpec), SpecError> {
    let def = find(text)?;
    Ok((def, def.parse(text)?))
}

const fn size(name: &'static str, default: u64, help: &'static str) -> ParamDef {
    ParamDef {
        name,
        kind: ParamKind::Size,
        default,
        min: 1,
        help,
    }
}

const fn duration(name: &'static str, default_ns: u64, help: &'static str) -> ParamDef {
    ParamDef {
        name,
        kind: ParamKind::Duration,
        default: default_ns,
        min: 0,
        help,
    }
}

const fn count(name: &'static str, default: u64, min: u64, help: &'static str) -> ParamDef {
    ParamDef {
        name,
        kind: ParamKind::Count,
        default,
        min,
        help,
    }
}

const fn choice(name: &'static str, names: &'static [&'static str], default: u64, help: &'static str) -> ParamDef {
    ParamDef {
        name,
        kind: ParamKind::Choice(names),
        default,
        min: 0,
        help,
    }
}

/// `passes=`: user accesses after the memory is written, for the TLB model.
pub(crate) const PASSES: ParamDef = count(
    "passes",
    0,
    0,
    "passes of user accesses over the memory once written, in PATTERN (the TLB model estimates their user time)",
);

/// The names of [`crate::access::Pattern`] in `pattern=` order.
pub(crate) const PATTERN_NAMES: &[&str] = &["seq", "stride", "chase"];

/// `pattern=`: the order of the user accesses.
pub(crate) const PATTERN: ParamDef = choice(
    "pattern",
    PATTERN_NAMES,
    0,
    "seq: every 64-byte line in order; stride: one line per 4 KiB in order; chase: one line per 4 KiB in a random cycle of dependent loads",
);

/// The `pattern=` of a spec.
pub(crate) fn pattern_of(spec: &crate::spec::WorkloadSpec) -> crate::access::Pattern {
    crate::access::Pattern::from_name(PATTERN_NAMES[spec.get("pattern") as usize]).expect("a pattern name")
}

/// The stream op of `passes=`/`pattern=` over slot 0's `len` bytes, if any.
pub(crate) fn stream_of(spec: &crate::spec::WorkloadSpec, ctx: &BuildCtx, len: u64) -> Option<Op> {
    let passes = spec.get("passes");
    (passes > 0).then(|| Op::Stream {
        slot: 0,
        offset: 0,
        len,
        pattern: pattern_of(spec),
        passes,
        seed: ctx.seed ^ (ctx.task as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    })
}

const MIB: u64 = 1 << 20;

/// `hugepage=1`: `madvise(MADV_HUGEPAGE)` right after the mmap.
const HUGEPAGE: ParamDef = count(
    "hugepage",
    0,
    0,
    "1: madvise(MADV_HUGEPAGE) the mapping (THP sizes set to madvise apply)",
);

/// One access every `stride` bytes of slot 0's first `len` bytes, in address order.
fn touch_seq(len: u64, stride: u64, write: bool) -> Op {
    Op::Touch {
        slot: 0,
        offset: 0,
        len,
        stride,
        write,
        order: crate::op::TouchOrder::Sequential,
    }
}

/// A private anonymous read-write `mmap` of `len` into slot 0.
fn map_anon(len: u64) -> Op {
    Op::Mmap {
        slot: 0,
        len,
        write: true,
        shared: false,
    }
}

/// `munmap` of slot 0's first `len` bytes.
fn unmap_all(len: u64) -> Op {
    Op::Munmap {
        slot: 0,
        offset: 0,
        len,
    }
}

/// `mmap` of `len` into slot 0, advised MADV_HUGEPAGE when the spec asks.
fn map_region(spec: &WorkloadSpec, len: u64) -> Vec<Op> {
    let mut ops = vec![map_anon(len)];
    if spec.params.get("hugepage").copied().unwrap_or(0) != 0 {
        ops.push(Op::Madvise {
            slot: 0,
            offset: 0,
            len,
            advice: crate::op::AdviceKind::HugePage,
        });
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_builds_with_its_defaults() {
        let ctx = BuildCtx {
            page_size: 4096,
            task: 0,
            nr_tasks: 1,
            seed: 1,
        };
        for def in catalog() {
            let spec = def.parse(def.name).unwrap();
            assert!(!def.script(&spec, &ctx).is_empty(), "{}", def.name);
        }
        assert!(parse("page_fault2").is_err());
    }
}
