"""The adapter's reaches into Powertools (``service.api.powertools_adapter``) hold for the locked
version: this fails when ``requirements.txt`` moves Powertools, or when what the adapter uses is
gone or changed shape, so the adapter is re-read before such a version ships."""

from __future__ import annotations

import inspect
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route

from service.api import powertools_adapter as adapter

ROOT = Path(__file__).resolve().parents[2]
CHECKED_VERSION = "3.37.0"  # the version the adapter was read against


def locked(package: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    found = re.search(rf"^{re.escape(package)}(\[[^\]]*\])?==([^\s#]+)", text, re.MULTILINE)
    assert found, f"{package} is not pinned in requirements.txt"
    return found.group(2)


def test_the_adapter_was_read_against_the_locked_and_installed_powertools():
    assert locked("aws-lambda-powertools") == CHECKED_VERSION
    assert version("aws-lambda-powertools") == CHECKED_VERSION


def test_the_private_members_the_adapter_uses_still_have_their_shape():
    for name in adapter.PRIVATE_METHODS:
        assert callable(getattr(APIGatewayRestResolver, name, None)), name
    assert list(inspect.signature(APIGatewayRestResolver._resolve).parameters) == ["self"]
    build = inspect.signature(APIGatewayRestResolver._build_response)
    assert list(build.parameters) == ["self", "response_builder"]
    stack = inspect.signature(Route._build_middleware_stack)
    assert list(stack.parameters) == ["self", "router_middlewares", "app"]
    resolver = APIGatewayRestResolver()
    for name in adapter.PRIVATE_ATTRIBUTES:
        assert isinstance(getattr(resolver, name), list), name

    @resolver.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    (route,) = resolver._static_routes + resolver._dynamic_routes
    assert route._middleware_stack_built is False
    adapter.build_stacks(resolver)
    assert route._middleware_stack_built is True


class Probe(adapter.RequestState, APIGatewayRestResolver):
    def __init__(self) -> None:
        adapter.RequestState.__init__(self, "probe")
        APIGatewayRestResolver.__init__(self)

        @self.get("/echo/<value>")
        def echo(value: str) -> dict[str, str]:
            barrier.wait()  # every request is in flight at once
            return {"value": value, "seen": self.current_event.path}


barrier = threading.Barrier(8)


def event(value: str) -> dict[str, object]:
    return {
        "resource": "/echo/{value}",
        "path": f"/echo/{value}",
        "httpMethod": "GET",
        "headers": {},
        "requestContext": {"requestId": value},
    }


def serve(app: Probe, value: str) -> str:
    with app.serving(event(value), None, lambda text: text):
        built = adapter.route(app)
        assert isinstance(built, ResponseBuilder)
        return adapter.build(app, built)["body"]


def test_state_is_per_request_and_gone_after_it():
    # Given one resolver serving 8 requests at the same moment from threads
    app = Probe()
    adapter.build_stacks(app)
    with ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(lambda n: serve(app, f"v{n}"), range(8)))
    # Then each answer saw its own request, and nothing is left behind
    assert bodies == [f'{{"value":"v{n}","seen":"/echo/v{n}"}}' for n in range(8)]
    assert app.current_event is None and app.context == {}
