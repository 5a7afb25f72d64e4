"""The package's entry points: typed results with the CLI's `--json`
fields, configuration objects, exceptions, the GIL released."""

import json
import subprocess
import threading
import time

import pyarrow as pa
import pytest

import largo
from largo import _native

SMALL = "page_fault1:size=16M,iterations=2"


def test_run_returns_the_cli_json_field_for_field(cli):
    configs = {"4K": None, "64K": largo.Policy(thp={"64K": "always"})}
    r = largo.run([SMALL], configs, seed=3)
    out = subprocess.run(
        [str(cli), "run", SMALL, "--config", "4K:", "--config", "64K:--thp 64K=always", "--seed", "3", "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    want = [json.loads(l) for l in out.splitlines()]
    assert [rec.to_json() for rec in r.records] == want


def test_run_records_are_typed_and_configs_apply():
    r = largo.run(
        [SMALL],
        [largo.Config("small", largo.Machine(mem="4G", nodes=2, cpus=4)), largo.Config("big", largo.Machine(mem=8 << 30), largo.Policy(thp=["64K"]))],
        machine=largo.Machine(preset="x86_64"),
    )
    small, big = r.get(r.workloads[0], "small"), r.get(r.workloads[0], "big")
    assert "4G 2 node(s) 4 cpu(s)" in small.machine and "8G" in big.machine
    assert "transparent_hugepage/hugepages-64kB/enabled=always" in big.knobs
    assert big.vmstat["pgfault"] * 16 == small.vmstat["pgfault"], "64K folios: 16x fewer faults"
    assert isinstance(small.kernel_ns, int) and small.kernel_ns > big.kernel_ns > 0


def test_to_arrow_is_wide_with_dotted_counter_columns():
    r = largo.run([SMALL, "anon-w-rand:size=8M"], {"4K": None, "16K": largo.Policy(thp=["16K"])})
    t = r.to_arrow()
    assert isinstance(t, pa.Table) and t.num_rows == 4
    assert t.column_names[:2] == ["config", "workload"]
    for col in ("vmstat.pgfault", "cost.kernel_ns", "mthp.16kB.anon_fault_alloc", "peak.anon_kb"):
        assert col in t.column_names, col
    assert t.column("vmstat.pgfault").to_pylist() == [rec.vmstat["pgfault"] for rec in r.records]
    df = r.to_pandas()
    assert list(df["config"]) == ["4K", "4K", "16K", "16K"]


def test_default_run_is_the_default_suite():
    r = largo.run(["page_fault1:size=8M,iterations=1"])
    assert r.configs == [c.name for c in largo.DEFAULT_SUITE]


def test_replay_of_a_shipped_program():
    r = largo.replay("sort-words", {"4K": None, "64K": largo.Policy(thp=["64K"])})
    assert len(r) == 2 and r.workloads == ["sort-words"]
    assert r.records[1].mthp["64kB"]["anon_fault_alloc"] > 0
    with pytest.raises(largo.UsageError, match="not a trace file or recorded program"):
        largo.replay("page_fault1")


def test_advise_ranks_candidates_and_prints_sysfs_writes():
    a = largo.advise("page_fault1:size=16M", max_bloat=5)
    assert a.recommendation is not None and a.candidates[0]["rank"] == 1
    assert any("transparent_hugepage" in c for c in a.commands)
    t = a.to_arrow()
    assert t.num_rows == len(a.candidates) and "kernel_time_change_pct" in t.column_names


def test_show_renders_proc_files_and_tables():
    meminfo = largo.show("meminfo", machine=largo.Machine(mem="4G"))
    rows = {r["name"]: r["value"] for r in meminfo.to_arrow().to_pylist()}
    assert rows["MemTotal"] > 3 * 1024 * 1024
    after = largo.show("vmstat", "anon-w-seq:size=64M", policy=largo.Policy(thp={"64K": "always"}))
    vm = {r["name"]: r["value"] for r in after.rows()}
    assert vm["nr_anon_pages"] == 64 * 256
    assert "Node 0, zone" in str(largo.show("buddyinfo"))
    with pytest.raises(largo.UsageError, match="is not one of"):
        largo.show("slabinfo")


def test_validate_compares_with_the_host(root):
    v = largo.validate([ "page_fault1:size=8M,iterations=1"], {"4K": None, "64K": largo.Policy(thp=["64K"])}, no_costs=True, repeats=1)
    assert [r["config"] for r in v.records] == ["4K", "64K"]
    assert all("host" in r and "largo" in r for r in v.records)
    assert v.ok == all(r["match"] for r in v.records)
    assert v.to_arrow().num_rows == 2


def test_command_runs_any_command_line():
    out = largo.command("age", "server", "--hours", "1", "--mem", "4G", "--config", "base:", "--json")
    recs = out.records
    assert len(recs) == 60 and recs[0]["minute"] >= 0
    with pytest.raises(largo.UsageError, match="unrecognized subcommand"):
        largo.command("frobnicate")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: largo.run(["nope"]), "unknown workload 'nope'"),
        (lambda: largo.run([SMALL], machine=largo.Machine(mem="3Q")), "Machine.mem: invalid size '3Q'"),
        (lambda: largo.run([SMALL], machine=largo.Machine(mem="1M")), "--mem: memory size 1M is too small"),
        (lambda: largo.run([SMALL], machine=largo.Machine(preset="vax")), "unknown machine 'vax'"),
        (lambda: largo.run([SMALL], policy=largo.Policy(thp={"48K": "always"})), "Policy.thp"),
        (lambda: largo.run([SMALL], policy=largo.Policy(set={"vm/nonsense": 1})), "nonsense"),
        (lambda: largo.run([SMALL], machine=largo.Machine(nodes=0)), "Machine.nodes: 0 is not in 1..=64"),
        (lambda: largo.run([SMALL], mode="fiber"), "mode: 'fiber'"),
        (lambda: _native.run([SMALL], [("x", {"memory": "4G"}, None)]), "unknown field 'memory'"),
        (lambda: largo.run([SMALL], [largo.Config("a"), largo.Config("a")]), "used twice"),
    ],
)
def test_bad_input_raises_usage_errors_with_the_cli_message(call, message):
    with pytest.raises(largo.UsageError) as e:
        call()
    assert message in str(e.value)
    assert isinstance(e.value, largo.LargoError)


def test_a_failure_is_a_largo_error_not_a_usage_error(tmp_path):
    bad = tmp_path / "broken.trace"
    bad.write_text("this is not a trace\n")
    with pytest.raises(largo.LargoError) as e:
        largo.run([str(bad)], {"4K": None})
    assert str(e.value)


def test_the_gil_is_released_while_the_engine_runs():
    """Another Python thread keeps running during a long engine call."""
    spans = {}

    def engine():
        spans["start"] = time.perf_counter()
        largo.run(["anon-w-rand:size=2G"], {"4K": None})
        spans["end"] = time.perf_counter()

    t = threading.Thread(target=engine)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    assert spans["end"] - spans["start"] > 0.2, "the call is long enough to see"
    inside = [x for x in ticks if spans["start"] + 0.05 < x < spans["end"] - 0.05]
    # Held, the GIL would stop this thread for the whole call.
    assert len(inside) > 20, f"{len(inside)} ticks while the engine ran"


def test_ctrl_c_stays_pythons_after_the_commands_that_handle_it():
    """The binary's commands install SIGINT/SIGTERM handlers; embedded
    they must not, or Ctrl-C would stop raising KeyboardInterrupt."""
    import os
    import signal

    # Python raises KeyboardInterrupt only where SIGINT was not ignored at
    # its start (a shell's background job ignores it): set up as an
    # interactive interpreter is, whatever launched the tests.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        largo.advise("page_fault1:size=4M")
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_counts_and_output_edges():
    with pytest.raises(largo.UsageError, match="seed: -1 is below 0"):
        largo.run([SMALL], seed=-1)
    with pytest.raises(largo.UsageError, match="tasks: 0 is below 1"):
        largo.show("meminfo", tasks=0)
    assert "largo" in largo.command("--version").text
    assert "memory" in largo.command("hotplug", "list", "--mem", "1G").text, "hotplug prints through the capture"
    with pytest.raises(largo.UsageError, match="holds memory until killed"):
        largo.command("host", "fragment")
    r = largo.run([SMALL], {"nozero": largo.Policy(set={"transparent_hugepage/use_zero_page": False})})
    assert "transparent_hugepage/use_zero_page=0" in r.records[0].knobs


def test_config_objects_are_plain_data():
    m = largo.Machine(mem="4G", cma=[largo.Cma("64M")], swap=[largo.Swap("1G", "disk")], virtio_mem=largo.VirtioMem("1G", plugged="512M"))
    n = m.to_native()
    assert n["cma"] == [{"size": "64M", "node": None}] and n["virtio_mem"]["plugged"] == "512M"
    assert sorted(n) == sorted(_native.MACHINE_FIELDS), "the dataclass and the engine agree on the fields"
    assert sorted(largo.Policy().to_native()) == sorted(_native.POLICY_FIELDS)
    assert largo.Policy(thp=["16K", "32K"]).thp == {"16K": "always", "32K": "always"}
    r = largo.run([SMALL], {"cma": m})
    assert "CmaTotal" in r.records[0].meminfo and r.records[0].meminfo["CmaTotal"] == 64 * 1024
