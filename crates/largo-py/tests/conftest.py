import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def largo_binary():
    """The command line built by cargo (the Rust half of the test command
    builds it), to compare the package's fields with `--json`."""
    for profile in ("debug", "release"):
        p = REPO / "target" / profile / "largo"
        if p.exists():
            return p
    found = shutil.which("largo")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def cli():
    b = largo_binary()
    if b is None:
        pytest.skip("no largo binary built (cargo build -p largo-cli): the CLI comparison cannot run")
    return b


@pytest.fixture(scope="session")
def root():
    if os.geteuid() != 0:
        pytest.skip("not root: validate runs workloads natively under the host's THP knobs")


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the session's Ray tests."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (scripts/python-tests installs it)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
