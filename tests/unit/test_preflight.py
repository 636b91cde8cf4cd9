"""``local.preflight``: before ``make local`` sets anything up, each port is checked, and a busy one
is reported with the process that holds it (read from Linux's ``/proc``)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from local import preflight


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port this process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_a_busy_port_names_the_process_that_listens_on_it(held_port):
    # Given a port this very process listens on
    # Then it is reported busy, naming this process by pid and command line
    (line,) = preflight.busy({"PORT": held_port, "DYNAMODB_PORT": free_port()})
    assert line.startswith(f"PORT={held_port} is in use: pid {os.getpid()}: ")
    assert "pytest" in line or "python" in line


def test_free_ports_and_port_zero_pass(held_port):
    assert preflight.busy({"PORT": free_port(), "IDENTITY_PORT": 0}) == []
    assert preflight.main([f"PORT={free_port()}"]) == 0


def test_the_command_fails_with_advice_on_other_ports(held_port, capsys):
    assert preflight.main([f"PORT={held_port}", f"IDENTITY_PORT={free_port()}"]) == 1
    err = capsys.readouterr().err
    assert f"PORT={held_port} is in use" in err
    assert f"make local PORT={held_port + 1} " in err


def test_each_stack_keeps_its_state_in_a_folder_named_after_its_port():
    assert preflight.state_dir(3000) == preflight.ROOT / ".local" / "3000"
    assert preflight.state_dir(3000) != preflight.state_dir(3001)
