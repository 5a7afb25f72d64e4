"""largo.plot: each figure written and non-empty, with its labels."""

import pytest

import largo
from largo import plot

pytest.importorskip("matplotlib", reason="matplotlib is not installed (scripts/python-tests installs it)")


def svg(path):
    text = path.read_text()
    assert text.lstrip().startswith("<?xml") or "<svg" in text[:400]
    assert path.stat().st_size > 2000
    return text


def test_run_bars_from_a_result_and_from_a_sweep(tmp_path):
    r = largo.run(["page_fault1:size=16M", "anon-w-rand:size=16M"], {"4K": None, "16K": largo.Policy(thp=["16K"]), "64K": largo.Policy(thp=["64K"])})
    text = svg_of(plot.run_bars(r, "vmstat.pgfault", path=tmp_path / "bars.svg"), tmp_path / "bars.svg")
    assert "page faults (pgfault)" in text and "against 4K" in text
    s = largo.sweep({"4K": None, "64K": largo.Policy(thp=["64K"])}, ["anon-chase:size=16M"], [0, 1], backend="serial", progress=False)
    plot.run_bars(s, "cost.kernel_ns", path=tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").stat().st_size > 2000
    with pytest.raises(ValueError, match="no column"):
        plot.run_bars(r, "vmstat.nonsense")


def svg_of(fig, path):
    assert fig is not None
    return svg(path)


def test_reporting_timeline(tmp_path):
    r = largo.run(["memhog:size=256M,idle=20s"], {"4K": largo.Machine(balloon=True, mem="4G")})
    text = svg_of(plot.reporting(r, tmp_path / "rep.svg"), tmp_path / "rep.svg")
    assert "reported (MiB, cumulative)" in text
    with pytest.raises(ValueError, match="no run reported"):
        plot.reporting(largo.run(["page_fault1:size=8M"], {"4K": None}))


def test_aging_gigantic_tlb_and_migrate_figures(tmp_path):
    age = largo.command("age", "server", "--hours", "1", "--mem", "4G", "--config", "b:--thp 64K", "--json").records
    assert "simulated hours" in svg_of(plot.aging(age, tmp_path / "age.svg"), tmp_path / "age.svg")
    gig = largo.command("bench", "gigantic", "--mem", "8G", "--steps", "2", "--json").records
    assert "1G allocations" in svg_of(plot.gigantic(gig, tmp_path / "gig.svg"), tmp_path / "gig.svg")
    tlb = largo.command("bench", "tlb", "--model-only", "--ranges", "64M,256M", "--json").records
    assert "time per access (ns)" in svg_of(plot.tlb(tlb, tmp_path / "tlb.svg"), tmp_path / "tlb.svg")
    mig = largo.command("bench", "migrate", "--quick", "--runs", "1", "--json").records
    assert "GB/s (copy + kernel)" in svg_of(plot.migrate(mig, tmp_path / "mig.svg"), tmp_path / "mig.svg")
    with pytest.raises(ValueError, match="no records"):
        plot.migrate(age)
