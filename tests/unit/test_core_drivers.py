"""The protocol core's two drivers (turnstile_ddb._core): they perform each effect a protocol
yields and nothing else, throw a call's exception back in where the protocol can catch it, and
answer a Gather in order (the async one with its requests in flight together)."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

import pytest

from turnstile_ddb import _core


class Recording:
    """A boto3-like client that answers each operation with its params (``fail``: raises)."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail or {}

    def __getattr__(self, operation: str) -> Any:
        def call(**params: Any) -> Any:
            self.calls.append((operation, params))
            if operation in self.fail:
                raise self.fail[operation]
            return {"op": operation, **params}

        return call


class AsyncRecording(Recording):
    """The same, awaited; each call waits ``delay`` and notes how many were in flight."""

    def __init__(self, fail: dict[str, Exception] | None = None, delay: float = 0.0) -> None:
        super().__init__(fail)
        self.delay = delay
        self.in_flight = 0
        self.most_in_flight = 0

    def __getattr__(self, operation: str) -> Any:
        answer = super().__getattr__(operation)

        async def call(**params: Any) -> Any:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.delay)
                return answer(**params)
            finally:
                self.in_flight -= 1

        return call


def dialogue(slept: list[float]) -> _core.Steps[list[Any]]:
    """A protocol touching every effect: a call, a failing call caught, a gather, a sleep, a
    clock read and an operation of the caller's."""
    seen: list[Any] = [(yield from _core.send("get_item", Key=1))]
    try:
        yield _core.Call("update_item", {"Key": 2})
    except KeyError as exc:
        seen.append(f"caught {exc}")
    seen.append((yield _core.Gather((_core.Call("a", {"n": 1}), _core.Call("update_item", {})))))
    seen.append((yield _core.Sleep(0.25, slept.append)))
    seen.append((yield _core.Now(lambda: 42.0)))
    seen.append((yield _core.Invoke(lambda: "invoked")))
    return seen


def test_the_sync_driver_performs_each_effect_and_throws_failures_in() -> None:
    # Given a client whose update_item fails
    client = Recording(fail={"update_item": KeyError("refused")})
    slept: list[float] = []
    # When the sync driver runs the dialogue
    seen = _core.run(client, dialogue(slept))
    # Then each answer came back in, the failure was caught inside, the sleep was the injected one
    assert seen[0] == {"op": "get_item", "Key": 1}
    assert seen[1] == "caught 'refused'"
    gathered = seen[2]
    assert gathered[0] == {"op": "a", "n": 1} and isinstance(gathered[1], KeyError)
    assert seen[3:] == [None, 42.0, "invoked"]
    assert slept == [0.25]
    assert [op for op, _ in client.calls] == ["get_item", "update_item", "a", "update_item"]


def test_the_async_driver_gives_the_same_answers_and_gathers_concurrently() -> None:
    # Given the same failing client, awaited, each call taking a little while
    client = AsyncRecording(fail={"update_item": KeyError("refused")}, delay=0.01)
    slept: list[float] = []
    # When the async driver runs the dialogue
    seen = asyncio.run(_core.run_async(client, dialogue(slept)))
    # Then the answers are the sync driver's, and the gather had both requests in flight at once
    assert seen[0] == {"op": "get_item", "Key": 1}
    assert seen[1] == "caught 'refused'"
    assert seen[2][0] == {"op": "a", "n": 1} and isinstance(seen[2][1], KeyError)
    assert seen[3:] == [None, 42.0, "invoked"]
    assert slept == [0.25]
    assert client.most_in_flight == 2


def test_an_uncaught_failure_leaves_both_drivers_as_the_protocol_raised_it() -> None:
    # Given a protocol that does not catch what its call raises
    def bare() -> _core.Steps[Any]:
        return (yield _core.Call("get_item", {}))

    refused = ValueError("no")
    # Then both drivers raise that very exception
    with pytest.raises(ValueError) as sync_raised:
        _core.run(Recording(fail={"get_item": refused}), bare())
    with pytest.raises(ValueError) as async_raised:
        asyncio.run(_core.run_async(AsyncRecording(fail={"get_item": refused}), bare()))
    assert sync_raised.value is refused and async_raised.value is refused


def test_the_async_driver_awaits_an_injected_async_sleep_and_replaces_time_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a coroutine sleep, and time.sleep (Backoff's default)
    awaited: list[float] = []

    async def nap(seconds: float) -> None:
        awaited.append(seconds)

    def napping() -> _core.Steps[None]:
        yield _core.Sleep(0.5, nap)
        yield _core.Sleep(0.0, time.sleep)

    real_sleep = asyncio.sleep
    used: list[float] = []

    async def counting(seconds: float) -> None:
        used.append(seconds)
        await real_sleep(0)

    # When the async driver runs them (asyncio.sleep observed)
    monkeypatch.setattr(asyncio, "sleep", counting)
    asyncio.run(_core.run_async(None, napping()))
    # Then the coroutine was awaited, and time.sleep became asyncio.sleep
    assert awaited == [0.5]
    assert used == [0.0]


def test_cancelling_a_task_runs_the_protocols_cleanup() -> None:
    # Given a protocol with cleanup around a call that never answers
    cleaned: list[str] = []

    def guarded() -> _core.Steps[Any]:
        try:
            return (yield _core.Call("get_item", {}))
        finally:
            cleaned.append("cleaned")

    async def main() -> None:
        task = asyncio.ensure_future(_core.run_async(AsyncRecording(delay=60.0), guarded()))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    # When its task is cancelled mid-call
    asyncio.run(main())
    # Then the protocol's finally ran (the cancellation was thrown into it)
    assert cleaned == ["cleaned"]


def fetched_protocol(table: str, *, key: int, consistent: bool = True) -> _core.Steps[Any]:
    """Read one item of ``table``."""
    return (yield from _core.send("get_item", TableName=table, Key=key, Consistent=consistent))


def test_a_built_sync_front_door_is_the_protocol_driven_with_its_name_doc_and_signature() -> None:
    # Given a sync front door built from a protocol
    fetched = _core.driven(fetched_protocol)

    # Then it is named, documented and signed as a hand-written one would be
    assert (fetched.__name__, fetched.__doc__) == ("fetched", "Read one item of ``table``.")  # type: ignore[attr-defined]
    assert str(inspect.signature(fetched)) == (
        "(client: 'DynamoDBClient', table: 'str', *, key: 'int', consistent: 'bool' = True)"
        " -> 'Any'"
    )
    # and a call, with the client by position or by name, runs the protocol on that client
    client = Recording()
    assert fetched(client, "t", key=1) == fetched(client=client, table="t", key=1)  # type: ignore[arg-type]
    assert client.calls == [("get_item", {"TableName": "t", "Key": 1, "Consistent": True})] * 2


def test_a_built_async_front_door_shows_the_module_it_is_built_in_when_told() -> None:
    # Given async front doors built from a protocol, one told the module that shows it
    told = _core.awaited(fetched_protocol, "turnstile_ddb.aio.somewhere")
    untold = _core.awaited(fetched_protocol)

    # Then the one told says that module, the other its builder's as before
    assert (told.__module__, untold.__module__) == ("turnstile_ddb.aio.somewhere", _core.__name__)
    # and both are named, signed and documented the same, and run the protocol awaited
    assert (told.__name__, told.__doc__) == (untold.__name__, untold.__doc__)
    assert inspect.signature(told) == inspect.signature(untold)
    client = AsyncRecording()
    assert asyncio.run(told(client, "t", key=1)) == {
        "op": "get_item",
        "TableName": "t",
        "Key": 1,
        "Consistent": True,
    }


class _Table:
    """A sync class front door: its method runs ``_protocol`` with ``self``'s settings."""

    def __init__(self, name: str) -> None:
        self.client: Any = None
        self.name = name

    def put(self, key: str, value: int, *, note: str = "") -> dict[str, Any]:
        """Put ``value`` under ``key``."""
        return _core.run(self.client, _protocol(self, key, value, note))


def _protocol(table: _Table, key: str, value: int, note: str) -> _core.Steps[dict[str, Any]]:
    answer = yield _core.Call("put_item", {"TableName": table.name, "Key": key, "N": value})
    return {**answer, "note": note}


class _AsyncTable:
    """Its async twin: the method made from the sync one's signature and protocol."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def _config(self) -> _Table:
        return _Table("t")

    put = _core.awaited_method(_Table.put, _protocol)


def test_an_awaited_method_takes_the_sync_ones_parameters_and_drives_its_protocol() -> None:
    twin = _AsyncTable.put
    assert inspect.signature(twin) == inspect.signature(_Table.put)
    assert (twin.__name__, twin.__qualname__) == ("put", "_Table.put")
    assert twin.__doc__ == f":meth:`{__name__}._Table.put`, awaited."
    client = AsyncRecording()
    by_position = asyncio.run(_AsyncTable(client).put("k", 1))
    by_name = asyncio.run(_AsyncTable(client).put(value=2, key="k", note="n"))
    assert by_position == {"op": "put_item", "TableName": "t", "Key": "k", "N": 1, "note": ""}
    assert (by_name["N"], by_name["note"]) == (2, "n")
