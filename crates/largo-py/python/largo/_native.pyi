"""Type stubs of the native module (crates/largo-py/src). Each function
returns the JSON lines the command prints with ``--json`` (``show``: the
file's text); the package's typed wrappers are in ``largo.api``."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

__version__: str
MACHINE_FIELDS: List[str]
POLICY_FIELDS: List[str]

class LargoError(Exception): ...
class UsageError(LargoError): ...

_Config = Tuple[str, Optional[Dict[str, Any]], Optional[Dict[str, Any]]]

def run(
    workloads: Sequence[str],
    configs: Sequence[_Config],
    machine: Optional[Dict[str, Any]] = None,
    policy: Optional[Dict[str, Any]] = None,
    seed: int = 0,
    tasks: int = 1,
    mode: str = "process",
    check: int = 0,
    profile: Optional[str] = None,
    keep_going: bool = False,
    tlb: Optional[str] = None,
) -> str: ...
def replay(
    traces: Sequence[str],
    configs: Sequence[_Config],
    machine: Optional[Dict[str, Any]] = None,
    policy: Optional[Dict[str, Any]] = None,
    check: int = 0,
    profile: Optional[str] = None,
    keep_going: bool = False,
) -> str: ...
def advise(
    workload: Optional[str] = None,
    command: Optional[Sequence[str]] = None,
    machine: Optional[Dict[str, Any]] = None,
    policy: Optional[Dict[str, Any]] = None,
    max_bloat: Optional[float] = None,
    profile: Optional[str] = None,
    verify: bool = False,
    runs: int = 5,
    top: int = 3,
    no_recalibrate: bool = False,
) -> str: ...
def show(
    file: str,
    workload: Optional[str] = None,
    machine: Optional[Dict[str, Any]] = None,
    policy: Optional[Dict[str, Any]] = None,
    tasks: int = 1,
    seed: int = 0,
) -> str: ...
def validate(
    workloads: Sequence[str],
    configs: Sequence[_Config],
    suite: str = "all",
    repeats: int = 5,
    no_costs: bool = False,
) -> Tuple[str, Optional[str]]: ...
def command(argv: Sequence[str]) -> str: ...
def parse_size(text: str) -> int: ...
