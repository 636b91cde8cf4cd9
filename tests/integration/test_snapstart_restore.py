"""SnapStart: environments restored from one snapshot are distinct (against DynamoDB Local).

Given a function initialized once (its module imported, a client even built during init), when two
processes are forked from it, each first put back into the memory state of the snapshot (the
``random`` generator as it was at init: CPython reseeds it at ``fork``, a SnapStart restore does
not) and then run the after-restore hooks as Lambda's runtime does, then each draws its ids and
both race for one lease: the ids differ, each builds its own client, exactly one holds the lease,
and the other cannot act as its holder (renew it) either.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from typing import Any

import pytest

from service import config, runtime, snapstart
from turnstile_ddb import lease, transact

pytestmark = [
    pytest.mark.integration,
    # the session's DynamoDB Local has reader threads; the children only use their own client
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]


def _restored_environment(snapshot: Any, go: int, out: int, table: str, resource: str) -> None:
    """One restored environment (runs in a forked child, reports one JSON line on ``out``)."""
    random.setstate(snapshot["random"])  # memory as in the snapshot
    snapstart.restored()
    client = runtime.dynamodb.get()
    owner = f"top-up/{uuid.uuid4().hex}"  # how a wallet top-up names its lease owner
    report: dict[str, Any] = {
        "random": random.random(),
        "token": transact.new_token(),
        "owner": owner,
        "client_rebuilt": client is not snapshot["client"],
        "init_owner": snapshot["init_owner"],
    }
    leases = lease.Leases(client=client, table=table)
    os.read(go, 1)  # both restored environments start the race together
    try:
        held = leases.acquire(resource, owner, 60_000)
        report["acquired"] = True
    except lease.Held as taken:
        report["acquired"] = False
        # the current lease's fence, with this environment's own owner id
        held = lease.Lease(
            resource=resource,
            owner=owner,
            fence=taken.fence,
            expires_at_ms=taken.expires_at_ms,
            acquired_at=0,
        )
    try:
        leases.renew(held, 60_000)  # acting as the holder: only the real one may
        report["renewed"] = True
    except lease.LeaseLost:
        report["renewed"] = False
    os.write(out, (json.dumps(report) + "\n").encode())


def _fork(snapshot: Any, go: int, table: str, resource: str) -> tuple[int, int]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        status = 0
        try:
            os.close(read_end)
            _restored_environment(snapshot, go, write_end, table, resource)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
            os.write(write_end, (json.dumps({"error": repr(exc)}) + "\n").encode())
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    return pid, read_end


def test_two_restores_from_one_snapshot_draw_different_ids_and_never_share_a_lease(
    dynamodb_local: Any, tables: config.Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given one initialized environment, with a client built during init (the worst case)
    for key, value in dynamodb_local.environment().items():
        monkeypatch.setenv(key, value)
    runtime.Lazy.reset_all()
    import service.handlers.locks  # noqa: F401 - the function's init

    snapshot = {
        "random": random.getstate(),
        "client": runtime.dynamodb.get(),
        "init_owner": f"top-up/{uuid.uuid4().hex}",  # the mistake: an id made at init
    }
    table, resource = tables[config.LEASES], f"snapstart-{uuid.uuid4().hex[:12]}"
    go_read, go_write = os.pipe()

    # When two environments are restored from it and race for one lease
    children = [_fork(snapshot, go_read, table, resource) for _ in range(2)]
    os.write(go_write, b"go")
    reports = []
    for pid, pipe in children:
        with os.fdopen(pipe) as lines:
            reports.append(json.loads(lines.readline()))
        _, status = os.waitpid(pid, 0)
        assert status == 0, reports[-1]
    runtime.Lazy.reset_all()
    first, second = reports

    # Then their ids differ, though an id made at init would have been the same in both
    assert first["init_owner"] == second["init_owner"]
    assert first["random"] != second["random"]
    assert first["token"] != second["token"]
    assert first["owner"] != second["owner"]
    assert first["client_rebuilt"] and second["client_rebuilt"]
    # and exactly one of them holds the lease: the other can neither take nor renew it
    assert sorted(r["acquired"] for r in reports) == [False, True]
    assert sorted(r["renewed"] for r in reports) == [False, True]
    winner = next(r for r in reports if r["acquired"])
    assert winner["renewed"]
    item = runtime.dynamodb.get().get_item(
        TableName=table, Key={"resource": {"S": resource}}, ConsistentRead=True
    )["Item"]
    assert item["owner"]["S"] == winner["owner"]


def test_the_hooks_are_registered_at_import_and_run_in_order() -> None:
    # Given the function modules' imports (runtime registers its hook through service.snapstart)
    registered = [hook for hook, _, _ in snapstart.hooks()]
    # Then the generator is reseeded and the lazily built clients are forgotten on restore
    assert snapstart.reseed_random in registered
    assert runtime.Lazy.reset_all in registered
    state = random.getstate()
    snapstart.restored()
    assert random.getstate() != state
