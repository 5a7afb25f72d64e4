//! vm-scalability style cases (case-anon-w-seq, case-anon-w-rand,
//! case-anon-r-seq, case-anon-cow-seq): one mapping per task, touched
//! whole, then unmapped.

use super::{map_region, size, stream_of, unmap_all, BuildCtx, WorkloadDef, HUGEPAGE, MIB, PASSES, PATTERN};
use crate::op::{Op, TouchOrder};
use crate::spec::{ParamDef, WorkloadSpec};

const SIZE_PARAM: [ParamDef; 2] = [size("size", 512 * MIB, "bytes mapped and touched per task"), HUGEPAGE];

/// anon-w-seq and anon-w-rand: user accesses may follow the writes.
const WRITE_PARAMS: [ParamDef; 4] = [
    size("size", 512 * MIB, "bytes mapped and touched per task"),
    HUGEPAGE,
    PASSES,
    PATTERN,
];

/// anon-chase: four passes of a pointer chase by default.
const CHASE_PARAMS: [ParamDef; 4] = [
    size("size", 1024 * MIB, "bytes mapped, written, then accessed per task"),
    HUGEPAGE,
    ParamDef { default: 4, ..PASSES },
    ParamDef { default: 2, ..PATTERN },
];

pub const ANON_CHASE: WorkloadDef = WorkloadDef {
    name: "anon-chase",
    summary: "write every page of SIZE, then PASSES passes of user accesses in PATTERN (default a pointer chase, one line per 4 KiB): what the TLB costs in user time",
    params: &CHASE_PARAMS,
    default_suite: false,
    build: |spec, ctx| touch_all(spec, ctx, true, TouchOrder::Sequential),
};

pub const ANON_W_SEQ: WorkloadDef = WorkloadDef {
    name: "anon-w-seq",
    summary: "vm-scalability anon-w-seq: write every page of SIZE in address order",
    params: &WRITE_PARAMS,
    default_suite: true,
    build: |spec, ctx| touch_all(spec, ctx, true, TouchOrder::Sequential),
};

pub const ANON_W_RAND: WorkloadDef = WorkloadDef {
    name: "anon-w-rand",
    summary: "vm-scalability anon-w-rand: write every page of SIZE in a random order",
    params: &WRITE_PARAMS,
    default_suite: false,
    build: |spec, ctx| {
        let seed = ctx.seed ^ (ctx.task as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        touch_all(spec, ctx, true, TouchOrder::Random { seed })
    },
};

pub const ANON_R_SEQ: WorkloadDef = WorkloadDef {
    name: "anon-r-seq",
    summary: "vm-scalability anon-r-seq: read every page of SIZE (zero-page faults)",
    params: &SIZE_PARAM,
    default_suite: true,
    build: |spec, ctx| touch_all(spec, ctx, false, TouchOrder::Sequential),
};

pub const ANON_RW_SEQ: WorkloadDef = WorkloadDef {
    name: "anon-rw-seq",
    summary: "read every page of SIZE (zero page), then write every page (CoW of the zero page; huge zero folio with PMD THP)",
    params: &SIZE_PARAM,
    default_suite: false,
    build: anon_rw_seq,
};

fn anon_rw_seq(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let mut ops = map_region(spec, len);
    ops.push(whole(len, ctx, false, TouchOrder::Sequential));
    ops.push(whole(len, ctx, true, TouchOrder::Sequential));
    ops.push(unmap_all(len));
    ops
}

pub const ANON_COW_SEQ: WorkloadDef = WorkloadDef {
    name: "anon-cow-seq",
    summary: "vm-scalability anon-cow-seq: write SIZE, fork, the child writes every page (CoW), the parent waits",
    params: &SIZE_PARAM,
    default_suite: true,
    build: anon_cow_seq,
};

fn whole(len: u64, ctx: &BuildCtx, write: bool, order: TouchOrder) -> Op {
    Op::Touch {
        slot: 0,
        offset: 0,
        len,
        stride: ctx.page_size,
        write,
        order,
    }
}

fn touch_all(spec: &WorkloadSpec, ctx: &BuildCtx, write: bool, order: TouchOrder) -> Vec<Op> {
    let len = spec.get("size");
    let mut ops = map_region(spec, len);
    ops.push(whole(len, ctx, write, order));
    if spec.params.contains_key("passes") {
        ops.extend(stream_of(spec, ctx, len));
    }
    ops.push(unmap_all(len));
    ops
}

pub const SHMEM_W_SEQ: WorkloadDef = WorkloadDef {
    name: "shmem-w-seq",
    summary: "write every page of SIZE of shared anonymous memory (shmem) in address order; folio sizes from --shmem",
    params: &SIZE_PARAM,
    default_suite: false,
    build: shmem_w_seq,
};

/// anon-w-seq on a shared mapping.
fn shmem_w_seq(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let mut ops = touch_all(spec, ctx, true, TouchOrder::Sequential);
    if let Some(Op::Mmap { shared, .. }) = ops.first_mut() {
        *shared = true;
    }
    ops
}

fn anon_cow_seq(spec: &WorkloadSpec, ctx: &BuildCtx) -> Vec<Op> {
    let len = spec.get("size");
    let mut ops = map_region(spec, len);
    ops.extend([
        whole(len, ctx, true, TouchOrder::Sequential),
        Op::Fork {
            child: vec![whole(len, ctx, true, TouchOrder::Sequential)],
        },
        Op::Wait,
        unmap_all(len),
    ]);
    ops
}
