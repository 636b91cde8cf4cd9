"""Every log of ``make test`` ends with its slowest tests, so where the suite's time goes can be
read off any run (CI's too) without timing the tiers by hand."""

from __future__ import annotations

import shlex

from tests.helpers import make


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
