"""A newcomer's first hour, as a test: from a clean clone of the committed code, the commands the
README and docs/getting-started.md give, in their order.

1. ``git clone`` of this repository's HEAD into a temporary folder (what is committed, nothing
   else: an uncommitted file the path needs fails this test);
2. ``make local`` in the background on free ports, until its banner says it is up;
3. ``make token``, then every example of docs/identity.md (``tests.docs_runner``, as written);
4. ``make wheel``; the wheel installed into a fresh venv as tests/dist and ``make examples`` do
   (``examples.run.fresh_venv``: the wheel plus the locked boto3/botocore, nothing of the clone),
   while ``make local`` starts (it needs no stack: the test stays as short as it can);
5. ``examples/quickstart.py`` from that venv against the clone's DynamoDB Local;
6. Ctrl-C to ``make local``; then no process of the clone is left and its ports are free.

Nothing is reinstalled: the clone's ``.venv``, ``node_modules`` and ``build/layer`` are symlinks to
this checkout's (as a helper's worktree has them), and ``make`` is told they are installed
(``-o .venv/.installed -o node_modules/.installed -o layers``): a fresh clone's newer lock file
would otherwise make it rebuild the venv and the layer that every other checkout shares. The
install steps themselves are what ``make test``'s own set-up runs each time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.run import fresh_venv
from local import preflight
from local.dynamodb_local import free_port
from tests import docs_runner
from tests.helpers import REPO

BANNER = "Ctrl-C stops everything"
START_LIMIT = 600.0  # a bound on waiting for the banner, not a measured speed
SHARED = (".venv", "node_modules", "build/layer")
INSTALLED = ("-o", ".venv/.installed", "-o", "node_modules/.installed", "-o", "layers")


def make(clone: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *INSTALLED, *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def distinct_free_ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)


def processes_of(folder: Path, *needles: str) -> list[str]:
    """Every live process working in ``folder`` or whose command line holds one of ``needles``
    (from /proc: make, local.run, the function workers, the JVM)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(str(folder)) or any(needle in command for needle in needles):
            found.append(f"{entry.name} in {cwd}: {command[:200]}")
    return found


@dataclass
class Clone:
    path: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Clone:
    path = tmp_path_factory.mktemp("first-hour") / "turnstile"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(path)], check=True, timeout=300)
    for shared in SHARED:
        (path / shared).parent.mkdir(parents=True, exist_ok=True)
        (path / shared).symlink_to((REPO / shared).resolve(), target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
    env.pop("PYTHONPATH", None)
    return Clone(path, env)


@dataclass
class Running:
    process: subprocess.Popen[str]
    log: Path
    ports: dict[str, int]
    started: float


def start_make_local(clone: Clone, log: Path) -> Running:
    api, dynamodb, identity = distinct_free_ports(3)
    ports = {"PORT": api, "DYNAMODB_PORT": dynamodb, "IDENTITY_PORT": identity}
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", *INSTALLED, "local"]
            + [f"{name}={port}" for name, port in ports.items()],
            cwd=clone.path,
            env=clone.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a terminal's job of its own: Ctrl-C reaches all of it
        )
    return Running(process, log, ports, started)


def wait_for_banner(running: Running) -> None:
    deadline = time.monotonic() + START_LIMIT
    while BANNER not in running.log.read_text():
        if running.process.poll() is not None:
            pytest.fail(
                f"make local exited {running.process.returncode}:\n{running.log.read_text()}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"no banner after {START_LIMIT} s:\n{running.log.read_text()[-4000:]}")
        time.sleep(0.5)


def stop(running: Running) -> int:
    """Ctrl-C, as in the terminal: SIGINT to make local's process group, then wait."""
    if running.process.poll() is None:
        os.killpg(running.process.pid, signal.SIGINT)
    try:
        return running.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(running.process.pid, signal.SIGKILL)
        running.process.wait(timeout=30)
        return -9


def wheel_in_a_fresh_venv(clone: Clone, venv: Path) -> Path:
    """``make wheel``, then the wheel in a fresh venv; that venv's python."""
    wheel = make(clone.path, "wheel", env=clone.env)
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr[-3000:]
    (built,) = (clone.path / "dist").glob("turnstile_ddb-*.whl")
    return fresh_venv(venv, built)


@pytest.fixture
def make_local(clone: Clone, tmp_path: Path) -> Iterator[Running]:
    running = start_make_local(clone, tmp_path / "make-local.log")
    try:
        yield running
    finally:
        stop(running)


def test_a_newcomers_first_hour_from_a_clean_clone(
    clone: Clone, make_local: Running, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = make_local.ports
    port = ports["PORT"]
    # While make local starts (a minute or more: synth, the JVM, the workers), the wheel is built
    # and installed: it needs no stack, and the test is kept as short as it can be
    with ThreadPoolExecutor(max_workers=1) as pool:
        installing = pool.submit(wheel_in_a_fresh_venv, clone, tmp_path / "venv")
        # Given make local, started in a clean clone, up and saying so
        wait_for_banner(make_local)
        python = installing.result()
    state = clone.path / ".local" / str(port)
    assert (state / "auth.json").exists() and (state / "outputs.json").exists()

    # When the newcomer asks for a token, it is a token of that stack's identity provider
    token = make(clone.path, "-s", "token", f"PORT={port}", "USER=newcomer", env=clone.env)
    assert token.returncode == 0, token.stderr
    assert token.stdout.count(".") == 2 and "user newcomer  sub (user id) " in token.stderr

    # And every example of the identity page runs as written against it
    with docs_runner.page_environment(port) as environment:
        environment.pop("PYTHONPATH", None)
        report = docs_runner.run_page("docs/identity.md", environment, root=clone.path)
    assert report.executed >= 2

    # Then the quick start runs from that venv (not the clone) against the clone's DynamoDB Local
    quickstart = subprocess.run(
        [str(python), str(clone.path / "examples" / "quickstart.py")],
        cwd=tmp_path,
        env={
            **clone.env,
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{ports['DYNAMODB_PORT']}",
            "AWS_ACCESS_KEY_ID": "newcomer",
            "AWS_SECRET_ACCESS_KEY": "newcomer",
            "AWS_REGION": "us-east-1",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert quickstart.returncode == 0, quickstart.stdout + quickstart.stderr
    assert "lease fence 1, released" in quickstart.stdout

    # When the newcomer presses Ctrl-C, make local stops, and nothing of it is left behind
    assert stop(make_local) in (0, 2, -signal.SIGINT), make_local.log.read_text()[-4000:]
    left = processes_of(clone.path, str(clone.path), f"-port {ports['DYNAMODB_PORT']}", f"={port} ")
    assert left == []
    for name, held in ports.items():
        assert preflight.can_bind(held), f"{name}={held} is still held"
    assert not state.exists()
    with capsys.disabled():
        print(f"\nfirst hour: {time.monotonic() - make_local.started:.0f} s, make local to Ctrl-C")
