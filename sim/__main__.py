"""``python -m sim``: run seeds, print each failing seed with its repro line, end with a summary.

Exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))
# The library's metrics log through Powertools; thousands of simulated calls: keep warnings.
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from sim.ddb import moto_dynamodb  # noqa: E402
from sim.kinds import KINDS  # noqa: E402
from sim.model import Model  # noqa: E402
from sim.run import Config, default_sizes, describe, run_seed, shrink, summary  # noqa: E402

PROGRESS_SECONDS = 30.0  # a line on stderr this often while many seeds run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds (from --first)")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, default=None, help="run this one seed only")
    parser.add_argument("--show", action="store_true", help="print the seed's whole history")
    parser.add_argument("--buyers", type=int, default=Config.purchase_clients)
    parser.add_argument("--holders", type=int, default=Config.lease_clients)
    parser.add_argument("--purchases", type=int, default=Config.purchases_each, help="per buyer")
    parser.add_argument("--acquisitions", type=int, default=Config.leases_each, help="per holder")
    parser.add_argument("--reservers", type=int, default=Config.reservation_clients)
    parser.add_argument(
        "--reservations",
        type=int,
        default=Config.reservations_each,
        help="per reservation client",
    )
    parser.add_argument("--sharded-buyers", type=int, default=Config.sharded_clients)
    parser.add_argument(
        "--sharded-ops", type=int, default=Config.sharded_each, help="per sharded-products client"
    )
    parser.add_argument("--queuers", type=int, default=Config.queue_clients)
    parser.add_argument(
        "--queued", type=int, default=Config.queue_each, help="acquisitions per queue client"
    )
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="KIND=CLIENTS:EACH",
        help="a registered workload's size (sim/kinds.py), e.g. events=3:8; 0 clients: none",
    )
    parser.add_argument(
        "--fault-scale", type=float, default=1.0, help="every fault probability times this"
    )
    parser.add_argument(
        "--no-shrink", action="store_true", help="do not look for a smaller failing run"
    )
    parser.add_argument(
        "--backend",
        choices=("model", "moto"),
        default="model",
        help="the DynamoDB: the simulator's in-memory model (fast) or moto's backend",
    )
    args = parser.parse_args(argv)
    config = Config(
        args.buyers,
        args.holders,
        args.purchases,
        args.acquisitions,
        reservation_clients=args.reservers,
        reservations_each=args.reservations,
        sharded_clients=args.sharded_buyers,
        sharded_each=args.sharded_ops,
        queue_clients=args.queuers,
        queue_each=args.queued,
        fault_scale=args.fault_scale,
        sizes_by_kind={**default_sizes(), **dict(_size(text) for text in args.size)},
    )
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started = time.perf_counter()
    results = []
    backend = moto_dynamodb() if args.backend == "moto" else contextlib.nullcontext(Model())
    with backend as real:
        said = started
        for seed in seeds:
            result = run_seed(seed, config, real=real)
            results.append(result)
            if time.perf_counter() - said >= PROGRESS_SECONDS and len(seeds) > 1:
                # A long run is never silent: the summary so far, on stderr (stdout stays the
                # history and the verdicts).
                said = time.perf_counter()
                print(f"{summary(results, said - started)} (of {len(seeds)})", file=sys.stderr)
            if args.show:
                sys.stdout.write(result.history)
            if result.violations:
                print(describe(result), flush=True)
                if not args.no_shrink:
                    _, small = shrink(seed, config, real=real)
                    print("shrunk: " + describe(small), flush=True)
    print(summary(results, time.perf_counter() - started))
    return 1 if any(r.violations for r in results) else 0


def _size(text: str) -> tuple[str, tuple[int, int]]:
    name, _, size = text.partition("=")
    clients, _, each = size.partition(":")
    known = {kind.name: kind for kind in KINDS}
    if name not in known:
        raise SystemExit(f"--size: no workload {name!r}; registered: {', '.join(known) or 'none'}")
    return name, (int(clients), int(each) if each else known[name].each)


if __name__ == "__main__":
    sys.exit(main())
