"""Each function of the synthesized template, run as deployed: its asset, its layer, its role.

One worker process per ``AWS::Lambda::Function`` of the template (``local/sandbox/bootstrap.py``
in a clean interpreter, see there): its code is the function's Code asset in the cloud assembly
(``aws:asset:path`` metadata), its dependencies the layer built from the same pins for this host's
architecture (``infra.layer.layer_dir``), its environment exactly the template's variables plus
what the Lambda runtime sets and what a local run must add (DynamoDB Local's endpoint and
credentials; ``POWERTOOLS_TRACE_DISABLED``, as there is no X-Ray daemon). Its DynamoDB calls are
checked against its role's policy as synthesized (``local.iam``).

A :class:`Worker` is called like a handler (``worker(event, context)``), so the HTTP bridge and
the stream pumps use it in place of an in-process import. An unhandled error in the function
raises :class:`FunctionError` here (API Gateway answers 502, the event source mapping retries);
a function that fails to import raises :class:`InitError` at start, with its output.

Two ways to run a function's concurrent requests (``start(mode=...)``). ``shared``
(:class:`Worker`): one process serves them all, each on a thread, so what Lambda keeps per
execution environment (module globals, caches, lazily built clients) is shared by concurrent
requests here. ``pool`` (:class:`WorkerPool`): as Lambda scales a function, each process serves
one request at a time; when every process is busy the pool starts a new one (a cold start), up
to a cap. Idle processes are reused, most recently used first, and are not reaped (Lambda reaps
idle environments after minutes; a local run keeps its few).

Workers print what the function logs; lines that are CloudWatch EMF documents also feed the
process-wide ``turnstile_ddb.metrics.tally`` here, so ``make local``'s contention summary still sees
what the functions counted.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3

from local import iam
from local import template as cfn
from turnstile_ddb import metrics

SANDBOX = Path(__file__).resolve().parent / "sandbox"
BOOTSTRAP = SANDBOX / "bootstrap.py"
# Where the workers' bytecode goes (``python -X pycache_prefix``): nothing is written into the
# layer (infra.layer: its content is hashed) or the asset (the CDK's), and a prefix makes Python
# read only the cache, so without one every start compiled boto3, botocore and Powertools afresh,
# in every worker. Bytecode only
# saves the compiling: Python checks each file against its source, so what runs is the same.
BYTECODE_CACHE = SANDBOX.parent.parent / "build" / "pycache"
REGION = iam.REGION
ACCOUNT = iam.ACCOUNT

log = logging.getLogger("local.function")


class InitError(RuntimeError):
    """The function could not start (its handler failed to import)."""


class FunctionError(RuntimeError):
    """The function raised: Lambda's ``X-Amz-Function-Error: Unhandled``."""

    def __init__(self, function: str, error_type: str, message: str) -> None:
        super().__init__(f"{function}: {error_type}: {message}")
        self.error_type = error_type


def host_arch() -> str:
    """The layer architecture this machine runs (``arm64`` or ``x86_64``)."""
    from infra import layer

    return layer.host_arch()


def host_layer() -> Path:
    """The layer's content for this host, built if missing."""
    from infra import layer

    layer.build(host_arch(), log=False)  # nothing to do when the stamp matches the lock
    return layer.layer_dir(host_arch()) / "python"


@dataclass(frozen=True)
class FunctionDef:
    """One function of the template, resolved to local paths and names."""

    logical_id: str
    handler: str
    asset: Path
    environment: dict[str, str]
    timeout_seconds: int
    memory_mb: int
    role: str

    @property
    def name(self) -> str:
        return self.logical_id  # the local physical name, as tables are named by logical id

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.name}"


def asset_paths(assembly_dir: Path) -> dict[str, Path]:
    """S3 object key -> the staged asset's folder, from the cloud assembly's asset manifests
    (the files ``cdk deploy`` uploads: the template's ``Code.S3Key`` names one of them)."""
    assembly_dir = assembly_dir.resolve()
    manifest = json.loads((assembly_dir / "manifest.json").read_text())
    found: dict[str, Path] = {}
    for artifact in manifest["artifacts"].values():
        if artifact["type"] != "cdk:asset-manifest":
            continue
        assets = json.loads((assembly_dir / artifact["properties"]["file"]).read_text())
        for asset in assets.get("files", {}).values():
            for destination in asset["destinations"].values():
                found[destination["objectKey"]] = assembly_dir / asset["source"]["path"]
    return found


def code_asset(logical: str, resource: Mapping[str, Any], assets: Mapping[str, Path]) -> Path:
    """The folder a function's code was synthesized to (``aws:asset:path`` metadata when the
    app writes it, else the asset manifest's entry for ``Code.S3Key``)."""
    metadata = resource.get("Metadata") or {}
    assembly_dir = next(iter(assets.values())).parent if assets else Path()
    if metadata.get("aws:asset:property") == "Code" and "aws:asset:path" in metadata:
        return assembly_dir / metadata["aws:asset:path"]
    key = (resource["Properties"].get("Code") or {}).get("S3Key")
    if not isinstance(key, str) or key not in assets or not assets[key].is_dir():
        raise ValueError(f"{logical}: its code is not a synthesized folder asset ({key!r})")
    return assets[key]


def functions(template: Mapping[str, Any], assembly_dir: Path) -> list[FunctionDef]:
    """Every ``AWS::Lambda::Function`` of ``template``; assets are under ``assembly_dir``."""
    names = {logical: logical for logical in cfn.resources(dict(template), "AWS::DynamoDB::Table")}
    assets = asset_paths(assembly_dir.resolve())
    found = []
    for logical, resource in cfn.resources(dict(template), "AWS::Lambda::Function").items():
        properties = resource["Properties"]
        variables = (properties.get("Environment") or {}).get("Variables") or {}
        found.append(
            FunctionDef(
                logical_id=logical,
                handler=properties["Handler"],
                asset=code_asset(logical, resource, assets),
                environment={key: cfn.resolve(v, names) for key, v in variables.items()},
                timeout_seconds=int(properties.get("Timeout", 3)),
                memory_mb=int(properties.get("MemorySize", 128)),
                role=properties["Role"]["Fn::GetAtt"][0],
            )
        )
    return found


def runtime_environment(function: FunctionDef, local: Mapping[str, str]) -> dict[str, str]:
    """The process environment: the template's variables, Lambda's own, and ``local``'s."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "AWS_LAMBDA_FUNCTION_NAME": function.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "local",
        "LAMBDA_TASK_ROOT": str(function.asset),
        "LAMBDA_RUNTIME_DIR": str(SANDBOX),
        "_HANDLER": function.handler,
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon locally
        **local,
        **function.environment,
    }


def _feed_tally(line: str) -> None:
    """A CloudWatch EMF line's figures into ``metrics.tally``; anything else is ignored."""
    if not line.startswith("{") or '"_aws"' not in line:
        return
    try:
        document = json.loads(line)
        pattern = str(document.get("pattern", ""))
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = document[metric["Name"]]
                total = sum(value) if isinstance(value, list) else value
                metrics.tally(metrics.Figure(pattern, metric["Name"], float(total), "Count"))
    except (ValueError, KeyError, TypeError):
        return


@dataclass
class Worker:
    """One function's process; call it like the handler."""

    function: FunctionDef
    layers: list[Path]
    local_environment: dict[str, str]
    policy: dict[str, Any] | None
    chaos: dict[str, Any] | None = None  # the chaos agent's settings (make chaos only)
    # Where its configuration file (the role's policy among it) is written, removed on stop
    # (make local: its state folder, .local/<PORT>/workers); None: the system's temporary folder.
    config_dir: Path | None = None
    # Where its bytecode is cached (:data:`BYTECODE_CACHE`); None: none written (``python -B``).
    bytecode_dir: Path | None = None
    process: subprocess.Popen[str] | None = None
    port: int = 0
    output: list[str] = field(default_factory=list)
    _pool: urllib3.HTTPConnectionPool | None = None
    _config: Path | None = None
    # Calls under way per connection pool (by id): a replaced process stops once its reach 0.
    _calls: dict[int, int] = field(default_factory=dict)
    _calls_changed: threading.Condition = field(default_factory=threading.Condition)

    def spawn(self) -> Worker:
        config = {
            "asset": str(self.function.asset),
            "layers": [str(each) for each in self.layers],
            "handler": self.function.handler,
            "policy": self.policy,
            "chaos": self.chaos,
        }
        if self.config_dir is not None:
            self.config_dir.mkdir(parents=True, exist_ok=True)
        handle, path = tempfile.mkstemp(
            prefix="turnstile-worker-", suffix=".json", dir=self.config_dir
        )
        with os.fdopen(handle, "w") as file:
            json.dump(config, file)
        self._config = Path(path)
        if self.bytecode_dir is None:
            bytecode = ["-B"]
        else:
            bytecode = ["-X", f"pycache_prefix={self.bytecode_dir}"]
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", *bytecode, str(BOOTSTRAP), "--config", path],
            env=runtime_environment(self.function, self.local_environment),
            cwd=self.function.asset,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_die_with_parent,
        )
        return self

    def ready(self) -> Worker:
        """Wait for the function's init; :class:`InitError` with its output if it failed."""
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("READY "):
                self.port = int(line.split()[1])
                break
            self.output.append(line)
        else:
            self.process.wait()
            raise InitError(
                f"{self.function.name} ({self.function.handler}) failed to start:\n"
                + "".join(self.output[-40:])
            )
        self._pool = urllib3.HTTPConnectionPool(
            "127.0.0.1", self.port, maxsize=256, block=False, retries=False
        )
        threading.Thread(target=self._relay, name=f"log-{self.function.name}", daemon=True).start()
        return self

    def pids(self) -> list[int]:
        """The process id of the function's process, while it runs."""
        alive = self.process is not None and self.process.poll() is None
        return [self.process.pid] if alive and self.process is not None else []

    def _relay(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        function_log = log.getChild(self.function.name)
        for line in self.process.stdout:
            _feed_tally(line)
            function_log.info("%s", line.rstrip("\n"))

    def invoke(self, event: Any, request_id: str | None = None) -> Any:
        return self.invoke_answer(event, request_id)["result"]

    def invoke_answer(
        self, event: Any, request_id: str | None = None, chaos: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The runtime's whole answer (``result``, and the chaos agent's ``chaos`` report when
        ``chaos``, the calling chaos client's context, is given)."""
        body = json.dumps(
            {
                "event": event,
                "context": {
                    "aws_request_id": request_id or str(uuid.uuid4()),
                    "timeout_seconds": self.function.timeout_seconds,
                    **({"chaos": chaos} if chaos is not None else {}),
                },
            },
            default=str,
        )
        with self._calling() as pool:
            response = pool.request(
                "POST",
                "/invoke",
                body=body.encode(),
                headers={"Content-Type": "application/json"},
                timeout=self.function.timeout_seconds + 30,
            )
        answer = json.loads(response.data)
        if response.headers.get("X-Function-Error"):
            raise FunctionError(self.function.name, answer["errorType"], answer["errorMessage"])
        return dict(answer)

    def get(self, path: str) -> Any:
        """A ``GET`` route of the worker's runtime (the chaos agent's, ``/chaos/provider``)."""
        with self._calling() as pool:
            response = pool.request("GET", path, timeout=30)
        if response.status != 200:
            raise LookupError(f"{self.function.name}: GET {path} answered {response.status}")
        return json.loads(response.data)

    def __call__(self, event: Any, context: Any = None) -> Any:
        return self.invoke(event, getattr(context, "aws_request_id", None))

    @contextmanager
    def _calling(self) -> Iterator[urllib3.HTTPConnectionPool]:
        """The current process's connection pool, counted as in use until the call is done."""
        with self._calls_changed:
            pool = self._pool
            if pool is None:
                raise RuntimeError(f"{self.function.name} is not running")
            self._calls[id(pool)] = self._calls.get(id(pool), 0) + 1
        try:
            yield pool
        finally:
            with self._calls_changed:
                self._calls[id(pool)] -= 1
                if not self._calls[id(pool)]:
                    del self._calls[id(pool)]
                self._calls_changed.notify_all()

    def replace(self, function: FunctionDef, policy: dict[str, Any] | None = None) -> None:
        """Run ``function`` (new code: another asset) in place of the current process, in this
        same object (the bridge and the stream pumps hold it): :meth:`successor`, then
        :meth:`take_over`. Call it from a thread that lives as long as the stack (see there)."""
        self.take_over(self.successor(function, policy))

    def successor(self, function: FunctionDef, policy: dict[str, Any] | None = None) -> Worker:
        """A new process for ``function``, spawned but not yet ready, with this worker's layers,
        environment and chaos settings (``policy``: its role's, by default the current one).
        The kernel kills a worker when the *thread* that spawned it ends (``PR_SET_PDEATHSIG``):
        spawn from a thread that lives as long as the stack, never from a short-lived one."""
        return Worker(
            function,
            self.layers,
            self.local_environment,
            self.policy if policy is None else policy,
            self.chaos,
            self.config_dir,
            self.bytecode_dir,
        ).spawn()

    def take_over(self, successor: Worker) -> None:
        """Wait for ``successor`` (:meth:`successor`) to be ready, then send it every new call;
        calls under way finish on the old process, which then stops: no call sees a gap or a
        killed process. If the new code fails to start, :class:`InitError` and the old process
        keeps serving. Any thread may wait here."""
        try:
            successor.ready()
        except BaseException:
            successor.stop()
            raise
        with self._calls_changed:
            retired = Worker(self.function, self.layers, {}, None)
            retired.process, retired._pool, retired._config = self.process, self._pool, self._config
            self.function, self.policy = successor.function, successor.policy
            self.process, self.port = successor.process, successor.port
            self._pool, self._config = successor._pool, successor._config
            self.output = successor.output
            old = id(retired._pool)
            self._calls_changed.wait_for(
                lambda: old not in self._calls, timeout=retired.function.timeout_seconds + 30
            )
        retired.stop()

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        if self._config is not None:
            self._config.unlink(missing_ok=True)


def _alive(worker: Worker) -> bool:
    return worker.process is not None and worker.process.poll() is None


SHARED = "shared"
POOL = "pool"
MODES = (SHARED, POOL)
POOL_SIZE = 4  # processes per function at most, in pool mode (Lambda: the concurrency limit)


@dataclass
class WorkerPool(Worker):
    """One function as Lambda scales it: a process per concurrent request, up to ``size``.

    Called like :class:`Worker` (it is one, to every caller): ``function``, ``layers``, ``output``
    and ``process``/``port`` (its first process's) mean the same. A request takes an idle process
    (the most recently used); when there is none it waits, and the pool starts one more process
    if it may. The request is served by whichever comes first, a process freed or the new one
    (Lambda would hold it for the new one; locally, cold starts compete for the same few cores).
    Processes are started one at a time per function, by a thread of the pool's own: a process
    is tied to the thread that started it (it dies with it, ``_die_with_parent``), and a request's
    thread ends with the request. A process that died is dropped and replaced on demand, as Lambda
    replaces a crashed execution environment."""

    size: int = POOL_SIZE
    members: list[Worker] = field(default_factory=list)
    _idle: list[Worker] = field(default_factory=list)
    _waiting: int = 0
    _stopped: bool = False
    _failure: BaseException | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def _new(self) -> Worker:
        return Worker(
            self.function,
            self.layers,
            self.local_environment,
            self.policy,
            self.chaos,
            self.config_dir,
            self.bytecode_dir,
            output=self.output,
        )

    def spawn(self) -> WorkerPool:
        first = self._new().spawn()
        self.members.append(first)
        self.process = first.process
        return self

    def ready(self) -> WorkerPool:
        first = self.members[0].ready()
        self.port = first.port
        self._idle.append(first)
        name = f"pool-{self.function.name}"
        threading.Thread(target=self._grow, name=name, daemon=True).start()
        return self

    def pids(self) -> list[int]:
        """The process id of each live process of the pool."""
        with self._changed:
            return [pid for member in self.members for pid in member.pids()]

    def _needs_one(self) -> bool:
        return self._waiting > 0 and not self._idle and len(self.members) < self.size

    def _grow(self) -> None:
        """Start a process whenever a request waits, none is idle and the pool may grow."""
        while True:
            with self._changed:
                while not self._stopped and not self._needs_one():
                    self._changed.wait()
                if self._stopped:
                    return
            try:
                worker = self._new().spawn().ready()
            except (InitError, OSError) as error:  # a failed init: every waiter is told
                with self._changed:
                    self._failure = error
                    self._changed.notify_all()
                return
            with self._changed:
                if self._stopped:
                    worker.stop()
                    return
                self.members.append(worker)
                self._idle.append(worker)
                self._changed.notify_all()

    def _acquire(self) -> Worker:
        with self._changed:
            self._waiting += 1
            try:
                while True:
                    while self._idle:
                        worker = self._idle.pop()  # the most recently used: as warm as it gets
                        if _alive(worker):
                            return worker
                        self.members.remove(worker)  # died while idle: Lambda would replace it
                        worker.stop()
                    if self._stopped or self._failure is not None:
                        raise self._failure or RuntimeError(f"{self.function.name} is not running")
                    self._changed.notify_all()  # the grower: one more may be needed
                    self._changed.wait()
            finally:
                self._waiting -= 1

    def _release(self, worker: Worker) -> None:
        with self._changed:
            if _alive(worker):
                self._idle.append(worker)
            elif worker in self.members:
                self.members.remove(worker)
                worker.stop()
            self._changed.notify_all()

    def invoke_answer(
        self, event: Any, request_id: str | None = None, chaos: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        worker = self._acquire()
        try:
            return worker.invoke_answer(event, request_id, chaos)
        finally:
            self._release(worker)

    def get(self, path: str) -> Any:
        worker = self._acquire()
        try:
            return worker.get(path)
        finally:
            self._release(worker)

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            members, self.members, self._idle = list(self.members), [], []
            self._changed.notify_all()
        for worker in members:
            worker.stop()


def _die_with_parent() -> None:
    from local.dynamodb_local import _die_with_parent as die

    die()


class Workers(dict[str, Worker]):
    """Every function's worker, by handler path (``service.handlers.products.handler``)."""

    def stop(self) -> None:
        for worker in self.values():
            worker.stop()


def start(
    template: Mapping[str, Any],
    assembly_dir: Path,
    local_environment: Mapping[str, str],
    *,
    layers: list[Path] | None = None,
    enforce_iam: bool = True,
    only: set[str] | None = None,
    chaos: dict[str, Any] | None = None,
    mode: str = SHARED,
    pool_size: int = POOL_SIZE,
    config_dir: Path | None = None,
    bytecode_dir: Path | None = BYTECODE_CACHE,
) -> Workers:
    """Start a worker per function (``only``: these handler paths), all at once; stops them
    all if any fails to start. ``chaos``: load the chaos agent with these settings
    (``local/sandbox/chaos_agent.py``; ``make chaos`` only). ``mode``: ``shared`` (one process
    per function, a thread per request) or ``pool`` (a process per concurrent request, up to
    ``pool_size`` per function: :class:`WorkerPool`). ``config_dir``: where the workers'
    configuration files go (:attr:`Worker.config_dir`); ``bytecode_dir``: where their bytecode is
    cached (:data:`BYTECODE_CACHE`; None: none is written)."""
    if mode not in MODES:
        raise ValueError(f"worker mode {mode!r}: one of {', '.join(MODES)}")
    layers = layers if layers is not None else [host_layer()]
    policies = iam.policies(dict(template)) if enforce_iam else {}
    workers = Workers()
    try:
        for function in functions(template, assembly_dir):
            if only is not None and function.handler not in only:
                continue
            policy = policies[function.logical_id].config() if enforce_iam else None
            if mode == POOL:
                workers[function.handler] = WorkerPool(
                    function,
                    list(layers),
                    dict(local_environment),
                    policy,
                    chaos,
                    config_dir,
                    bytecode_dir,
                    size=pool_size,
                ).spawn()
            else:
                workers[function.handler] = Worker(
                    function,
                    list(layers),
                    dict(local_environment),
                    policy,
                    chaos,
                    config_dir,
                    bytecode_dir,
                ).spawn()
        for worker in workers.values():
            worker.ready()
    except BaseException:
        workers.stop()
        raise
    return workers


@contextmanager
def running(
    template: Mapping[str, Any],
    assembly_dir: Path,
    local_environment: Mapping[str, str],
    **options: Any,
) -> Iterator[Workers]:
    workers = start(template, assembly_dir, local_environment, **options)
    try:
        yield workers
    finally:
        workers.stop()
