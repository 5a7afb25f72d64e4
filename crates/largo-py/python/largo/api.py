"""The entry points. Each runs the command of the same name in the engine
(the GIL released while it runs) and returns a typed result; a failure
raises ``LargoError`` (bad input: ``UsageError``) with the command line's
one-line message. An engine call runs to its end: Ctrl-C raises
KeyboardInterrupt when it returns (sweeps stop between cells)."""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

from . import _native
from .config import Config, Machine, Policy, as_configs
from .results import AdviseResult, CommandOutput, RunResult, ShowResult, ValidateResult

__all__ = ["run", "replay", "advise", "show", "validate", "command"]

Workloads = Union[str, Sequence[str]]
Configs = Union[None, Config, Sequence[Config], dict]


def _names(workloads: Optional[Workloads]) -> list:
    if workloads is None:
        return []
    if isinstance(workloads, (str, os.PathLike)):
        return [os.fspath(workloads)]
    return [os.fspath(w) for w in workloads]


def _native_configs(configs: Configs) -> list:
    return [c.to_native() for c in as_configs(configs)]


def _count(name: str, value: int, low: int = 0) -> int:
    """A count the engine takes unsigned: a clear UsageError below ``low``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _native.UsageError(f"{name}: expected an integer, got {value!r}")
    if value < low:
        raise _native.UsageError(f"{name}: {value} is below {low}")
    return value


def _opt(obj: Any, kind: type):
    if obj is None:
        return None
    if not isinstance(obj, kind):
        raise TypeError(f"expected largo.{kind.__name__}, got {type(obj).__name__}")
    return obj.to_native()


def run(
    workloads: Optional[Workloads] = None,
    configs: Configs = None,
    *,
    machine: Optional[Machine] = None,
    policy: Optional[Policy] = None,
    seed: int = 0,
    tasks: int = 1,
    mode: str = "process",
    check: int = 0,
    profile: Optional[Union[str, os.PathLike]] = None,
    keep_going: bool = False,
    tlb: Optional[str] = None,
) -> RunResult:
    """``largo run``: workloads (``NAME[:KEY=VALUE,...]``, trace files,
    shipped programs; default the default suite) under each configuration
    (default: the seed paper's six). ``machine`` and ``policy`` apply to
    every configuration, a configuration's own fields override them."""
    text = _native.run(
        _names(workloads),
        _native_configs(configs),
        machine=_opt(machine, Machine),
        policy=_opt(policy, Policy),
        seed=_count("seed", seed),
        tasks=_count("tasks", tasks, 1),
        mode=mode,
        check=_count("check", check),
        profile=os.fspath(profile) if profile is not None else None,
        keep_going=keep_going,
        tlb=tlb,
    )
    return RunResult.from_output(text)


def replay(
    traces: Workloads,
    configs: Configs = None,
    *,
    machine: Optional[Machine] = None,
    policy: Optional[Policy] = None,
    check: int = 0,
    profile: Optional[Union[str, os.PathLike]] = None,
    keep_going: bool = False,
) -> RunResult:
    """``largo replay``: recorded traces (files or shipped programs) under
    each configuration."""
    text = _native.replay(
        _names(traces),
        _native_configs(configs),
        machine=_opt(machine, Machine),
        policy=_opt(policy, Policy),
        check=_count("check", check),
        profile=os.fspath(profile) if profile is not None else None,
        keep_going=keep_going,
    )
    return RunResult.from_output(text)


def advise(
    workload: Optional[str] = None,
    *,
    command: Optional[Sequence[str]] = None,
    machine: Optional[Machine] = None,
    policy: Optional[Policy] = None,
    max_bloat: Optional[float] = None,
    profile: Optional[Union[str, os.PathLike]] = None,
    verify: bool = False,
    runs: int = 5,
    top: int = 3,
    no_recalibrate: bool = False,
) -> AdviseResult:
    """``largo advise``: which anonymous mTHP sizes a workload should use.
    ``command=[...]`` records a program on this host first (root)."""
    text = _native.advise(
        workload=os.fspath(workload) if workload is not None else None,
        command=list(command) if command is not None else None,
        machine=_opt(machine, Machine),
        policy=_opt(policy, Policy),
        max_bloat=max_bloat,
        profile=os.fspath(profile) if profile is not None else None,
        verify=verify,
        runs=runs,
        top=top,
        no_recalibrate=no_recalibrate,
    )
    return AdviseResult.from_output(text)


def show(
    file: str,
    workload: Optional[str] = None,
    *,
    machine: Optional[Machine] = None,
    policy: Optional[Policy] = None,
    tasks: int = 1,
    seed: int = 0,
) -> ShowResult:
    """``largo show``: a /proc file (buddyinfo, pagetypeinfo, zoneinfo,
    vmstat, meminfo, mthp, thpmaps, page_reporting, extfrag_index,
    unusable_index) of the machine, after ``workload`` if given."""
    text = _native.show(
        file,
        workload=workload,
        machine=_opt(machine, Machine),
        policy=_opt(policy, Policy),
        tasks=_count("tasks", tasks, 1),
        seed=_count("seed", seed),
    )
    return ShowResult(file, text)


def validate(
    workloads: Optional[Workloads] = None,
    configs: Configs = None,
    *,
    suite: str = "all",
    repeats: int = 5,
    no_costs: bool = False,
) -> ValidateResult:
    """``largo validate`` (root): scenarios and workloads on the model and
    natively on this host, counters compared. The host's THP knobs are
    changed under a lock and restored. Counters that differ are a result
    (``.ok`` False, ``.failure`` the command line's message), not an
    exception; a host that cannot run it raises ``LargoError``."""
    text, failure = _native.validate(
        _names(workloads), _native_configs(configs), suite=suite, repeats=repeats, no_costs=no_costs
    )
    return ValidateResult.from_output(text, failure)


def command(*argv: str) -> CommandOutput:
    """Any command line, ``largo.command("age", "phone", "--hours", "1",
    "--json")``: the commands without a typed entry point."""
    if len(argv) == 1 and not isinstance(argv[0], str):
        argv = tuple(argv[0])
    return CommandOutput(_native.command([str(a) for a in argv]))
