"""Before ``make local`` sets anything up: is each of its ports free, and if not, who holds it?

    python -m local.preflight [--host 127.0.0.1] PORT=3000 DYNAMODB_PORT=8000 IDENTITY_PORT=8100

Exits 0 when every port can be bound on ``host``; otherwise prints one line per busy port naming
the process that listens there (from Linux's ``/proc``: the listening socket's inode in
``/proc/net/tcp*``, then the process whose ``/proc/<pid>/fd`` holds that socket) and exits 1,
within a second, before any venv, layer or synth step. ``make local`` runs it first; so does
``local.run`` itself. Standard library only: it runs before the venv exists.

Each stack keeps its state (``auth.json``, ``outputs.json``) in a folder of its own named after
its API port, ``.local/<PORT>/`` (:func:`state_dir`), written once its servers are bound and
removed when it stops: a second stack never touches a running one's files.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_ROOT = ROOT / ".local"
LOOPBACK = "127.0.0.1"
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


def state_dir(port: int) -> Path:
    """Where the stack whose API listens on ``port`` keeps its files."""
    return STATE_ROOT / str(port)


def can_bind(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could listen on ``host:port`` now (``SO_REUSEADDR``, as the servers
    set it, so a closed connection still in TIME_WAIT does not count as busy)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on ``port`` (any address, IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def holder(port: int) -> str:
    """Who listens on ``port``: ``pid N: command line``, or why that cannot be told."""
    inodes = listening_inodes(port)
    if not inodes:
        return "no listener found in /proc (another network namespace, or not Linux)"
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                    command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
                    return f"pid {pid}: {command[:160]}"
            except OSError:
                continue
    return "a process this user cannot see (another user's, or a container's)"


def busy(ports: dict[str, int], host: str = LOOPBACK) -> list[str]:
    """One line per port of ``ports`` (name -> number; 0 means any free one) that is taken."""
    return [
        f"{name}={port} is in use: {holder(port)}"
        for name, port in ports.items()
        if port and not can_bind(port, host)
    ]


def advice(ports: dict[str, int]) -> str:
    others = " ".join(f"{name}={port + 1}" for name, port in ports.items())
    return (
        "make local sets nothing up while a port is taken: stop what holds it, or choose other "
        f"ports, e.g. make local {others}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("ports", nargs="+", metavar="NAME=PORT")
    args = parser.parse_args(argv)
    ports = {name: int(port) for name, port in (p.split("=", 1) for p in args.ports)}
    taken = busy(ports, args.host)
    for line in taken:
        print(line, file=sys.stderr)
    if taken:
        print(advice(ports), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
