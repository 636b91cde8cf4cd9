"""Request schemas as plain JSON Schema (draft 4 subset), and a strict validator for them.

The same dictionaries become API Gateway request models (so bad bodies can be refused before a
Lambda runs), OpenAPI components, and the validation each handler does itself (so the local server
and a direct invocation refuse them too). Supported keywords: type, properties, required,
additionalProperties, minProperties, minimum, maximum, minLength, maxLength, pattern, enum.

Strictness that matters for money: ``true`` is not an integer, ``3.0`` and ``"3"`` are not
integers, ``1e40`` is not an integer, and NaN/Infinity never get past the JSON parser.
"""

from __future__ import annotations

import functools
import re
from typing import Any

Schema = dict[str, Any]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"


def string(min_length: int = 1, max_length: int = 256, pattern: str | None = None) -> Schema:
    schema: Schema = {"type": "string", "minLength": min_length, "maxLength": max_length}
    if pattern:
        schema["pattern"] = pattern
    return schema


def identifier() -> Schema:
    return string(1, 128, ID_PATTERN)


def integer(minimum: int, maximum: int) -> Schema:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def number(minimum: float, maximum: float) -> Schema:
    return {"type": "number", "minimum": minimum, "maximum": maximum}


def enum(*choices: str) -> Schema:
    return {"type": "string", "enum": list(choices)}


def obj(
    required: dict[str, Schema], optional: dict[str, Schema] | None = None, **extra: Any
) -> Schema:
    schema: Schema = {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "additionalProperties": False,
        **extra,
    }
    if required:
        schema["required"] = sorted(required)
    return schema


@functools.cache
def _pattern(pattern: str) -> re.Pattern[str]:
    """JSON Schema patterns follow ECMA-262, where ``$`` ends the input. In Python ``$`` also
    matches before a final newline ("abc\\n" would pass and reach a Location header), so an
    ending ``$`` is read as ``\\Z`` here."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise ValueError(f"unsupported schema type {expected!r}")


def errors(schema: Schema, value: Any, where: str = "body") -> list[str]:
    """Every way ``value`` breaks ``schema``, as human-readable sentences (empty when valid)."""
    expected = schema.get("type")
    if expected and not _type_ok(expected, value):
        return [f"{where} must be {'an' if expected[0] in 'aeiou' else 'a'} {expected}"]
    found: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where} must be one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            found.append(f"{where} must have at least {schema['minLength']} characters")
        if len(value) > schema.get("maxLength", len(value)):
            found.append(f"{where} must have at most {schema['maxLength']} characters")
        if "pattern" in schema and not _pattern(schema["pattern"]).search(value):
            found.append(f"{where} has characters that are not allowed")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(f"{where} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            found.append(f"{where} must be at most {schema['maximum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                found.append(f"{where}.{name} is required")
        if len(value) < schema.get("minProperties", 0):
            found.append(f"{where} must set at least one of {', '.join(sorted(properties))}")
        for name, item in value.items():
            if name in properties:
                found.extend(errors(properties[name], item, f"{where}.{name}"))
            elif schema.get("additionalProperties") is False:
                found.append(f"{where}.{name} is not a known field")
    return found
