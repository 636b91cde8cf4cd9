"""Runtime invariants of the library survive ``python -O`` (which strips ``assert``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from turnstile_ddb import capacity, codec

ROOT = Path(__file__).resolve().parents[2]


def test_an_update_without_its_new_item_is_an_error_not_none():
    with pytest.raises(RuntimeError):
        codec.new_item({})
    assert codec.new_item({"Attributes": {"v": {"N": "2"}}}) == {"v": 2}


def test_a_join_without_its_member_item_is_refused():
    counter = capacity.CapacityRow("t", {"pk": "e"})
    with pytest.raises(ValueError):
        capacity.join_ops(counter, capacity.Member("t", {"pk": "e#u"}))


def test_the_checks_hold_under_python_dash_o():
    # Given an interpreter that drops every assert statement
    script = (
        "from turnstile_ddb import capacity, codec\n"
        "try:\n    codec.new_item({})\nexcept RuntimeError:\n    pass\n"
        "else:\n    raise SystemExit('new_item returned without Attributes')\n"
        "try:\n    capacity.join_ops(capacity.CapacityRow('t', {'pk': 'e'}), "
        "capacity.Member('t', {'pk': 'e#u'}))\n"
        "except ValueError:\n    pass\n"
        "else:\n    raise SystemExit('join_ops accepted a member without its item')\n"
    )
    done = subprocess.run(
        [sys.executable, "-O", "-c", script],
        cwd=ROOT / "functions",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Then the invariants are still checked
    assert done.returncode == 0, done.stdout + done.stderr
