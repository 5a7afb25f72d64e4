"""The three scripts of examples/ run (small) and write Parquet and figures."""

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize(
    "script, args, dataset, figures",
    [
        ("mthp_advisor_sweep.py", ["--quick"], "results.parquet", ["kernel_time.svg", "memory.svg"]),
        ("fragmentation_remedies.py", ["--hours", "1", "--mem", "4G", "--seeds", "1"], "aging.parquet", ["success_4G.svg"]),
        ("reporting_study.py", ["--mem", "4G"], "results.parquet", ["reported.svg", "timeline.svg"]),
    ],
)
def test_an_example_writes_parquet_and_figures(tmp_path, script, args, dataset, figures):
    r = subprocess.run([sys.executable, str(EXAMPLES / script), "-o", str(tmp_path), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert pq.ParquetDataset(tmp_path / dataset).read().num_rows > 0
    for f in figures:
        assert (tmp_path / f).stat().st_size > 2000, f
