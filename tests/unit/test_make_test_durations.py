"""Every log of ``make test`` ends with its slowest tests, so where the suite's time goes can be
read off any run (CI's too) without timing the tiers by hand; and the tests run on two worker
processes, grouped so that no two workers run make in this checkout at once."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.helpers import REPO, make, runs_in_the_checkout


def test_make_test_runs_pytest_with_its_slowest_tests_reported():
    # Given make test's plan (a dry run: nothing installed, nothing tested)
    planned = make("-n", "test")
    assert planned.returncode == 0, planned.stderr
    # When its pytest call is found
    (pytest_call,) = [
        shlex.split(line) for line in planned.stdout.splitlines() if " -m pytest" in line
    ]
    # Then it asks pytest for the slowest tests, a useful number of them
    durations = [arg for arg in pytest_call if arg.startswith("--durations=")]
    assert durations, pytest_call
    assert int(durations[0].split("=")[1]) >= 20, durations


def pytest_call_of(*variables: str) -> list[str]:
    planned = make("-n", "test", *variables)
    assert planned.returncode == 0, planned.stderr
    (call,) = [shlex.split(line) for line in planned.stdout.splitlines() if " -m pytest" in line]
    return call


def test_make_test_runs_two_workers_that_keep_each_module_and_the_checkouts_users_together():
    # Given make test's plan, by default and with TEST_WORKERS=0
    default, single = pytest_call_of(), pytest_call_of("TEST_WORKERS=0")
    # Then by default two worker processes share the tests by group (tests/conftest.py gives
    # each test its module's group, or the checkout's), and TEST_WORKERS=0 runs them in pytest's
    # own process
    assert default[default.index("-n") + 1] == "2"
    assert default[default.index("--dist") + 1] == "loadscope"
    assert "--no-loadscope-reorder" in default
    assert single[single.index("-n") + 1] == "0"


@pytest.mark.parametrize(
    "source",
    [
        "from tests.helpers import REPO, make\n",
        "from tests.helpers import (\n    REPO,\n    make,\n)\n",
        'done = subprocess.run(["make", "wheel"], cwd=REPO)\n',
        "report = docs_runner.run_page(page, environment)\n",
    ],
)
def test_a_module_that_runs_make_or_a_page_here_is_in_the_checkout_group(source):
    assert runs_in_the_checkout(source)


@pytest.mark.parametrize(
    "source",
    [
        # a function of its own called make, after an import of other helpers
        "from tests.helpers import REPO\n\n\ndef make(units):\n    return units\n",
        "from tests.helpers import (\n    REPO,\n)\nqueue = make(ddb)\n",
        'command = ["python", "-m", "sim"]  # make sim runs this\n',
    ],
)
def test_a_module_that_does_not_is_grouped_by_itself(source):
    assert not runs_in_the_checkout(source)


def test_the_known_users_of_the_checkout_are_found_and_a_library_test_is_not():
    tests = REPO / "tests"
    for used in ("e2e/test_make_targets.py", "e2e/test_docs_run.py", "dist/test_make_wheel.py"):
        assert runs_in_the_checkout((tests / used).read_text(encoding="utf-8")), used
    assert not runs_in_the_checkout((tests / "unit/test_creation_resend.py").read_text())


def test_the_workers_run_each_module_and_the_checkout_group_whole(tmp_path):
    # Given four small modules under this suite's grouping hook (tests/conftest.py): two of their
    # own, two that run make here (the checkout group)
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_xdist_make_scheduler  # noqa: F401\n"
    )
    tests = "\n".join(f"def test_{n}():\n    pass\n" for n in range(4))
    for name, extra in [("own_a", ""), ("own_b", ""), ("here_a", "MAKE = ['make']\n")]:
        (tmp_path / f"test_{name}.py").write_text(extra + tests)
    (tmp_path / "test_here_b.py").write_text("from tests.helpers import make\n" + tests)
    # When they run on two workers, as make test runs the suite
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadscope",
            "--no-loadscope-reorder",
            "-v",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'functions'}"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Then each module ran on one worker, and both of the checkout's users on the same one
    ran = re.findall(r"\[(gw\d)\] .*PASSED .*test_(\w+)\.py::", done.stdout)
    workers = {module: {gw for gw, name in ran if name == module} for _, module in ran}
    assert len(ran) == 16, done.stdout[-3000:]
    assert all(len(used) == 1 for used in workers.values()), workers
    assert workers["here_a"] == workers["here_b"], workers
