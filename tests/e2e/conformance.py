"""The conformance run: schemathesis, every check, against a running stack, as a new user would
point it at ``make local`` and its own ``GET /openapi.json``. Used by the e2e tier (a short,
derandomized run: ``tests/e2e/test_conformance.py``) and by ``make fuzz`` (more examples, a
random seed: ``python -m tests.e2e.conformance``).

Phases: examples, coverage (boundary and negative values of every parameter), fuzzing (positive
and negative data) and stateful (sequences that follow the document's OpenAPI links from create
operations to the operations using their ids). Checks: all of them; the response-time limit (10 s
by default, a timed assertion: on a shared machine it measures the neighbours) is the request
timeout, as speed is measured in ``bench/``; the two expected-status lists of
``schemathesis.toml`` are set as that file explains.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "schemathesis.toml"
PHASES = "examples,coverage,fuzzing,stateful"


@dataclass(frozen=True)
class Outcome:
    returncode: int
    output: str

    @property
    def summary(self) -> str:
        """The report's closing sections (operations, phases, failures, test cases)."""
        start = self.output.rfind(" SUMMARY ")
        return self.output[start:] if start >= 0 else self.output[-3000:]

    @property
    def server_errors(self) -> int:
        return len(re.findall(r"^\[5\d\d\]", self.output, flags=re.MULTILINE))


@dataclass(frozen=True)
class Exchange:
    """One request schemathesis sent and the answer it got (from the run's HAR report)."""

    method: str
    url: str
    headers: dict[str, str]  # the request's, names lower-cased
    status: int
    body: str


def exchanges(report_dir: Path) -> list[Exchange]:
    """Every exchange of the HAR files in ``report_dir`` (``run(..., report_dir=...)``)."""
    found: list[Exchange] = []
    for har in sorted(report_dir.glob("har-*.json")):
        for entry in json.loads(har.read_text(encoding="utf-8"))["log"]["entries"]:
            request, response = entry["request"], entry["response"]
            found.append(
                Exchange(
                    method=request["method"],
                    url=request["url"],
                    headers={h["name"].lower(): h["value"] for h in request.get("headers", [])},
                    status=int(response["status"]),
                    body=str((response.get("content") or {}).get("text") or ""),
                )
            )
    return found


def run(
    base_url: str,
    token: str,
    *,
    max_examples: int,
    seed: int | None,
    workers: int = 1,
    phases: str = PHASES,
    report_dir: Path | None = None,
    timeout: float = 1800,
) -> Outcome:
    """One schemathesis run with ``token`` (a user's or an administrator's ID token)."""
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(CONFIG),
        "--no-color",
        "run",
        f"{base_url}/openapi.json",
        # the document's server is relative ("/"); say where the API is rather than rely on it
        "--url",
        base_url,
        "--checks",
        "all",
        # schemathesis times every response (10 s unless told): no timed assertions here, so its
        # limit is the request timeout itself; latency is bench/'s job
        "--max-response-time",
        "120",
        "--phases",
        phases,
        "--header",
        f"Authorization: Bearer {token}",
        "--max-examples",
        str(max_examples),
        "--workers",
        str(workers),
        "--request-timeout",
        "120",
        "--suppress-health-check",
        "all",
    ]
    command += ["--seed", str(seed), "--generation-deterministic"] if seed is not None else []
    if report_dir is not None:
        # the HAR report keeps every exchange; unsanitized, as schemathesis would otherwise
        # write "[Filtered]" for the Idempotency-Key (a "key") and the local, worthless token
        command += ["--report", "junit,har", "--report-dir", str(report_dir)]
        command += ["--output-sanitize", "false"]
    # schemathesis keeps a crash cache in its working directory: not in the repository
    with tempfile.TemporaryDirectory(prefix="schemathesis-") as workdir:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, cwd=workdir
        )
    return Outcome(done.returncode, done.stdout + done.stderr)


def main(argv: list[str] | None = None) -> int:
    """``make fuzz``: start the local stack (as ``make local`` does), run schemathesis with an
    administrator's and a user's token, print both summaries; exit 1 on any failure."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None, help="default: random")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    from local import run as local_run
    from local.issue_token import id_token

    failed = False
    with local_run.running(port=0) as stack:
        for name, admin in (("fuzz-admin", True), ("fuzz-user", False)):
            token = id_token(stack.auth, name, admin=admin)
            outcome = run(
                stack.url,
                token,
                max_examples=args.max_examples,
                seed=args.seed,
                workers=args.workers,
                timeout=6 * 3600,
            )
            print(f"== {name} ({'administrator' if admin else 'user'})")
            print(outcome.summary)
            failed |= outcome.returncode != 0 or outcome.server_errors > 0
    print(json.dumps({"failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
