"""A sync front door of the library is built from its protocol, not written out
(``decrement = _contract.write(_core.driven(decrement_protocol))``, see
``turnstile_ddb._core.driven``), so griffe, which reads the source without running it, would see
an attribute. This extension turns each such attribute back into the function a caller calls:
``client`` and the protocol's parameters, the protocol's answer, the protocol's docstring (shown
once, on the front door)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import griffe

BUILT = re.compile(r"^_contract\.(?:write|read)\(_core\.driven\((\w+)\)\)$")


def _modules(module: griffe.Module) -> Iterator[griffe.Module]:
    yield module
    for member in module.members.values():
        if not member.is_alias and member.is_module:
            yield from _modules(member)  # type: ignore[arg-type]


def _front(name: str, built: griffe.Attribute, protocol: griffe.Function) -> griffe.Function:
    client = griffe.Parameter(
        "client", annotation="DynamoDBClient", kind=griffe.ParameterKind.positional_or_keyword
    )
    answer = protocol.returns
    front = griffe.Function(
        name,
        lineno=built.lineno,
        endlineno=built.endlineno,
        parameters=griffe.Parameters(client, *protocol.parameters),
        returns=getattr(answer, "slice", answer),  # Steps[Item] answers an Item
    )
    if protocol.docstring is not None:
        front.docstring = griffe.Docstring(protocol.docstring.value, parent=front)
        protocol.docstring = None
    return front


class DrivenFronts(griffe.Extension):
    """Replace each attribute built by ``_core.driven`` with the function it is."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for module in _modules(pkg):
            for name, member in list(module.members.items()):
                if member.is_alias or not member.is_attribute:
                    continue
                match = BUILT.match(str(member.value))  # type: ignore[union-attr]
                protocol = module.members.get(match.group(1)) if match else None
                if isinstance(protocol, griffe.Alias):  # imported (sharded.resize's)
                    protocol = protocol.final_target
                if isinstance(protocol, griffe.Function):
                    module.set_member(name, _front(name, member, protocol))  # type: ignore[arg-type]
