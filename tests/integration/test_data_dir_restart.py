"""``make local DATA_DIR=...``: DynamoDB Local keeps the tables *and their streams* in the folder,
and a restarted stack's pumps start every shard at its oldest record, so the consumers see again
the records they handled before the restart. This shows what that replay does to the registration
decider: nothing, but count each request it finds decided as ``AlreadyDecided``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local import template as cfn
from local.dynamodb_local import DynamoDBLocal
from local.pump import StreamPump
from service import config, runtime
from service.domain.events import Events
from service.domain.registration_requests import ACCEPTED, REJECTED, RegistrationRequests
from service.handlers import registration_consumer
from tests.helpers import metric_totals, registration_items, table_environment
from turnstile_ddb import metrics, retry

pytestmark = pytest.mark.integration


class Stack:
    """DynamoDB Local on a data folder with the template's tables, the decider wired to it."""

    def __init__(self, folder: Path, template: dict[str, Any], monkeypatch: Any) -> None:
        self.folder, self.template, self.monkeypatch = folder, template, monkeypatch
        self.db: DynamoDBLocal | None = None
        self.tables = config.Tables(cfn.table_names(template))

    def start(self, *, create: bool) -> tuple[Any, Events, RegistrationRequests]:
        self.db = DynamoDBLocal(data_dir=str(self.folder)).start()
        client = self.db.client(config=retry.client_config(read_timeout=60))
        if create:
            cfn.create_tables(client, self.template)
        for key, value in {**self.db.environment(), **table_environment(self.template)}.items():
            self.monkeypatch.setenv(key, value)
        runtime.Lazy.reset_all()
        runtime.dynamodb.set(client)
        events = Events(client=client, table=self.tables[config.EVENTS])
        table = self.tables[config.REGISTRATION_REQUESTS]
        return client, events, RegistrationRequests(client=client, table=table, events=events)

    def drain(self, client: Any) -> int:
        assert self.db is not None
        return StreamPump(
            dynamodb=client,
            streams=self.db.streams_client(),
            table=self.tables[config.REGISTRATION_REQUESTS],
            handler=registration_consumer.handler,
        ).drain(timeout=120)

    def stop(self) -> None:
        if self.db is not None:
            self.db.stop()
        runtime.Lazy.reset_all()


@pytest.fixture
def stack(
    tmp_path: Path, template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    made = Stack(tmp_path / "data", template, monkeypatch)
    yield made
    made.stop()


@pytest.fixture
def tally() -> Iterator[metrics.Tally]:
    with metric_totals() as counted:
        yield counted


def state(
    client: Any, stack: Stack, events: Events, requests: RegistrationRequests, ids: list[str]
) -> Any:
    return (
        events.get("gig"),
        sorted(
            str(sorted(item.items()))
            for item in registration_items(client, stack.tables[config.EVENTS], "gig")
        ),
        [requests.get("gig", each) for each in ids],
    )


def test_a_restart_on_the_same_data_dir_replays_the_stream_and_changes_nothing(stack, tally):
    # Given a stack on a data folder: an event of 2 seats, 3 requests, decided through the stream
    client, events, requests = stack.start(create=True)
    events.create("gig", "Gig", 2)
    ids = [requests.submit("gig", user)["requestId"] for user in ("ann", "bob", "cy")]
    first = stack.drain(client)
    before = state(client, stack, events, requests, ids)
    assert sorted(each["status"] for each in before[2]) == [ACCEPTED, ACCEPTED, REJECTED]
    assert tally.get(registration_consumer.PATTERN, "AlreadyDecided") == 0
    # When the stack stops and starts again on the same folder, with a new pump
    stack.stop()
    client, events, requests = stack.start(create=False)
    replayed = stack.drain(client)
    # Then the stream was kept: every record handled before is delivered again
    print(f"records delivered before the restart: {first}, after it: {replayed}")
    assert replayed == first
    # And the replay changed nothing: each request was found decided and counted so
    assert state(client, stack, events, requests, ids) == before
    assert tally.get(registration_consumer.PATTERN, "AlreadyDecided") == 3
    assert tally.get(registration_consumer.PATTERN, "RequestAccepted") == 2
