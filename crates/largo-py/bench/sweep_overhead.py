"""Sweep overhead: 64 cells (4 configurations x 4 workloads x 4 seeds) run
back to back in this process with ``largo.run`` (no dataset), then as a
sweep on a local Ray instance (started and stopped inside the timing,
results streamed into Parquet), on one started before the timing (as a
notebook's or a cluster's is), and on the process pool; wall times side by
side, and whether every cell's counters are identical on all of them. Two
cell weights: ``heavy`` (4-16 GiB workloads, ~0.2-1 s a cell) and ``light``
(the shipped programs, ~50 ms a cell, where Ray's fixed start dominates).

    scripts/python-tests -k nothing   # once: builds the package into .venv
    .venv/bin/python crates/largo-py/bench/sweep_overhead.py [--weight heavy|light|both] [--json]
"""

import argparse
import json
import os
import tempfile
import time

import largo
from largo.sweeps import cells_of

GRID = {
    "4K": None,
    "16K": largo.Policy(thp=["16K"]),
    "64K": largo.Policy(thp=["64K"]),
    "64K+2M": largo.Policy(thp=["64K", "2M"]),
}
WORKLOADS = {
    "heavy": ["anon-chase:size=4G", "page_fault1:size=2G,iterations=8", "anon-w-rand:size=4G", "churn:size=1G,cycles=8,idle=1s"],
    "light": ["lua-build", "sqlite-cc", "xz-compress", "python-json"],
}
SEEDS = [0, 1, 2, 3]


def in_process(workloads):
    """Each cell's ``largo.run`` back to back; the records by cell."""
    t = time.perf_counter()
    rows = {}
    for cell in cells_of(GRID, workloads, SEEDS):
        r = largo.run([cell.workload], [cell.config], seed=cell.seed)
        rows[cell.cell_id] = r.records[0].to_json()
    return time.perf_counter() - t, rows


def swept(backend, workloads, out):
    t = time.perf_counter()
    r = largo.sweep(GRID, workloads, SEEDS, backend=backend, output=out, progress=False, resume=False)
    return time.perf_counter() - t, r


def same_cells(rows, path):
    """Every cell of the dataset has the in-process record's counters."""
    table = largo.read_results(path).to_pylist()
    if len(table) != len(rows):
        return False
    for row in table:
        want = largo.results.flatten(rows[row["cell_id"]])
        want["workload_described"] = want.pop("workload")
        if any(row.get(k) != v for k, v in want.items() if not isinstance(v, list)):
            return False
    return True


def warm_ray(workloads, out):
    """The sweep on a Ray instance started before the timing (a notebook's
    or a cluster's): the sweep's own overhead, without Ray's start and stop."""
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        return swept("ray", workloads, out)
    finally:
        ray.shutdown()


def measure(weight):
    workloads = WORKLOADS[weight]
    serial_s, rows = in_process(workloads)
    with tempfile.TemporaryDirectory() as d:
        ray_s, on_ray = swept("ray", workloads, f"{d}/ray")
        warm_s, warm = warm_ray(workloads, f"{d}/warm")
        pool_s, pool = swept("local", workloads, f"{d}/pool")
        same = all(same_cells(rows, f"{d}/{x}") for x in ("ray", "warm", "pool"))
    return {
        "weight": weight,
        "cells": len(rows),
        "cpus": os.cpu_count(),
        "in_process_s": round(serial_s, 2),
        "ray_local_s": round(ray_s, 2),
        "ray_started_s": round(warm_s, 2),
        "process_pool_s": round(pool_s, 2),
        "ray_vs_in_process": round(ray_s / serial_s, 3),
        "ray_started_vs_in_process": round(warm_s / serial_s, 3),
        "pool_vs_in_process": round(pool_s / serial_s, 3),
        "failed": on_ray.failed + warm.failed + pool.failed,
        "identical_cells": same,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--weight", choices=["heavy", "light", "both"], default="both")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    for w in (["heavy", "light"] if args.weight == "both" else [args.weight]):
        res = measure(w)
        if args.json:
            print(json.dumps(res))
        else:
            print("  ".join(f"{k} {v}" for k, v in res.items()))


if __name__ == "__main__":
    main()
