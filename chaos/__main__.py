"""``python -m chaos --seed S --seconds T``: every pattern under the nemesis; exit 1 if violated."""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))
# The handlers log every decision; under the nemesis that is thousands of lines: keep warnings.
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from chaos import runner  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument(
        "--ttl-leases",
        action="store_true",
        help="let TTL purge expired lease items (as after their 30-day retention)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("local.pump").setLevel(logging.CRITICAL)  # injected crashes log tracebacks
    # The checkers judge the history, not metrics; an EMF line per invocation would bury the report.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    result = runner.run(
        seed,
        args.seconds,
        ttl_leases=args.ttl_leases,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    result.print(sys.stdout)
    return 1 if result.report.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
