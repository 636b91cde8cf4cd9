"""A local worker reports each invocation's CPU time and duration beside its answer: what the
memory benchmark (``python -m bench --only memory``) models Lambda's billed duration from."""

from __future__ import annotations

from pathlib import Path

from local import workers

HANDLER = """
import time


def handler(event, context):
    spin = time.thread_time() + event["cpu_s"]
    while time.thread_time() < spin:
        pass
    time.sleep(event["sleep_s"])
    return {"statusCode": 200}
"""


def test_an_invocation_reports_its_cpu_time_and_its_duration(tmp_path: Path):
    # Given a function that burns CPU, then waits (as on DynamoDB) without using any
    asset = tmp_path / "asset"
    asset.mkdir()
    (asset / "timed.py").write_text(HANDLER)
    function = workers.FunctionDef(
        logical_id="Timed",
        handler="timed.handler",
        asset=asset,
        environment={},
        timeout_seconds=10,
        memory_mb=128,
        role="Role",
    )
    worker = workers.Worker(function, [], {}, None).spawn().ready()
    try:
        # When it is invoked
        answer = worker.invoke_answer({"cpu_s": 0.05, "sleep_s": 0.05})
    finally:
        worker.stop()
    # Then the answer says how much CPU the invocation used and how long it took
    assert answer["result"] == {"statusCode": 200}
    cpu, duration = answer["cpu_ms"], answer["duration_ms"]
    print(f"cpu {cpu:.1f} ms, duration {duration:.1f} ms")
    assert 0 < cpu < duration  # it spent CPU, and waited on top of it without spending any
