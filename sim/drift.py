"""``python -m sim.drift``: the drift workloads over many seeds, through one front door or both.

A drift workload (:data:`WORKLOADS`) is written once and runs either through the synchronous
front doors or through ``turnstile_ddb.aio`` on an event loop, under the same seeded scheduler
(sim/stock.py says how). For each seed and workload this runs the requested drivers, judges each
history by the workload's own checks, and with ``--driver both`` also compares the two histories,
which must be equal call for call (a difference is a *drift*: the two front doors no longer
perform the same protocol).

The last line says ``N violations, M drifts over S seeds``; the exit status is 1 when either is
not zero, so ``python -m sim.mutants --layers async`` counts a mutant killed through the async
front door exactly as its ``sim`` layer counts the synchronous simulator's verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "functions"))
# The library's metrics log through Powertools; thousands of simulated calls: keep warnings.
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from functools import partial

from chaos.checkers import Report
from sim import counters, edges, hold_ends, keyed, leasing, places, reserving, resizing, stock

Run = Callable[[int, str], tuple[str, Report]]
# Each workload's one-seed run: (seed, driver) -> (history, report).
WORKLOADS: dict[str, Run] = {
    "stock": stock.run,
    "places": places.run,
    "leasing": leasing.run,
    "keyed": keyed.run,
    "edges": edges.run,
    "counters": counters.run,
    "resizing": resizing.run,
    # The asyncio reservation reads ahead where the synchronous one reads pool by pool: each of
    # the two protocols is compared through both drivers (sim/reserving.py).
    "reserving": partial(reserving.run_pair, {"sync": "sync", "async": "async-in-order"}),
    "reserving-ahead": partial(reserving.run_pair, {"sync": "sync-ahead", "async": "async"}),
    # A hold's end, at the very millisecond (sim/hold_ends.py).
    "hold-ends": hold_ends.run,
}
DRIVERS = ("sync", "async")


def check_seed(seed: int, name: str, drivers: Sequence[str]) -> tuple[list[str], bool]:
    """One seed of one workload through each of ``drivers``: the violations each history's
    checks found, and whether the drivers' histories differ (a drift)."""
    found: list[str] = []
    histories = []
    for driver in drivers:
        history, report = WORKLOADS[name](seed, driver)
        histories.append(history)
        found += [f"{name} seed {seed} {driver}: {v.check}: {v.message}" for v in report.violations]
    return found, len(set(histories)) > 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.drift", description=__doc__)
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds (from --first)")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--driver", choices=(*DRIVERS, "both"), default="both")
    parser.add_argument(
        "--only", action="append", default=[], choices=sorted(WORKLOADS), help="a workload"
    )
    args = parser.parse_args(argv)
    drivers = DRIVERS if args.driver == "both" else (args.driver,)
    names = args.only or list(WORKLOADS)
    started = time.monotonic()
    violations = drifts = 0
    for seed in range(args.first, args.first + args.seeds):
        for name in names:
            found, drifted = check_seed(seed, name, drivers)
            for line in found:
                print(line, flush=True)
            if drifted:
                print(f"{name} seed {seed}: the two drivers' histories differ", flush=True)
            violations += len(found)
            drifts += drifted
        if (seed - args.first + 1) % 100 == 0:
            print(f"... {seed - args.first + 1} seeds", flush=True)
    took = time.monotonic() - started
    print(
        f"{', '.join(names)} through {' and '.join(drivers)}: {violations} violations, "
        f"{drifts} drifts over {args.seeds} seeds in {took:.1f} s"
    )
    return 1 if violations or drifts else 0


if __name__ == "__main__":
    sys.exit(main())
