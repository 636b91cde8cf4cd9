"""What ``make destroy`` leaves that the stack never created: the CDK bootstrap stack.

    python -m infra.teardown        # what make destroy prints after destroying the stack

``npx cdk bootstrap`` (run once per account and region before the first deploy) creates the
``CDKToolkit`` stack: an S3 bucket holding the assets of every deploy (the functions' code, the
layer), versioned and retained when its stack is deleted; an ECR repository for container images
(empty here: turnstile deploys no image); the deploy roles and a version parameter. Deleting
turnstile's stack touches none of them. They are shared by every CDK app in that account and
region, so they are only named here, with the commands that remove them, never removed by make.

The commands are :data:`COMMANDS`; docs/teardown.md shows the same lines
(tests/infra/test_teardown.py checks both).
"""

from __future__ import annotations

# The bootstrap template's default names (qualifier hnb659fds); ACCOUNT and REGION are shell
# variables the first two commands set.
BOOTSTRAP_STACK = "CDKToolkit"
BUCKET = "cdk-hnb659fds-assets-$ACCOUNT-$REGION"
REPOSITORY = "cdk-hnb659fds-container-assets-$ACCOUNT-$REGION"

COMMANDS = (
    "ACCOUNT=$(aws sts get-caller-identity --query Account --output text)",
    "REGION=$(aws configure get region)",
    f"aws cloudformation describe-stack-resources --stack-name {BOOTSTRAP_STACK} "
    '--query "StackResources[].[ResourceType,PhysicalResourceId]" --output text',
    ".venv/bin/python -c \"import boto3, sys; boto3.resource('s3').Bucket(sys.argv[1])"
    f'.object_versions.delete()" {BUCKET}',
    f"aws cloudformation delete-stack --stack-name {BOOTSTRAP_STACK}",
    f"aws cloudformation wait stack-delete-complete --stack-name {BOOTSTRAP_STACK}",
    f"aws s3api delete-bucket --bucket {BUCKET}",
)

NOTE = f"""\
Left behind: the CDK bootstrap stack {BOOTSTRAP_STACK}, made by `npx cdk bootstrap` for this
account and region, not by this stack:
  - S3 bucket {BUCKET}: every deploy's assets (versioned,
    kept even when {BOOTSTRAP_STACK} is deleted; billed as S3 storage while it holds them)
  - ECR repository {REPOSITORY}: empty (no images deployed)
  - the deploy roles and the parameter /cdk-bootstrap/hnb659fds/version
Every CDK app in this account and region deploys through it: remove it only if none is left.
To remove it (docs/teardown.md):
"""


def main() -> None:
    print(NOTE + "\n".join(f"  {command}" for command in COMMANDS))


if __name__ == "__main__":
    main()
