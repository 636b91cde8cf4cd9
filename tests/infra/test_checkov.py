"""checkov over the synthesized template (the session's synth), every skip justified here.

checkov runs from its own virtualenv (``.venv/checkov``, installed by ``make install`` from
``requirements-checkov.txt``, hashes required; ``make lock`` compiles it from
``requirements-checkov.in``): it pins boto3, packaging and networkx below what the functions and
the tests run with. The test fails when checkov reports a finding not in ``ACCEPTED`` and when an
entry of ``ACCEPTED`` no longer matches any finding (a stale acknowledgement hides the next one).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / ".venv" / "checkov" / "bin" / "checkov"

# check id -> why turnstile accepts it (each reason is the acknowledgement; keep them true)
ACCEPTED: dict[str, str] = {
    "CKV_AWS_27": (
        "The dead-letter queue is encrypted at rest with SQS-managed SSE (SqsManagedSseEnabled, "
        "asserted below); checkov 3.3.30 only recognises a KmsMasterKeyId. A KMS key would add "
        "a key policy for the event source mappings and per-message KMS calls for no gain."
    ),
    "CKV_AWS_115": (
        "No function relies on concurrency limits for correctness: stream consumers stay serial "
        "per shard through their event source mapping (parallelization factor 1), decisions "
        "are conditional writes, and the API is bounded by stage throttling. Reserved concurrency "
        "would also fail a deploy on a new account (unreserved pool below its minimum of 10)."
    ),
    "CKV_AWS_116": (
        "A function dead-letter queue only receives failed asynchronous invocations; the API "
        "functions are invoked synchronously (the client gets the error), and the stream "
        "consumers' failures go to the event source mappings' on-failure SQS queue."
    ),
    "CKV_AWS_117": (
        "Nothing private to reach: the functions call DynamoDB and read Cognito's public JWKS "
        "only, through IAM-authorised public endpoints. A VPC would add NAT or endpoints, ENIs "
        "and cold-start time without narrowing what a function may do (IAM already does)."
    ),
    "CKV_AWS_119": (
        "Tables are encrypted at rest with DynamoDB's default AWS-owned key. A customer-managed "
        "key costs a KMS request per uncached data key and a key to administer; nothing stored "
        "(stock, registrations, leases, wallets of a demo payment provider) asks for it."
    ),
    "CKV_AWS_120": (
        "Every answer must be the current state (stock, versions with ETag, fences, balances) "
        "and most depend on the caller's token: a stage cache would serve stale or another "
        "caller's answers."
    ),
    "CKV_AWS_158": (
        "Log groups are encrypted by CloudWatch Logs by default; the functions log no tokens, "
        "bodies or secrets (Powertools Logger with request ids and outcomes), so a KMS key "
        "would add cost and a key policy for no protected content."
    ),
    "CKV_AWS_173": (
        "Environment variables hold table names and tuning constants only, never secrets; "
        "Lambda encrypts them at rest with its AWS-managed key."
    ),
}


@pytest.fixture(scope="module")
def findings(template: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    assert CHECKOV.exists(), f"{CHECKOV} is missing: `make install` installs it"
    path = tmp_path_factory.mktemp("checkov") / "Turnstile.template.json"
    path.write_text(json.dumps(template))
    done = subprocess.run(
        [
            str(CHECKOV),
            "--quiet",
            "--compact",
            "--framework",
            "cloudformation",
            "-o",
            "json",
            "--skip-download",
            "-f",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: findings
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    failed: list[dict] = []
    for one in reports:
        failed += one.get("results", {}).get("failed_checks", [])
    return failed


def test_checkov_finds_nothing_unacknowledged(findings):
    unexplained = sorted(
        {(f["check_id"], f["resource"], f["check_name"]) for f in findings}
        - {
            (f["check_id"], f["resource"], f["check_name"])
            for f in findings
            if f["check_id"] in ACCEPTED
        }
    )
    assert unexplained == [], "\n".join(map(str, unexplained))


def test_the_dead_letter_queue_is_encrypted_as_the_acknowledgement_says(template):
    queues = [
        r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SQS::Queue"
    ]
    assert queues and all(q.get("SqsManagedSseEnabled") is True for q in queues), queues


def test_every_acknowledgement_is_still_needed_and_explained(findings):
    seen = {f["check_id"] for f in findings}
    for check_id, reason in ACCEPTED.items():
        assert check_id in seen, f"{check_id} no longer fires: drop its acknowledgement"
        assert len(reason) > 40, check_id
