"""Each function's role policy, read from the synthesized template, enforced on DynamoDB calls.

:func:`policies` resolves, per ``AWS::Lambda::Function``, the statements of every
``AWS::IAM::Policy`` attached to its role (and the role's inline policies) into plain strings: a
table's ``Fn::GetAtt Arn`` becomes ``arn:aws:dynamodb:<REGION>:<ACCOUNT>:table/<logical id>``
(tables are named by logical id locally), ``Fn::Join`` and the pseudo parameters are resolved.
A :class:`RolePolicy` gives the configuration the function's worker enforces
(``local/sandbox/iam_guard.py``, which also documents the evaluation and why it is hand-written),
and :meth:`RolePolicy.attach` enforces the same policy on a client in this process: the
integration tier and ``make chaos`` call handlers in-process, and :func:`acting_as` says which
function's policy applies to the calls made inside it (:func:`attach_current`).
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from local.sandbox import iam_guard

Handler = Callable[[Any, Any], Any]

REGION = "us-east-1"  # the local credentials' region (local.dynamodb_local.CREDENTIALS)
ACCOUNT = "123456789012"
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "Turnstile",
}


def _resources(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def resolve(value: Any, template: Mapping[str, Any]) -> Any:
    """``value`` with the intrinsic functions a policy of this stack uses resolved."""
    if isinstance(value, list):
        return [resolve(each, template) for each in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        return PSEUDO.get(value["Ref"], value["Ref"])
    if "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return delimiter.join(str(resolve(part, template)) for part in parts)
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        kind = template["Resources"][logical]["Type"]
        if kind == "AWS::DynamoDB::Table" and attribute == "Arn":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{logical}"
        if kind == "AWS::DynamoDB::Table" and attribute == "StreamArn":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{logical}/stream/local"
        return f"arn:aws:local:{REGION}:{ACCOUNT}:{kind}/{logical}/{attribute}"
    if len(value) == 1 and next(iter(value)).startswith("Fn::"):
        raise ValueError(f"cannot resolve {value!r} locally")
    return {key: resolve(each, template) for key, each in value.items()}


@dataclass(frozen=True)
class RolePolicy:
    """One function's identity policy as synthesized, resolved."""

    function: str  # the function's logical id (its local name)
    role: str  # the role's logical id
    statements: tuple[dict[str, Any], ...]
    hash_keys: dict[str, str]  # table name -> partition key attribute

    @property
    def principal(self) -> str:
        """The assumed-role ARN AWS names in a denial (Lambda's session name: the function)."""
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{self.role}/{self.function}"

    def config(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "statements": [dict(each) for each in self.statements],
            "region": REGION,
            "account": ACCOUNT,
            "hash_keys": dict(self.hash_keys),
        }

    def guard(self) -> iam_guard.Guard:
        return iam_guard.Guard(self.config())

    def attach(self, client: Any) -> Any:
        """Enforce this policy on ``client``; returns it."""
        return self.guard().attach(client)

    def without(self, action: str) -> RolePolicy:
        """A copy in which no statement grants ``action`` any more."""
        statements = []
        for statement in copy.deepcopy(list(self.statements)):
            actions = statement.get("Action")
            if isinstance(actions, str):
                actions = [actions]
            if actions is not None:
                kept = [a for a in actions if a.lower() != action.lower()]
                if not kept:
                    continue
                statement["Action"] = kept
            statements.append(statement)
        return RolePolicy(self.function, self.role, tuple(statements), self.hash_keys)


def hash_keys(template: Mapping[str, Any]) -> dict[str, str]:
    return {
        logical: next(
            k["AttributeName"] for k in r["Properties"]["KeySchema"] if k["KeyType"] == "HASH"
        )
        for logical, r in _resources(template, "AWS::DynamoDB::Table").items()
    }


def policies(template: Mapping[str, Any]) -> dict[str, RolePolicy]:
    """Function logical id -> its role's policy."""
    keys = hash_keys(template)
    by_role: dict[str, list[dict[str, Any]]] = {}
    for policy in _resources(template, "AWS::IAM::Policy").values():
        properties = policy["Properties"]
        document = resolve(properties["PolicyDocument"], template)
        for role in properties.get("Roles") or []:
            by_role.setdefault(role["Ref"], []).extend(_statements(document))
    roles = _resources(template, "AWS::IAM::Role")
    for logical, role in roles.items():
        for inline in role["Properties"].get("Policies") or []:
            document = resolve(inline["PolicyDocument"], template)
            by_role.setdefault(logical, []).extend(_statements(document))
    found = {}
    for logical, function in _resources(template, "AWS::Lambda::Function").items():
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        if roles[role]["Properties"].get("ManagedPolicyArns"):
            raise ValueError(f"{role}: managed policies cannot be evaluated locally")
        found[logical] = RolePolicy(logical, role, tuple(by_role.get(role, [])), keys)
    return found


def _statements(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    statements = document["Statement"]
    return [statements] if isinstance(statements, dict) else list(statements)


def by_handler(template: Mapping[str, Any]) -> dict[str, RolePolicy]:
    """Handler path (the template's ``Handler``) -> that function's role policy."""
    found = policies(template)
    return {
        r["Properties"]["Handler"]: found[logical]
        for logical, r in _resources(template, "AWS::Lambda::Function").items()
    }


def policy_of(template: Mapping[str, Any], handler: str) -> RolePolicy:
    """The policy of the function whose template ``Handler`` is ``handler``."""
    return by_handler(template)[handler]


# -- in-process enforcement -------------------------------------------------------------------

_current: contextvars.ContextVar[iam_guard.Guard | None] = contextvars.ContextVar(
    "turnstile_iam_guard", default=None
)


@contextmanager
def acting_as(policy: RolePolicy | iam_guard.Guard) -> Iterator[None]:
    """DynamoDB calls made in this context (this thread) are the function's: its policy applies
    on clients prepared with :func:`attach_current`."""
    guard = policy.guard() if isinstance(policy, RolePolicy) else policy
    token = _current.set(guard)
    try:
        yield
    finally:
        _current.reset(token)


def _current_guard(params: Mapping[str, Any], model: Any, **kwargs: Any) -> None:
    guard = _current.get()
    if guard is not None:
        guard(params, model, **kwargs)


def as_function(policy: RolePolicy, handler: Handler) -> Handler:
    """``handler`` invoked as its function: under :func:`acting_as` ``policy``."""
    guard = policy.guard()

    def invoke(event: Any, context: Any) -> Any:
        with acting_as(guard):
            return handler(event, context)

    return invoke


def attach_current(client: Any) -> Any:
    """Enforce, on ``client``, the policy of whichever function :func:`acting_as` names (none
    outside it); returns the client."""
    client.meta.events.register(iam_guard.EVENT, _current_guard, unique_id="turnstile-iam")
    return client
