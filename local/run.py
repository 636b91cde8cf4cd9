"""``make local``: DynamoDB Local, the tables of the synthesized template, the API on port 3000.

    python -m local.run [--port 3000] [--dynamodb-port 8000] [--data-dir DIR] [--no-synth]

Ctrl-C (or SIGTERM) stops everything it started, DynamoDB Local's JVM included.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))

from werkzeug.serving import BaseWSGIServer  # noqa: E402

from local import bridge, pump, template  # noqa: E402
from local.dynamodb_local import DynamoDBLocal  # noqa: E402


@dataclass
class LocalStack:
    """Everything ``make local`` runs, startable from tests too."""

    dynamodb: DynamoDBLocal
    server: BaseWSGIServer
    url: str
    pumps: list[pump.StreamPump]


def prepare_environment(db: DynamoDBLocal, loaded: dict[str, Any]) -> dict[str, str]:
    """Create the template's tables and put what the handlers need into ``os.environ``."""
    names = template.create_tables(db.client(), loaded)
    environment = {
        **db.environment(),
        **template.merged_environment(template.function_environments(loaded, names)),
    }
    os.environ.update(environment)
    return environment


def start_pumps(
    db: DynamoDBLocal, loaded: dict[str, Any], stop: threading.Event
) -> list[pump.StreamPump]:
    """One pump thread per event source mapping in the template."""
    names = {logical: logical for logical in template.resources(loaded, "AWS::DynamoDB::Table")}
    streams = db.streams_client()
    pumps = []
    for spec in pump.mapping_specs(loaded, names):
        stream_pump = pump.StreamPump(
            dynamodb=db.client(),
            streams=streams,
            table=spec.table,
            handler=spec.load_handler(),
            batch_size=spec.batch_size,
            retry_attempts=spec.retry_attempts,
            function_name=spec.function_name,
        )
        thread = threading.Thread(
            target=stream_pump.run, args=(stop,), name=f"pump-{spec.table}", daemon=True
        )
        thread.start()
        bridge.log.info("stream pump     %s -> %s", spec.table, spec.handler)
        pumps.append(stream_pump)
    return pumps


@contextmanager
def running(
    *,
    port: int = 3000,
    dynamodb_port: int = 0,
    data_dir: str | None = None,
    template_path: Path = template.TEMPLATE,
    host: str = "127.0.0.1",
) -> Iterator[LocalStack]:
    db = DynamoDBLocal(port=dynamodb_port, data_dir=data_dir).start()
    stop = threading.Event()
    try:
        loaded = template.load(template_path)
        prepare_environment(db, loaded)
        pumps = start_pumps(db, loaded, stop)
        server = bridge.serve(bridge.Bridge(), host, port)
        stack = LocalStack(db, server, f"http://{host}:{server.server_port}", pumps)
        try:
            yield stack
        finally:
            server.shutdown()
    finally:
        stop.set()
        db.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "3000")))
    parser.add_argument(
        "--dynamodb-port", type=int, default=int(os.environ.get("DYNAMODB_PORT", "8000"))
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("DATA_DIR") or None,
        help="persist here (default: in memory)",
    )
    parser.add_argument("--no-synth", action="store_true", help="reuse cdk.out/ as it is")
    args = parser.parse_args(argv)

    bridge.configure_logging()
    log = bridge.log
    if not args.no_synth or not template.TEMPLATE.exists():
        log.info("synthesizing the stack (python app.py)...")
        template.synthesize()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    with running(port=args.port, dynamodb_port=args.dynamodb_port, data_dir=args.data_dir) as stack:
        log.info("DynamoDB Local  %s (%s)", stack.dynamodb.endpoint, args.data_dir or "in memory")
        log.info(
            "API             %s   (OpenAPI: %s/openapi.json, Swagger UI: %s/swagger)",
            stack.url,
            stack.url,
            stack.url,
        )
        log.info("Ctrl-C stops everything")
        stop.wait()
        log.info("stopping...")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
