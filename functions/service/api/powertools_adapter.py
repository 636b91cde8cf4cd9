"""Every use of Powertools' event handler beyond its public API, in one place.

Why each reach is needed, and what it relies on in the locked version (``requirements.txt``;
``tests/unit/test_powertools_adapter.py`` fails when that version changes any of it):

* **Per-request state.** Powertools keeps the request being served in class attributes
  (``BaseRouter.current_event``, ``BaseRouter.lambda_context``) and one ``context`` dict per
  resolver. Right in Lambda, which serves one request per process at a time; wrong for the local
  bridge and the concurrency tests, which serve many at once from threads. :class:`RequestState`
  keeps them in :mod:`contextvars` instead (each thread, and each task, has its own), as
  properties that shadow the class attributes Powertools reads through ``self``.
* **Resolving without Powertools' ``resolve``.** Its public ``resolve`` writes those class
  attributes, so the resolver runs its two steps itself: :func:`route` (``_resolve``: match the
  route, run middlewares and handlers) and :func:`build` (``_build_response``: the integration
  response).
* **Middleware stacks built once.** Powertools builds each route's middleware stack lazily, on
  the route's first call, and two threads' first calls race. :func:`build_stacks` builds every
  stack up front (``Route._build_middleware_stack``, ``_middleware_stack_built``,
  ``_router_middlewares``, ``_static_routes``, ``_dynamic_routes``), under the caller's lock.

The event itself is wrapped with the public data class (``APIGatewayProxyEvent``), with the
resolver's JSON deserializer, as Powertools' own ``_to_proxy_event`` does for REST events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

# What the locked Powertools must still have for this module to be right (the adapter test).
PRIVATE_METHODS = ("_resolve", "_build_response")
PRIVATE_ROUTE_MEMBERS = ("_build_middleware_stack",)
PRIVATE_ATTRIBUTES = ("_static_routes", "_dynamic_routes", "_router_middlewares")


class RequestState:
    """``current_event``, ``lambda_context`` and ``context`` per request (contextvars), for a
    subclass of ``APIGatewayRestResolver`` that lists this class first."""

    def __init__(self, name: str) -> None:
        self._event: ContextVar[Any] = ContextVar(f"{name}.event", default=None)
        self._lambda_context: ContextVar[Any] = ContextVar(f"{name}.lambda_context", default=None)
        self._context: ContextVar[dict[str, Any] | None] = ContextVar(
            f"{name}.context", default=None
        )
        self._caller: ContextVar[Any] = ContextVar(f"{name}.caller", default=None)

    @property
    def current_event(self) -> Any:
        return self._event.get()

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._event.set(value)

    @property
    def lambda_context(self) -> LambdaContext:
        found: LambdaContext = self._lambda_context.get()
        return found

    @lambda_context.setter
    def lambda_context(self, value: LambdaContext) -> None:
        self._lambda_context.set(value)

    @property
    def context(self) -> dict[str, Any]:
        found = self._context.get()
        if found is None:
            found = {}
            self._context.set(found)
        return found

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._context.set(value)

    @property
    def request_caller(self) -> Any:
        return self._caller.get()

    @request_caller.setter
    def request_caller(self, value: Any) -> None:
        self._caller.set(value)

    @contextmanager
    def serving(
        self, event: dict[str, Any], context: Any, deserializer: Callable[[str], Any]
    ) -> Iterator[None]:
        """The request's state for the duration of the block, then none (as before it)."""
        tokens = (
            self._event.set(APIGatewayProxyEvent(event, deserializer)),
            self._lambda_context.set(context),
            self._context.set({}),
            self._caller.set(None),
        )
        try:
            yield
        finally:
            for var, token in zip(
                (self._event, self._lambda_context, self._context, self._caller),
                tokens,
                strict=True,
            ):
                var.reset(token)


def route(resolver: APIGatewayRestResolver) -> ResponseBuilder:
    """Match the current event's route and run it (middlewares, exception handlers)."""
    return resolver._resolve()


def build(resolver: APIGatewayRestResolver, builder: ResponseBuilder) -> dict[str, Any]:
    """The integration response (REST proxy shape) of ``builder`` for the current event."""
    return resolver._build_response(builder)


def build_stacks(resolver: APIGatewayRestResolver) -> None:
    """Build every route's middleware stack now (the caller holds a lock and does this once)."""
    for registered in resolver._static_routes + resolver._dynamic_routes:
        if not registered._middleware_stack_built:
            registered._build_middleware_stack(resolver._router_middlewares, resolver)
