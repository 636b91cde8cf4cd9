"""Fixtures shared by every tier.

* ``template``: the stack synthesized once per session by ``python app.py``, as ``make synth``
  runs it (cdk-nag runs as part of it); ``assembly``: the cloud assembly it wrote (nag's
  validation report, acknowledgements), which tests/infra/test_stack.py also lints.
* ``dynamodb_local``: Amazon DynamoDB Local, started once per session on a free port, stopped at
  the end (and killed by the kernel if pytest itself dies).
* ``tables``: the template's tables created in DynamoDB Local; physical names by logical name.
* ``ddb``: a thread-safe low-level client for DynamoDB Local, with turnstile's retry settings.

``make test`` runs the tests on worker processes (pytest-xdist, ``--dist loadscope``); each
worker has its own session (its own DynamoDB Local and local stack; the synth is the run's one,
shared). A module runs whole on one worker, so its module fixtures are made once; the modules
that run ``make`` targets or a page's commands in this checkout (they write its ``cdk.out/``,
``build/``, ``site/``) all run on one worker, one after another (:func:`runs_in_the_checkout`).

* ``show``: ``show(text)`` prints ``text`` in the run's summary, also from a worker (whose own
  output the terminal never sees).

Plain helpers every tier shares (``claims_of`` / ``ADMIN`` / ``ALICE`` / ``BOB``: verified
callers in API Gateway's claim shape; ``proxy_event``, ``invoke``, ``Faults``...) live in
``tests/helpers.py``: test modules import that module, never a conftest or another test module.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from local import template as cfn
from local.dynamodb_local import DynamoDBLocal
from service import config
from tests.helpers import runs_in_the_checkout
from turnstile_ddb import retry


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--outputs",
        default=None,
        help="a stack's outputs as JSON (python -m infra.outputs): tests/deployed runs against "
        "that stack instead of make local's",
    )


ROOT = Path(__file__).resolve().parents[1]
DEPLOYED = Path(__file__).resolve().parent / "deployed"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The post-deploy tier needs a stack's outputs (``--outputs``, given by ``make
    test-deployed``); without them it is left out of the run: ``make test`` runs it through that
    target against a local stack (``tests/e2e/test_make_targets.py``)."""
    if collection_path == DEPLOYED and not config.getoption("--outputs"):
        return True
    return None


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadscope`` (as ``make test`` runs), the workers' units of work: each module
    whole, except that every module running in the checkout shares one unit, ``checkout``
    (:func:`runs_in_the_checkout`, read from the module's source). Units go out in collection order
    (e2e first, unit last: the long ones start first, given ``--no-loadscope-reorder``).

    A scheduler because pytest-xdist's own grouping (``--dist loadgroup``, ``xdist_group``
    marks) renames each test's node id to carry its group, which pytest 9.2 no longer lets a
    plugin do: every test was scheduled alone (each module's fixtures made on both workers, two
    workers in the checkout at once). ``LoadScopeScheduling`` is pytest-xdist's public scheduler
    for units of tests; only its ``_split_scope`` (the unit of a node id; a private method, so
    tests/unit/test_make_test_durations.py pins what it does here) is replaced."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    checkout: dict[str, bool] = {}

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            if module not in checkout:
                source = (config.rootpath / module).read_text(encoding="utf-8")
                checkout[module] = runs_in_the_checkout(source)
            return "checkout" if checkout[module] else module

    return ByModule(config, log)


class _Shown:
    """What tests asked to show, gathered from every test's report (a worker's reports reach the
    controller with their ``user_properties``) and printed in the terminal summary."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Every phase's report carries the test's properties so far: the teardown's has them all
        if report.when == "teardown":
            self.texts += [str(value) for name, value in report.user_properties if name == "shown"]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for text in self.texts:
            terminalreporter.write_line(text)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Shown(), "turnstile-shown")


@pytest.fixture
def show(request: pytest.FixtureRequest) -> Callable[[str], None]:
    def shown(text: str) -> None:
        request.node.user_properties.append(("shown", text))

    return shown


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The cloud assembly ``python app.py`` writes, offline (cdk-nag's report and acknowledgements
    included). The run's only synth: the script a user runs, so no second synth is needed to prove
    it runs. With workers, the first one to need it synthesizes into the run's shared folder while
    the others wait on a lock, and every worker then reads that one assembly (nothing writes into
    it: the functions' workers keep their bytecode elsewhere)."""
    from aws_cdk import cx_api

    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the run's folder, above each worker's own (pytest-xdist's documented way to share)
        shared = tmp_path_factory.getbasetemp().parent
        outdir = shared / "cdk.out"
        with open(shared / "cdk.out.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not (outdir / "manifest.json").exists():
                _synthesize(outdir)
    else:
        outdir = tmp_path_factory.mktemp("cdk.out")
        _synthesize(outdir)
    return cx_api.CloudAssembly(str(outdir))


def _synthesize(outdir: Path) -> None:
    env = {"CDK_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"python app.py failed:\n{done.stdout}{done.stderr}"


@pytest.fixture(scope="session")
def template(assembly: Any) -> dict[str, Any]:
    import app

    return dict(assembly.get_stack_by_name(app.STACK_NAME).template)


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    with DynamoDBLocal() as db:
        yield db


@pytest.fixture(scope="session")
def ddb(dynamodb_local: DynamoDBLocal) -> Any:
    return dynamodb_local.client(config=retry.client_config())


@pytest.fixture(scope="session")
def tables(dynamodb_local: DynamoDBLocal, template: dict[str, Any]) -> config.Tables:
    # Creating every table (indexes, streams) can take DynamoDB Local longer than the library's
    # 5 s read timeout on a loaded machine: a patient client of its own, so it never times out.
    patient = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    cfn.create_tables(patient, template)
    return config.Tables(cfn.table_names(template))


@pytest.fixture
def unique() -> str:
    """A fresh id, so tests sharing the session's tables never see each other's items."""
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def streams(dynamodb_local: DynamoDBLocal) -> Any:
    """A DynamoDB Streams client for DynamoDB Local."""
    return dynamodb_local.streams_client()
