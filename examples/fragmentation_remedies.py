"""Large folio success while a phone ages, under each remedy of `largo age`
(baseline, ZONE_MOVABLE, the TAO-style movable reserve, ...), for several
memory sizes and seeds: one task per (memory size, seed), each aging every
remedy, on a process pool or Ray. Writes OUT/aging.parquet (a row per
remedy, size, seed and simulated minute) and OUT/success_<MEM>.svg.

    python examples/fragmentation_remedies.py -o /tmp/frag [--hours 4] [--mem 4G,8G] [--seeds 3] [--ray]
"""

import argparse
import concurrent.futures as cf
import multiprocessing as mp
from pathlib import Path

import pyarrow.parquet as pq

import largo
from largo import plot
from largo.results import table_of, flatten


def age(mem: str, seed: int, hours: int):
    """Every remedy aged on a `mem` phone: `largo age`'s JSON lines."""
    out = largo.command("age", "phone", "--hours", str(hours), "--mem", mem, "--seed", str(seed), "--json")
    return [dict(r, mem=mem, seed=seed) for r in out.records]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--hours", type=int, default=4)
    p.add_argument("--mem", default="4G,8G")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS")
    args = p.parse_args()
    tasks = [(m, s, args.hours) for m in args.mem.split(",") for s in range(args.seeds)]
    if args.ray is not None:
        import ray

        ray.init(address=args.ray or None)
        remote = ray.remote(num_cpus=1)(age)
        results = ray.get([remote.remote(*t) for t in tasks])
    else:
        with cf.ProcessPoolExecutor(mp_context=mp.get_context("spawn")) as pool:
            results = list(pool.map(age, *zip(*tasks)))
    records = [r for rs in results for r in rs]
    args.out.mkdir(parents=True, exist_ok=True)
    pq.write_table(table_of([flatten(r) for r in records]), args.out / "aging.parquet")
    for mem in args.mem.split(","):
        first_seed = [r for r in records if r["mem"] == mem and r["seed"] == 0]
        plot.aging(first_seed, args.out / f"success_{mem}.svg")
    print(f"{len(records)} minutes aged; {args.out}/aging.parquet and success_*.svg")


if __name__ == "__main__":
    main()
