"""Typed results. Each holds the objects ``--json`` prints (``.records``)
and converts them to Arrow, the interchange: pandas, polars, DuckDB and Ray
Data all read an Arrow table without copying, and Parquet (what sweeps
write) is Arrow's file format. ``.to_pandas()`` goes through Arrow.

Tables are wide: one row per record, nested objects flattened into dotted
column names (``vmstat.thp_fault_alloc``, ``cost.kernel_ns``); lists (the
knobs, buddyinfo) stay list columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = [
    "flatten",
    "table_of",
    "RunRecord",
    "RunResult",
    "AdviseResult",
    "ShowResult",
    "ValidateResult",
    "CommandOutput",
]

#: Columns placed first, in this order, when present.
_LEADING = ("cell_id", "status", "error", "config", "workload", "seed", "machine", "tasks", "mode")


def flatten(obj: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """Nested dicts as one dict with dotted keys; other values unchanged."""
    out: Dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        elif isinstance(value, Mapping):
            continue
        else:
            out[name] = value
    return out


def table_of(rows: Sequence[Mapping[str, Any]]):
    """An Arrow table of flat rows: every key any row has is a column,
    null where a row lacks it."""
    import pyarrow as pa

    keys: Dict[str, None] = {}
    for k in _LEADING:
        if any(k in r for r in rows):
            keys[k] = None
    for k in sorted({k for r in rows for k in r}):
        keys.setdefault(k, None)
    # Types fixed whatever the rows hold: an empty `knobs` list would
    # otherwise be list<null>, and an ok cell's `error` or a trace's
    # `cost.user_ns` null, differing from another cell's type (which makes
    # a sweep rewrite the file to one schema).
    fixed = {"knobs": pa.list_(pa.string()), "error": pa.string(), "cost.user_ns": pa.int64()}
    return pa.table({k: pa.array([r.get(k) for r in rows], type=fixed.get(k)) for k in keys})


class _Tabular:
    """``to_arrow`` from ``rows()``; ``to_pandas`` through it."""

    def rows(self) -> List[Dict[str, Any]]:
        raise NotImplementedError

    def to_arrow(self):
        """The records as a ``pyarrow.Table``."""
        return table_of(self.rows())

    def to_pandas(self):
        """The records as a ``pandas.DataFrame`` (via Arrow)."""
        return self.to_arrow().to_pandas()


def _json_lines(text: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class RunRecord:
    """One (configuration, workload) run: the fields of ``largo run --json``."""

    config: str
    workload: str
    machine: str
    knobs: List[str]
    tasks: int
    mode: str
    seed: int
    largo_version: str
    vmstat: Dict[str, int]
    mthp: Any
    meminfo: Dict[str, int]
    buddyinfo: List[Dict[str, Any]]
    swap: Any
    memcg: Any
    khugepaged: Dict[str, Any]
    allocs: Dict[str, int]
    locks: Dict[str, Any]
    contention: Dict[str, Any]
    cost: Dict[str, Any]
    peak: Dict[str, Any]
    tlb: Dict[str, Any]
    problems: Dict[str, Any]
    page_reporting: Optional[Dict[str, Any]] = None
    #: Fields this package does not know yet (a newer engine).
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "RunRecord":
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        kwargs = {k: v for k, v in obj.items() if k in known}
        extra = {k: v for k, v in obj.items() if k not in known}
        return cls(**kwargs, extra=extra)

    def to_json(self) -> Dict[str, Any]:
        """The object ``--json`` printed."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("extra", "page_reporting")}
        if self.page_reporting is not None:
            out["page_reporting"] = self.page_reporting
        out.update(self.extra)
        return out

    @property
    def kernel_ns(self) -> int:
        """Estimated kernel time of the anonymous-memory work."""
        return int(self.cost["kernel_ns"])


@dataclass(frozen=True)
class RunResult(_Tabular):
    """What ``largo.run`` and ``largo.replay`` return: a record per
    (configuration, workload) run, and the pairs that could not run."""

    records: List[RunRecord]
    skipped: List[Dict[str, str]] = field(default_factory=list)

    @classmethod
    def from_output(cls, text: str) -> "RunResult":
        records, skipped = [], []
        for obj in _json_lines(text):
            (skipped if "skipped" in obj else records).append(obj)
        return cls([RunRecord.from_json(o) for o in records], skipped)

    def rows(self) -> List[Dict[str, Any]]:
        return [flatten(r.to_json()) for r in self.records]

    @property
    def configs(self) -> List[str]:
        return list(dict.fromkeys(r.config for r in self.records))

    @property
    def workloads(self) -> List[str]:
        return list(dict.fromkeys(r.workload for r in self.records))

    def get(self, workload: str, config: str) -> RunRecord:
        for r in self.records:
            if r.workload == workload and r.config == config:
                return r
        raise KeyError((workload, config))

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return (
            f"RunResult({len(self.records)} records: workloads {self.workloads}, "
            f"configs {self.configs}, {len(self.skipped)} skipped)"
        )


@dataclass(frozen=True)
class AdviseResult(_Tabular):
    """``largo advise --json``: the recommendation, every candidate ranked,
    and the sysfs writes that apply the recommendation."""

    recommendation: Any
    candidates: List[Dict[str, Any]]
    commands: List[str]
    raw: Dict[str, Any]

    @classmethod
    def from_output(cls, text: str) -> "AdviseResult":
        objs = _json_lines(text)
        if len(objs) != 1:
            raise ValueError(f"advise printed {len(objs)} objects, expected one")
        o = objs[0]
        return cls(o.get("recommendation"), list(o.get("candidates", [])), list(o.get("commands", [])), o)

    def rows(self) -> List[Dict[str, Any]]:
        """One row per candidate mix."""
        return [flatten(c) for c in self.candidates]


@dataclass(frozen=True)
class ShowResult(_Tabular):
    """A /proc file of the modelled machine, as ``largo show`` prints it."""

    file: str
    text: str

    def rows(self) -> List[Dict[str, Any]]:
        """``name value`` files (vmstat, meminfo) as (name, value) rows; any
        other file one row per line."""
        lines = [l for l in self.text.splitlines() if l.strip()]
        pairs = [l.replace(":", " ", 1).split() for l in lines]
        if self.file in ("vmstat", "meminfo") and all(len(p) >= 2 and p[1].isdigit() for p in pairs):
            return [{"name": p[0], "value": int(p[1])} for p in pairs]
        return [{"line": l} for l in lines]

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ValidateResult(_Tabular):
    """``largo validate --json``: one object per compared case."""

    records: List[Dict[str, Any]]
    #: Why the comparison failed (what the command line exits 1 with).
    failure: Optional[str] = None

    @classmethod
    def from_output(cls, text: str, failure: Optional[str] = None) -> "ValidateResult":
        return cls(_json_lines(text), failure)

    @property
    def ok(self) -> bool:
        """Every compared counter agreed."""
        return self.failure is None

    def rows(self) -> List[Dict[str, Any]]:
        return [flatten(r) for r in self.records]


@dataclass(frozen=True)
class CommandOutput(_Tabular):
    """What any command printed; with ``--json``, its objects."""

    text: str

    @property
    def records(self) -> List[Dict[str, Any]]:
        return _json_lines(self.text)

    def rows(self) -> List[Dict[str, Any]]:
        return [flatten(r) for r in self.records]

    def __str__(self) -> str:
        return self.text


