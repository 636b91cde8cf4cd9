"""``make local``: DynamoDB Local, the tables of the synthesized template, the API on port 3000,
and the identity provider with the template's user pool (``.local/<PORT>/auth.json`` says where).
Every route but the documentation needs an ID token of that pool, verified by the bridge as API
Gateway's Cognito authorizer would (``make token USER=alice [ADMIN=1]`` prints one).

    python -m local.run [--port 3000] [--dynamodb-port 8000] [--identity-port 8100]
                        [--data-dir DIR] [--no-synth | --force-synth] [--no-watch]
                        [--workers shared|pool] [--pool-size N]

The synth (``local.synth``) is skipped when nothing it reads changed since the last one. While it
runs, a change saved under ``functions/`` is rebuilt by the same synth and the functions whose
asset changed are restarted, the tables, their data and the users kept (``local.watch``).

Ctrl-C (or SIGTERM) stops everything it started, DynamoDB Local's JVM included.

Before anything else it checks that its three ports are free (``local.preflight``) and stops
within a second, naming what holds a busy one. Its files (``auth.json``, ``outputs.json``) live in
``.local/<PORT>/``, are written only once every server is bound, and are removed when it stops:
another stack's files are never touched. Each start-up step is logged as it starts and with its
duration when it ends.

Every function runs as deployed (``local.workers``): from its synthesized asset in ``cdk.out`` and
the dependency layer (``infra.layer``), in a clean interpreter of its own with the template's
environment, and every DynamoDB call it makes is checked against its role's policy as synthesized
(``local.iam``): a call the role does not allow fails with AccessDeniedException, as on AWS.

With ``TURNSTILE_CAPACITY_SCALE`` set, DynamoDB's per-partition-key limits apply to the functions'
calls (``local.capacity_model``): their DynamoDB endpoint is then a proxy in front of DynamoDB Local
(``local.dynamo_proxy``) that answers a request over its keys' limits as AWS does.

Contention is visible while it runs: every invocation writes its EMF metrics to this log (the same
lines Lambda writes to CloudWatch), and every :data:`SUMMARY_SECONDS` in which something was
counted, one ``contention:`` line gives the running totals per pattern (``metrics.tally``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))

from werkzeug.serving import BaseWSGIServer  # noqa: E402

from infra import outputs  # noqa: E402
from local import bridge, capacity_model, preflight, pump, synth, template, watch, workers  # noqa: E402
from local.dynamo_proxy import DynamoProxy  # noqa: E402
from local.dynamodb_local import CREDENTIALS, DynamoDBLocal  # noqa: E402
from local.identity import AuthConfig, IdentityProvider  # noqa: E402
from local.identity import auth_file as auth_file_of  # noqa: E402
from service import observability  # noqa: E402
from turnstile_ddb import metrics  # noqa: E402

T = TypeVar("T")

SUMMARY_SECONDS = 10.0
DEFAULT_PORT = 3000
DEFAULT_WORKERS = workers.SHARED  # make local's: docs/operations.md says why


def outputs_file(port: int) -> Path:
    """The outputs (a deployed stack's keys, ``infra.outputs``) of the stack on ``port``."""
    return preflight.state_dir(port) / "outputs.json"


def worker_dir(port: int) -> Path:
    """Where the stack on ``port`` writes its workers' configuration files (each holds a
    function's role policy): its own state folder, not the system's temporary one. Emptied when
    the stack starts (what a killed stack left: the port being free, no stack owns them) and
    removed when it stops (``running(worker_dir=...)``)."""
    return preflight.state_dir(port) / "workers"


def library_exports(dynamodb_endpoint: str) -> list[str]:
    """The shell lines that point a program of yours (boto3, so the library; the AWS CLI) at
    this DynamoDB Local: its endpoint, and the dummy credentials and region the stack's tables
    were made under (DynamoDB Local accepts any; ``local.dynamodb_local.CREDENTIALS``)."""
    region = CREDENTIALS["AWS_DEFAULT_REGION"]
    return [
        f"export AWS_ENDPOINT_URL_DYNAMODB={dynamodb_endpoint}",
        f"export AWS_ACCESS_KEY_ID={CREDENTIALS['AWS_ACCESS_KEY_ID']} "
        f"AWS_SECRET_ACCESS_KEY={CREDENTIALS['AWS_SECRET_ACCESS_KEY']} "
        f"AWS_REGION={region} AWS_DEFAULT_REGION={region}",
    ]


def synth_dir(port: int) -> Path:
    """Where the stack on ``port`` re-synthesizes on a save: a folder of its own, so two stacks
    of one checkout never run ``python app.py`` into one folder nor load each other's assets
    (``make synth``'s ``cdk.out/``, which each starts from, is left alone). Removed when the
    stack stops (``running(reload_dir=...)``)."""
    return preflight.state_dir(port) / synth.OUTDIR


def reloader(functions: workers.Workers, port: int, **options: Any) -> watch.Watcher:
    """The watcher (not started) that reloads the stack on ``port`` when a file is saved."""
    return watch.Watcher(functions, outdir=synth_dir(port), **options)


class PortsBusy(RuntimeError):
    """A port the stack needs is taken: nothing was started."""


class Step:
    """A start-up step under way: logged as it starts, a line every ``beat`` seconds while it
    runs (never a long silence), and its duration once :meth:`done`. ``record``: a list that
    gets ``("start", name)`` and ``("done", name)`` appended, in the order they happen (which
    steps overlapped, without reading a clock)."""

    def __init__(
        self, name: str, beat: float = 5.0, record: list[tuple[str, str]] | None = None
    ) -> None:
        self.name, self.record = name, record
        self.started = time.monotonic()
        self._stopped = threading.Event()
        bridge.log.info("%s ...", name)
        if record is not None:
            record.append(("start", name))
        threading.Thread(target=self._beat, args=(beat,), name="step", daemon=True).start()

    def _beat(self, beat: float) -> None:
        while not self._stopped.wait(beat):
            bridge.log.info("    ... %s: %.0f s so far", self.name, time.monotonic() - self.started)

    def stop(self) -> None:
        """No more heartbeat (the step failed: nothing more is said of it)."""
        self._stopped.set()

    def done(self) -> None:
        self.stop()
        if self.record is not None:
            self.record.append(("done", self.name))
        bridge.log.info("%s: done in %.1f s", self.name, time.monotonic() - self.started)


@contextmanager
def step(
    name: str, beat: float = 5.0, record: list[tuple[str, str]] | None = None
) -> Iterator[None]:
    """Run the block as the :class:`Step` ``name``."""
    current = Step(name, beat, record)
    try:
        yield
    except BaseException:
        current.stop()
        raise
    current.done()


def meanwhile(
    pool: ThreadPoolExecutor,
    name: str,
    work: Callable[[], T],
    record: list[tuple[str, str]] | None = None,
) -> Future[T]:
    """Start the :class:`Step` ``name`` now and run ``work`` on ``pool``, while the caller goes
    on with another step; its result (or error) from the future."""
    current = Step(name, record=record)

    def run() -> T:
        try:
            result = work()
        except BaseException:
            current.stop()
            raise
        current.done()
        return result

    return pool.submit(run)


def check_ports(host: str, **ports: int) -> None:
    """Raise :class:`PortsBusy` naming what holds each busy port (0: any free port)."""
    taken = preflight.busy(ports, host)
    if taken:
        raise PortsBusy("\n".join([*taken, preflight.advice(ports)]))


@dataclass
class LocalStack:
    """Everything ``make local`` runs, startable from tests too."""

    dynamodb: DynamoDBLocal
    server: BaseWSGIServer
    url: str
    pumps: list[pump.StreamPump]
    identity: IdentityProvider
    auth: AuthConfig
    functions: workers.Workers


def prepare_environment(
    db: DynamoDBLocal, loaded: dict[str, Any], names: dict[str, str] | None = None
) -> dict[str, str]:
    """Create the template's tables (unless done: ``names``, what ``template.create_tables``
    returned) and put what the handlers need into ``os.environ``."""
    if names is None:
        names = template.create_tables(db.client(), loaded)
    environment = {
        **db.environment(),
        **template.merged_environment(template.function_environments(loaded, names)),
    }
    os.environ.update(environment)
    return environment


@contextmanager
def exported(environment: dict[str, str]) -> Iterator[None]:
    """``environment`` in ``os.environ`` until exit, then as it was; the handlers' lazily built
    clients are forgotten on the way in and out (they read the environment when built)."""
    from service import runtime

    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    runtime.Lazy.reset_all()
    try:
        yield
    finally:
        runtime.Lazy.reset_all()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def capacity_front(
    db: DynamoDBLocal, scale: float, **model_options: Any
) -> tuple[DynamoProxy, capacity_model.CapacityModel]:
    """A started proxy in front of ``db`` enforcing the capacity model at ``scale`` (the
    workers' DynamoDB endpoint: ``proxy.environment(db.environment())``)."""
    describer = db.client()
    model = capacity_model.CapacityModel(
        scale,
        describe=lambda table: describer.describe_table(TableName=table)["Table"],
        **model_options,
    )
    return DynamoProxy(db.endpoint, capacity=model).start(), model


def start_pumps(
    db: DynamoDBLocal,
    loaded: dict[str, Any],
    stop: threading.Event,
    functions: Mapping[str, pump.Handler],
) -> list[pump.StreamPump]:
    """One pump thread per event source mapping in the template, invoking ``functions``."""
    names = {logical: logical for logical in template.resources(loaded, "AWS::DynamoDB::Table")}
    streams = db.streams_client()
    pumps = []
    for spec in pump.mapping_specs(loaded, names):
        stream_pump = pump.StreamPump(
            dynamodb=db.client(),
            streams=streams,
            table=spec.table,
            handler=functions[spec.handler],
            batch_size=spec.batch_size,
            retry_attempts=spec.retry_attempts,
            function_name=spec.function_name,
            filters=spec.filters,
            timeout_seconds=spec.timeout_seconds,
        )
        thread = threading.Thread(
            target=stream_pump.run, args=(stop,), name=f"pump-{spec.table}", daemon=True
        )
        thread.start()
        bridge.log.info("stream pump     %s -> %s", spec.table, spec.handler)
        pumps.append(stream_pump)
    return pumps


def report_contention(stop: threading.Event, interval: float = SUMMARY_SECONDS) -> None:
    """Log the running totals whenever they changed since the last line, until ``stop``."""
    last: dict[tuple[str, str], float] = {}
    while not stop.wait(interval):
        totals = metrics.tally.snapshot()
        if totals != last:
            bridge.log.info("contention: %s", observability.summary(totals))
            last = totals


@contextmanager
def running(
    *,
    port: int = 3000,
    dynamodb_port: int = 0,
    data_dir: str | None = None,
    template_path: Path = template.TEMPLATE,
    host: str = "127.0.0.1",
    identity_port: int = 0,
    auth_file: Path | None = None,
    assembly_dir: Path | None = None,
    outputs_file: Path | None = None,
    reload_dir: Path | None = None,
    worker_mode: str = workers.SHARED,
    pool_size: int = workers.POOL_SIZE,
    worker_dir: Path | None = None,
    steps: list[tuple[str, str]] | None = None,
) -> Iterator[LocalStack]:
    """Start everything; ``auth_file``: where to write the identity provider's ``auth.json``;
    ``assembly_dir``: the cloud assembly holding the functions' assets (default: the template's
    folder). Each function runs from its asset and the layer, its role's policy enforced.
    ``outputs_file``: where to write this stack's outputs as a deployed stack's (infra.outputs).
    ``reload_dir``: where this stack's watcher re-synthesizes (:func:`synth_dir`), removed once
    its workers have stopped.
    ``worker_mode``: ``shared`` (a process per function) or ``pool`` (a process per concurrent
    request, up to ``pool_size`` per function, as Lambda scales): ``local.workers``.
    ``worker_dir``: where the workers' configuration files go (:func:`worker_dir`), emptied first
    and removed once they have stopped (default: the system's temporary folder).
    ``steps``: gets each start-up step's start and end appended, in order (:class:`Step`)."""
    check_ports(host, PORT=port, DYNAMODB_PORT=dynamodb_port, IDENTITY_PORT=identity_port)
    if worker_dir is not None:  # the ports are free: what is there a killed stack left behind
        shutil.rmtree(worker_dir, ignore_errors=True)
    # The JVM boots while the functions' workers start (neither needs the other until a request):
    # the two longest steps overlap.
    db = DynamoDBLocal(port=dynamodb_port, data_dir=data_dir).start(wait=False)
    bridge.log.info("launched DynamoDB Local (a JVM) on %s: it boots meanwhile", db.endpoint)
    identity = IdentityProvider(port=identity_port, host=host)
    stop = threading.Event()
    functions: workers.Workers | None = None
    front: DynamoProxy | None = None
    written: list[Path] = []
    try:
        loaded = template.load(template_path)
        function_environment = db.environment()
        scale = capacity_model.scale_from_env()
        if scale is not None:
            front, model = capacity_front(db, scale)
            function_environment = front.environment(function_environment)
            bridge.log.info(
                "capacity model  %.0f WCU/s, %.0f RCU/s per partition key (functions' calls, "
                "through %s)",
                model.wcu,
                model.rcu,
                front.endpoint,
            )
        # Side by side: the tables (once the JVM answers) and the identity provider on threads,
        # the workers here (a worker dies with the thread that started it: this one lives as
        # long as the stack). Only os.environ waits for all three (no thread reads it meanwhile).
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="start") as pool:

            def create_tables() -> dict[str, str]:
                db.wait_ready()
                return template.create_tables(db.client(), loaded)

            tables = meanwhile(
                pool,
                "waiting for DynamoDB Local, then creating the template's tables",
                create_tables,
                steps,
            )
            provider = meanwhile(
                pool,
                "starting the identity provider",
                lambda: identity.start().provision(loaded),
                steps,
            )
            with step(
                "starting the functions' workers (the tables and the identity provider meanwhile)",
                record=steps,
            ):
                functions = workers.start(
                    loaded,
                    assembly_dir or template_path.parent,
                    function_environment,
                    mode=worker_mode,
                    pool_size=pool_size,
                    config_dir=worker_dir,
                )
            prepare_environment(db, loaded, tables.result())
            auth = provider.result()
        pumps = start_pumps(db, loaded, stop, functions)
        verifier = bridge.CachedVerifier(auth.verifier())  # as the deployed authorizer caches
        server = bridge.serve(bridge.Bridge(verifier=verifier, functions=functions), host, port)
        stack = LocalStack(
            db, server, f"http://{host}:{server.server_port}", pumps, identity, auth, functions
        )
        # Every server is bound: only now is this stack's state written (never before a failure)
        if auth_file is not None:
            auth.write(auth_file)
            written.append(auth_file)
        if outputs_file is not None:
            outputs.write(outputs_file, local_outputs(stack))
            written.append(outputs_file)
        try:
            yield stack
        finally:
            server.shutdown()
    finally:
        for path in written:  # ours alone: a stopped stack leaves no file naming dead servers
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # its folder too, unless something else is there
                path.parent.rmdir()
        stop.set()
        if functions is not None:
            functions.stop()
        # No worker runs from its assets, nor reads its configuration, any more
        for folder in (reload_dir, worker_dir):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
                with contextlib.suppress(OSError):  # its folder too, unless something else is
                    folder.parent.rmdir()
        if front is not None:
            front.stop()
        identity.stop()
        db.stop()


def local_outputs(stack: LocalStack) -> dict[str, str]:
    """What ``.local/<PORT>/outputs.json`` holds: a deployed stack's output keys, for this one."""
    return {
        outputs.API_URL: f"{stack.url}/",  # as API Gateway's stage URL, with its trailing slash
        outputs.USER_POOL_ID: stack.auth.user_pool_id,
        outputs.USER_POOL_CLIENT_ID: stack.auth.client_id,
        outputs.IDENTITY_ENDPOINT: stack.auth.endpoint,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.run",
        description="make local: synthesizes the stack (skipped when nothing it reads changed), "
        "then runs DynamoDB Local with the template's tables, the identity provider with its user "
        "pool, every function in a worker of its own from its synthesized asset, and the API. "
        "Changes saved under functions/ are picked up while it runs. Ctrl-C (or SIGTERM) stops "
        "everything it started. Each option defaults to the environment variable of its name "
        "(PORT, DYNAMODB_PORT, IDENTITY_PORT, DATA_DIR).",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PORT", DEFAULT_PORT)),
        help="the API's port on 127.0.0.1; also names the stack's state folder .local/<PORT>/ "
        "(auth.json, outputs.json) (default: %(default)s)",
    )
    parser.add_argument(
        "--dynamodb-port",
        type=int,
        default=int(os.environ.get("DYNAMODB_PORT", "8000")),
        help="DynamoDB Local's port (default: %(default)s)",
    )
    parser.add_argument(
        "--identity-port",
        type=int,
        default=int(os.environ.get("IDENTITY_PORT", "8100")),
        help="the local identity provider's (Cognito user pool) port (default: %(default)s)",
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("DATA_DIR") or None,
        help="keep DynamoDB Local's data in this folder across runs (default: in memory, gone "
        "when it stops)",
    )
    synthesis = parser.add_mutually_exclusive_group()
    synthesis.add_argument(
        "--no-synth",
        action="store_true",
        help="use cdk.out/ as it is, without checking its inputs (make local: make synth ran "
        "just before); synthesizes only if there is no template",
    )
    synthesis.add_argument(
        "--force-synth",
        action="store_true",
        help="run python app.py even when none of its inputs changed since the last synth "
        "(default: skipped then, local.synth)",
    )
    parser.add_argument(
        "--no-watch",
        action="store_true",
        help="do not pick up changes saved under functions/ while it runs (default: rebuild them "
        "with the synth and restart the functions whose asset changed)",
    )
    parser.add_argument(
        "--workers",
        choices=workers.MODES,
        default=os.environ.get("WORKERS") or DEFAULT_WORKERS,
        help="shared: a process per function; pool: a process per concurrent request, as Lambda",
    )
    parser.add_argument(
        "--pool-size",
        type=int,
        default=int(os.environ.get("POOL_SIZE") or workers.POOL_SIZE),
        help="pool mode: processes per function at most",
    )
    args = parser.parse_args(argv)

    bridge.configure_logging()
    log = bridge.log
    ports = {
        "PORT": args.port,
        "DYNAMODB_PORT": args.dynamodb_port,
        "IDENTITY_PORT": args.identity_port,
    }
    taken = preflight.busy(ports)
    if taken:  # before the synth, before anything: a busy port costs a second, nothing else
        print("\n".join([*taken, preflight.advice(ports)]), file=sys.stderr)
        return 1
    if not args.no_synth or not template.TEMPLATE.exists():
        with step(
            "synthesizing the stack (python app.py; built once, then skipped while no input "
            "changed)"
        ):
            if not synth.synthesize(force=args.force_synth):
                log.info("synth skipped: no input changed since the last one (local.synth)")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    state = auth_file_of(args.port)
    with running(
        port=args.port,
        dynamodb_port=args.dynamodb_port,
        data_dir=args.data_dir,
        identity_port=args.identity_port,
        auth_file=state,
        outputs_file=outputs_file(args.port),
        reload_dir=synth_dir(args.port),
        worker_mode=args.workers,
        pool_size=args.pool_size,
        worker_dir=worker_dir(args.port),
    ) as stack:
        log.info("DynamoDB Local  %s (%s)", stack.dynamodb.endpoint, args.data_dir or "in memory")
        log.info(
            "Identity        %s (local Cognito; public dev signing key; users in memory)\n"
            "%s: %s  token: make token USER=alice [ADMIN=1]%s",
            stack.auth.endpoint,
            state.relative_to(ROOT),
            json.dumps(stack.auth.to_json()),
            "" if args.port == DEFAULT_PORT else f" PORT={args.port}",
        )
        log.info(
            "API             %s   (OpenAPI: %s/openapi.json, Swagger UI: %s/swagger)",
            stack.url,
            stack.url,
            stack.url,
        )
        for handler, worker in stack.functions.items():
            log.info(
                "function        %s <- %s + layer %s (its role's policy enforced; %s)",
                handler,
                worker.function.asset.name,
                ", ".join(str(layer) for layer in worker.layers),
                f"pool of {args.pool_size} processes at most"
                if args.workers == workers.POOL
                else "one process, a thread per request",
            )
        with contextlib.ExitStack() as watching:
            if args.workers == workers.POOL and not args.no_watch:
                # A reload swaps one process per function (Worker.replace); a pool has several.
                log.info(
                    "Edits           not picked up in pool mode: restart make local to load them"
                )
            elif not args.no_watch:
                watching.callback(reloader(stack.functions, args.port).start().stop)
                synth_seconds = synth.last_seconds()
                log.info(
                    "Edits           saved under functions/ are picked up (WATCH=0: not): the "
                    "synth rebuilds the asset (%s) and the functions whose asset changed restart "
                    "(as 'starting the functions' workers' above), tables, data and users kept; "
                    "each reload logs its time from the save",
                    "unknown" if synth_seconds is None else f"{synth_seconds:.0f} s last time here",
                )
            token = "make token USER=alice [ADMIN=1]" + (
                "" if args.port == DEFAULT_PORT else f" PORT={args.port}"
            )
            # Printed as they are (no log prefix): lines to paste into another shell
            print(
                "\nA program of yours (the library, boto3, the AWS CLI) on this DynamoDB Local:\n"
                + "".join(f"    {line}\n" for line in library_exports(stack.dynamodb.endpoint))
                + f"A token of this stack's identity provider, for the API:\n    {token}\n",
                flush=True,
            )
            log.info("Ctrl-C stops everything")
            threading.Thread(target=report_contention, args=(stop,), daemon=True).start()
            stop.wait()
            log.info("stopping...")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
