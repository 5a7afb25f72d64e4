"""How much memory does free page reporting give back to the host, and how
soon? A sweep of balloon machines (memory sizes x page_reporting_order)
over workloads that free memory and idle, seeds as repeats; writes
OUT/results.parquet, OUT/reported.svg (memory reported after the
workload's frees per configuration, %change against the first) and OUT/timeline.svg (one run's timeline).

    python examples/reporting_study.py -o /tmp/reporting [--ray [ADDRESS]]
"""

import argparse
from pathlib import Path

import largo
from largo import plot

WORKLOADS = ["memhog:size=1G,idle=30s", "churn:size=512M,cycles=4,idle=5s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS")
    p.add_argument("--mem", default="4G,16G")
    args = p.parse_args()
    grid = {}
    for mem in args.mem.split(","):
        for order in (9, 10):
            grid[f"{mem} order {order}"] = largo.Config(
                f"{mem} order {order}",
                largo.Machine(mem=mem, balloon=True),
                largo.Policy(set={"page_reporting/page_reporting_order": order}),
            )
    r = largo.sweep(
        grid, WORKLOADS, [0, 1],
        backend="ray" if args.ray is not None else "local", address=args.ray or None,
        output=args.out / "results.parquet",
    )
    df = r.to_pandas()
    df = df[df["status"] == "ok"]
    # What the workload's frees gave back (the boot's own reporting aside).
    df = df.assign(
        reported_after_free_mib=(df["page_reporting.reported_kib"] - df["page_reporting.reported_kib_before_free"]) / 1024
    )
    print(df.groupby(["workload", "config"])[["reported_after_free_mib", "page_reporting.passes"]].mean())
    plot.run_bars(df, "reported_after_free_mib", path=args.out / "reported.svg")
    one = largo.run([WORKLOADS[0]], {name: grid[name] for name in list(grid)[:2]})
    plot.reporting(one, args.out / "timeline.svg")
    print(f"{args.out}/results.parquet, reported.svg, timeline.svg")


if __name__ == "__main__":
    main()
