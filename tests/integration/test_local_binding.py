"""``make local`` listens on the loopback interface only: DynamoDB Local, the identity provider
and the API. Checked from the kernel's own table of listening sockets (``/proc/net/tcp*``, what
``ss -ltn`` reads), so the test sees what a remote client could reach."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from pathlib import Path

import pytest

LISTEN = "0A"


def listening_addresses(port: int) -> set[str]:
    """Every local address a TCP socket listens on at ``port`` (IPv4 and IPv6)."""
    found: set[str] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            address_hex, port_hex = local.split(":")
            if state != LISTEN or int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(address_hex)
            # the kernel prints each 32-bit word in host (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, words))
    return found


def loopback_only(addresses: set[str]) -> bool:
    def loopback(text: str) -> bool:
        address = ipaddress.ip_address(text)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        return address.is_loopback

    return bool(addresses) and all(loopback(a) for a in addresses)


pytestmark = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp"
)


def test_the_reader_sees_a_wildcard_listener():
    # Given a socket listening on every interface: the check must be able to fail
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        probe.listen()
        port = probe.getsockname()[1]
        assert listening_addresses(port) == {"0.0.0.0"}
        assert not loopback_only(listening_addresses(port))


def test_dynamodb_local_listens_on_loopback_only(dynamodb_local):
    # Given the session's DynamoDB Local (started as make local starts it)
    addresses = listening_addresses(dynamodb_local.port)
    # Then no interface but the loopback one reaches it
    assert loopback_only(addresses), addresses


def test_make_local_listens_on_loopback_only(assembly, template, tmp_path, monkeypatch):
    from local import run
    from service import runtime

    # Given make local's whole stack (running() exports its endpoints into os.environ)
    monkeypatch.setattr(os, "environ", dict(os.environ))
    template_path = tmp_path / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    try:
        with run.running(
            port=0, template_path=template_path, assembly_dir=Path(assembly.directory)
        ) as stack:
            ports = {
                "dynamodb": stack.dynamodb.port,
                "identity": stack.identity.port,
                "api": stack.server.server_port,
            }
            # Then each of DynamoDB Local, the identity provider and the API is loopback-only
            for name, port in ports.items():
                addresses = listening_addresses(port)
                assert loopback_only(addresses), (name, addresses)
    finally:
        runtime.Lazy.reset_all()
