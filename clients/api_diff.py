"""The HTTP API keeps what its released document promised: the served document
(``local.docs.document()``) against the newest released one (``api/openapi-<version>.json``),
every breaking change either recorded in the API changelog (docs/api-changelog.md, its
"Unreleased" section) or the check fails.

    python -m clients.api_diff                    # make api-diff
    python -m clients.api_diff --release 1.1.0    # keep the served document as released 1.1.0

**Why a checker of our own.** The maintained diff tools do not fit this machine: oasdiff (the most
complete, a Go program) is published on neither PyPI nor npm (its npm name is a placeholder),
and building it needs a newer Go than Debian 12 packages (1.19); @pb33f/openapi-changes is an npm
wrapper whose install step downloads its Go binary from outside the registry, which fails here;
Atlassian's openapi-diff (npm) refuses OpenAPI 3.1 ("Swagger Parser only supports versions
3.0.x"), and judges schemas by JSON Schema set inclusion, under which a response field removed is
not a change. What follows is the list of rules below, about 200 lines.

**What is breaking** (each change has a key, ``kind: where[: detail]``, which is what the
changelog records). Schemas are compared after resolving ``$ref`` (a renamed schema is compared
with itself under its new name). A request must still be accepted, an answer must still be
understood, and a client generated again must keep its names:

* ``route-removed``: a method on a path; ``status-removed``: a 2xx status of an operation;
* ``operation-renamed``: an ``operationId`` changed, and ``schema-removed``: a component schema
  gone (renamed, most often): they name the generated clients' functions (``create_product.sync``)
  and models (``models.NewProduct``), so code using them breaks when the client is generated again,
  though the wire is unchanged;
* ``parameter-removed``, ``parameter-made-required``: a path, query or header parameter;
* ``field-removed``: a property of a request or answer body (the server refuses unknown fields,
  so a request field removed breaks a client sending it; an answer field removed, one reading it);
* ``field-made-required``: a request property required that was not (a new required one too);
  ``field-made-optional``: an answer property no longer always present;
* ``enum-value-removed``: in a request or an answer;
* ``type-narrowed``: a request value of a type accepted before is not (``number`` to
  ``integer``, ``null`` no longer allowed); ``bound-narrowed``: a request bound tightened or
  added (``maxLength``, ``minimum``, ...); ``type-widened``: an answer value of a type it never
  had (``integer`` to ``number``);
* ``header-removed``: a response header an answer declared.

Additions are not breaking: a route, an optional request field, an answer field, a request enum
value, a header, a bound relaxed. An answer enum value added is not reported either (clients must
expect new error codes; the document says so).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "api"
CHANGELOG = ROOT / "docs" / "api-changelog.md"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_RELEASED = re.compile(r"openapi-(\d+)\.(\d+)\.(\d+)\.json")
_RECORD = re.compile(r"^\s*[-*]\s+`([^`]+)`", re.M)
# Bounds a request value must keep within: tightened when lowered (upper) or raised (lower).
_UPPER = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
_LOWER = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")


@dataclass(frozen=True)
class Change:
    """One breaking change: its kind, the operation part it is in, and what changed there."""

    kind: str
    where: str
    detail: str = ""

    @property
    def key(self) -> str:
        return ": ".join([self.kind, self.where] + ([self.detail] if self.detail else []))


def _at(path: str, text: str) -> str:
    return f"{path}: {text}" if path else text


class _Comparison:
    """One comparison of two documents; ``changes`` gathers what breaks."""

    def __init__(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.old, self.new = old, new
        self.changes: list[Change] = []

    def note(self, kind: str, where: str, detail: str = "") -> None:
        self.changes.append(Change(kind, where, detail))

    @staticmethod
    def resolve(document: dict[str, Any], node: Any) -> Any:
        seen: set[str] = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen or not ref.startswith("#/"):
                return {}
            seen.add(ref)
            node = document
            for part in ref[2:].split("/"):
                node = node.get(part.replace("~1", "/").replace("~0", "~"), {})
        return node if isinstance(node, dict) else {}

    def pair(self, old: Any, new: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.resolve(self.old, old), self.resolve(self.new, new)

    def schema_names(self) -> None:
        new_names = self.new.get("components", {}).get("schemas", {})
        for name in self.old.get("components", {}).get("schemas", {}):
            if name not in new_names:
                self.note("schema-removed", name)

    def operations(self) -> None:
        for path, old_item in self.old.get("paths", {}).items():
            new_item = self.new.get("paths", {}).get(path, {})
            for method in METHODS:
                if method not in old_item:
                    continue
                where = f"{method.upper()} {path}"
                if method not in new_item:
                    self.note("route-removed", where)
                    continue
                old_op, new_op = self.pair(old_item[method], new_item[method])
                old_id, new_id = old_op.get("operationId"), new_op.get("operationId")
                if old_id and old_id != new_id:
                    self.note("operation-renamed", where, f"{old_id} to {new_id}")
                self.parameters(where, old_item, old_op, new_item, new_op)
                self.request_body(where, old_op, new_op)
                self.responses(where, old_op, new_op)

    def parameters(
        self,
        where: str,
        old_item: dict[str, Any],
        old_op: dict[str, Any],
        new_item: dict[str, Any],
        new_op: dict[str, Any],
    ) -> None:
        def by_key(document: dict[str, Any], *owners: dict[str, Any]) -> dict[tuple[str, str], Any]:
            found: dict[tuple[str, str], Any] = {}
            for owner in owners:
                for parameter in owner.get("parameters", []):
                    resolved = self.resolve(document, parameter)
                    name = resolved.get("name", "")
                    location = resolved.get("in", "")
                    found[(location, name.lower() if location == "header" else name)] = resolved
            return found

        old, new = by_key(self.old, old_item, old_op), by_key(self.new, new_item, new_op)
        for key, parameter in new.items():
            if parameter.get("required") and not old.get(key, {}).get("required"):
                self.note("parameter-made-required", f"{where} {key[0]} {parameter['name']}")
        for key, parameter in old.items():
            named = f"{where} {key[0]} {parameter.get('name', '')}"
            if key not in new:
                self.note("parameter-removed", named)
            else:
                self.schema(named, "", parameter.get("schema"), new[key].get("schema"), True)

    def request_body(self, where: str, old_op: dict[str, Any], new_op: dict[str, Any]) -> None:
        old, new = self.pair(old_op.get("requestBody", {}), new_op.get("requestBody", {}))
        if new.get("required") and not old.get("required") and old:
            self.note("body-made-required", where)
        for media, old_media in old.get("content", {}).items():
            new_media = new.get("content", {}).get(media)
            if new_media is None:
                self.note("body-type-removed", where, media)
            else:
                old_schema, new_schema = old_media.get("schema"), new_media.get("schema")
                self.schema(f"{where} request body", "", old_schema, new_schema, True)

    def responses(self, where: str, old_op: dict[str, Any], new_op: dict[str, Any]) -> None:
        new_responses = new_op.get("responses", {})
        for status, old_response in old_op.get("responses", {}).items():
            if str(status) not in new_responses and status not in new_responses:
                if str(status).startswith("2"):
                    self.note("status-removed", f"{where} {status}")
                continue
            old, new = self.pair(
                old_response, new_responses.get(str(status), new_responses.get(status))
            )
            new_headers = {name.lower() for name in new.get("headers", {})}
            for name in old.get("headers", {}):
                if name.lower() not in new_headers:
                    self.note("header-removed", f"{where} {status}", name)
            for media, old_media in old.get("content", {}).items():
                new_media = new.get("content", {}).get(media, {})
                old_schema, new_schema = old_media.get("schema"), new_media.get("schema")
                self.schema(f"{where} {status} body", "", old_schema, new_schema, False)

    def schema(self, where: str, path: str, old: Any, new: Any, request: bool) -> None:
        """Compare two schemas; ``request``: a value a client sends (else: one it reads)."""
        old, new = self.pair(old, new)
        old_types, new_types = _types(self.old, old), _types(self.new, new)
        if request and not _admits(new_types, old_types):
            shown = f"{_shown(old_types)} to {_shown(new_types)}"
            self.note("type-narrowed", where, _at(path, shown))
        if not request and not _admits(old_types, new_types):
            shown = f"{_shown(old_types)} to {_shown(new_types)}"
            self.note("type-widened", where, _at(path, shown))
        if "enum" in old and "enum" in new:
            for value in old["enum"]:
                if value not in new["enum"]:
                    self.note("enum-value-removed", where, _at(path, str(value)))
        if request:
            self.bounds(where, path, old, new)
        self.properties(where, path, old, new, request)
        if "items" in old and "items" in new:
            self.schema(where, f"{path}[]", old["items"], new["items"], request)
        old_member, new_member = _single_member(self.old, old), _single_member(self.new, new)
        if old_member is not None and new_member is not None:
            self.schema(where, path, old_member, new_member, request)

    def bounds(self, where: str, path: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        for name in _UPPER + _LOWER:
            if name not in new or old.get(name) == new[name]:
                continue
            before = old.get(name)
            upper = name in _UPPER
            if before is None or (new[name] < before if upper else new[name] > before):
                shown = f"{name} {'none' if before is None else before} to {new[name]}"
                self.note("bound-narrowed", where, _at(path, shown))

    def properties(
        self, where: str, path: str, old: dict[str, Any], new: dict[str, Any], request: bool
    ) -> None:
        old_fields, new_fields = old.get("properties", {}), new.get("properties", {})
        old_required, new_required = set(old.get("required", [])), set(new.get("required", []))
        for name, schema in old_fields.items():
            field = f"{path}.{name}" if path else name
            if name not in new_fields:
                self.note("field-removed", where, field)
                continue
            self.schema(where, field, schema, new_fields[name], request)
            if not request and name in old_required and name not in new_required:
                self.note("field-made-optional", where, field)
        if request and (old_fields or new_fields):
            for name in sorted(new_required - old_required):
                self.note("field-made-required", where, f"{path}.{name}" if path else name)


def _types(document: dict[str, Any], schema: dict[str, Any]) -> frozenset[str] | None:
    """The JSON types a schema admits; None: any."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset([declared])
    if isinstance(declared, list):
        return frozenset(declared)
    members = schema.get("anyOf") or schema.get("oneOf")
    if members:
        found: set[str] = set()
        for member in members:
            types = _types(document, _Comparison.resolve(document, member))
            if types is None:
                return None
            found |= types
        return frozenset(found)
    return None


def _admits(wide: frozenset[str] | None, narrow: frozenset[str] | None) -> bool:
    """Whether every value of type set ``narrow`` is of type set ``wide`` (``number`` holds
    ``integer``)."""
    if wide is None:
        return True
    if narrow is None:
        return False
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow)


def _shown(types: frozenset[str] | None) -> str:
    return "any" if types is None else ", ".join(sorted(types))


def _single_member(document: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The one non-null member of an ``anyOf``/``oneOf`` (``Optional[Model]``), if that is what
    it is."""
    members = schema.get("anyOf") or schema.get("oneOf") or []
    kept = [m for m in members if _Comparison.resolve(document, m).get("type") != "null"]
    return kept[0] if len(kept) == 1 else None


def breaking_changes(released: dict[str, Any], current: dict[str, Any]) -> list[Change]:
    """Every breaking change from ``released`` to ``current``, in document order, once each."""
    comparison = _Comparison(released, current)
    comparison.operations()
    comparison.schema_names()
    return list(dict.fromkeys(comparison.changes))


def recorded(changelog: str) -> set[str]:
    """The change keys the changelog's "Unreleased" section records (``- `key`: why``)."""
    matched = re.search(r"^## Unreleased\b.*?(?=^## |\Z)", changelog, re.M | re.S)
    return set(_RECORD.findall(matched.group(0))) if matched else set()


def unrecorded(changes: list[Change], changelog: str) -> list[Change]:
    keys = recorded(changelog)
    return [change for change in changes if change.key not in keys]


def releases() -> Iterator[tuple[tuple[int, int, int], Path]]:
    for path in RELEASES.glob("openapi-*.json"):
        matched = _RELEASED.fullmatch(path.name)
        if matched:
            major, minor, patch = (int(part) for part in matched.groups())
            yield (major, minor, patch), path


def latest_release() -> tuple[str, dict[str, Any]]:
    """The newest released document: its version and content."""
    version, path = max(releases())
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return ".".join(map(str, version)), document


def served() -> dict[str, Any]:
    from local import docs

    return docs.document()


def report(version: str, changes: list[Change]) -> str:
    lines = [
        f"{len(changes)} breaking change(s) since the released {version} "
        f"(api/openapi-{version}.json) that {CHANGELOG.relative_to(ROOT)} does not record:"
    ]
    lines += [f"  - `{change.key}`" for change in changes]
    lines.append(
        "Undo each, or record it under '## Unreleased' as a bullet starting with its key in "
        "backticks, then what a client does about it (the next release is then a MAJOR one)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--release", metavar="VERSION", help="write the served document as api/openapi-VERSION.json"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "functions"))
    current = served()
    if args.release:
        if current["info"]["version"] != args.release:
            print(f"the served document is version {current['info']['version']}", file=sys.stderr)
            return 2
        target = RELEASES / f"openapi-{args.release}.json"
        target.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
        print(f"released: {target.relative_to(ROOT)}")
        return 0
    version, promised = latest_release()
    changes = breaking_changes(promised, current)
    left = unrecorded(changes, CHANGELOG.read_text(encoding="utf-8"))
    if left:
        print(report(version, left), file=sys.stderr)
        return 1
    print(
        f"the served document ({current['info']['version']}) keeps the released {version}: "
        f"{len(changes)} breaking change(s), each recorded in {CHANGELOG.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
