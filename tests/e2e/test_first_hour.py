"""A newcomer's first hour, as a test: from a clean clone of the committed code, the commands the
README, docs/library.md and docs/getting-started.md give, in their order, each step's time
measured and printed (never asserted: a slow machine is not a failure).

The library path (``test_the_library_from_a_clone_to_its_first_call``):

1. ``git clone`` of this repository's HEAD into a temporary folder (what is committed, nothing
   else: an uncommitted file the path needs fails this test);
2. a fresh venv, and ``pip install .`` from the clone (docs/library.md's first block);
3. ``examples/quickstart.py`` from that venv against a DynamoDB Local, pointed there by the
   lines ``make local`` prints for a program of yours (``local.run.library_exports``).

The service path (``test_the_service_from_make_local_to_an_authorized_answer``):

4. ``make local`` in the clone on free ports, until its first answer (the API refusing a request
   without a token) and its banner;
5. ``make token``, and the first authorized answer; every example of docs/identity.md;
6. the quick start again, from the library's venv, with the exports ``make local`` printed;
7. Ctrl-C to ``make local``; then no process of the clone is left and its ports are free.

Warm (``make test``): the clone shares this checkout's venv, node_modules and built layers (a
folder of links with an install stamp of its own, so ``make`` sees them installed and never
rebuilds what every checkout shares), and pip uses its usual cache; the synth and the workers'
bytecode are the clone's own, so cold. Cold (``make first-hour``, ``FIRST_HOUR=cold``): the
clone installs everything itself, with empty pip, uv and npm caches. The table printed at the end
says which each step was.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from local import preflight
from local.dynamodb_local import DynamoDBLocal, free_port
from local.run import library_exports
from tests import docs_runner
from tests.helpers import REPO

COLD = os.environ.get("FIRST_HOUR") == "cold"
HOW = "cold" if COLD else "warm"
BANNER = "Ctrl-C stops everything"
# Bounds on waiting, not measured speeds: a cold clone installs the whole lock first
START_LIMIT = 3600.0 if COLD else 900.0
SHARED = (".venv", "node_modules")  # folders of links, each with an install stamp of its own
LINKED = ("build/layer",)  # linked whole: current for the clone's lock, which is this one's


@dataclass
class Timings:
    """Each step's time, in the order taken; printed as a table with the machine's load."""

    rows: list[tuple[str, float, str]] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, how: str = HOW) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.rows.append((name, time.monotonic() - started, how))

    def add(self, name: str, seconds: float, how: str = HOW) -> None:
        self.rows.append((name, seconds, how))

    def table(self) -> str:
        width = max(len(name) for name, _, _ in self.rows)
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        lines = [f"first hour ({os.cpu_count()} cores, load {load}):"]
        lines += [f"  {name:<{width}}  {seconds:7.1f} s  {how}" for name, seconds, how in self.rows]
        return "\n".join(lines)


@pytest.fixture(scope="module")
def timings() -> Timings:
    return Timings()


@dataclass
class Clone:
    path: Path
    env: dict[str, str]


def link_installed(clone: Path, folder: str) -> None:
    """``clone/folder`` as a folder of links to this checkout's entries, with its own install
    stamp: installed, as ``make`` sees it, without ever rebuilding this checkout's."""
    target = clone / folder
    target.mkdir()
    for entry in (REPO / folder).iterdir():
        if entry.name != ".installed":
            (target / entry.name).symlink_to(entry.resolve())
    (target / ".installed").touch()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory, timings: Timings) -> Clone:
    base = tmp_path_factory.mktemp("first-hour")
    path = base / "turnstile"
    with timings.step("git clone", "cold"):
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(path)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    if COLD:  # every installer starts from an empty cache of its own
        for variable in ("PIP_CACHE_DIR", "UV_CACHE_DIR", "npm_config_cache"):
            env[variable] = str(base / "caches" / variable)
    else:
        for folder in SHARED:
            link_installed(path, folder)
        for folder in LINKED:
            (path / folder).parent.mkdir(parents=True, exist_ok=True)
            (path / folder).symlink_to((REPO / folder).resolve(), target_is_directory=True)
    return Clone(path, env)


@pytest.fixture(scope="module")
def library(clone: Clone, timings: Timings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/library.md's install: a fresh venv, ``pip install .`` from the clone; its python."""
    venv = tmp_path_factory.mktemp("library") / "venv"
    with timings.step("library: python3 -m venv", "cold"):
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    with timings.step("library: pip install . (from the clone)"):
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "."],
            cwd=clone.path,
            env=clone.env,
            check=True,
            timeout=900,
        )
    return python


def exports_of(lines: list[str]) -> dict[str, str]:
    """The variables of ``export A=1 B=2`` lines, as ``make local`` prints them."""
    found = {}
    for line in lines:
        words = line.split()
        if words and words[0] == "export":
            for word in words[1:]:
                name, _, value = word.partition("=")
                found[name] = value
    return found


def quickstart(clone: Clone, python: Path, exports: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [str(python), str(clone.path / "examples" / "quickstart.py")],
        cwd=cwd,
        env={**clone.env, **exports},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_library_from_a_clone_to_its_first_call(
    clone: Clone, library: Path, timings: Timings, tmp_path: Path, show
) -> None:
    # Given the library installed from the clone into a fresh venv, and a DynamoDB Local
    with DynamoDBLocal() as db:
        # When the quick start runs with the lines make local prints for a program of yours
        exports = exports_of(library_exports(db.endpoint))
        with timings.step("library: first call (examples/quickstart.py)", "cold"):
            out = quickstart(clone, library, exports, tmp_path)
    # Then it ran from that venv alone, as a user's program would
    assert "lease fence 1, released" in out
    first = ("git clone", "library: python3 -m venv", "library: pip install . (from the clone)")
    taken = sum(seconds for name, seconds, _ in timings.rows if name in first)
    timings.add("library: clone to first call (its steps above)", taken + timings.rows[-1][1])
    show(timings.table())


def make(clone: Clone, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=clone.path,
        env=clone.env,
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
class Running:
    process: subprocess.Popen[str]
    log: Path
    ports: dict[str, int]
    started: float

    def text(self) -> str:
        return self.log.read_text()


def wait_for(running: Running, ready: Callable[[], bool], what: str) -> float:
    """Poll ``ready()`` until true (bounded by :data:`START_LIMIT`); seconds since the start."""
    deadline = running.started + START_LIMIT
    while not ready():
        if running.process.poll() is not None:
            pytest.fail(f"make local exited {running.process.returncode}:\n{running.text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {START_LIMIT} s:\n{running.text()[-4000:]}")
        time.sleep(0.5)
    return time.monotonic() - running.started


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


@pytest.fixture
def make_local(clone: Clone, tmp_path: Path) -> Iterator[Running]:
    api, dynamodb, identity = distinct_free_ports(3)
    ports = {"PORT": api, "DYNAMODB_PORT": dynamodb, "IDENTITY_PORT": identity}
    log = tmp_path / "make-local.log"
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "local"]
            + [f"{name}={port}" for name, port in ports.items()],
            cwd=clone.path,
            env=clone.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a terminal's job of its own: Ctrl-C reaches all of it
        )
    running = Running(process, log, ports, started)
    try:
        yield running
    finally:
        stop(running)


# A step's end as make's set-up (local/step.sh) and local.run log it: its name and duration
STEP_DONE = re.compile(r"^(?:<== |\S+ \S+ )(?P<name>.+): done in (?P<seconds>[0-9.]+) s$")


def steps_of(log: str) -> list[tuple[str, float]]:
    """Each step ``make local`` logged as done, with the duration it logged."""
    found = []
    for line in log.splitlines():
        match = STEP_DONE.match(line)
        if match:
            found.append((match["name"].split(" (")[0], float(match["seconds"])))
    return found


def answer(url: str, token: str | None = None) -> int:
    """The status of GET ``url`` (0: nothing answered yet)."""
    request = urllib.request.Request(url, headers={"Authorization": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)
    except OSError:
        return 0


def test_the_service_from_make_local_to_an_authorized_answer(
    clone: Clone, library: Path, make_local: Running, timings: Timings, tmp_path: Path, show
) -> None:
    ports = make_local.ports
    port = ports["PORT"]
    api = f"http://127.0.0.1:{port}/products/no-such-product"
    # Given make local, started in a clean clone: its first answer refuses a request without a
    # token, and its banner follows
    first = wait_for(make_local, lambda: answer(api) == 401, "first answer")
    timings.add("make local: start to first answer (401, no token)", first)
    timings.add(
        "make local: start to its banner",
        wait_for(make_local, lambda: BANNER in make_local.text(), "banner"),
    )
    for name, seconds in steps_of(make_local.text()):
        timings.add(f"  make local step: {name[:60]}", seconds)
    state = clone.path / ".local" / str(port)
    assert (state / "auth.json").exists() and (state / "outputs.json").exists()

    # When the newcomer asks for a token, it is a token of that stack's identity provider
    with timings.step("make token", "warm"):
        token = make(clone, "-s", "token", f"PORT={port}", "USER=newcomer")
    assert token.returncode == 0, token.stderr
    assert token.stdout.count(".") == 2 and "user newcomer  sub (user id) " in token.stderr
    # And with it the API answers: no such product, a 404 past the authorizer
    assert answer(api, token.stdout.strip()) == 404
    timings.add(
        "make local: start to first authorized answer", time.monotonic() - make_local.started
    )

    # And every example of the identity page runs as written against it
    with docs_runner.page_environment(port) as environment:
        environment.pop("PYTHONPATH", None)
        report_page = docs_runner.run_page("docs/identity.md", environment, root=clone.path)
    assert report_page.executed >= 2

    # And the library's quick start runs with the exports make local printed, and only those
    exports = exports_of(make_local.text().splitlines())
    assert exports["AWS_ENDPOINT_URL_DYNAMODB"] == f"http://127.0.0.1:{ports['DYNAMODB_PORT']}"
    assert "lease fence 1, released" in quickstart(clone, library, exports, tmp_path)

    # When the newcomer presses Ctrl-C, make local stops, and nothing of it is left behind
    with timings.step("make local: Ctrl-C to stopped", "warm"):
        assert stop(make_local) in (0, 2, -signal.SIGINT), make_local.text()[-4000:]
    left = processes_of(clone.path, str(clone.path), f"-port {ports['DYNAMODB_PORT']}", f"={port} ")
    assert left == []
    for name, held in ports.items():
        assert preflight.can_bind(held), f"{name}={held} is still held"
    assert not state.exists()
    show(timings.table())
