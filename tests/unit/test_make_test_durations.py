"""Every log of ``make test`` ends with its slowest tests, so where the suite's time goes can be
read off any run (CI's too) without timing the tiers by hand; and the tests run on two worker
processes, grouped so that no two workers run make in this checkout at once."""

from __future__ import annotations

import shlex

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
    assert default[default.index("--dist") + 1] == "loadgroup"
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
