"""The local runtime interface: runs ONE function as Lambda runs it, in a clean interpreter.

Started by ``local.workers`` as ``python -I -S -B bootstrap.py --config <file>``: isolated mode
and no ``site``, so neither the source tree, the dev venv nor the user's site-packages is on
``sys.path``. This script then puts there exactly what Lambda's python3.12 runtime has: the
function's asset (``LAMBDA_TASK_ROOT``, ``/var/task`` on AWS), the layer's ``python/`` folder
(``/opt/python``) and the standard library. The environment is the one the template gives the
function plus what the Lambda runtime sets (the parent builds it).

Before the handler is imported, the function's role policy is enforced on every botocore session
(``iam_guard.py``, loaded from its file: it is not on ``sys.path`` either). Then the handler named
by the template's ``Handler`` is imported (an import error ends the process, as a failed init
does on Lambda) and invocations are served over HTTP on 127.0.0.1:

    POST /invoke  {"event": ..., "context": {"aws_request_id", "timeout_seconds"}}
    -> 200 {"result": ...} | 200 {"errorType", "errorMessage", "stackTrace"} + X-Function-Error

For ``make chaos`` only (the config carries ``"chaos"`` settings), the chaos agent
(``chaos_agent.py``, loaded from its file like the guard) hooks the function's sessions before the
handler is imported, takes each invocation's ``context.chaos`` and answers ``GET /chaos/...``; an
injected crash ends the invocation as a dead runtime's (``Runtime.ExitError``). Without those
settings nothing of it is loaded.

The first line on stdout is ``READY <port>``. Standard library only (``http.server``), like the
runtime interface client it stands in for: nothing of the dev venv may be loaded here. Threaded:
each connection is served by a thread, as many execution environments would serve them.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


class Context:
    """The parts of Lambda's context object a handler may use."""

    def __init__(self, request_id: str, timeout_seconds: float) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.invoked_function_arn = os.environ.get("TURNSTILE_LOCAL_FUNCTION_ARN", "")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.aws_request_id = request_id
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no access log; :meth:`send` answers (also ``local.dynamo_proxy``'s)."""

    protocol_version = "HTTP/1.1"

    def send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # one connection per calling thread, many threads at once


def load_sibling(name: str) -> Any:
    """A module of this folder, loaded from its file (this folder is not on ``sys.path``)."""
    spec = importlib.util.spec_from_file_location(f"_turnstile_{name}", f"{HERE}/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load_guard(config: dict[str, Any]) -> Any:
    module = load_sibling("iam_guard")
    guard = module.Guard(config)
    module.enforce_on_new_sessions(guard)
    return guard


def clean_path(asset: str, layers: list[str]) -> None:
    """The asset, the layers, the standard library: nothing else."""
    stdlib = [p for p in sys.path if p and not p.endswith("site-packages")]
    sys.path[:] = [asset, *layers, *stdlib]


def main() -> int:
    with open(sys.argv[sys.argv.index("--config") + 1]) as file:
        config = json.load(file)
    clean_path(config["asset"], config["layers"])
    if config.get("policy") is not None:
        load_guard(config["policy"])
    chaos: Any = load_sibling("chaos_agent") if config.get("chaos") is not None else None
    agent = chaos.Agent(config["chaos"]) if chaos is not None else None
    if agent is not None:
        agent.install()  # before the handler builds its clients
    module_name, _, function = config["handler"].rpartition(".")
    module = importlib.import_module(module_name)
    handler = getattr(module, function)
    if agent is not None:
        agent.configure(module)
    lock = threading.Lock()

    def call(request: dict[str, Any], context: Context) -> dict[str, Any]:
        if agent is None:
            return {"result": handler(request["event"], context)}
        with agent.invocation(request["context"].get("chaos")) as report:
            try:
                return {"result": handler(request["event"], context), "chaos": report}
            except chaos.Crash as crash:
                return {
                    "errorType": chaos.CRASH_ERROR,
                    "errorMessage": f"injected crash at {crash}",
                    "chaos": report,
                }

    class Invocations(Handler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = json.loads(body)
            context = Context(
                request["context"]["aws_request_id"], request["context"]["timeout_seconds"]
            )
            error = False
            # This invocation's CPU (its thread's: the server gives each request one) and
            # duration, beside the answer: what Lambda bills is modelled from them.
            cpu, started = time.thread_time(), time.perf_counter()
            try:
                answer = call(request, context)
                answer["cpu_ms"] = (time.thread_time() - cpu) * 1000
                answer["duration_ms"] = (time.perf_counter() - started) * 1000
                error = "errorType" in answer
            except Exception as exc:  # noqa: BLE001 (any unhandled error: a function error)
                error = True
                answer = {
                    "errorType": type(exc).__name__,
                    "errorMessage": str(exc),
                    "stackTrace": traceback.format_exception(exc),
                }
                with lock:
                    traceback.print_exc()
            self.answer(answer, error)

        def do_GET(self) -> None:
            found = agent.get(self.path) if agent is not None else None
            if found is None:
                self.send_error(404)
                return
            self.answer(found, False)

        def answer(self, answer: Any, error: bool) -> None:
            headers = {"Content-Type": "application/json"}
            if error:
                headers["X-Function-Error"] = "Unhandled"
            self.send(200, json.dumps(answer, default=str).encode(), headers)

    server = Server(("127.0.0.1", 0), Invocations)
    print(f"READY {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
