"""Figures with matplotlib: the same questions the command line's
``--plot FILE.svg`` answers, one figure per question, axes labelled with
their units. Each function returns the ``matplotlib.figure.Figure`` and,
given ``path``, saves it (the format from the suffix: .svg, .png, .pdf).

Inputs are what the entry points return: a ``RunResult`` or a sweep's
Arrow table / DataFrame for ``run_bars``; the JSON records of the commands
without a typed entry point (``largo.command(..., "--json").records``) for
``aging``, ``gigantic``, ``tlb`` and ``migrate``.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

__all__ = ["run_bars", "reporting", "aging", "gigantic", "tlb", "migrate", "METRICS"]

#: Bars a row of run_bars holds at most.
_BARS_PER_ROW = 30

#: run_bars metrics: column -> axis label.
METRICS = {
    "cost.kernel_ns": "estimated kernel time",
    "vmstat.pgfault": "page faults (pgfault)",
    "peak.anon_kb": "peak anonymous memory",
    "contention.kernel_ns_with_waits": "kernel time with lock waits",
}


def _plt():
    import matplotlib

    if os.environ.get("DISPLAY") is None and matplotlib.get_backend().lower() not in ("agg", "svg", "pdf"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(fig, path: Optional[Union[str, os.PathLike]]):
    fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path))
    return fig


def _frame(data: Any):
    """A DataFrame of a RunResult, a SweepResult, an Arrow table or a DataFrame."""
    if hasattr(data, "to_pandas") and not hasattr(data, "iloc"):
        return data.to_pandas()
    return data


def run_bars(
    data: Any,
    metric: str = "cost.kernel_ns",
    baseline: Optional[str] = None,
    path: Optional[Union[str, os.PathLike]] = None,
):
    """A run table as grouped bars: per workload, each configuration's
    %change of ``metric`` against ``baseline`` (default: the first
    configuration). Over several seeds (a sweep) the bar is the mean change
    and the whisker its standard deviation; failed cells are left out."""
    df = _frame(data)
    if "status" in df.columns:
        df = df[df["status"] == "ok"]
    if metric not in df.columns:
        raise ValueError(f"run_bars: no column '{metric}' (e.g. {', '.join(METRICS)})")
    configs = list(dict.fromkeys(df["config"]))
    if len(configs) < 2:
        raise ValueError("run_bars: needs two configurations or more (one is the baseline)")
    base = baseline or configs[0]
    if base not in configs:
        raise ValueError(f"run_bars: baseline '{base}' is not one of {configs}")
    seed = df["seed"] if "seed" in df.columns else 0
    df = df.assign(_seed=seed, _short=df["workload"].str.split(":").str[0])
    ref = df[df["config"] == base].set_index(["workload", "_seed"])[metric]
    others = [c for c in configs if c != base]
    workloads = list(dict.fromkeys(df["workload"]))
    shorts = list(dict.fromkeys(df.drop_duplicates("workload")["_short"]))
    # Rows of at most _BARS_PER_ROW bars (balanced), one y range for all,
    # so the figure keeps a page's proportions however many workloads.
    most = max(1, _BARS_PER_ROW // len(others))
    nrows = math.ceil(len(workloads) / most)
    per_row = math.ceil(len(workloads) / nrows)
    plt = _plt()
    cols = min(per_row, len(workloads))
    fig, axes = plt.subplots(
        nrows, 1, figsize=(max(6.0, 0.35 * cols * len(others) + 2.5), 3.4 * nrows + 0.6), sharey=True, squeeze=False
    )
    width = 0.8 / len(others)
    names = shorts if len(shorts) == len(workloads) else workloads
    label = METRICS.get(metric, metric)
    for row in range(nrows):
        ax = axes[row][0]
        part = range(row * per_row, min((row + 1) * per_row, len(workloads)))
        for i, c in enumerate(others):
            means, errs = [], []
            for k in part:
                w = workloads[k]
                rows = df[(df["config"] == c) & (df["workload"] == w)]
                changes = []
                for _, r in rows.iterrows():
                    b = ref.get((w, r["_seed"]))
                    if b is not None and b > 0:
                        changes.append((r[metric] - b) / b * 100.0)
                means.append(sum(changes) / len(changes) if changes else math.nan)
                errs.append(_std(changes))
            xs = [j + (i - (len(others) - 1) / 2) * width for j in range(len(part))]
            ax.bar(
                xs,
                means,
                width * 0.92,
                yerr=errs if any(e > 0 for e in errs) else None,
                label=c,
                capsize=3,
                color=f"C{i}",
            )
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(part)))
        ax.set_xticklabels([names[k] for k in part], rotation=15, ha="right")
        ax.set_xlim(-0.5, per_row - 0.5)
        ax.set_ylabel(f"change in {label} (%)")
    axes[0][0].set_title(f"{label} against {base}")
    axes[0][0].legend(fontsize="small", loc="best")
    return _finish(fig, path)


def _std(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def reporting(result: Any, path: Optional[Union[str, os.PathLike]] = None):
    """Free page reporting: memory reported over time, a line per run with
    a reporting device (``Machine(balloon=True)``)."""
    lines = []
    for r in result.records:
        rep = r.page_reporting
        if rep and rep.get("timeline"):
            t = rep["timeline"]
            lines.append((f"{r.config} {r.workload.split(':')[0]}", [s["t_ms"] / 1000 for s in t], [s["reported_kib"] / 1024 for s in t]))
    if not lines:
        raise ValueError("reporting: no run reported free pages (a balloon machine and idle time after the frees)")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, xs, ys in lines:
        ax.step(xs, ys, where="post", label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("reported (MiB, cumulative)")
    ax.set_title("free page reporting: memory reported to the host")
    ax.legend(fontsize="small")
    return _finish(fig, path)


def aging(records: Iterable[Mapping[str, Any]], path: Optional[Union[str, os.PathLike]] = None, window: int = 10):
    """``largo age ... --json``: each size's fault success per ``window``
    simulated minutes, a line per configuration and size."""
    by: Dict[str, List[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        if "minute" in r:
            by[r["config"]].append(r)
    if not by:
        raise ValueError("aging: no records of `largo age --json`")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for config, rs in by.items():
        rs = sorted(rs, key=lambda r: r["minute"])
        sizes = sorted({s for r in rs for s in r.get("alloc", {})}, key=lambda s: int(s.rstrip("kB") or 0))
        for size in sizes:
            xs, ys = [], []
            for i in range(0, len(rs), window):
                chunk = rs[i : i + window]
                a = sum(r["alloc"].get(size, 0) for r in chunk)
                f = sum(r.get("fallback", {}).get(size, 0) for r in chunk)
                if a + f:
                    xs.append(chunk[-1]["minute"] / 60)
                    ys.append(100.0 * a / (a + f))
            ax.plot(xs, ys, label=f"{config} {size}")
    ax.set_ylim(0, 100)
    ax.set_xlabel("simulated hours")
    ax.set_ylabel("faults that got the size (%)")
    ax.set_title("large folio fault success while aging")
    ax.legend(fontsize="small")
    return _finish(fig, path)


def gigantic(records: Iterable[Mapping[str, Any]], path: Optional[Union[str, os.PathLike]] = None):
    """``largo bench gigantic --json``: success of 2M, 32M and 1G
    allocations over the aging steps, a panel per size, a line per variant."""
    rs = [r for r in records if r.get("experiment") == "gigantic"]
    if not rs:
        raise ValueError("gigantic: no records of `largo bench gigantic --json`")
    variants = list(dict.fromkeys(r["variant"] for r in rs))
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    for ax, (key, size) in zip(axes, [("success_2m", "2M"), ("success_32m", "32M"), ("success_1g", "1G")]):
        for v in variants:
            pts = sorted((r["t_s"], 100 * r[key]) for r in rs if r["variant"] == v)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=v)
        ax.set_title(f"{size} allocations")
        ax.set_xlabel("aging step (s)")
        ax.set_ylim(0, 100)
    axes[0].set_ylabel("allocations that succeeded (%)")
    axes[0].legend(fontsize="small")
    fig.suptitle("large allocations on an aged machine")
    return _finish(fig, path)


def tlb(records: Iterable[Mapping[str, Any]], path: Optional[Union[str, os.PathLike]] = None):
    """``largo bench tlb --json``: ns per access against the range, a
    panel per pattern, a line per folio size and side (host, largo)."""
    rs = [r for r in records if r.get("bench") == "tlb"]
    if not rs:
        raise ValueError("tlb: no records of `largo bench tlb --json`")
    patterns = list(dict.fromkeys(r["pattern"] for r in rs))
    folios = sorted({r["folio_kib"] for r in rs})
    plt = _plt()
    fig, axes = plt.subplots(1, len(patterns), figsize=(6 * len(patterns), 4.2), squeeze=False)
    for ax, p in zip(axes[0], patterns):
        for f in folios:
            for side, style in (("host", "-"), ("largo", "--")):
                pts = sorted((r["range_mib"], r[f"{side}_ns"]) for r in rs if r["pattern"] == p and r["folio_kib"] == f and r.get(f"{side}_ns") is not None)
                if pts:
                    ax.plot([q[0] for q in pts], [q[1] for q in pts], style, marker="o", label=f"{_kib(f)} {side}", color=f"C{folios.index(f)}")
        ax.set_xscale("log", base=2)
        ranges = sorted({r["range_mib"] for r in rs if r["pattern"] == p})
        ax.set_xticks(ranges)
        ax.set_xticklabels([str(x) for x in ranges])
        ax.set_ylim(bottom=0)
        ax.set_title(f"{p} loads")
        ax.set_xlabel("range (MiB, log scale)")
        ax.set_ylabel("time per access (ns)")
        ax.legend(fontsize="small")
    fig.suptitle("dependent loads by folio size")
    return _finish(fig, path)


def migrate(records: Iterable[Mapping[str, Any]], path: Optional[Union[str, os.PathLike]] = None):
    """``largo bench migrate --json``: GB/s (measured copy + estimated
    kernel time) against folios per move_pages call, a panel per folio
    size, a line per copy policy, and each row's best memcpy of the same
    frames."""
    rs = [r for r in records if r.get("bench") == "migrate" and r.get("folio_kib") is not None]
    moves = [r for r in rs if not str(r["column"]).startswith("memcpy_")]
    if not moves:
        raise ValueError("migrate: no records of `largo bench migrate --json`")
    sizes = list(dict.fromkeys(r["folio_kib"] for r in moves))
    plt = _plt()
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.2), squeeze=False, sharey=True)
    for ax, kib in zip(axes[0], sizes):
        for col in dict.fromkeys(r["column"] for r in moves if r["folio_kib"] == kib):
            pts = sorted((r["nr_folios"], r["gbps"]) for r in moves if r["folio_kib"] == kib and r["column"] == col)
            ax.plot([q[0] for q in pts], [q[1] for q in pts], marker="o", label=col)
        best = {}
        for r in rs:
            if r["folio_kib"] == kib and str(r["column"]).startswith("memcpy_"):
                best[r["nr_folios"]] = max(best.get(r["nr_folios"], 0.0), r.get("copy_gbps", r["gbps"]))
        if best:
            pts = sorted(best.items())
            ax.plot([q[0] for q in pts], [q[1] for q in pts], color="grey", linestyle=":", label="memcpy (best)")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{_kib(kib)} folios")
        ax.set_xlabel("folios per move_pages call (log scale)")
    axes[0][0].set_ylabel("GB/s (copy + kernel)")
    axes[0][0].legend(fontsize="small")
    fig.suptitle("move_pages from node 0 to node 1 by copy policy")
    return _finish(fig, path)


def _kib(kib: int) -> str:
    if kib >= 1 << 20:
        return f"{kib >> 20}G"
    if kib >= 1024:
        return f"{kib >> 10}M"
    return f"{kib}K"
