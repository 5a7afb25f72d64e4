//! Workloads for the rest of memory's life: memfd (shmem files), swap under
//! a memory limit, and collapse of 4K-faulted ranges into PMD folios by
//! khugepaged or `MADV_COLLAPSE`.

use super::{count, duration, map_anon, size, touch_seq, unmap_all, BuildCtx, WorkloadDef, MIB};
use crate::op::{AdviceKind, Op};
use crate::spec::WorkloadSpec;

pub const MEMFD_W_SEQ: WorkloadDef = WorkloadDef {
    name: "memfd-w-seq",
    summary:
        "memfd_create + ftruncate(SIZE) + mmap(MAP_SHARED), write every page in address order; folio sizes from --shmem",
    params: &[size(
        "size",
        512 * MIB,
        "bytes of the memfd mapped and written per task",
    )],
    default_suite: false,
    build: memfd_w_seq,
};

fn memfd_w_seq(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    vec![
        Op::MmapMemfd {
            slot: 0,
            len,
            write: true,
        },
        touch_seq(len, ctx.page_size, true),
        unmap_all(len),
    ]
}

pub const SWAP_PRESSURE: WorkloadDef = WorkloadDef {
    name: "swap-pressure",
    summary: "write every page of SIZE of private anon, then read it all back PASSES times: a working set over a --memcg-max limit swaps out (with --swap) and faults back in",
    params: &[
        size("size", 256 * MIB, "bytes of private anonymous memory per task"),
        count("passes", 2, 0, "read passes over the whole range after the first write"),
        count("rewrite", 0, 0, "1: the passes write instead of read (swapped-in folios are dirtied again)"),
    ],
    default_suite: false,
    build: swap_pressure,
};

fn swap_pressure(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let write_back = spec.get("rewrite") != 0;
    let mut ops = vec![map_anon(len), touch_seq(len, ctx.page_size, true)];
    for _ in 0..spec.get("passes") {
        ops.push(touch_seq(len, ctx.page_size, write_back));
    }
    ops.push(unmap_all(len));
    ops
}

pub const COLLAPSE: WorkloadDef = WorkloadDef {
    name: "collapse",
    summary: "write SIZE of private anon in 4K folios (MADV_NOHUGEPAGE), then MADV_HUGEPAGE and collapse it to PMD folios: MADV_COLLAPSE, or with khugepaged=1 khugepaged scanning while the task sleeps WAIT",
    params: &[
        size("size", 64 * MIB, "bytes faulted in 4K pages, then collapsed"),
        count("khugepaged", 0, 0, "1: leave the collapse to khugepaged (MADV_HUGEPAGE, wake it, sleep WAIT)"),
        duration("wait", 2_000_000_000, "with khugepaged=1: how long the task sleeps while khugepaged scans"),
        size("fill", 4096, "bytes written per PMD range before the collapse, from its start (max_ptes_none decides what collapses)"),
    ],
    default_suite: false,
    build: collapse,
};

/// The PMD size of every base page size largo models is not a parameter
/// here: ranges are written `fill` bytes per `2 MiB << (page_shift - 12)`.
fn collapse(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let pmd_bytes = pmd_size(ctx.page_size);
    let fill = spec.get("fill").clamp(ctx.page_size, pmd_bytes);
    let mut ops = vec![map_anon(len), advise(len, AdviceKind::NoHugePage)];
    let mut start = 0;
    while start < len {
        ops.push(Op::Touch {
            slot: 0,
            offset: start,
            len: fill.min(len - start),
            stride: ctx.page_size,
            write: true,
            order: crate::op::TouchOrder::Sequential,
        });
        start += pmd_bytes;
    }
    // MADV_HUGEPAGE clears VM_NOHUGEPAGE, which forbids MADV_COLLAPSE too.
    ops.push(advise(len, AdviceKind::HugePage));
    if spec.get("khugepaged") != 0 {
        ops.push(Op::KhugepagedWake);
        ops.push(Op::Sleep { ns: spec.get("wait") });
    } else {
        ops.push(advise(len, AdviceKind::Collapse));
    }
    ops.push(unmap_all(len));
    ops
}

/// Bytes one PMD entry maps: a page of PTEs (8 bytes each) times the page size.
fn pmd_size(page_size: u64) -> u64 {
    page_size / 8 * page_size
}

fn advise(len: u64, advice: AdviceKind) -> Op {
    Op::Madvise {
        slot: 0,
        offset: 0,
        len,
        advice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> BuildCtx {
        BuildCtx {
            page_size: 4096,
            task: 0,
            nr_tasks: 1,
            seed: 1,
        }
    }

    #[test]
    fn collapse_writes_fill_bytes_of_every_pmd_range() {
        let spec = COLLAPSE.parse("collapse:size=8M,fill=64K").unwrap();
        let ops = collapse(&spec, &ctx());
        let touches: Vec<_> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Touch { offset, len, .. } => Some((*offset, *len)),
                _ => None,
            })
            .collect();
        assert_eq!(
            touches,
            vec![(0, 65536), (2 << 20, 65536), (4 << 20, 65536), (6 << 20, 65536)]
        );
        assert!(matches!(
            ops[ops.len() - 2],
            Op::Madvise {
                advice: AdviceKind::Collapse,
                ..
            }
        ));
    }

    #[test]
    fn collapse_by_khugepaged_sleeps_after_the_wake() {
        let spec = COLLAPSE.parse("collapse:khugepaged=1,wait=500ms").unwrap();
        let ops = collapse(&spec, &ctx());
        let n = ops.len();
        assert!(matches!(ops[n - 3], Op::KhugepagedWake));
        assert!(matches!(ops[n - 2], Op::Sleep { ns: 500_000_000 }));
    }

    #[test]
    fn swap_pressure_reads_back_every_pass() {
        let spec = SWAP_PRESSURE.parse("swap-pressure:size=1M,passes=3").unwrap();
        let ops = swap_pressure(&spec, &ctx());
        let reads = ops
            .iter()
            .filter(|op| matches!(op, Op::Touch { write: false, .. }))
            .count();
        assert_eq!(reads, 3);
    }
}
