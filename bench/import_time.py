"""What ``import turnstile_ddb`` costs, as a ratio to ``import botocore`` measured in the same run.

    python -m bench.import_time [--runs N]

Each import runs in a fresh interpreter with ``-X importtime``; the figure is the cumulative
microseconds of the top-level module's line (median of N runs). The library's promise: importing
``turnstile_ddb`` loads only its exception hierarchy, costs <= 30 ms, and loads neither boto3 nor
botocore (tests/unit/test_errors.py asserts the latter structurally).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_MS = 30.0


def cumulative_us(module: str) -> int:
    """Cumulative import time of ``module`` in a fresh interpreter (microseconds)."""
    # The source tree's package, with bytecode writing as the caller has it (make: off, so
    # turnstile is compiled on every run: the conservative figure, as in a Lambda asset).
    env = {**os.environ, "PYTHONPATH": str(ROOT / "functions")}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    for line in out.splitlines():
        # "import time: self [us] | cumulative | imported package"
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise RuntimeError(f"no import-time line for {module}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    cumulative_us("turnstile_ddb"), cumulative_us("botocore")  # warm the bytecode caches
    ours = statistics.median(cumulative_us("turnstile_ddb") for _ in range(args.runs))
    sdk = statistics.median(cumulative_us("botocore") for _ in range(args.runs))
    print(f"\n## library: import time (median of {args.runs} fresh interpreters)\n")
    print("| import | cumulative ms | ratio to `import botocore` |")
    print("|---|---|---|")
    print(f"| `import turnstile_ddb` | {ours / 1000:.2f} | {ours / sdk:.3f} |")
    print(f"| `import botocore` | {sdk / 1000:.2f} | 1.000 |")
    verdict = "within" if ours / 1000 <= LIMIT_MS else "OVER"
    print(f"\nimport turnstile: {ours / 1000:.2f} ms ({verdict} the {LIMIT_MS:.0f} ms budget)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
