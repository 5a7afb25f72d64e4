//! Workloads for the large-folio lifecycle: memory bloat from sparse
//! touches, touch-and-free, and partial unmaps feeding the deferred split
//! queue.

use super::{count, duration, map_anon, map_region, size, touch_seq, unmap_all, BuildCtx, WorkloadDef, HUGEPAGE, MIB};
use crate::op::{AdviceKind, Op};
use crate::spec::{ParamDef, WorkloadSpec};

pub const SPARSE: WorkloadDef = WorkloadDef {
    name: "sparse",
    summary: "write one page every STRIDE bytes of SIZE: what large folios cost in memory (bloat)",
    params: &[
        size("size", 512 * MIB, "bytes mapped"),
        size("stride", 64 << 10, "distance between written pages"),
        HUGEPAGE,
    ],
    default_suite: true,
    build: sparse,
};

fn sparse(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let mut ops = map_region(spec, len);
    ops.push(touch_seq(len, spec.get("stride").max(ctx.page_size), true));
    ops.push(unmap_all(len));
    ops
}

/// Map `len` bytes, write every page, unmap them.
fn write_and_free(len: u64, page_size: u64) -> [Op; 3] {
    [map_anon(len), touch_seq(len, page_size, true), unmap_all(len)]
}

pub const MEMHOG: WorkloadDef = WorkloadDef {
    name: "memhog",
    summary: "write every page of SIZE, free it all at once, then idle IDLE (the free page reporting case)",
    params: &[
        size("size", 2048 * MIB, "bytes written then freed"),
        duration(
            "idle",
            0,
            "simulated time to idle after the free (free page reporting runs)",
        ),
        duration(
            "settle",
            0,
            "simulated time to idle first (reporting of the memory free at boot finishes)",
        ),
    ],
    default_suite: false,
    build: |spec, ctx| {
        let len = spec.get("size");
        let mut ops = Vec::new();
        if spec.get("settle") > 0 {
            ops.push(Op::Idle { ns: spec.get("settle") });
        }
        ops.extend(write_and_free(len, ctx.page_size));
        if spec.get("idle") > 0 {
            ops.push(Op::Idle { ns: spec.get("idle") });
        }
        ops
    },
};

pub const CHURN: WorkloadDef = WorkloadDef {
    name: "churn",
    summary: "CYCLES times: write SIZE, free it, idle IDLE (reported memory comes back as host refaults)",
    params: &[
        size("size", 512 * MIB, "bytes written then freed per cycle"),
        count("cycles", 8, 1, "allocate / free / idle cycles"),
        duration("idle", 3_000_000_000, "simulated time to idle after each free"),
    ],
    default_suite: false,
    build: |spec, ctx| {
        let len = spec.get("size");
        let mut ops = Vec::new();
        for _ in 0..spec.get("cycles") {
            ops.extend(write_and_free(len, ctx.page_size));
            ops.push(Op::Idle { ns: spec.get("idle") });
        }
        ops
    },
};

pub const MOVE_PAGES: WorkloadDef = WorkloadDef {
    name: "move-pages",
    summary: "write SIZE, move_pages every page of it to NODE (needs two or more NUMA nodes), munmap",
    params: &[
        size("size", 64 * MIB, "bytes written then migrated"),
        count("node", 1, 0, "the target node"),
        HUGEPAGE,
    ],
    default_suite: false,
    build: |spec, ctx| {
        let len = spec.get("size");
        let mut ops = map_region(spec, len);
        ops.push(touch_seq(len, ctx.page_size, true));
        ops.push(Op::MovePages {
            slot: 0,
            offset: 0,
            len,
            node: spec.get("node") as u32,
        });
        ops.push(unmap_all(len));
        ops
    },
};

const PARTIAL_PARAMS: [ParamDef; 5] = [
    size("size", 256 * MIB, "bytes mapped and written"),
    size(
        "period",
        64 << 10,
        "a hole is punched at the start of every PERIOD bytes",
    ),
    size("hole", 4 << 10, "bytes unmapped per period"),
    count(
        "drop_caches",
        1,
        0,
        "1: echo 2 > drop_caches afterwards (runs the deferred split shrinker)",
    ),
    HUGEPAGE,
];

pub const MUNMAP_PARTIAL: WorkloadDef = WorkloadDef {
    name: "munmap-partial",
    summary:
        "write SIZE, munmap HOLE bytes of every PERIOD (partially mapped folios, deferred split), drop caches, munmap",
    params: &PARTIAL_PARAMS,
    default_suite: true,
    build: munmap_partial,
};

fn munmap_partial(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let period = spec.get("period").max(ctx.page_size);
    let hole = spec.get("hole").next_multiple_of(ctx.page_size).min(period);
    let mut ops = map_region(spec, len);
    ops.push(touch_seq(len, ctx.page_size, true));
    let mut offset = 0;
    while offset < len {
        ops.push(Op::Munmap {
            slot: 0,
            offset,
            len: hole.min(len - offset),
        });
        offset += period;
    }
    if spec.get("drop_caches") != 0 {
        ops.push(Op::DropCaches { mode: 2 });
    }
    ops.push(unmap_all(len));
    ops
}

pub const FRAGMENT: WorkloadDef = WorkloadDef {
    name: "fragment",
    summary: "fill FILL with base pages and free every other one (free memory in order-0 holes), then write SIZE: what THP faults get from compaction (transparent_hugepage/defrag)",
    params: &[
        size("fill", 15360 * MIB, "bytes of base pages written, then every other page freed (near the machine's memory: the default suits the default 16G machine)"),
        size("size", 1024 * MIB, "bytes written afterwards"),
        HUGEPAGE,
    ],
    default_suite: false,
    build: |spec, ctx| {
        let (fill, len, page) = (spec.get("fill"), spec.get("size"), ctx.page_size);
        let mut ops = vec![
            Op::Mmap {
                slot: 1,
                len: fill,
                write: true,
                shared: false,
            },
            // Base pages only, so that freeing every other one fragments.
            Op::Madvise {
                slot: 1,
                offset: 0,
                len: fill,
                advice: AdviceKind::NoHugePage,
            },
            Op::Touch {
                slot: 1,
                offset: 0,
                len: fill,
                stride: page,
                write: true,
                order: crate::op::TouchOrder::Sequential,
            },
        ];
        ops.extend((0..fill / page).step_by(2).map(|i| Op::Madvise {
            slot: 1,
            offset: i * page,
            len: page,
            advice: AdviceKind::DontNeed,
        }));
        ops.extend(map_region(spec, len));
        ops.push(touch_seq(len, page, true));
        ops.extend([
            unmap_all(len),
            Op::Munmap {
                slot: 1,
                offset: 0,
                len: fill,
            },
        ]);
        ops
    },
};
