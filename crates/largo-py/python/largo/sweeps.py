"""Sweeps: every (configuration, workload, seed) cell is one task; results
stream into a Parquet dataset, one file per finished cell, so a rerun skips
the cells already done and an interrupted sweep loses only the cells in
flight. A failed cell is written with its error and the sweep goes on.

Backends: ``serial`` (back to back in this process), ``local`` (a process
pool of this machine's CPUs) and ``ray`` (a task per cell with
``num_cpus=1``; a local Ray instance when no address is given, else the
cluster at the address). A cell's counters depend only on the cell: the
engine is deterministic given its configuration, workload and seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from .config import Config, Machine, Policy, as_configs
from .results import flatten, table_of

__all__ = ["Cell", "SweepResult", "sweep", "cells_of", "run_cell", "read_results", "harmonise", "load_spec", "RUN_OPTIONS"]

BACKENDS = ("serial", "local", "ray")


@dataclass(frozen=True)
class Cell:
    """One task of a sweep."""

    config: Config
    workload: str
    seed: int
    #: MACHINE and POLICY fields common to every configuration.
    machine: Optional[Machine] = None
    policy: Optional[Policy] = None
    #: Further ``largo.run`` keyword arguments (tasks, mode, check, ...).
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cell_id(self) -> str:
        """A hash of everything that determines the cell's result: the
        fields (sizes as bytes, so "4G" and 4 << 30 are one cell), the
        workload, the seed, the options and the engine's version (a resume
        after an upgrade runs the cells again)."""
        from . import _native

        key = json.dumps(
            {
                "config": {"name": self.config.name, "machine": _canonical(self.config.machine), "policy": self.config.policy.to_native()},
                "workload": self.workload,
                "seed": self.seed,
                "machine": _canonical(self.machine) if self.machine else None,
                "policy": self.policy.to_native() if self.policy else None,
                "options": dict(self.options),
                "largo": _native.__version__,
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(key.encode()).hexdigest()[:20]


#: Machine fields holding byte sizes.
_SIZE_FIELDS = ("mem", "memory_block_size", "maxmem", "movable", "memcg_max", "page_cache")


def _bytes(v: Any) -> Any:
    from . import _native

    if isinstance(v, str):
        try:
            return _native.parse_size(v)
        except Exception:
            return v  # the run reports the bad size
    return v


def _canonical(m: Machine) -> Dict[str, Any]:
    """A machine's fields with every size in bytes."""
    d = m.to_native()
    for k in _SIZE_FIELDS:
        d[k] = _bytes(d[k])
    d["node_mem"] = [_bytes(v) for v in d["node_mem"]] if d["node_mem"] else d["node_mem"]
    for sub, keys in (("cma", ("size",)), ("swap", ("size",))):
        d[sub] = [{k: (_bytes(v) if k in keys else v) for k, v in x.items()} for x in d[sub]]
    if d["virtio_mem"]:
        d["virtio_mem"] = {k: (_bytes(v) if k in ("size", "block", "plugged") else v) for k, v in d["virtio_mem"].items()}
    return d


def run_cell(cell: Cell) -> Dict[str, Any]:
    """Runs one cell; its row: identity, status (ok, skipped, error), the
    error if any, the wall time, and the run's ``--json`` fields flattened
    (its ``workload``, the description with every parameter, as
    ``workload_described``)."""
    from . import api

    row: Dict[str, Any] = {
        "cell_id": cell.cell_id,
        "config": cell.config.name,
        "workload": cell.workload,
        "seed": cell.seed,
    }
    started = time.perf_counter()
    try:
        result = api.run([cell.workload], [cell.config], machine=cell.machine, policy=cell.policy, seed=cell.seed, **cell.options)
        if result.records:
            record = flatten(result.records[0].to_json())
            # `workload` stays as the sweep names it; the engine's full
            # description (every parameter's value) goes beside it.
            record["workload_described"] = record.pop("workload")
            row.update(record)
            row.update(status="ok", error=None)
        else:
            reason = result.skipped[0]["skipped"] if result.skipped else "no record"
            row.update(status="skipped", error=reason)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a failed cell (even an engine panic) is data
        row.update(status="error", error=f"{type(e).__name__}: {e}")
    row["elapsed_s"] = time.perf_counter() - started
    # The identity columns win over the record's same-named fields.
    row.update(config=cell.config.name, workload=cell.workload, seed=cell.seed)
    return row


def run_cell_into(cell: Cell, out: Optional[str]) -> Dict[str, Any]:
    """``run_cell``, its row written to the dataset ``out`` by the process
    that ran it (a pool worker or a Ray worker of this machine: the writes
    run in parallel, not one after another in the driver); returns the
    row's status columns only. ``out`` None: the whole row."""
    row = run_cell(cell)
    if out is None:
        return row
    _write_cell(Path(out), row)
    return {k: row[k] for k in ("cell_id", "config", "workload", "seed", "status", "error", "elapsed_s")} | {
        "_written": True
    }


@dataclass
class SweepResult:
    """What a sweep did, and its dataset."""

    path: Optional[Path]
    total: int
    ran: int
    reused: int
    failed: int
    elapsed_s: float
    rows: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    #: The ids of this sweep's cells (a dataset may hold other sweeps' too).
    cell_ids: List[str] = field(default_factory=list, repr=False)

    def to_arrow(self):
        """This sweep's cells, one row each (from the dataset when there is
        one), sorted by configuration, workload and seed."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.path is not None:
            t = read_results(self.path)
            return t.filter(pc.is_in(t.column("cell_id"), value_set=pa.array(self.cell_ids)))
        return _sorted(table_of(self.rows))

    def to_pandas(self):
        return self.to_arrow().to_pandas()


def cells_of(
    grid: Any,
    workloads: Sequence[str],
    seeds: Sequence[int],
    machine: Optional[Machine] = None,
    policy: Optional[Policy] = None,
    options: Optional[Mapping[str, Any]] = None,
) -> List[Cell]:
    """The cells of a grid, configuration-major."""
    configs = as_configs(grid)
    if not configs:
        raise ValueError("sweep: the grid has no configurations")
    names = [c.name for c in configs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"sweep: configuration names used twice: {sorted(dupes)}")
    if isinstance(workloads, str):
        workloads = [workloads]
    if not workloads or not seeds:
        raise ValueError("sweep: needs at least one workload and one seed")
    if not all(isinstance(w, str) for w in workloads):
        raise ValueError("sweep: workloads are strings (NAME[:KEY=VALUE,...], trace files, shipped programs)")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ValueError("sweep: seeds are integers of 0 or more")
    opts = dict(options or {})
    unknown = sorted(set(opts) - RUN_OPTIONS)
    if unknown:
        raise ValueError(f"sweep: unknown option(s) {unknown} (options: {sorted(RUN_OPTIONS)})")
    cells = [Cell(c, w, int(s), machine, policy, opts) for c in configs for w in workloads for s in seeds]
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):
        twice = sorted({f"{c.config.name} {c.workload} seed {c.seed}" for c, i in zip(cells, ids) if ids.count(i) > 1})
        raise ValueError(f"sweep: the same cell twice: {twice[:5]} (a workload or seed listed twice?)")
    return cells


#: The ``largo.run`` keywords a sweep's options may set (not its seed,
#: workloads or configurations: the grid sets those).
RUN_OPTIONS = {"tasks", "mode", "check", "profile", "keep_going", "tlb"}


def sweep(
    grid: Any,
    workloads: Sequence[str],
    seeds: Sequence[int] = (0,),
    *,
    backend: str = "local",
    address: Optional[str] = None,
    output: Optional[Union[str, os.PathLike]] = None,
    machine: Optional[Machine] = None,
    policy: Optional[Policy] = None,
    options: Optional[Mapping[str, Any]] = None,
    workers: Optional[int] = None,
    resume: bool = True,
    progress: Optional[bool] = None,
) -> SweepResult:
    """Runs every (configuration, workload, seed) cell of ``grid`` (a dict
    of name to Config / Machine / Policy, or a list of Configs).

    ``output``: a Parquet dataset directory, one file per cell; with
    ``resume`` the cells already finished there are not run again (failed
    cells are). ``backend``: serial, local (process pool, ``workers``
    processes, default this machine's CPUs) or ray (``address`` of a
    cluster, or a local instance). ``progress``: cells done/total on
    stderr (default: when stderr is a terminal)."""
    if backend not in BACKENDS:
        raise ValueError(f"sweep: backend '{backend}' is not one of {', '.join(BACKENDS)}")
    if address is not None and backend != "ray":
        raise ValueError("sweep: an address needs backend='ray'")
    cells = cells_of(grid, workloads, seeds, machine, policy, options)
    started = time.perf_counter()
    out = Path(output) if output is not None else None
    done = _finished(out) if (out is not None and resume) else set()
    todo = [c for c in cells if c.cell_id not in done]
    bar = _Progress(len(cells), len(cells) - len(todo), sys.stderr.isatty() if progress is None else progress)
    rows: List[Dict[str, Any]] = []
    failed = 0
    # Workers on this machine write their cells' files themselves (the
    # process pool; Ray when every node is this one); the driver writes for
    # serial runs and for the cells of other nodes (which may not share
    # this file system).
    try:
        for row in _execute(todo, backend, address, workers, str(out) if out is not None else None):
            failed += row["status"] == "error"
            if out is not None and not row.pop("_written", False):
                _write_cell(out, row)
            elif out is None:
                rows.append(row)
            bar.step(row["status"] == "error")
    finally:
        bar.close()
        if out is not None and out.exists():
            harmonise(out)
    return SweepResult(
        out, len(cells), len(todo), len(cells) - len(todo), failed, time.perf_counter() - started, rows,
        [c.cell_id for c in cells],
    )


def _execute(
    cells: List[Cell], backend: str, address: Optional[str], workers: Optional[int], out: Optional[str]
) -> Iterator[Dict[str, Any]]:
    """Rows of the cells as they finish (status columns only for cells a
    worker wrote to ``out`` itself)."""
    if not cells:
        return
    if backend == "serial":
        for c in cells:
            yield run_cell(c)
    elif backend == "local":
        yield from _local(cells, workers, out)
    else:
        yield from _ray(cells, address, out)


def _local(cells: List[Cell], workers: Optional[int], out: Optional[str]) -> Iterator[Dict[str, Any]]:
    """A process pool with at most ``n`` cells in flight. A worker that
    dies (killed, out of memory) breaks the pool: the cells then in flight
    get a strike and the rest go on in a new pool; a cell in flight at two
    breaks is recorded as failed."""
    import concurrent.futures as cf
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool

    n = max(1, min(workers or os.cpu_count() or 1, len(cells)))
    todo = list(reversed(cells))
    strikes: Dict[str, int] = {}
    while todo:
        # spawn: a worker never inherits a parent's engine threads.
        with cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn")) as pool:
            running: Dict[Any, Cell] = {}
            broken = False
            try:
                while todo or running:
                    while todo and len(running) < n and not broken:
                        c = todo.pop()
                        running[pool.submit(run_cell_into, c, out)] = c
                    if not running:
                        break
                    done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                    for f in done:
                        cell = running.pop(f)
                        try:
                            yield f.result()
                        except BrokenProcessPool:
                            broken = True
                            strikes[cell.cell_id] = strikes.get(cell.cell_id, 0) + 1
                            if strikes[cell.cell_id] >= 2:
                                yield _error_row(cell, "a worker process died running it (twice)")
                            else:
                                todo.append(cell)
                        except Exception as e:
                            yield _error_row(cell, f"{type(e).__name__}: {e}")
                    if broken and not running:
                        break
            except BaseException:
                for f in running:
                    f.cancel()
                raise


def _error_row(cell: Cell, error: str) -> Dict[str, Any]:
    """The row of a cell whose worker failed it."""
    return {
        "cell_id": cell.cell_id,
        "config": cell.config.name,
        "workload": cell.workload,
        "seed": cell.seed,
        "status": "error",
        "error": error,
        "elapsed_s": 0.0,
    }


def _ray(cells: List[Cell], address: Optional[str], out: Optional[str]) -> Iterator[Dict[str, Any]]:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("backend='ray' needs Ray: pip install 'largo[ray]'") from e
    started_here = not ray.is_initialized()
    if started_here:
        # No address: an embedded local instance; else join the cluster.
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    elif address is not None:
        raise ValueError("sweep: Ray is already initialised in this process: omit address, or ray.shutdown() first")
    task = ray.remote(num_cpus=1, max_retries=0)(run_cell_into)
    # `ray.init()` without an address may join a cluster (RAY_ADDRESS, a
    # `ray start --head` here, or one the caller connected to): workers
    # write their cells only when every live node is this driver's.
    if out is not None and not _ray_local_only(ray):
        out = None
    # Twice the cluster's CPUs in flight: every CPU busy, the driver's
    # bookkeeping bounded for sweeps of thousands of cells.
    window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    todo = list(reversed(cells))
    pending: Dict[Any, Cell] = {}
    try:
        while todo or pending:
            while todo and len(pending) < window:
                c = todo.pop()
                pending[task.remote(c, out)] = c
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as e:  # the worker died, or Ray failed the task
                    yield _error_row(cell, f"{type(e).__name__}: {e}")
    finally:
        for ref in list(pending):
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def _ray_local_only(ray) -> bool:
    """Whether every live node of the Ray instance is the driver's node."""
    here = ray.get_runtime_context().get_node_id()
    alive = [n for n in ray.nodes() if n.get("Alive")]
    return len(alive) == 1 and alive[0].get("NodeID") == here


# --- the dataset ------------------------------------------------------------


def _cell_file(out: Path, cell_id: str) -> Path:
    return out / f"cell-{cell_id}.parquet"


def _finished(out: Path) -> set:
    """The ids of cells with a row that is not an error."""
    if not out.exists():
        return set()
    import pyarrow.parquet as pq

    done = set()
    for f in out.glob("cell-*.parquet"):
        t = pq.read_table(f, columns=["cell_id", "status"])
        for cid, status in zip(t.column("cell_id").to_pylist(), t.column("status").to_pylist()):
            if status != "error":
                done.add(cid)
    return done


def _write_cell(out: Path, row: Dict[str, Any]) -> None:
    """One cell's row as its own Parquet file, written whole or not at all."""
    out.mkdir(parents=True, exist_ok=True)
    _replace_with(_cell_file(out, row["cell_id"]), table_of([row]))


def _replace_with(final: Path, table) -> None:
    """Writes ``table`` to a hidden temporary file beside ``final`` and
    renames it over ``final``: a reader sees the old file or the new one,
    never half of one. An interrupt (Ctrl-C raises KeyboardInterrupt at any
    bytecode, the middle of the write included) removes the temporary file
    before it propagates."""
    import pyarrow.parquet as pq

    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def harmonise(out: Path) -> None:
    """Rewrites the cell files whose schema is not the dataset's unified
    one (a column that is null in one cell and a number in another, a
    column only some cells have), so that any Parquet reader
    (``pandas.read_parquet``, ``pyarrow.dataset``, DuckDB, Spark) reads the
    directory as one table. Called when a sweep returns, interrupted or not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(out.glob("cell-*.parquet"))
    if not files:
        return
    schemas = [pq.read_schema(f) for f in files]
    unified = pa.unify_schemas(schemas, promote_options="permissive")
    for f, schema in zip(files, schemas):
        if not schema.equals(unified):
            _replace_with(f, _conform(pq.read_table(f), unified))


def read_results(path: Union[str, os.PathLike]):
    """A sweep's dataset as one Arrow table, its files' schemas unified (a
    column one cell lacks is null there), one row per cell, sorted by
    configuration, workload and seed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(Path(path).glob("cell-*.parquet"))
    if not files:
        raise FileNotFoundError(f"{path}: no sweep results (cell-*.parquet)")
    tables = [pq.read_table(f) for f in files]
    schema = pa.unify_schemas([t.schema for t in tables], promote_options="permissive")
    return _sorted(pa.concat_tables([_conform(t, schema) for t in tables]))


def _sorted(table):
    return table.sort_by([("config", "ascending"), ("workload", "ascending"), ("seed", "ascending")])


def _conform(t, schema):
    import pyarrow as pa

    have = {name: i for i, name in enumerate(t.column_names)}
    cols = []
    for f in schema:
        i = have.get(f.name)
        if i is None:
            cols.append(pa.nulls(t.num_rows, type=f.type))
        else:
            col = t.column(i)
            cols.append(col if col.type == f.type else col.cast(f.type))
    return pa.Table.from_arrays(cols, schema=schema)


# --- progress ---------------------------------------------------------------


class _Progress:
    """``cells done/total`` on one rewritten stderr line."""

    def __init__(self, total: int, reused: int, enabled: bool) -> None:
        self.total, self.done, self.failed, self.enabled = total, reused, 0, enabled
        self.started = time.monotonic()
        if enabled and reused:
            print(f"sweep: {reused} of {total} cells already done", file=sys.stderr)
        self._draw()

    def step(self, failed: bool) -> None:
        self.done += 1
        self.failed += failed
        self._draw()

    def _draw(self) -> None:
        if self.enabled:
            t = time.monotonic() - self.started
            failed = f", {self.failed} failed" if self.failed else ""
            sys.stderr.write(f"\r\x1b[Ksweep: {self.done}/{self.total} cells{failed} ({t:.0f} s)")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


# --- specs ------------------------------------------------------------------


@dataclass
class Spec:
    """A sweep described in TOML (``python -m largo sweep SPEC.toml``)."""

    configs: List[Config]
    workloads: List[str]
    seeds: List[int]
    machine: Optional[Machine] = None
    policy: Optional[Policy] = None
    options: Dict[str, Any] = field(default_factory=dict)
    backend: str = "local"


def load_spec(path: Union[str, os.PathLike]) -> Spec:
    """Reads a sweep spec:

        workloads = ["page_fault1:size=64M", "lua-build"]
        seeds = [0, 1, 2]
        backend = "local"            # or "ray", "serial"
        [machine]                    # every configuration's MACHINE fields
        mem = "4G"
        [options]                    # largo.run keywords: tasks, mode, check
        tasks = 1
        [configs."4K"]
        [configs."64K".policy]
        thp = { "64K" = "always" }
        [configs."16K-pages".machine]
        preset = "arm64-16k"
    """
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    known = {"workloads", "seeds", "machine", "policy", "options", "configs", "backend"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown} (keys: {sorted(known)})")
    if not doc.get("configs"):
        raise ValueError(f"{path}: no [configs.NAME] tables")
    configs = []
    if not isinstance(doc["configs"], dict):
        raise ValueError(f"{path}: configs must be tables ([configs.NAME])")
    for name, body in doc["configs"].items():
        body = body or {}
        if not isinstance(body, dict):
            raise ValueError(f"{path}: configs.{name} must be a table")
        extra = sorted(set(body) - {"machine", "policy"})
        if extra:
            raise ValueError(f"{path}: configs.{name}: unknown key(s) {extra} (machine, policy)")
        configs.append(Config(name, _machine(body.get("machine"), path), _policy(body.get("policy"), path)))
    workloads = doc.get("workloads")
    if not isinstance(workloads, list) or not workloads or not all(isinstance(w, str) for w in workloads):
        raise ValueError(f'{path}: workloads must be a list of strings, e.g. workloads = ["page_fault1"]')
    seeds = doc.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise ValueError(f"{path}: seeds must be a list of integers of 0 or more, e.g. seeds = [0, 1, 2]")
    for key in ("machine", "policy", "options"):
        if key in doc and not isinstance(doc[key], dict):
            raise ValueError(f"{path}: {key} must be a table ([{key}])")
    return Spec(
        configs=configs,
        workloads=workloads,
        seeds=seeds,
        machine=_machine(doc["machine"], path) if "machine" in doc else None,
        policy=_policy(doc["policy"], path) if "policy" in doc else None,
        options=dict(doc.get("options") or {}),
        backend=doc.get("backend", "local"),
    )


def _machine(body: Optional[Mapping[str, Any]], path: Any) -> Machine:
    from .config import Cma, Swap, VirtioMem

    body = dict(body or {})
    try:
        if "cma" in body:
            body["cma"] = tuple(Cma(**c) for c in body["cma"])
        if "swap" in body:
            body["swap"] = tuple(Swap(**s) for s in body["swap"])
        if "virtio_mem" in body:
            body["virtio_mem"] = VirtioMem(**body["virtio_mem"])
        return Machine(**body)
    except (TypeError, AttributeError) as e:
        raise ValueError(f"{path}: machine: {e}") from None


def _policy(body: Optional[Mapping[str, Any]], path: Any) -> Policy:
    try:
        return Policy(**dict(body or {}))
    except TypeError as e:
        raise ValueError(f"{path}: policy: {e}") from None
