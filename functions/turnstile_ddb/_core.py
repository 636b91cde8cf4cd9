"""The protocol core: each primitive's decisions written once, without I/O, and two drivers.

A primitive's protocol is a generator. It never sends a request, sleeps or reads a clock: it
*yields* an effect saying what it needs, and whoever drives it performs the effect and sends the
answer back in (or throws the SDK's exception in, at the ``yield``, so the protocol's own
``try/except ClientError`` reads exactly as it did when it called boto3 itself). Protocols
compose with ``yield from``: ``versioned.update_versioned`` runs ``transact``'s protocol, which
runs ``retry``'s. The effects:

* :class:`Call`: one DynamoDB request (``operation`` is the client's method name);
* :class:`Gather`: independent requests, answered in order, each a response or an exception;
* :class:`Sleep`: wait ``seconds`` with the sleep the caller injected (``Backoff.sleep``);
* :class:`Now`: read the clock the caller injected (``Backoff.clock``);
* :class:`Invoke`: run an operation the caller supplied (``retry.call``'s argument).

:func:`run` drives a protocol with a boto3 client (requests in order, the injected sleep), and
:func:`run_async` with an aiobotocore client (a :class:`Gather` concurrently, ``asyncio.sleep``
unless another sleep was injected). The drivers decide nothing; metrics are counted inside the
protocols (counting is not I/O), so both front doors count the same.

Why generators and not generated code. The alternative is to write the async code and generate
the sync code from it by rewriting ``await``/``async`` away (unasync, as httpcore does): two
copies on disk, kept equal by a build step, and a protocol's logic still interleaved with its
I/O. The sans-I/O libraries (h11, h2, wsproto) go further: a state machine fed bytes, which
suits a wire protocol whose events arrive unasked, but a DynamoDB primitive is a short
request/answer dialogue, which a generator states directly, top to bottom, as ordinary code.
The decisions exist once, the drivers are a few lines each, and the simulator can drive either.

Writing a protocol (the pattern each primitive follows)::

    def decrement_protocol(*, table, key, attr, amount, backoff, ...) -> Steps[Item]:
        ...build the request (pure)...
        try:
            response = yield from retry.retrying(Call("update_item", params), backoff=..., ...)
        except ClientError as exc:
            ...decide what the refusal means, raise the library's error...
        return codec.new_item(response)

    # versioned.py: the sync front door, made from the protocol (see driven)
    decrement = _contract.write(_core.driven(decrement_protocol))

    # aio/versioned.py: the async one, made from the same protocol (see awaited)
    decrement = _contract.write_async(_core.awaited(versioned.decrement_protocol))

A class whose methods run protocols (``aio.lease.Leases``) makes each async method from the sync
one and its protocol (see awaited_method): ``renew = awaited_method(sync.Leases.renew, ...)``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeAlias, TypeVar, cast

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
P = ParamSpec("P")


@dataclass(frozen=True)
class Call:
    """One DynamoDB request: the client's method ``operation`` with keyword ``params``."""

    operation: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Gather:
    """Independent requests; the answer is a list in the same order, each item the response or
    the exception that call raised (an ``Exception``; anything else propagates)."""

    calls: tuple[Call, ...]


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` with ``sleep`` (the caller's injected sleep; ``time.sleep`` by default)."""

    seconds: float
    sleep: Callable[[float], object]


@dataclass(frozen=True)
class Now:
    """Read ``clock`` (the caller's injected clock); the answer is its float."""

    clock: Callable[[], float]


@dataclass(frozen=True)
class Invoke:
    """Run ``operation()``, an operation the caller supplied; the sync driver calls it, the async
    driver awaits what it returns."""

    operation: Callable[[], Any]


Effect: TypeAlias = Call | Gather | Sleep | Now | Invoke
Steps: TypeAlias = Generator[Effect, Any, T]


class AsyncDynamoDBClient(Protocol):
    """What :func:`run_async` needs of an aiobotocore DynamoDB client: its operations, awaited
    (``await client.update_item(...)``). Only those a protocol names are looked up."""

    def __getattr__(self, operation: str) -> Callable[..., Awaitable[Any]]: ...


def send(operation: str, **params: Any) -> Steps[Any]:
    """One request (as ``yield from send("get_item", TableName=...)``); its response."""
    return (yield Call(operation, params))


def run(client: Any, protocol: Steps[T]) -> T:
    """Drive ``protocol`` with a boto3 ``client``: each request in order, sleeps and clocks as
    injected. Its return value is the protocol's; what it raises, the protocol raised."""
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            effect = protocol.send(answer) if failure is None else protocol.throw(failure)
        except StopIteration as stop:
            value: T = stop.value
            return value
        answer, failure = None, None
        try:
            answer = _perform(client, effect)
        except BaseException as exc:  # noqa: BLE001 - thrown into the protocol, which decides
            failure = exc


def _perform(client: Any, effect: Effect) -> Any:
    if isinstance(effect, Call):
        return getattr(client, effect.operation)(**effect.params)
    if isinstance(effect, Gather):
        answers: list[Any] = []
        for call in effect.calls:
            try:
                answers.append(getattr(client, call.operation)(**call.params))
            except Exception as exc:  # noqa: BLE001 - an answer like any other
                answers.append(exc)
        return answers
    if isinstance(effect, Sleep):
        return effect.sleep(effect.seconds)
    if isinstance(effect, Now):
        return effect.clock()
    return effect.operation()


async def run_async(client: Any, protocol: Steps[T]) -> T:
    """Drive ``protocol`` with an aiobotocore ``client``: a :class:`Gather`'s requests at once;
    ``time.sleep`` (the default ``Backoff.sleep``) becomes ``asyncio.sleep``, an injected sleep
    is called and awaited if it returns an awaitable."""
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            effect = protocol.send(answer) if failure is None else protocol.throw(failure)
        except StopIteration as stop:
            value: T = stop.value
            return value
        answer, failure = None, None
        try:
            answer = await _perform_async(client, effect)
        except BaseException as exc:  # noqa: BLE001 - thrown into the protocol (cancelling too)
            failure = exc


async def _perform_async(client: Any, effect: Effect) -> Any:
    if isinstance(effect, Call):
        return await getattr(client, effect.operation)(**effect.params)
    if isinstance(effect, Gather):
        calls = [getattr(client, call.operation)(**call.params) for call in effect.calls]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, Exception):
                raise answer
        return answers
    if isinstance(effect, Sleep):
        if effect.sleep is time.sleep:
            return await asyncio.sleep(effect.seconds)
        return await _maybe_await(effect.sleep(effect.seconds))
    if isinstance(effect, Now):
        return effect.clock()
    return await _maybe_await(effect.operation())


class Driven(Protocol[P, T_co]):
    """The type of a front door :func:`driven` built: ``client`` (by position or by name), then
    the protocol's own parameters."""

    def __call__(self, client: DynamoDBClient, *args: P.args, **kwargs: P.kwargs) -> T_co: ...


def driven(protocol: Callable[P, Steps[T]]) -> Driven[P, T]:
    """The sync front door of a primitive: ``front(client, ...)`` is ``run(client,
    protocol(...))``. Its name is the protocol's without ``_protocol``, its parameters ``client``
    and the protocol's, its doc the protocol's (which describes the primitive, not its steps)."""

    def front(*args: Any, **kwargs: Any) -> Any:
        client, rest = (kwargs.pop("client"), args) if "client" in kwargs else (args[0], args[1:])
        return run(client, protocol(*rest, **kwargs))

    return cast(
        Driven[P, T],
        _front(front, protocol, "DynamoDBClient", protocol.__doc__, protocol.__module__),
    )


def _front(
    front: Any, protocol: Callable[..., Any], client: str, doc: str | None, module: str
) -> Any:
    """``front`` named, signed and documented as the front door of ``protocol``."""
    name = protocol.__name__.removesuffix("_protocol")
    signature = inspect.signature(protocol)
    answer = re.sub(r"^(?:_core\.)?Steps\[(.*)\]$", r"\1", str(signature.return_annotation))
    first = inspect.Parameter("client", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=client)
    front.__signature__ = signature.replace(
        parameters=[first, *signature.parameters.values()], return_annotation=answer
    )
    front.__name__ = front.__qualname__ = name
    front.__module__ = module
    front.__doc__ = doc or f":func:`{protocol.__module__}.{name}`, awaited."
    return front


def awaited(
    protocol: Callable[P, Steps[T]], module: str = __name__
) -> Callable[Concatenate[AsyncDynamoDBClient, P], Coroutine[Any, Any, T]]:
    """The async front door of a primitive whose sync one is ``run(client, protocol(...))``:
    ``await front(client, ...)`` drives ``protocol(...)`` with :func:`run_async`. Its name is
    the protocol's without ``_protocol``, its parameters ``client`` and the protocol's (so they
    are the sync front door's, which the parity test holds), its doc a line naming the twin,
    its ``__module__`` ``module`` (the module that shows it, when given)."""

    async def front(*args: Any, **kwargs: Any) -> Any:
        client, rest = (kwargs.pop("client"), args) if "client" in kwargs else (args[0], args[1:])
        return await run_async(client, protocol(*rest, **kwargs))

    built = _front(front, protocol, "_core.AsyncDynamoDBClient", None, module)
    return cast(Callable[Concatenate[AsyncDynamoDBClient, P], Coroutine[Any, Any, T]], built)


def awaited_method(
    method: Callable[Concatenate[Any, P], T], protocol: Callable[..., Steps[T]]
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """The async twin of a sync class front door's ``method`` (``run(self.client,
    protocol(self, ...))``, the arguments in the method's order): its parameters, name and
    qualified name are the method's, its doc a line naming it; it drives ``protocol`` with
    :func:`run_async` on the twin's ``client``, given the sync object of the same settings that
    the twin's ``_config()`` makes. Its module is the one it is built in (as ``namedtuple``'s)."""
    signature = inspect.signature(method)

    async def twin(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self._config(), *args, **kwargs)
        bound.apply_defaults()
        return await run_async(self.client, protocol(*bound.arguments.values()))

    setattr(twin, "__signature__", signature)  # noqa: B010 - mypy knows no __signature__
    twin.__name__, twin.__qualname__ = method.__name__, method.__qualname__
    twin.__module__ = sys._getframe(1).f_globals["__name__"]
    twin.__doc__ = f":meth:`{method.__module__}.{method.__qualname__}`, awaited."
    return twin


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
