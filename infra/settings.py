"""What a deployment chooses, from CDK context (``cdk.json``'s ``context``, or ``-c key=value`` on
the CDK CLI; ``make deploy`` passes its variables that way):

* ``turnstile:stackName`` (default ``Turnstile``): the CloudFormation stack's name;
* ``turnstile:stage`` (default ``v1``): the API Gateway stage, the last part of the API's URL;
* ``turnstile:region`` (default: none, the CLI's region, ``AWS_REGION``, at deploy time): the
  region the stack is for;
* ``turnstile:destroyWithStack`` (default ``false``): a development stack, whose tables and user
  pool are deleted with it (no deletion protection, removal policy ``DESTROY``).

Two stacks of different names (say ``-c turnstile:stackName=TurnstileDev``) live side by side in
one account and region. docs/teardown.md says what ``destroyWithStack`` changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from constructs import Construct

STACK_NAME = "turnstile:stackName"
STAGE = "turnstile:stage"
REGION = "turnstile:region"
DESTROY_WITH_STACK = "turnstile:destroyWithStack"

DEFAULT_STACK_NAME = "Turnstile"
DEFAULT_STAGE = "v1"

_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")  # CloudFormation's rule
_STAGE = re.compile(r"^[A-Za-z0-9_]{1,128}$")  # API Gateway's rule for a stage name


def _flag(value: object) -> bool:
    """A context flag: JSON ``true`` in cdk.json, the string ``true`` from ``-c key=true``."""
    if isinstance(value, bool):
        return value
    if value is None or str(value).lower() in ("", "false", "0", "no"):
        return False
    if str(value).lower() in ("true", "1", "yes"):
        return True
    raise ValueError(f"{DESTROY_WITH_STACK} must be true or false, not {value!r}")


@dataclass(frozen=True)
class Settings:
    stack_name: str = DEFAULT_STACK_NAME
    stage: str = DEFAULT_STAGE
    region: str | None = None  # None: environment-agnostic, the CLI's region at deploy time
    destroy_with_stack: bool = False

    @classmethod
    def of(cls, scope: Construct) -> Settings:
        """The settings in ``scope``'s context (any construct of the app: context is inherited)."""
        node = scope.node
        settings = cls(
            stack_name=str(node.try_get_context(STACK_NAME) or DEFAULT_STACK_NAME),
            stage=str(node.try_get_context(STAGE) or DEFAULT_STAGE),
            region=str(node.try_get_context(REGION) or "") or None,
            destroy_with_stack=_flag(node.try_get_context(DESTROY_WITH_STACK)),
        )
        if not _STACK_NAME.match(settings.stack_name):
            raise ValueError(f"{STACK_NAME}: {settings.stack_name!r} is not a stack name")
        if not _STAGE.match(settings.stage):
            raise ValueError(f"{STAGE}: {settings.stage!r} is not a stage name")
        return settings

    @property
    def removal_policy(self) -> RemovalPolicy:
        """What happens to data (tables, the user pool) when the stack is deleted."""
        return RemovalPolicy.DESTROY if self.destroy_with_stack else RemovalPolicy.RETAIN
