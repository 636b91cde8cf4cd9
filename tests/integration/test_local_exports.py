"""What ``make local`` prints for a library user: the shell lines that point boto3 at its DynamoDB
Local. Pasted into a shell with no AWS settings of its own, they reach it: a program there lists
the table this test created through the stack's own client."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from local import run
from local.dynamodb_local import DynamoDBLocal
from tests.helpers import REPO

pytestmark = pytest.mark.integration

LIST_TABLES = "import boto3; print(' '.join(boto3.client('dynamodb').list_tables()['TableNames']))"


def test_the_printed_exports_reach_the_stacks_dynamodb_local(dynamodb_local: DynamoDBLocal):
    # Given a table made in DynamoDB Local as the stack makes its tables
    name = f"exports-{uuid.uuid4().hex[:8]}"
    client = dynamodb_local.client()
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    # And the lines make local prints for it
    lines = run.library_exports(dynamodb_local.endpoint)
    assert lines[0] == f"export AWS_ENDPOINT_URL_DYNAMODB={dynamodb_local.endpoint}"
    # When they are pasted into a shell that has no AWS setting, then a program uses boto3 there
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    clean["AWS_CONFIG_FILE"] = clean["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    script = "\n".join([*lines, f'"{sys.executable}" -c "{LIST_TABLES}"'])
    done = subprocess.run(
        ["bash", "-ec", script], env=clean, capture_output=True, text=True, timeout=60, check=False
    )
    # Then it reached that DynamoDB Local, under the credentials and region its tables live in
    assert done.returncode == 0, done.stderr
    assert name in done.stdout.split()


@pytest.mark.parametrize("page", ["docs/library.md", "docs/getting-started.md"])
def test_the_pages_show_the_lines_make_local_prints(page: str):
    # For make local's default DynamoDB port, as the pages show it
    text = (REPO / page).read_text()
    for line in run.library_exports("http://127.0.0.1:8000"):
        assert line in text, (page, line)
