"""largo: Linux's large-folio memory management, modelled in user space.

    import largo
    r = largo.run(["page_fault1:size=64M"], {"4K": None, "64K": largo.Policy(thp=["64K"])})
    r.to_pandas()[["config", "workload", "cost.kernel_ns", "vmstat.pgfault"]]

Entry points: run, replay, advise, show, validate, command; sweeps over
(configuration, workload, seed) cells: sweep (process pool or Ray);
figures: largo.plot (matplotlib).
"""

from . import _native
from ._native import LargoError, UsageError
from .api import advise, command, replay, run, show, validate
from .config import DEFAULT_SUITE, Cma, Config, Machine, Policy, Swap, VirtioMem
from .results import AdviseResult, CommandOutput, RunRecord, RunResult, ShowResult, ValidateResult
from . import plot
from .sweeps import Cell, SweepResult, load_spec, read_results, sweep

__version__ = _native.__version__

__all__ = [
    "LargoError",
    "UsageError",
    "run",
    "replay",
    "advise",
    "show",
    "validate",
    "command",
    "Machine",
    "Policy",
    "Config",
    "Cma",
    "VirtioMem",
    "Swap",
    "DEFAULT_SUITE",
    "RunRecord",
    "RunResult",
    "AdviseResult",
    "ShowResult",
    "ValidateResult",
    "CommandOutput",
    "sweep",
    "Cell",
    "SweepResult",
    "load_spec",
    "read_results",
    "plot",
]
