"""A small CDK app on ``turnstile_ddb.cdk``: a lease table and an idempotency table, a function
granted
exactly what each primitive issues, an ordered consumer of a stream, and a refused replication.

Synthesizes offline (``cdk synth`` would run the same code); needs ``turnstile-ddb[cdk]``.
"""

from __future__ import annotations

import json
import os

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_

from turnstile_ddb import cdk as turnstile_cdk

app = cdk.App(outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
stack = cdk.Stack(app, "TurnstileExample", env=cdk.Environment(region="eu-west-1"))

worker = lambda_.Function(
    stack,
    "Worker",
    runtime=lambda_.Runtime.PYTHON_3_12,
    handler="index.handler",
    code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
)
leases = turnstile_cdk.LeaseTable(stack, "Leases")
leases.grant_lease(worker)  # UpdateItem + ConditionCheckItem on this table, nothing else
requests = turnstile_cdk.IdempotencyTable(
    stack, "Requests", stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES
)
requests.grant_idempotency(worker)
turnstile_cdk.OrderedStreamConsumer(stack, "Audit", table=requests.table, function=worker)

try:  # a lease table replicated with last-writer-wins would issue one fence twice
    turnstile_cdk.LeaseTable(
        stack, "GlobalLeases", replication=turnstile_cdk.Replication(["us-east-1", "ap-south-1"])
    )
    raise SystemExit("an eventually consistent lease table must be refused")
except turnstile_cdk.UnsafeReplication as refused:
    print(f"refused: {str(refused)[:72]}...")

template = app.synth().get_stack_by_name("TurnstileExample").template
kinds = sorted({resource["Type"] for resource in template["Resources"].values()})
policy = next(r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy")
statements = policy["Properties"]["PolicyDocument"]["Statement"]
# A statement's Action is one string or a list of them.
actions = sorted(
    {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
)
assert "dynamodb:ConditionCheckItem" in actions and "dynamodb:Scan" not in actions
print(json.dumps(actions))
print(f"synthesized {len(template['Resources'])} resources: {', '.join(kinds)}")
