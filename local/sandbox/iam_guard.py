"""A function's role policy, enforced on every DynamoDB call its boto3 clients make.

IAM in miniature for the one service the functions call: a call becomes the IAM requests AWS
authorizes (action, resource ARN, ``dynamodb:LeadingKeys``), each is evaluated against the role's
identity-based policy statements as synthesized, and a call any of them is not allowed for fails
before it is sent with the ``AccessDeniedException`` DynamoDB answers (botocore ``ClientError``,
AWS's message: "User: <assumed role> is not authorized to perform: dynamodb:X on resource: <arn>
because no identity-based policy allows the dynamodb:X action").

Which requests a call makes: the operation's own action on its table (``table/T``, or
``table/T/index/I`` for a Query or Scan on an index); ``TransactWriteItems`` has no IAM action of
its own, each element needs its per-item action (``Put`` -> ``PutItem``, ``Update`` ->
``UpdateItem``, ``Delete`` -> ``DeleteItem``, ``ConditionCheck`` -> ``ConditionCheckItem``) on its
table, and
``TransactGetItems`` needs ``GetItem``; a batch needs the batch action on each table it names.
``dynamodb:LeadingKeys`` holds the partition key values the request touches (from ``Key``, ``Item``
or a Query's ``pk = :v``); a Scan has none, so a ``ForAllValues`` condition holds for it, as on AWS.

Policy evaluation covers what identity policies of this stack use: ``Allow``/``Deny``, ``Action``
and ``NotAction``, ``Resource`` and ``NotResource`` with ``*``/``?`` wildcards (actions
case-insensitive), and conditions with ``StringEquals``/``StringLike`` (and their ``Not`` forms),
optionally under ``ForAllValues:``/``ForAnyValue:``. Any other condition operator or key makes
:class:`Guard` refuse the policy when it is built, never guess.

Hand-written, and why: no maintained library evaluates a request against an IAM policy (on PyPI
the IAM tools lint or summarize policies: parliament, cloudsplaining, iam-policy-validator; moto's
evaluator is private API), and this module runs inside the function's clean interpreter, which
holds only the asset, the layer and the standard library: it may import nothing else (botocore,
from the layer, only when a denial is raised). It is loaded from its file by the local runtime's
bootstrap (``local/sandbox/bootstrap.py``) and, for in-process tiers, by ``local.iam``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
SET_QUALIFIERS = ("ForAllValues:", "ForAnyValue:")
OPERATORS = ("StringEquals", "StringLike", "StringNotEquals", "StringNotLike")
CONDITION_KEYS = ("dynamodb:leadingkeys",)
EVENT = "before-parameter-build.dynamodb"


class UnsupportedPolicy(ValueError):
    """The policy uses an element this evaluator does not implement."""


@dataclass(frozen=True)
class Request:
    """One authorization request: ``action`` on ``resource``; ``leading_keys`` None: not given."""

    action: str
    resource: str
    leading_keys: tuple[str, ...] | None = None


# -- a call -> its IAM requests ---------------------------------------------------------------


def _scalar(value: Mapping[str, Any]) -> str:
    (typed,) = value.values()
    return typed.decode() if isinstance(typed, bytes) else str(typed)


class Calls:
    """Turns a DynamoDB call (operation name, the client's parameters) into IAM requests."""

    def __init__(self, region: str, account: str, hash_keys: Mapping[str, str]) -> None:
        self.region = region
        self.account = account
        self.hash_keys = dict(hash_keys)  # table name -> partition key attribute

    def table_arn(self, table: str, index: str | None = None) -> str:
        arn = f"arn:aws:dynamodb:{self.region}:{self.account}:table/{table}"
        return f"{arn}/index/{index}" if index else arn

    def _keys(self, table: str, items: Iterable[Mapping[str, Any] | None]) -> tuple[str, ...]:
        attribute = self.hash_keys.get(table)
        found = []
        for item in items:
            if attribute and item and attribute in item:
                found.append(_scalar(item[attribute]))
        return tuple(found)

    def _query_key(self, params: Mapping[str, Any]) -> tuple[str, ...] | None:
        attribute = self.hash_keys.get(params["TableName"])
        expression = params.get("KeyConditionExpression")
        if not attribute or not expression or params.get("IndexName"):
            return None
        names = params.get("ExpressionAttributeNames") or {}
        for name, placeholder in re.findall(r"(#?[\w.]+)\s*=\s*(:\w+)", expression):
            if names.get(name, name) == attribute:
                return (_scalar(params["ExpressionAttributeValues"][placeholder]),)
        return None

    def requests(self, operation: str, params: Mapping[str, Any]) -> list[Request]:
        if operation in ("TransactWriteItems", "TransactGetItems"):
            found = []
            for element in params.get("TransactItems") or []:
                ((kind, body),) = element.items()
                table = body["TableName"]
                keys = self._keys(table, [body.get("Key") or body.get("Item")])
                found.append(
                    Request(f"dynamodb:{TRANSACT_ACTIONS[kind]}", self.table_arn(table), keys)
                )
            return found
        if operation == "BatchGetItem":
            return [
                Request(
                    "dynamodb:BatchGetItem",
                    self.table_arn(table),
                    self._keys(table, request.get("Keys") or []),
                )
                for table, request in (params.get("RequestItems") or {}).items()
            ]
        if operation == "BatchWriteItem":
            return [
                Request(
                    "dynamodb:BatchWriteItem",
                    self.table_arn(table),
                    self._keys(
                        table,
                        [
                            (w.get("PutRequest") or {}).get("Item")
                            or (w.get("DeleteRequest") or {}).get("Key")
                            for w in writes
                        ],
                    ),
                )
                for table, writes in (params.get("RequestItems") or {}).items()
            ]
        table = params.get("TableName")
        if table is None:  # ListTables and the like: no resource-level permission
            return [Request(f"dynamodb:{operation}", "*")]
        resource = self.table_arn(table, params.get("IndexName"))
        if operation == "Query":
            return [Request("dynamodb:Query", resource, self._query_key(params))]
        if operation == "Scan":
            return [Request("dynamodb:Scan", resource)]
        item = params.get("Key") or params.get("Item")
        if item is None:
            return [Request(f"dynamodb:{operation}", resource)]
        return [Request(f"dynamodb:{operation}", resource, self._keys(table, [item]))]


# -- policy evaluation ------------------------------------------------------------------------


def _pattern(glob: str, *, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.compile(f"^{regex}$", flags)


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _matches_any(value: str, globs: Iterable[str], *, ignore_case: bool) -> bool:
    return any(_pattern(glob, ignore_case=ignore_case).match(value) for glob in globs)


def _condition_holds(operator: str, key: str, wanted: list[str], request: Request) -> bool:
    qualifier = next((q for q in SET_QUALIFIERS if operator.startswith(q)), "")
    base = operator.removeprefix(qualifier)
    values = request.leading_keys if key.lower() == "dynamodb:leadingkeys" else None
    negated = "Not" in base
    like = base.endswith("Like")

    def test(value: str) -> bool:
        hit = _matches_any(value, wanted, ignore_case=False) if like else value in wanted
        return hit != negated

    if qualifier == "ForAllValues:":
        return all(test(v) for v in values or ())  # no values: holds (as in IAM)
    if qualifier == "ForAnyValue:":
        return any(test(v) for v in values or ())  # no values: fails (as in IAM)
    if not values:
        return negated  # a missing key fails a positive operator, passes a negated one
    return len(values) == 1 and test(values[0])


def check_statement(statement: Mapping[str, Any]) -> None:
    """Refuse a statement whose elements this evaluator does not implement."""
    known = {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"}
    unknown = set(statement) - known
    if unknown or statement.get("Effect") not in ("Allow", "Deny"):
        raise UnsupportedPolicy(f"statement elements {sorted(unknown)}: {statement}")
    for operator, keys in (statement.get("Condition") or {}).items():
        qualifier = next((q for q in SET_QUALIFIERS if operator.startswith(q)), "")
        if operator.removeprefix(qualifier).removesuffix("IfExists") not in OPERATORS:
            raise UnsupportedPolicy(f"condition operator {operator}")
        if operator.endswith("IfExists"):
            raise UnsupportedPolicy(f"condition operator {operator}")
        for key in keys:
            if key.lower() not in CONDITION_KEYS:
                raise UnsupportedPolicy(f"condition key {key}")


def applies(statement: Mapping[str, Any], request: Request) -> bool:
    """Whether ``statement`` covers ``request`` (its Effect aside)."""
    if "Action" in statement:
        if not _matches_any(request.action, _listed(statement["Action"]), ignore_case=True):
            return False
    elif _matches_any(request.action, _listed(statement.get("NotAction", [])), ignore_case=True):
        return False
    if "Resource" in statement:
        if not _matches_any(request.resource, _listed(statement["Resource"]), ignore_case=False):
            return False
    elif _matches_any(
        request.resource, _listed(statement.get("NotResource", [])), ignore_case=False
    ):
        return False
    return all(
        _condition_holds(operator, key, _listed(wanted), request)
        for operator, keys in (statement.get("Condition") or {}).items()
        for key, wanted in keys.items()
    )


def decide(statements: Iterable[Mapping[str, Any]], request: Request) -> str:
    """``"allow"``, ``"explicit deny"`` or ``"implicit deny"``, as IAM decides one request."""
    allowed = False
    for statement in statements:
        if applies(statement, request):
            if statement["Effect"] == "Deny":
                return "explicit deny"
            allowed = True
    return "allow" if allowed else "implicit deny"


# -- the guard --------------------------------------------------------------------------------


class Guard:
    """One function's policy, as a botocore ``before-parameter-build.dynamodb`` handler.

    ``config``: ``principal`` (the assumed-role ARN AWS names in its message), ``statements``
    (the role's identity-policy statements, resolved to strings), ``region``, ``account`` and
    ``hash_keys`` (table name -> partition key attribute)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.principal: str = config["principal"]
        self.statements: list[Mapping[str, Any]] = list(config["statements"])
        for statement in self.statements:
            check_statement(statement)
        self.calls = Calls(config["region"], config["account"], config["hash_keys"])
        self.denied = 0

    def denial(self, operation: str, params: Mapping[str, Any]) -> tuple[Request, str] | None:
        """The first request of the call the policy does not allow, and why; None: allowed."""
        for request in self.calls.requests(operation, params):
            verdict = decide(self.statements, request)
            if verdict != "allow":
                return request, verdict
        return None

    def message(self, request: Request, verdict: str) -> str:
        because = (
            "with an explicit deny in an identity-based policy"
            if verdict == "explicit deny"
            else f"because no identity-based policy allows the {request.action} action"
        )
        return (
            f"User: {self.principal} is not authorized to perform: {request.action} "
            f"on resource: {request.resource} {because}"
        )

    def __call__(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        denied = self.denial(model.name, params)
        if denied is None:
            return
        from botocore.exceptions import ClientError

        self.denied += 1
        response: Any = {
            "Error": {"Code": "AccessDeniedException", "Message": self.message(*denied)},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": uuid.uuid4().hex.upper()},
        }
        raise ClientError(response, model.name)

    def attach(self, client: Any) -> Any:
        """Enforce on ``client`` (a boto3 DynamoDB client); returns it."""
        client.meta.events.register(EVENT, self)
        return client


def enforce_on_new_sessions(guard: Callable[..., None]) -> None:
    """Register ``guard`` on every botocore session created from now on (boto3's sessions take
    theirs from ``botocore.session.get_session``), so the handler's own clients carry it."""
    import botocore.session

    original = botocore.session.get_session

    def get_session(env_vars: Any = None) -> Any:
        session = original(env_vars)
        session.register(EVENT, guard)
        return session

    botocore.session.get_session = get_session
