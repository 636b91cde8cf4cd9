"""Benchmarks against DynamoDB Local, reported as ratios to a raw-write ceiling measured in the
same run (``make bench``, or ``python -m bench.<section>`` for one section on its own)."""

import sys
from pathlib import Path

# The Lambda code lives in functions/ (its packages are top-level there, as in the Lambda bundle).
_FUNCTIONS = str(Path(__file__).resolve().parent.parent / "functions")
if _FUNCTIONS not in sys.path:
    sys.path.insert(0, _FUNCTIONS)
