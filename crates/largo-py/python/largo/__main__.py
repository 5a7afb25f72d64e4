"""``python -m largo sweep SPEC.toml -o results.parquet [--ray ADDRESS]``."""

from __future__ import annotations

import argparse
import sys

from . import LargoError
from .sweeps import load_spec, sweep


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m largo", description="largo from Python: sweeps")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run every (configuration, workload, seed) cell of a TOML spec")
    s.add_argument("spec", help="the sweep spec (TOML)")
    s.add_argument("-o", "--output", required=True, help="the Parquet dataset directory (resumed if it exists)")
    s.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on Ray: the cluster at ADDRESS, or a local instance without one")
    s.add_argument("--backend", choices=["serial", "local", "ray"], help="override the spec's backend")
    s.add_argument("--workers", type=int, help="local backend: processes (default: CPUs)")
    s.add_argument("--no-resume", action="store_true", help="rerun cells already in the dataset")
    args = p.parse_args(argv)
    try:
        spec = load_spec(args.spec)
    except (OSError, ValueError) as e:
        print(f"largo: {e}", file=sys.stderr)
        return 2
    backend = "ray" if args.ray is not None else (args.backend or spec.backend)
    try:
        r = sweep(
            spec.configs,
            spec.workloads,
            spec.seeds,
            backend=backend,
            address=args.ray or None,
            output=args.output,
            machine=spec.machine,
            policy=spec.policy,
            options=spec.options,
            workers=args.workers,
            resume=not args.no_resume,
            progress=True,
        )
    except (LargoError, ValueError, TypeError) as e:
        print(f"largo: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # Ray missing or failing to start
        print(f"largo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("largo: interrupted; rerun to finish the remaining cells", file=sys.stderr)
        return 130
    print(
        f"{r.total} cells: {r.ran} run, {r.reused} already done, {r.failed} failed; "
        f"{r.elapsed_s:.1f} s; results in {args.output}"
    )
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
