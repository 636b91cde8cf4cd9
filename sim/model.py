"""An in-memory DynamoDB for the simulator: the operations and expression subset turnstile sends.

Why hand-written: the simulator's budget is thousands of DynamoDB calls per wall second, and moto's
backend, even driven in-process, spends about 3 ms on one conditional update (botocore's
serialization, moto's request dispatch and expression parser run on every call). No maintained
library models DynamoDB's semantics in memory without that cost. This one takes the same keyword
arguments a boto3 low-level client takes and answers the same dictionaries (wire-typed values,
``{"S": "x"}``), raising botocore's :class:`~botocore.exceptions.ClientError` with DynamoDB's error
codes, so the library's own code runs against it unchanged. Parsed expressions are cached by their
text: the library sends the same few expressions over and over.

What it models (each checked against DynamoDB Local by tests/sim/test_differential.py):

- tables with a partition key and an optional sort key; global secondary indexes, sparse (an item
  without the index's key attributes is not in the index);
- PutItem, GetItem, UpdateItem, DeleteItem with ``ConditionExpression``, ``ReturnValues`` and
  ``ReturnValuesOnConditionCheckFailure``; Query (key conditions, ``FilterExpression``,
  ``ProjectionExpression``, ``Limit``, ``ExclusiveStartKey``, ``ScanIndexForward``, ``Select``),
  Scan, BatchGetItem, TransactWriteItems (Put, Update, Delete, ConditionCheck; cancellation
  reasons with the ALL_OLD image; one item twice refused);
- conditions: comparisons, ``BETWEEN``, ``IN``, ``AND``/``OR``/``NOT``, ``attribute_exists``,
  ``attribute_not_exists``, ``attribute_type``, ``begins_with``, ``contains``, ``size``;
- updates: ``SET`` (``+``/``-``, ``if_not_exists``, ``list_append``), ``REMOVE``, ``ADD``,
  ``DELETE``; nested paths (``a.b``, ``a[0]``);
- the validation DynamoDB does before reading the item: an unused or missing expression name or
  value, a key attribute in an update, two actions on one path.

What it does not model: capacity, throttling and transaction conflicts (the simulator's faults
inject those), item and request size limits, TTL deletion, Scan segments, LSIs, PartiQL,
the ClientRequestToken (:class:`sim.ddb.SimClient` keeps it), and the exact wording of error
messages (only codes are compared).

Streams: a table created with a ``StreamSpecification`` keeps one ordered log of its changes
(:meth:`Model.stream_records`): each applied write that changes the item (a Put, Update or Delete,
each element of a TransactWriteItems) appends one record with its ``eventName`` (INSERT, MODIFY,
REMOVE), ``Keys``, the images its view type asks for, and an increasing ``SequenceNumber``; a
refused write or one that changes nothing appends none. Not modelled: shards and their splitting
(the reader, :mod:`sim.streams`, splits the log itself), the 24-hour retention, TTL deletions'
records, ``ApproximateCreationDateTime``, ``SizeBytes``, and the Streams API (DescribeStream,
GetShardIterator, GetRecords).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from botocore.exceptions import ClientError

Wire = dict[str, Any]  # one wire-typed value: {"S": "x"}, {"N": "1"}, {"L": [...]}, ...
Item = dict[str, Wire]


def _error(operation: str, code: str, message: str, **extra: Any) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **extra,
    }
    return ClientError(response, operation)


class _Invalid(Exception):
    """A ValidationException, raised where the operation's name is not known yet."""


class _CheckFailed(Exception):
    """A condition that did not hold; ``old`` is the item it was evaluated on."""

    def __init__(self, old: Item | None) -> None:
        self.old = old


# ---------------------------------------------------------------------------------------------
# Values


def _number(text: str) -> Decimal:
    return Decimal(text)


def _canonical(text: str) -> str:
    """A number as DynamoDB answers it: no exponent, no trailing zeros, no leading zeros."""
    value = Decimal(text).normalize()
    if value == 0:
        return "0"
    rendered = format(value, "f")
    return rendered


def _normalized(value: Wire) -> Wire:
    ((kind, inner),) = value.items()
    if kind == "N":
        return {"N": _canonical(inner)}
    if kind == "NS":  # sets answer in order, as DynamoDB Local's do
        return {"NS": sorted({_canonical(v) for v in inner}, key=Decimal)}
    if kind in ("SS", "BS"):
        return {kind: sorted(set(inner))}
    if kind == "L":
        return {"L": [_normalized(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _normalized(v) for k, v in inner.items()}}
    return value


def _same(a: Wire, b: Wire) -> bool:
    ((ka, va),) = a.items()
    ((kb, vb),) = b.items()
    if ka != kb:
        return False
    if ka == "N":
        return _number(va) == _number(vb)
    if ka in ("SS", "BS"):
        return set(va) == set(vb)
    if ka == "NS":
        return {_number(v) for v in va} == {_number(v) for v in vb}
    if ka == "L":
        return len(va) == len(vb) and all(_same(x, y) for x, y in zip(va, vb, strict=True))
    if ka == "M":
        return va.keys() == vb.keys() and all(_same(va[k], vb[k]) for k in va)
    return bool(va == vb)


def _order(value: Wire) -> tuple[str, Any]:
    """A sort key for comparing two values of one scalar type (N numerically, S by UTF-8 bytes)."""
    ((kind, inner),) = value.items()
    if kind == "N":
        return kind, _number(inner)
    if kind == "S":
        return kind, inner.encode()
    if kind == "B":
        return kind, inner if isinstance(inner, bytes) else bytes(inner)
    return kind, None


def _compare(op: str, a: Wire | None, b: Wire | None) -> bool:
    if a is None or b is None:
        return False
    if op == "=":
        return _same(a, b)
    if op == "<>":
        return not _same(a, b)
    (ka,) = a
    (kb,) = b
    if ka != kb or ka not in ("N", "S", "B"):
        return False
    x, y = _order(a)[1], _order(b)[1]
    if op == "<":
        return bool(x < y)
    if op == "<=":
        return bool(x <= y)
    if op == ">":
        return bool(x > y)
    return bool(x >= y)


def _copied(value: Any) -> Any:
    """A copy of a wire-shaped value (dicts and lists of strings, bools, bytes and numbers) that
    shares nothing mutable with it. ``copy.deepcopy`` did the same at about four times the cost
    (its memo and dispatch), and copying was a tenth of a seed's time."""
    if type(value) is dict:
        return {name: _copied(inner) for name, inner in value.items()}
    if type(value) is list:
        return [_copied(inner) for inner in value]
    return value


def _copy_item(item: Item) -> Item:
    copied: Item = _copied(item)
    return copied


def _same_item(a: Item | None, b: Item | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.keys() == b.keys() and all(_same(a[name], b[name]) for name in a)


# ---------------------------------------------------------------------------------------------
# Expressions: tokens, then a small recursive-descent parser into tuples, cached by text.

_TOKEN = re.compile(
    r"\s*(?:(?P<op><>|<=|>=|=|<|>|\(|\)|,|\.|\[|\]|\+|-)|(?P<name>#[A-Za-z0-9_]+)"
    r"|(?P<value>:[A-Za-z0-9_]+)|(?P<number>\d+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"}


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    at = 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise _Invalid(f"Invalid expression: unexpected text at {text[at:]!r}")
        token = match.group(match.lastgroup or "")
        out.append(token.upper() if token.upper() in _KEYWORDS else token)
        at = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.names: set[str] = set()
        self.values: set[str] = set()

    def peek(self, offset: int = 0) -> str | None:
        at = self.at + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise _Invalid(f"Invalid expression: expected {expected or 'more'}, found {token}")
        self.at += 1
        return token

    def done(self) -> bool:
        return self.at >= len(self.tokens)

    # paths and operands -----------------------------------------------------------------------
    def path(self) -> tuple[Any, ...]:
        parts: list[Any] = [self.segment()]
        while self.peek() in (".", "["):
            if self.take() == ".":
                parts.append(self.segment())
            else:
                parts.append(int(self.take()))
                self.take("]")
        return ("path", tuple(parts))

    def segment(self) -> str:
        token = self.take()
        if token.startswith("#"):
            self.names.add(token)
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token) or token in _KEYWORDS:
            raise _Invalid(f"Invalid expression: unexpected token {token}")
        return token

    def operand(self) -> tuple[Any, ...]:
        token = self.peek()
        if token is not None and token.startswith(":"):
            self.values.add(self.take())
            return ("value", token)
        if token == "size" and self.peek(1) == "(":
            self.take()
            self.take("(")
            inner = self.path()
            self.take(")")
            return ("size", inner)
        return self.path()

    # conditions -------------------------------------------------------------------------------
    def condition(self) -> tuple[Any, ...]:
        node = self.conjunction()
        while self.peek() == "OR":
            self.take()
            node = ("or", node, self.conjunction())
        return node

    def conjunction(self) -> tuple[Any, ...]:
        node = self.negation()
        while self.peek() == "AND":
            self.take()
            node = ("and", node, self.negation())
        return node

    def negation(self) -> tuple[Any, ...]:
        if self.peek() == "NOT":
            self.take()
            return ("not", self.negation())
        return self.primary()

    _FUNCTIONS = ("attribute_exists", "attribute_not_exists", "attribute_type", "begins_with")

    def primary(self) -> tuple[Any, ...]:
        token = self.peek()
        if token == "(":
            self.take()
            node = self.condition()
            self.take(")")
            return node
        if token in (*self._FUNCTIONS, "contains") and self.peek(1) == "(":
            self.take()
            self.take("(")
            args = [self.operand()]
            while self.peek() == ",":
                self.take()
                args.append(self.operand())
            self.take(")")
            return ("call", token, tuple(args))
        left = self.operand()
        op = self.take()
        if op in ("=", "<>", "<", "<=", ">", ">="):
            return ("cmp", op, left, self.operand())
        if op == "BETWEEN":
            low = self.operand()
            self.take("AND")
            return ("between", left, low, self.operand())
        if op == "IN":
            self.take("(")
            options = [self.operand()]
            while self.peek() == ",":
                self.take()
                options.append(self.operand())
            self.take(")")
            return ("in", left, tuple(options))
        raise _Invalid(f"Invalid expression: unexpected token {op}")

    # updates ----------------------------------------------------------------------------------
    def update(self) -> list[tuple[Any, ...]]:
        actions: list[tuple[Any, ...]] = []
        seen: set[str] = set()
        while not self.done():
            clause = self.take()
            if clause not in ("SET", "REMOVE", "ADD", "DELETE") or clause in seen:
                raise _Invalid(f"Invalid UpdateExpression: unexpected {clause}")
            seen.add(clause)
            while True:
                target = self.path()
                if clause == "SET":
                    self.take("=")
                    actions.append(("set", target, self.set_value()))
                elif clause == "REMOVE":
                    actions.append(("remove", target))
                else:
                    actions.append((clause.lower(), target, self.operand()))
                if self.peek() != ",":
                    break
                self.take()
        if not actions:
            raise _Invalid("Invalid UpdateExpression: empty")
        return actions

    def set_value(self) -> tuple[Any, ...]:
        left = self.set_term()
        if self.peek() in ("+", "-"):
            op = self.take()
            return ("arith", op, left, self.set_term())
        return left

    def set_term(self) -> tuple[Any, ...]:
        token = self.peek()
        if token in ("if_not_exists", "list_append") and self.peek(1) == "(":
            self.take()
            self.take("(")
            first = self.set_value() if token == "list_append" else self.path()
            self.take(",")
            second = self.set_value()
            self.take(")")
            return (token, first, second)
        return self.operand()

    # projections ------------------------------------------------------------------------------
    def projection(self) -> list[tuple[Any, ...]]:
        paths = [self.path()]
        while self.peek() == ",":
            self.take()
            paths.append(self.path())
        return paths


@dataclass(frozen=True)
class _Parsed:
    tree: Any
    names: frozenset[str]
    values: frozenset[str]


@lru_cache(maxsize=4096)
def _parse(kind: str, text: str) -> _Parsed:
    parser = _Parser(text)
    if kind == "condition":
        tree: Any = parser.condition()
    elif kind == "update":
        tree = parser.update()
    else:
        tree = parser.projection()
    if not parser.done():
        raise _Invalid(f"Invalid {kind} expression: unexpected {parser.peek()}")
    return _Parsed(tree, frozenset(parser.names), frozenset(parser.values))


# ---------------------------------------------------------------------------------------------
# Evaluation


@dataclass
class _Scope:
    """The item an expression reads and the request's names and values."""

    item: Item | None
    names: Mapping[str, str]
    values: Mapping[str, Wire]

    def resolve(self, path: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.names[p] if isinstance(p, str) and p.startswith("#") else p for p in path)

    def get(self, path: tuple[Any, ...]) -> Wire | None:
        current: Any = {"M": self.item or {}}
        for part in self.resolve(path):
            if isinstance(part, int):
                inner = current.get("L")
                if inner is None or part >= len(inner):
                    return None
                current = inner[part]
            else:
                inner = current.get("M")
                if inner is None or part not in inner:
                    return None
                current = inner[part]
        return current

    def operand(self, node: tuple[Any, ...]) -> Wire | None:
        if node[0] == "value":
            return self.values[node[1]]
        if node[0] == "size":
            found = self.get(node[1][1])
            if found is None:
                return None
            ((kind, inner),) = found.items()
            if kind == "N" or kind in ("BOOL", "NULL"):
                return None
            if kind == "S":
                return {"N": str(len(inner.encode()))}
            return {"N": str(len(inner))}
        return self.get(node[1])

    def holds(self, node: tuple[Any, ...]) -> bool:
        kind = node[0]
        if kind == "and":
            return self.holds(node[1]) and self.holds(node[2])
        if kind == "or":
            return self.holds(node[1]) or self.holds(node[2])
        if kind == "not":
            return not self.holds(node[1])
        if kind == "cmp":
            return _compare(node[1], self.operand(node[2]), self.operand(node[3]))
        if kind == "between":
            value = self.operand(node[1])
            return _compare(">=", value, self.operand(node[2])) and _compare(
                "<=", value, self.operand(node[3])
            )
        if kind == "in":
            value = self.operand(node[1])
            return any(_compare("=", value, self.operand(option)) for option in node[2])
        return self._call(node[1], node[2])

    def _call(self, name: str, args: tuple[Any, ...]) -> bool:
        if name in ("attribute_exists", "attribute_not_exists"):
            if args[0][0] != "path":
                raise _Invalid(f"Invalid ConditionExpression: {name} takes a path")
            present = self.get(args[0][1]) is not None
            return present if name == "attribute_exists" else not present
        subject = self.operand(args[0])
        other = self.operand(args[1])
        if subject is None or other is None:
            return False
        ((kind, inner),) = subject.items()
        ((other_kind, other_inner),) = other.items()
        if name == "attribute_type":
            return bool(kind == other_inner)
        if name == "begins_with":
            return kind == other_kind and kind in ("S", "B") and inner.startswith(other_inner)
        # contains
        if kind == "S":
            return other_kind == "S" and other_inner in inner
        if kind in ("SS", "NS", "BS"):
            return any(_same({kind[0]: v}, other) for v in inner)
        if kind == "L":
            return any(_same(v, other) for v in inner)
        return False


def _check_references(
    parsed: Iterable[_Parsed], names: Mapping[str, str] | None, values: Mapping[str, Wire] | None
) -> None:
    used_names: set[str] = set()
    used_values: set[str] = set()
    for one in parsed:
        used_names |= one.names
        used_values |= one.values
    given_names = set(names or {})
    given_values = set(values or {})
    if used_names - given_names:
        missing = sorted(used_names - given_names)[0]
        raise _Invalid(
            "An expression attribute name used in the document path is not defined; "
            f"attribute name: {missing}"
        )
    if used_values - given_values:
        missing = sorted(used_values - given_values)[0]
        raise _Invalid(
            "An expression attribute value used in expression is not defined; "
            f"attribute value: {missing}"
        )
    for kind, unused in (
        ("Names", given_names - used_names),
        ("Values", given_values - used_values),
    ):
        if unused:
            listed = ", ".join(sorted(unused))
            raise _Invalid(
                f"Value provided in ExpressionAttribute{kind} unused in expressions: "
                f"keys: {{{listed}}}"
            )


def _arith(op: str, a: Wire | None, b: Wire | None) -> Wire:
    if a is None or b is None:
        raise _Invalid(
            "The provided expression refers to an attribute that does not exist in the item"
        )
    if "N" not in a or "N" not in b:
        raise _Invalid("An operand in the update expression has an incorrect data type")
    x, y = _number(a["N"]), _number(b["N"])
    return {"N": _canonical(str(x + y if op == "+" else x - y))}


def _set_value(scope: _Scope, node: tuple[Any, ...]) -> Wire:
    kind = node[0]
    if kind == "arith":
        return _arith(node[1], _set_value(scope, node[2]), _set_value(scope, node[3]))
    if kind == "if_not_exists":
        found = scope.get(node[1][1])
        return found if found is not None else _set_value(scope, node[2])
    if kind == "list_append":
        first, second = _set_value(scope, node[1]), _set_value(scope, node[2])
        if "L" not in first or "L" not in second:
            raise _Invalid("An operand in the update expression has an incorrect data type")
        return {"L": [*first["L"], *second["L"]]}
    found = scope.operand(node)
    if found is None:
        raise _Invalid(
            "The provided expression refers to an attribute that does not exist in the item"
        )
    return found


def _write_path(item: Item, path: tuple[Any, ...], value: Wire | None) -> None:
    """Set (or, with ``value`` None, remove) ``path`` in ``item``."""
    if len(path) == 1:
        if value is None:
            item.pop(path[0], None)
        else:
            item[path[0]] = value
        return
    parent: Any = item.get(path[0])
    for part in path[1:-1]:
        if parent is None:
            break
        parent = parent.get("L")[part] if isinstance(part, int) else parent.get("M", {}).get(part)
    if parent is None:
        raise _Invalid("The document path provided in the update expression is invalid for update")
    last = path[-1]
    if isinstance(last, int):
        items = parent.get("L")
        if items is None:
            raise _Invalid(
                "The document path provided in the update expression is invalid for update"
            )
        if value is None:
            if last < len(items):
                del items[last]
        elif last < len(items):
            items[last] = value
        else:
            items.append(value)
    else:
        members = parent.get("M")
        if members is None:
            raise _Invalid(
                "The document path provided in the update expression is invalid for update"
            )
        if value is None:
            members.pop(last, None)
        else:
            members[last] = value


def _apply_update(
    actions: list[tuple[Any, ...]], scope: _Scope, keys: Iterable[str]
) -> tuple[Item, set[str]]:
    """The item after ``actions`` (all evaluated on the item before any applies, as DynamoDB
    does) and the top-level attributes they touched."""
    old = scope.item or {}
    paths = [scope.resolve(action[1][1]) for action in actions]
    _check_paths(paths, keys)
    new = _copied(old)
    writes: list[tuple[tuple[Any, ...], Wire | None]] = []
    for action, path in zip(actions, paths, strict=True):
        kind = action[0]
        if kind == "set":
            writes.append((path, _set_value(scope, action[2])))
        elif kind == "remove":
            writes.append((path, None))
        else:
            writes.append(
                (path, _add_or_delete(kind, scope.get(action[1][1]), scope.operand(action[2])))
            )
    for path, value in writes:
        _write_path(new, path, value)
    return new, {path[0] for path in paths}


def _check_paths(paths: list[tuple[Any, ...]], keys: Iterable[str]) -> None:
    key_names = set(keys)
    for i, path in enumerate(paths):
        if path[0] in key_names:
            raise _Invalid(
                f"One or more parameter values were invalid: Cannot update attribute {path[0]}. "
                "This attribute is part of the key"
            )
        for other in paths[i + 1 :]:
            shorter = min(len(path), len(other))
            if path[:shorter] == other[:shorter]:
                raise _Invalid(
                    "Invalid UpdateExpression: Two document paths overlap with each other"
                )


def _add_or_delete(kind: str, current: Wire | None, value: Wire | None) -> Wire | None:
    if value is None:
        raise _Invalid("An expression attribute value used in expression is not defined")
    ((value_kind, inner),) = value.items()
    if kind == "add":
        if value_kind == "N":
            if current is None:
                return {"N": _canonical(inner)}
            return _arith("+", current, value)
        if value_kind in ("SS", "NS", "BS"):
            if current is None:
                return _normalized(value)
            if value_kind not in current:
                raise _Invalid("An operand in the update expression has an incorrect data type")
            return _normalized({value_kind: [*current[value_kind], *inner]})
        raise _Invalid("Incorrect operand type for operator or function; operator: ADD")
    if value_kind not in ("SS", "NS", "BS"):
        raise _Invalid("Incorrect operand type for operator or function; operator: DELETE")
    if current is None:
        return None
    if value_kind not in current:
        raise _Invalid("An operand in the update expression has an incorrect data type")
    kept = [
        m
        for m in current[value_kind]
        if not any(_same({value_kind: m}, {value_kind: v}) for v in inner)
    ]
    return _normalized({value_kind: kept}) if kept else None


def _project(item: Item, projection: str | None, names: Mapping[str, str] | None) -> Item:
    if projection is None:
        return _copy_item(item)
    parsed = _parse("projection", projection)
    scope = _Scope(item, names or {}, {})
    out: Item = {}
    for node in parsed.tree:
        path = scope.resolve(node[1])
        found = scope.get(node[1])
        if found is None:
            continue
        if len(path) == 1:
            out[path[0]] = _copied(found)
        else:  # a nested projection keeps the enclosing maps; lists are not modelled
            target: Any = out.setdefault(path[0], {"M": {}})
            for part in path[1:-1]:
                target = target["M"].setdefault(part, {"M": {}})
            target["M"][path[-1]] = _copied(found)
    return out


def _first_segments(tree: Any) -> set[str]:
    """The top-level attribute (or ``#name``) of every path in a parsed expression."""
    found: set[str] = set()
    if isinstance(tree, tuple) and tree and tree[0] == "path":
        found.add(tree[1][0])
    elif isinstance(tree, (tuple, list)):
        for part in tree:
            found |= _first_segments(part)
    return found


def _end_bound(
    tree: tuple[Any, ...],
    range_key: str | None,
    names: Mapping[str, str],
    values: Mapping[str, Wire],
    forward: bool,
) -> tuple[str, Wire] | None:
    """The sort key's inclusive bound a query reads towards (``sk <= :v`` read forwards,
    ``sk >= :v`` backwards, either end of ``BETWEEN``, ``sk = :v``), as (attribute, value)."""
    if range_key is None or tree[0] != "and":
        return None
    condition = tree[2]
    scope = _Scope(None, names, values)
    if condition[0] == "between":
        return range_key, scope.operand(condition[3] if forward else condition[2]) or {}
    if condition[0] == "cmp" and condition[1] in ("=", "<=" if forward else ">="):
        return range_key, scope.operand(condition[3]) or {}
    return None


def _on_bound(item: Item, end: tuple[str, Wire] | None) -> bool:
    return end is not None and end[0] in item and _compare("=", item[end[0]], end[1])


# ---------------------------------------------------------------------------------------------
# Tables


@dataclass
class _Index:
    name: str
    hash_key: str
    range_key: str | None
    projection: str = "ALL"  # ALL, KEYS_ONLY or INCLUDE
    included: tuple[str, ...] = ()

    def project(self, item: Item, table_keys: tuple[str, ...]) -> Item:
        """What the index holds of ``item``: all of it, or its keys (and the included ones)."""
        if self.projection == "ALL":
            return item
        kept = {*table_keys, self.hash_key, *([self.range_key] if self.range_key else [])}
        kept.update(self.included)
        return {name: value for name, value in item.items() if name in kept}


@dataclass
class _Table:
    name: str
    hash_key: str
    range_key: str | None
    types: dict[str, str]
    indexes: dict[str, _Index]
    items: dict[tuple[Any, ...], Item] = field(default_factory=dict)
    description: dict[str, Any] = field(default_factory=dict)
    view: str | None = None  # the stream's StreamViewType; None: no stream
    stream: list[dict[str, Any]] = field(default_factory=list)

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.hash_key,) if self.range_key is None else (self.hash_key, self.range_key)

    def key_of(self, key: Mapping[str, Wire], operation: str) -> tuple[Any, ...]:
        if set(key) != set(self.keys):
            raise _error(
                operation,
                "ValidationException",
                "The provided key element does not match the schema",
            )
        out = []
        for name in self.keys:
            value = key[name]
            ((kind, inner),) = value.items()
            if kind != self.types[name]:
                raise _error(
                    operation,
                    "ValidationException",
                    "The provided key element does not match the schema",
                )
            if kind == "S" and inner == "":
                raise _error(
                    operation,
                    "ValidationException",
                    "One or more parameter values are not valid. The AttributeValue for a key "
                    "attribute cannot contain an empty string value.",
                )
            out.append(_order(_normalized(value)))
        return tuple(out)


_OPERATIONS = {
    "put_item": "PutItem",
    "get_item": "GetItem",
    "update_item": "UpdateItem",
    "delete_item": "DeleteItem",
    "query": "Query",
    "scan": "Scan",
    "batch_get_item": "BatchGetItem",
    "transact_write_items": "TransactWriteItems",
    "create_table": "CreateTable",
    "delete_table": "DeleteTable",
    "describe_table": "DescribeTable",
}


def _validated(operation: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn the parser's and evaluator's validation failures into ClientErrors for ``operation``."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Model, **params: Any) -> Any:
            try:
                return method(self, **params)
            except _Invalid as exc:
                raise _error(_OPERATIONS[operation], "ValidationException", str(exc)) from None
            except KeyError as exc:
                raise _error(
                    _OPERATIONS[operation], "ValidationException", f"missing or unknown {exc}"
                ) from None

        call.__name__ = method.__name__
        call.__doc__ = method.__doc__
        return call

    return wrap


class Model:
    """One in-memory DynamoDB: the boto3 low-level client's methods the library calls."""

    def __init__(self) -> None:
        self._tables: dict[str, _Table] = {}
        self._sequence = 0  # the last stream record's sequence number, over every table

    # -- tables ------------------------------------------------------------------------------
    def create_table(self, **params: Any) -> dict[str, Any]:
        name = params["TableName"]
        if name in self._tables:
            raise _error("CreateTable", "ResourceInUseException", f"Table already exists: {name}")
        types = {d["AttributeName"]: d["AttributeType"] for d in params["AttributeDefinitions"]}
        schema = {k["KeyType"]: k["AttributeName"] for k in params["KeySchema"]}
        indexes = {}
        for index in params.get("GlobalSecondaryIndexes", []):
            keys = {k["KeyType"]: k["AttributeName"] for k in index["KeySchema"]}
            projection = index.get("Projection", {})
            indexes[index["IndexName"]] = _Index(
                index["IndexName"],
                keys["HASH"],
                keys.get("RANGE"),
                projection.get("ProjectionType", "ALL"),
                tuple(projection.get("NonKeyAttributes", ())),
            )
        description = {
            "TableName": name,
            "TableStatus": "ACTIVE",
            "KeySchema": params["KeySchema"],
            "AttributeDefinitions": params["AttributeDefinitions"],
        }
        spec = params.get("StreamSpecification") or {}
        view = spec.get("StreamViewType") if spec.get("StreamEnabled") else None
        if view is not None:
            description["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view}
            description["LatestStreamArn"] = f"arn:aws:dynamodb:sim:0:table/{name}/stream/0"
        self._tables[name] = _Table(
            name,
            schema["HASH"],
            schema.get("RANGE"),
            types,
            indexes,
            description=description,
            view=view,
        )
        return {"TableDescription": description}

    # -- streams -----------------------------------------------------------------------------
    def stream_records(self, table_name: str, after: int = 0) -> list[dict[str, Any]]:
        """The stream's records of ``table_name`` written after the ``after``-th (all, from 0),
        oldest first, as GetRecords answers them (copies). One ordered log per table: stronger than
        DynamoDB's order (per item), which the reader may weaken by splitting it into shards."""
        table = self._table(table_name, "GetRecords")
        if table.view is None:
            raise _error("GetRecords", "ValidationException", f"{table_name} has no stream")
        return _copied(table.stream[after:])

    def _write(self, table: _Table, key: tuple[Any, ...], item: Item | None) -> None:
        """Store ``item`` at ``key`` (None: delete it) and, when the table has a stream and the
        item changed, append its record: INSERT, MODIFY or REMOVE. A write that changes nothing
        (the same item put again, an update to the values it has, a delete of no item) writes no
        record, as DynamoDB and DynamoDB Local do."""
        old = table.items.get(key)
        if item is None:
            table.items.pop(key, None)
        else:
            table.items[key] = item
        if table.view is None or _same_item(old, item):
            return
        self._sequence += 1
        source = item if item is not None else old
        assert source is not None
        change: dict[str, Any] = {
            "Keys": {name: _copied(source[name]) for name in table.keys},
            "SequenceNumber": f"{self._sequence:021d}",
            "StreamViewType": table.view,
        }
        if item is not None and table.view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            change["NewImage"] = _copied(item)
        if old is not None and table.view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            change["OldImage"] = _copied(old)
        name = "INSERT" if old is None else "MODIFY" if item is not None else "REMOVE"
        table.stream.append(
            {
                "eventID": f"{self._sequence:032x}",
                "eventName": name,
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "sim",
                "dynamodb": change,
            }
        )

    def delete_table(self, **params: Any) -> dict[str, Any]:
        table = self._table(params["TableName"], "DeleteTable")
        del self._tables[table.name]
        return {"TableDescription": table.description}

    def describe_table(self, **params: Any) -> dict[str, Any]:
        return {"Table": self._table(params["TableName"], "DescribeTable").description}

    def list_tables(self, **params: Any) -> dict[str, Any]:
        return {"TableNames": sorted(self._tables)}

    def _table(self, name: str, operation: str) -> _Table:
        table = self._tables.get(name)
        if table is None:
            raise _error(operation, "ResourceNotFoundException", "Requested resource not found")
        return table

    # -- single items ------------------------------------------------------------------------
    @_validated("get_item")
    def get_item(self, **params: Any) -> dict[str, Any]:
        table = self._table(params["TableName"], "GetItem")
        projection = params.get("ProjectionExpression")
        if projection is not None:
            _check_references(
                [_parse("projection", projection)], params.get("ExpressionAttributeNames"), None
            )
        found = table.items.get(table.key_of(params["Key"], "GetItem"))
        if found is None:
            return {}
        return {"Item": _project(found, projection, params.get("ExpressionAttributeNames"))}

    def _condition(
        self, params: Mapping[str, Any], extra: Iterable[_Parsed] = ()
    ) -> _Parsed | None:
        text = params.get("ConditionExpression")
        parsed = _parse("condition", text) if text is not None else None
        everything = [*extra, *([parsed] if parsed else [])]
        _check_references(
            everything,
            params.get("ExpressionAttributeNames"),
            params.get("ExpressionAttributeValues"),
        )
        return parsed

    @staticmethod
    def _require(parsed: _Parsed | None, old: Item | None, params: Mapping[str, Any]) -> None:
        if parsed is None:
            return
        scope = _Scope(
            old,
            params.get("ExpressionAttributeNames") or {},
            params.get("ExpressionAttributeValues") or {},
        )
        if not scope.holds(parsed.tree):
            raise _CheckFailed(old)

    @staticmethod
    def _failed(operation: str, failure: _CheckFailed, params: Mapping[str, Any]) -> ClientError:
        extra = {}
        if (
            params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
            and failure.old is not None
        ):
            extra["Item"] = _copy_item(failure.old)
        return _error(
            operation, "ConditionalCheckFailedException", "The conditional request failed", **extra
        )

    def _put_plan(
        self, params: Mapping[str, Any]
    ) -> tuple[_Table, tuple[Any, ...], Item | None, Item, _Parsed | None]:
        table = self._table(params["TableName"], "PutItem")
        item = {name: _normalized(value) for name, value in params["Item"].items()}
        key = table.key_of({k: item[k] for k in table.keys if k in item}, "PutItem")
        return table, key, table.items.get(key), item, self._condition(params)

    @_validated("put_item")
    def put_item(self, **params: Any) -> dict[str, Any]:
        table, key, old, item, parsed = self._put_plan(params)
        try:
            self._require(parsed, old, params)
        except _CheckFailed as failure:
            raise self._failed("PutItem", failure, params) from None
        self._write(table, key, item)
        if params.get("ReturnValues") == "ALL_OLD" and old is not None:
            return {"Attributes": _copy_item(old)}
        return {}

    def _update_plan(
        self, params: Mapping[str, Any]
    ) -> tuple[_Table, tuple[Any, ...], Item | None, _Parsed, _Parsed | None]:
        table = self._table(params["TableName"], "UpdateItem")
        key = table.key_of(params["Key"], "UpdateItem")
        update = _parse("update", params["UpdateExpression"])
        return table, key, table.items.get(key), update, self._condition(params, [update])

    def _updated(
        self, table: _Table, params: Mapping[str, Any], old: Item | None, update: _Parsed
    ) -> tuple[Item, set[str]]:
        scope = _Scope(
            old,
            params.get("ExpressionAttributeNames") or {},
            params.get("ExpressionAttributeValues") or {},
        )
        new, touched = _apply_update(update.tree, scope, table.keys)
        if old is None:
            for name in table.keys:
                new[name] = _normalized(params["Key"][name])
        return new, touched

    @_validated("update_item")
    def update_item(self, **params: Any) -> dict[str, Any]:
        table, key, old, update, parsed = self._update_plan(params)
        try:
            self._require(parsed, old, params)
        except _CheckFailed as failure:
            raise self._failed("UpdateItem", failure, params) from None
        new, touched = self._updated(table, params, old, update)
        self._write(table, key, new)
        returned = params.get("ReturnValues", "NONE")
        if returned == "ALL_NEW":
            return {"Attributes": _copy_item(new)}
        if returned == "ALL_OLD":
            return {"Attributes": _copy_item(old)} if old else {}
        if returned in ("UPDATED_NEW", "UPDATED_OLD"):
            source = new if returned == "UPDATED_NEW" else (old or {})
            picked = {name: _copied(source[name]) for name in touched if name in source}
            return {"Attributes": picked} if picked else {}
        return {}

    @_validated("delete_item")
    def delete_item(self, **params: Any) -> dict[str, Any]:
        table = self._table(params["TableName"], "DeleteItem")
        key = table.key_of(params["Key"], "DeleteItem")
        parsed = self._condition(params)
        old = table.items.get(key)
        try:
            self._require(parsed, old, params)
        except _CheckFailed as failure:
            raise self._failed("DeleteItem", failure, params) from None
        self._write(table, key, None)
        if params.get("ReturnValues") == "ALL_OLD" and old is not None:
            return {"Attributes": _copy_item(old)}
        return {}

    # -- transactions ------------------------------------------------------------------------
    @_validated("transact_write_items")
    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        elements = params["TransactItems"]
        if not 1 <= len(elements) <= 100:
            raise _Invalid("Member must have length between 1 and 100")
        plans: list[tuple[str, Any, Mapping[str, Any]]] = []
        seen: set[tuple[str, tuple[Any, ...]]] = set()
        for element in elements:
            ((kind, parts),) = element.items()
            if kind == "Put":
                table, key, _, item, parsed = self._put_plan(parts)
                plan: Any = (table, key, parsed, item)
            elif kind == "Update":
                table, key, _, update, parsed = self._update_plan(parts)
                plan = (table, key, parsed, update)
            elif kind in ("Delete", "ConditionCheck"):
                table = self._table(parts["TableName"], "TransactWriteItems")
                key = table.key_of(parts["Key"], "TransactWriteItems")
                parsed = self._condition(parts)
                if kind == "ConditionCheck" and parsed is None:
                    raise _Invalid("ConditionCheck requires a ConditionExpression")
                plan = (table, key, parsed, None)
            else:
                raise _Invalid(f"unknown transaction element {kind}")
            if (table.name, key) in seen:
                raise _Invalid("Transaction request cannot include multiple operations on one item")
            seen.add((table.name, key))
            plans.append((kind, plan, parts))
        reasons: list[dict[str, Any]] = []
        failed = False
        for kind, (table, key, parsed, payload), parts in plans:
            old = table.items.get(key)
            try:
                self._require(parsed, old, parts)
                # An update that cannot apply refuses the whole request, as DynamoDB Local does
                # (DynamoDB cancels it with the reason ValidationError).
                if kind == "Update":
                    self._updated(table, parts, old, payload)
                reasons.append({"Code": "None"})
            except _CheckFailed:
                failed = True
                reason: dict[str, Any] = {
                    "Code": "ConditionalCheckFailed",
                    "Message": "The conditional request failed",
                }
                if (
                    parts.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                    and old is not None
                ):
                    reason["Item"] = _copy_item(old)
                reasons.append(reason)
        if failed:
            codes = ", ".join(r["Code"] for r in reasons)
            raise _error(
                "TransactWriteItems",
                "TransactionCanceledException",
                "Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{codes}]",
                CancellationReasons=reasons,
            )
        writes = []
        for kind, (table, key, _, payload), parts in plans:
            if kind == "Put":
                writes.append((table, key, payload))
            elif kind == "Update":
                writes.append(
                    (table, key, self._updated(table, parts, table.items.get(key), payload)[0])
                )
            elif kind == "Delete":
                writes.append((table, key, None))
        for table, key, item in writes:
            self._write(table, key, item)
        return {}

    # -- reads of many items -----------------------------------------------------------------
    @_validated("batch_get_item")
    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        responses: dict[str, list[Item]] = {}
        total = sum(len(request["Keys"]) for request in params["RequestItems"].values())
        if total > 100:
            raise _Invalid("Too many items requested for the BatchGetItem call")
        for name, request in params["RequestItems"].items():
            table = self._table(name, "BatchGetItem")
            found = responses.setdefault(name, [])
            projection = request.get("ProjectionExpression")
            names = request.get("ExpressionAttributeNames")
            if projection is not None:
                _check_references([_parse("projection", projection)], names, None)
            keys = [table.key_of(key, "BatchGetItem") for key in request["Keys"]]
            if len(set(keys)) != len(keys):
                raise _Invalid("Provided list of item keys contains duplicates")
            for key in keys:
                item = table.items.get(key)
                if item is not None:
                    found.append(_project(item, projection, names))
        return {"Responses": responses, "UnprocessedKeys": {}}

    @_validated("scan")
    def scan(self, **params: Any) -> dict[str, Any]:
        table = self._table(params["TableName"], "Scan")
        return self._page(table.keys, table.keys, list(table.items.values()), params)

    @_validated("query")
    def query(self, **params: Any) -> dict[str, Any]:
        table = self._table(params["TableName"], "Query")
        index_name = params.get("IndexName")
        index: _Index | None = None
        if index_name is not None:
            index = table.indexes.get(index_name)
            if index is None:
                raise _Invalid(f"The table does not have the specified index: {index_name}")
            hash_key, range_key = index.hash_key, index.range_key
        else:
            hash_key, range_key = table.hash_key, table.range_key
        key_condition = _parse("condition", params["KeyConditionExpression"])
        extra = [key_condition]
        if params.get("FilterExpression"):
            extra.append(_parse("condition", params["FilterExpression"]))
        if params.get("ProjectionExpression"):
            extra.append(_parse("projection", params["ProjectionExpression"]))
        _check_references(
            extra, params.get("ExpressionAttributeNames"), params.get("ExpressionAttributeValues")
        )
        scope_names = params.get("ExpressionAttributeNames") or {}
        scope_values = params.get("ExpressionAttributeValues") or {}
        if index is not None and index.projection != "ALL":
            read = {
                scope_names.get(part, part)
                for parsed in extra[1:]
                for part in _first_segments(parsed.tree)
            }
            projected = index.project({name: {} for name in read}, table.keys)
            if set(projected) != read:
                raise _Invalid(
                    "One or more parameter values were invalid: an expression reads an attribute "
                    f"the index {index.name} does not project"
                )
        index_keys = (hash_key,) if range_key is None else (hash_key, range_key)
        project = index.project if index is not None else None
        rows = [
            project(item, table.keys) if project else item
            for item in table.items.values()
            if all(name in item for name in index_keys)  # sparse: others are not in the index
            and _Scope(item, scope_names, scope_values).holds(key_condition.tree)
        ]
        # Within a partition, by sort key; ties (an index's) by the table's key, for determinism.
        order_keys = (*index_keys[1:], *table.keys)
        page_keys = (*index_keys, *(k for k in table.keys if k not in index_keys))
        forward = params.get("ScanIndexForward", True)
        # An index's sort key is not unique: more items may share the bound, so no end is sure.
        end = None
        if index_name is None:
            end = _end_bound(key_condition.tree, range_key, scope_names, scope_values, forward)
        return self._page(order_keys, page_keys, rows, params, end)

    def _page(
        self,
        order_keys: tuple[str, ...],
        page_keys: tuple[str, ...],
        rows: list[Item],
        params: Mapping[str, Any],
        end: tuple[str, Wire] | None = None,
    ) -> dict[str, Any]:
        """One page of ``rows`` in ``order_keys`` order, from after ``ExclusiveStartKey``; a
        ``LastEvaluatedKey`` (the ``page_keys`` of the last item read) when ``Limit`` stopped it."""

        def position(item: Mapping[str, Wire]) -> tuple[Any, ...]:
            return tuple(_order(item[k]) for k in order_keys)

        forward = params.get("ScanIndexForward", True)
        rows = sorted(rows, key=position, reverse=not forward)
        start = params.get("ExclusiveStartKey")
        if start is not None:
            at = position(start)
            rows = [r for r in rows if (position(r) > at if forward else position(r) < at)]
        limit = params.get("Limit")
        last = None
        # Where Limit stopped the read, the last item read is where to continue. Stopped exactly at
        # the end, DynamoDB Local still answers it, unless a table's item sits on the key
        # condition's inclusive bound in the read's direction (nothing can follow); AWS may answer
        # either way (an empty last page follows), and the library's readers handle both.
        if limit is not None and (
            len(rows) > limit or (len(rows) == limit and not _on_bound(rows[-1], end))
        ):
            rows = rows[:limit]
            last = rows[-1]
        filter_text = params.get("FilterExpression")
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        scanned = len(rows)
        if filter_text:
            tree = _parse("condition", filter_text).tree
            rows = [item for item in rows if _Scope(item, names, values).holds(tree)]
        answer: dict[str, Any] = {"Count": len(rows), "ScannedCount": scanned}
        if params.get("Select") != "COUNT":
            projection = params.get("ProjectionExpression")
            answer["Items"] = [_project(item, projection, names) for item in rows]
        if last is not None:
            answer["LastEvaluatedKey"] = {k: _copied(last[k]) for k in page_keys}
        return answer
