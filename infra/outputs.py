"""A stack's outputs as one JSON file: what the post-deploy tier (``tests/deployed``) reads.

Two writers, one shape (``{"ApiUrl": ..., "UserPoolId": ..., "UserPoolClientId": ...}``, the keys
of the template's ``Outputs``):

* a deployed stack: ``python -m infra.outputs --stack Turnstile --out FILE`` asks CloudFormation
  (``DescribeStacks``, the caller's AWS credentials and region);
* ``make local``: ``local.run`` writes ``.local/<PORT>/outputs.json`` with the same keys for its own
  stack, plus :data:`IDENTITY_ENDPOINT` (where its Cognito answers; absent on AWS, where the
  ``cognito-idp`` endpoint is the region's own).

The tier cannot tell them apart, which is the point: it runs on every ``make test`` against the
local stack, so it cannot rot before the day it runs against a deployment.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

API_URL = "ApiUrl"
USER_POOL_ID = "UserPoolId"
USER_POOL_CLIENT_ID = "UserPoolClientId"
STACK_OUTPUTS = (API_URL, USER_POOL_ID, USER_POOL_CLIENT_ID)  # infra.stack's CfnOutputs
IDENTITY_ENDPOINT = "IdentityEndpoint"  # local only


def from_stack(stack_name: str, cloudformation: Any = None) -> dict[str, str]:
    """The deployed stack's outputs by key; every key of :data:`STACK_OUTPUTS` must be there."""
    if cloudformation is None:
        import boto3

        cloudformation = boto3.client("cloudformation")
    (stack,) = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    missing = [key for key in STACK_OUTPUTS if key not in outputs]
    if missing:
        raise KeyError(f"stack {stack_name} has no output {', '.join(missing)}")
    return outputs


def write(path: Path, outputs: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n")


def load(path: Path) -> dict[str, str]:
    outputs: dict[str, str] = json.loads(path.read_text())
    missing = [key for key in STACK_OUTPUTS if key not in outputs]
    if missing:
        raise KeyError(f"{path} has no {', '.join(missing)}: not a turnstile stack's outputs")
    return outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write a deployed stack's outputs as JSON")
    parser.add_argument("--stack", default="Turnstile")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    write(args.out, from_stack(args.stack))
    print(f"{args.out}: outputs of stack {args.stack}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
