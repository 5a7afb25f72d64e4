"""Configuration objects: the command line's MACHINE and POLICY options as
typed fields, handed to the engine field by field (no flag strings).

Sizes are bytes (int) or strings with a K/M/G/T suffix ("16G"). A field left
None takes the command line's default. ``Config(name, machine, policy)`` is
one ``--config NAME:FLAGS``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

Size = Union[int, str]

__all__ = ["Size", "Cma", "VirtioMem", "Swap", "Machine", "Policy", "Config", "DEFAULT_SUITE"]


@dataclass(frozen=True)
class Cma:
    """A CMA area reserved at boot (``--cma SIZE[@NODE]``)."""

    size: Size
    node: Optional[int] = None


@dataclass(frozen=True)
class VirtioMem:
    """A virtio-mem device above boot RAM (``--virtio-mem``)."""

    size: Size
    block: Size = "2M"
    plugged: Size = 0
    movable: bool = False


@dataclass(frozen=True)
class Swap:
    """A swap device swapped on at boot (``--swap SIZE[:KIND]``): zram or disk."""

    size: Size
    kind: str = "zram"


@dataclass(frozen=True)
class Machine:
    """MACHINE: the hardware and kernel build to model (``largo run --help``).

    ``preset`` is what ``--machine`` takes: x86_64 (default), arm64-4k,
    arm64-16k, arm64-64k, host, or snapshot:FILE.
    """

    preset: Optional[str] = None
    mem: Optional[Size] = None
    nodes: Optional[int] = None
    node_mem: Optional[Sequence[Size]] = None
    cpus: Optional[int] = None
    backing: Optional[str] = None
    max_page_order: Optional[int] = None
    pageblock_order: Optional[int] = None
    section_bits: Optional[int] = None
    memory_block_size: Optional[Size] = None
    maxmem: Optional[Size] = None
    buddy_beyond_section: bool = False
    pageblock_beyond_pmd: bool = False
    cma: Sequence[Cma] = ()
    virtio_mem: Optional[VirtioMem] = None
    movable: Optional[Size] = None
    balloon: bool = False
    balloon_ack_us: Optional[int] = None
    swap: Sequence[Swap] = ()
    zswap: bool = False
    memcg_max: Optional[Size] = None
    page_cache: Optional[Size] = None

    def to_native(self) -> Dict[str, Any]:
        """The fields as the engine reads them (lists for sequences)."""
        return _plain(self)


@dataclass(frozen=True)
class Policy:
    """POLICY: knob settings applied after boot.

    ``thp`` and ``shmem`` map sizes to modes, ``{"64K": "always", "2M":
    "madvise"}``; a list of sizes means always. ``set`` maps knob paths to
    values, ``{"vm/min_free_kbytes": 65536}``.
    """

    thp: Optional[Mapping[str, str]] = None
    thp_enabled: Optional[str] = None
    shmem: Optional[Mapping[str, str]] = None
    thp_policy: Optional[str] = None
    set: Optional[Mapping[str, Any]] = None

    def __post_init__(self) -> None:
        for name in ("thp", "shmem"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                if isinstance(value, str):
                    raise TypeError(f"Policy.{name}: a dict of size to mode or a list of sizes, not a string")
                object.__setattr__(self, name, {str(s): "always" for s in value})

    def to_native(self) -> Dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class Config:
    """A named configuration: ``--config NAME:FLAGS``."""

    name: str
    machine: Machine = field(default_factory=Machine)
    policy: Policy = field(default_factory=Policy)

    def to_native(self):
        return (self.name, self.machine.to_native(), self.policy.to_native())

    def key(self) -> str:
        """A canonical text of every field (what a sweep cell's id hashes)."""
        return json.dumps(_plain(self), sort_keys=True, default=str)


def _plain(obj: Any) -> Any:
    """Dataclasses as dicts, tuples as lists, recursively."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def as_configs(configs: Union[None, Config, Mapping[str, Any], Sequence[Any]]) -> List[Config]:
    """Configurations from a Config, a list of them, or a dict of name to
    Config / (Machine, Policy) / Machine / Policy."""
    if configs is None:
        return []
    if isinstance(configs, Config):
        return [configs]
    if isinstance(configs, Mapping):
        return [_named(name, value) for name, value in configs.items()]
    out = []
    for c in configs:
        if not isinstance(c, Config):
            raise TypeError(f"expected largo.Config, got {type(c).__name__}")
        out.append(c)
    return out


def _named(name: str, value: Any) -> Config:
    if isinstance(value, Config):
        return dataclasses.replace(value, name=name)
    if isinstance(value, Machine):
        return Config(name, machine=value)
    if isinstance(value, Policy):
        return Config(name, policy=value)
    if isinstance(value, tuple) and len(value) == 2:
        return Config(name, machine=value[0] or Machine(), policy=value[1] or Policy())
    if value is None:
        return Config(name)
    raise TypeError(f"configuration {name}: expected Config, Machine, Policy or (Machine, Policy)")


#: The seed paper's configuration set, ``largo run``'s default.
DEFAULT_SUITE = [
    Config("4K", Machine(preset="x86_64")),
    Config("16K-pages", Machine(preset="arm64-16k")),
    Config("64K-pages", Machine(preset="arm64-64k")),
    Config("4K+16K", Machine(preset="x86_64"), Policy(thp=["16K"])),
    Config("4K+16K+32K", Machine(preset="x86_64"), Policy(thp=["16K", "32K"])),
    Config("4K+16K+32K+64K", Machine(preset="x86_64"), Policy(thp=["16K", "32K", "64K"])),
]
