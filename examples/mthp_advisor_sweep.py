"""Which mTHP sizes should each shipped program use?

Replays the recorded programs under five anonymous folio policies, three
seeds each, as one sweep (a cell per policy x program x seed; on Ray with
--ray [ADDRESS]), then per program picks the policy with the least
estimated kernel time whose peak memory grows at most --max-bloat percent
over 4K pages. Writes OUT/results.parquet (the dataset) and OUT/*.svg.

    python examples/mthp_advisor_sweep.py -o /tmp/advisor [--ray] [--quick]
"""

import argparse
from pathlib import Path

import largo
from largo import plot

POLICIES = {
    "4K": largo.Policy(),
    "16K": largo.Policy(thp=["16K"]),
    "64K": largo.Policy(thp=["64K"]),
    "16K+32K+64K": largo.Policy(thp=["16K", "32K", "64K"]),
    "64K+2M": largo.Policy(thp=["64K", "2M"]),
}
PROGRAMS = ["lua-build", "sqlite-cc", "python-compileall", "xz-compress", "sort-words", "python-json"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS")
    p.add_argument("--max-bloat", type=float, default=5.0, help="percent of peak memory over 4K pages")
    p.add_argument("--quick", action="store_true", help="two programs, one seed")
    args = p.parse_args()
    programs = PROGRAMS[-2:] if args.quick else PROGRAMS
    seeds = [0] if args.quick else [0, 1, 2]
    r = largo.sweep(
        POLICIES, programs, seeds,
        backend="ray" if args.ray is not None else "local", address=args.ray or None,
        output=args.out / "results.parquet",
    )
    print(f"{r.total} cells ({r.ran} run, {r.reused} reused, {r.failed} failed) in {r.elapsed_s:.1f} s")
    df = r.to_pandas()
    df = df[df["status"] == "ok"]
    mean = df.groupby(["workload", "config"])[["cost.kernel_ns", "peak.anon_kb"]].mean()
    for program in programs:
        m = mean.loc[program]
        base = m.loc["4K"]
        bloat = (m["peak.anon_kb"] / base["peak.anon_kb"] - 1) * 100
        ok = m[bloat <= args.max_bloat]
        best = ok["cost.kernel_ns"].idxmin()
        change = (ok.loc[best, "cost.kernel_ns"] / base["cost.kernel_ns"] - 1) * 100
        print(f"{program:18} {best:12} kernel time {change:+.1f}%, peak memory {bloat[best]:+.1f}%")
    plot.run_bars(df, "cost.kernel_ns", path=args.out / "kernel_time.svg")
    plot.run_bars(df, "peak.anon_kb", path=args.out / "memory.svg")
    print(f"figures: {args.out}/kernel_time.svg, {args.out}/memory.svg")


if __name__ == "__main__":
    main()
