"""``python -m sim.mutants``: the mutant set's kill table.

Each ``tests/mutants/NN-name.patch`` is one deliberate, small semantic bug in the library (or the
service's domain code), its first line a comment saying the bug in words. For each patch this
copies the tree to a temporary directory (the real tree is never modified), applies the patch
there with ``git apply`` and runs each requested layer against the copy:

* ``sim``: ``python -m sim --seeds S --no-shrink`` (killed: it reports a violation);
* ``async``: ``python -m sim.drift --driver async --seeds S``, the drift workloads through
  ``turnstile_ddb.aio`` (killed: a violation), the mutant table's column for the async path;
* ``tests``: pytest over the unit and integration files that exercise the mutated module
  (:data:`TESTS`; DynamoDB Local is started by the tests' own fixtures) (killed: a test fails);
* ``chaos``: ``python -m chaos --seconds 120`` (needs a synthesized stack; slow) (killed: a
  checker fails).

A mutant no layer kills names a property nobody checks (docs/mutants.md). The table is printed
as markdown and written to ``bench/results/mutants.md``, each run's output to
``bench/results/mutants/NN-name-layer.log``. Hand-written because mutation tools
(mutmut, cosmic-ray) generate thousands of syntactic mutants; this set is a chosen, reviewed list
of the bugs the concurrency patterns exist to prevent, each run under the layers built to catch
them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "tests" / "mutants"
RESULTS = ROOT / "bench" / "results" / "mutants.md"
LAYERS = ("sim", "async", "tests", "chaos")
SIM_SEEDS = 30
CHAOS_SECONDS = 120

# Not copied into the temporary tree: version control, caches, and the big shared directories
# (linked instead: the venv, DynamoDB Local's jar under node_modules, the synthesized stack).
_SKIPPED = {".git", ".venv", "node_modules", "build", "site", "cdk.out", "__pycache__"}
_SKIPPED |= {".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
_LINKED = (".venv", "node_modules", "build")

_UNIT = "tests/unit/"
_INTEGRATION = "tests/integration/"

# The mutated file -> the test files that exercise it (the tests layer runs only these).
TESTS: dict[str, tuple[str, ...]] = {
    "functions/turnstile_ddb/versioned.py": (
        _UNIT + "test_versioned_ops.py",
        _INTEGRATION + "test_versioned_atomic.py",
        _INTEGRATION + "test_purchase_contention.py",
        _INTEGRATION + "test_idempotency_key.py",
    ),
    **dict.fromkeys(
        (
            "functions/turnstile_ddb/claims.py",
            # its private parts (the unit item's writes, the hints, the reads, the answers)
            "functions/turnstile_ddb/_claims_units.py",
            "functions/turnstile_ddb/_claims_hints.py",
            "functions/turnstile_ddb/_claims_reader.py",
            "functions/turnstile_ddb/_claims_results.py",
        ),
        (
            _UNIT + "test_inventory_claims.py",
            _UNIT + "test_claims_options.py",
            _UNIT + "test_claim_hold_lapsed.py",
            _INTEGRATION + "test_inventory_reservations.py",
            _INTEGRATION + "test_inventory_transactions.py",
        ),
    ),
    **dict.fromkeys(
        (
            "functions/turnstile_ddb/sharded.py",
            "functions/turnstile_ddb/_sharded_counter.py",
            "functions/turnstile_ddb/_sharded_hints.py",
            "functions/turnstile_ddb/_sharded_take.py",
            "functions/turnstile_ddb/_sharded_resize.py",
        ),
        (
            _UNIT + "test_sharded_hints.py",
            _INTEGRATION + "test_sharded_stock.py",
            _INTEGRATION + "test_sharded_event.py",
            _INTEGRATION + "test_sharded_resize.py",
        ),
    ),
    "functions/turnstile_ddb/_lease_item.py": (
        _INTEGRATION + "test_lease_races.py",
        _INTEGRATION + "test_lease_guard.py",
        _INTEGRATION + "test_lease_queue.py",
        _INTEGRATION + "test_lease_queue_beat.py",
    ),
    "functions/turnstile_ddb/lease.py": (
        _UNIT + "test_policy.py",  # renewing or releasing someone else's lease (mutant 27)
        _INTEGRATION + "test_lease_races.py",
        _INTEGRATION + "test_lease_guard.py",
        _INTEGRATION + "test_lease_owners.py",
    ),
    "functions/turnstile_ddb/capacity.py": (
        _UNIT + "test_capacity_model.py",
        _INTEGRATION + "test_capacity_lock_table_and_slots.py",
        _INTEGRATION + "test_event_signup_concurrency.py",
    ),
    "functions/turnstile_ddb/slots.py": (_INTEGRATION + "test_capacity_lock_table_and_slots.py",),
    "functions/turnstile_ddb/idempotency.py": (
        _UNIT + "test_idempotency_store.py",
        _INTEGRATION + "test_idempotency_key.py",
    ),
    "functions/turnstile_ddb/retry.py": (
        _UNIT + "test_retry_policy.py",
        _INTEGRATION + "test_purchase_faults.py",
    ),
    "functions/turnstile_ddb/transact.py": (
        _UNIT + "test_retry_policy.py",
        _INTEGRATION + "test_wallet_retries.py",
        _INTEGRATION + "test_versioned_atomic.py",
    ),
    "functions/service/domain/inventory.py": (
        _UNIT + "test_inventory_api.py",
        _INTEGRATION + "test_inventory_reservations.py",
        _INTEGRATION + "test_inventory_summary.py",
    ),
    "functions/service/domain/inventory_summary.py": (_INTEGRATION + "test_inventory_summary.py",),
}


@dataclass(frozen=True)
class Mutant:
    """One patch file: its number-and-name, the bug it describes, the files it changes."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def number(self) -> str:
        return self.name.split("-", 1)[0]

    @property
    def bug(self) -> str:
        first = self.path.read_text().splitlines()[0]
        return first.lstrip("# ").strip()

    @property
    def files(self) -> list[str]:
        return [
            line.removeprefix("+++ b/")
            for line in self.path.read_text().splitlines()
            if line.startswith("+++ b/")
        ]


def mutants(only: Sequence[str] = ()) -> list[Mutant]:
    """The patches, in number order; ``only``: just these numbers (``07``) or names."""
    found = [Mutant(p) for p in sorted(PATCHES.glob("*.patch"))]
    if only:
        found = [m for m in found if m.number in only or m.name in only]
    return found


def applies(mutant: Mutant, tree: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``git apply --check`` of ``mutant`` against ``tree`` (nothing is written)."""
    return subprocess.run(
        ["git", "apply", "--check", str(mutant.path)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )


def copy_tree(into: Path, *, only: Sequence[str] | None = None) -> Path:
    """A copy of the working tree (or of just the top-level directories ``only``) at ``into``."""
    names = only if only is not None else [p.name for p in ROOT.iterdir()]
    for name in names:
        source = ROOT / name
        if name in _SKIPPED or not source.exists():
            continue
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns(*_SKIPPED))
        else:
            shutil.copy2(source, into / name)
    return into


@contextmanager
def mutated(mutant: Mutant) -> Iterator[Path]:
    """A temporary copy of the tree with ``mutant`` applied; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.number}-") as scratch:
        tree = copy_tree(Path(scratch))
        for name in _LINKED:
            if (ROOT / name).exists():
                (tree / name).symlink_to((ROOT / name).resolve())
        subprocess.run(["git", "apply", str(mutant.path)], cwd=tree, check=True)
        yield tree


@dataclass(frozen=True)
class Outcome:
    """One layer's verdict on one mutant: ``killed``, ``survived`` or ``error`` (the layer
    could not run: it says nothing about the mutant)."""

    verdict: str
    seconds: float
    detail: str = ""
    output: str = ""


def _run(command: list[str], tree: Path, timeout: float) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'functions'}{os.pathsep}{tree}"}
    env.pop("PYTHONHASHSEED", None)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return -1, "timed out", time.perf_counter() - started
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def _last(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def run_sim(tree: Path, mutant: Mutant, seeds: int) -> Outcome:
    code, output, took = _run(
        [sys.executable, "-m", "sim", "--seeds", str(seeds), "--no-shrink"], tree, 600
    )
    if code == 0:
        return Outcome("survived", took, _last(output), output)
    if code == 1 and "violations" in _last(output):
        return Outcome("killed", took, _last(output), output)
    return Outcome("error", took, _last(output), output)


def run_async(tree: Path, mutant: Mutant, seeds: int) -> Outcome:
    command = [sys.executable, "-m", "sim.drift", "--driver", "async", "--seeds", str(seeds)]
    code, output, took = _run(command, tree, 600)
    if code == 0:
        return Outcome("survived", took, _last(output), output)
    if code == 1 and " 0 violations" not in _last(output):
        return Outcome("killed", took, _last(output), output)
    return Outcome("error", took, _last(output), output)


def run_tests(tree: Path, mutant: Mutant) -> Outcome:
    files = sorted({f for changed in mutant.files for f in TESTS.get(changed, ())})
    if not files:
        return Outcome("error", 0.0, "no test files mapped for " + ", ".join(mutant.files))
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files]
    code, output, took = _run(command, tree, 1800)
    if code == 0:
        return Outcome("survived", took, _last(output), output)
    # A test that fails kills; a fixture that errors (DynamoDB Local missing, say) does not.
    if code == 1 and " failed" in _last(output):
        return Outcome("killed", took, _last(output), output)
    return Outcome("error", took, _last(output), output)


def run_chaos(tree: Path, mutant: Mutant, seconds: int) -> Outcome:
    command = [sys.executable, "-m", "chaos", "--seconds", str(seconds)]
    code, output, took = _run(command, tree, seconds * 4 + 600)
    if code == 0:
        return Outcome("survived", took, _last(output), output)
    # Exit 1 is also Python's for an uncaught exception: that is the run failing, not a checker.
    if code == 1 and "Traceback (most recent call last)" not in output:
        return Outcome("killed", took, _violations(output), output)
    return Outcome("error", took, _last(output), output)


def _violations(output: str) -> str:
    """The line of a chaos report that counts its violations, else its last line."""
    named = [line for line in output.splitlines() if "violations:" in line]
    return named[0][:160] if named else _last(output)


def table(rows: list[tuple[Mutant, dict[str, Outcome]]], layers: Sequence[str]) -> str:
    """The kill table as markdown: a row per mutant, a column per layer."""
    head = "| mutant | bug | " + " | ".join(layers) + " |"
    rule = "|---|---|" + "---|" * len(layers)
    lines = [head, rule]
    for mutant, outcomes in rows:
        cells = []
        for layer in layers:
            outcome = outcomes.get(layer)
            cells.append("-" if outcome is None else f"{outcome.verdict} ({outcome.seconds:.0f} s)")
        lines.append(f"| {mutant.name} | {mutant.bug} | " + " | ".join(cells) + " |")
    killed = {
        layer: sum(1 for _, o in rows if layer in o and o[layer].verdict == "killed")
        for layer in layers
    }
    any_layer = sum(1 for _, o in rows if any(v.verdict == "killed" for v in o.values()))
    lines.append("")
    lines.append(
        "killed: "
        + ", ".join(f"{layer} {killed[layer]}/{len(rows)}" for layer in layers)
        + f"; by any layer {any_layer}/{len(rows)}"
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.mutants", description=__doc__)
    parser.add_argument(
        "--layers", default="sim,async,tests", help="comma-separated: sim,async,tests,chaos"
    )
    parser.add_argument("--only", action="append", default=[], help="a mutant's number or name")
    parser.add_argument("--seeds", type=int, default=SIM_SEEDS, help="sim: seeds per mutant")
    parser.add_argument("--chaos-seconds", type=int, default=CHAOS_SECONDS)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the table is written")
    args = parser.parse_args(argv)
    layers = [layer for layer in args.layers.split(",") if layer]
    unknown = set(layers) - set(LAYERS)
    if unknown:
        parser.error(f"unknown layers: {', '.join(sorted(unknown))} (known: {', '.join(LAYERS)})")
    chosen = mutants(args.only)
    if not chosen:
        parser.error("no mutant matches --only")
    rows: list[tuple[Mutant, dict[str, Outcome]]] = []
    for mutant in chosen:
        refused = applies(mutant)
        if refused.returncode != 0:
            print(f"{mutant.name}: does not apply: {refused.stderr.strip()}", file=sys.stderr)
            rows.append(
                (mutant, {layer: Outcome("error", 0.0, "does not apply") for layer in layers})
            )
            continue
        outcomes: dict[str, Outcome] = {}
        with mutated(mutant) as tree:
            for layer in layers:
                if layer == "sim":
                    outcomes[layer] = run_sim(tree, mutant, args.seeds)
                elif layer == "async":
                    outcomes[layer] = run_async(tree, mutant, args.seeds)
                elif layer == "tests":
                    outcomes[layer] = run_tests(tree, mutant)
                else:
                    outcomes[layer] = run_chaos(tree, mutant, args.chaos_seconds)
                outcome = outcomes[layer]
                logs = args.out.parent / "mutants"
                logs.mkdir(parents=True, exist_ok=True)
                (logs / f"{mutant.name}-{layer}.log").write_text(outcome.output)
                print(
                    f"{mutant.name} {layer}: {outcome.verdict} in {outcome.seconds:.1f} s"
                    f" ({outcome.detail})",
                    file=sys.stderr,
                    flush=True,
                )
        rows.append((mutant, outcomes))
    text = table(rows, layers)
    sys.stdout.write(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("# Mutant kill table\n\nWritten by `python -m sim.mutants`.\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
