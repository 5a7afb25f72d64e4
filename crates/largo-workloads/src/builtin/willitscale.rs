//! will-it-scale style loops (tests/page_fault1.c, malloc1.c, mmap1.c).

use super::{count, map_region, size, touch_seq, unmap_all, BuildCtx, WorkloadDef, HUGEPAGE, MIB};
use crate::op::Op;
use crate::spec::{ParamDef, WorkloadSpec};

const LOOP_PARAMS: [ParamDef; 2] = [
    size("size", 128 * MIB, "bytes mapped per iteration"),
    count("iterations", 4, 1, "loop iterations per task"),
];

const PF_PARAMS: [ParamDef; 3] = [
    size("size", 128 * MIB, "bytes mapped per iteration"),
    count("iterations", 4, 1, "loop iterations per task"),
    HUGEPAGE,
];

/// page_fault1: mmap 128 MiB, write one byte per page, munmap; repeat.
pub const PAGE_FAULT1: WorkloadDef = WorkloadDef {
    name: "page_fault1",
    summary: "will-it-scale page_fault1: mmap SIZE anonymous, write one byte per page, munmap; repeat",
    params: &PF_PARAMS,
    default_suite: true,
    build: page_fault1,
};

fn page_fault1(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let mut ops = Vec::new();
    for _ in 0..spec.get("iterations") {
        ops.extend(map_region(spec, len));
        ops.push(touch_seq(len, ctx.page_size, true));
        ops.push(unmap_all(len));
    }
    ops
}

/// malloc1: glibc serves a 128 MiB malloc with mmap of the size plus one
/// page (the chunk header, rounded up), writes the header, and free
/// unmaps it. Nothing else is touched.
pub const MALLOC1: WorkloadDef = WorkloadDef {
    name: "malloc1",
    summary:
        "will-it-scale malloc1: malloc(SIZE) and free: glibc mmaps SIZE + one page, writes the chunk header, munmaps",
    params: &LOOP_PARAMS,
    default_suite: true,
    build: malloc1,
};

fn malloc1(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    // sysmalloc_mmap: size + SIZE_SZ + MALLOC_ALIGN_MASK, rounded up to a page.
    let len = (spec.get("size") + 8 + 15).next_multiple_of(ctx.page_size);
    let mut ops = Vec::new();
    for _ in 0..spec.get("iterations") {
        ops.push(Op::Mmap {
            slot: 0,
            len,
            write: true,
            shared: false,
        });
        ops.push(touch_seq(1, ctx.page_size, true));
        ops.push(unmap_all(len));
    }
    ops
}

/// mmap1: mmap and munmap without touching.
pub const MMAP1: WorkloadDef = WorkloadDef {
    name: "mmap1",
    summary: "will-it-scale mmap1: mmap SIZE anonymous and munmap it, no access",
    params: &LOOP_PARAMS,
    default_suite: false,
    build: mmap1,
};

fn mmap1(spec: &WorkloadSpec, _ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    (0..spec.get("iterations"))
        .flat_map(|_| {
            [
                Op::Mmap {
                    slot: 0,
                    len,
                    write: true,
                    shared: false,
                },
                unmap_all(len),
            ]
        })
        .collect()
}
