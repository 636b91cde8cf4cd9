"""The stack-outputs interface of the post-deploy tier (``infra.outputs``): the template declares
the keys it reads, and a deployed stack's outputs are read through CloudFormation's API."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from infra import outputs


def test_template_declares_every_output_the_tier_reads(template):
    assert set(outputs.STACK_OUTPUTS) <= set(template["Outputs"])
    assert outputs.IDENTITY_ENDPOINT not in template["Outputs"]  # local only


def cloudformation_answering(stack_outputs: list[dict[str, str]]) -> tuple[object, Stubber]:
    client = boto3.client(
        "cloudformation",
        region_name="eu-west-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    stubber = Stubber(client)
    stubber.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "Turnstile",
                    "CreationTime": "2026-11-24T00:00:00Z",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": stack_outputs,
                }
            ]
        },
        {"StackName": "Turnstile"},
    )
    return client, stubber


def test_deployed_outputs_are_read_from_describe_stacks(tmp_path):
    # Given a deployed stack's outputs as CloudFormation answers them
    deployed = {
        "ApiUrl": "https://abc.execute-api.eu-west-1.amazonaws.com/v1/",
        "UserPoolId": "eu-west-1_AbC",
        "UserPoolClientId": "client",
        "HttpApiEndpointDD5D7C73": "https://abc.execute-api.eu-west-1.amazonaws.com/v1/",
    }
    client, stubber = cloudformation_answering(
        [{"OutputKey": k, "OutputValue": v} for k, v in deployed.items()]
    )
    # When they are read and written as the tier's file
    with stubber:
        read = outputs.from_stack("Turnstile", client)
    outputs.write(tmp_path / "o.json", read)
    # Then the file holds them, and loads back as written
    assert json.loads((tmp_path / "o.json").read_text()) == deployed
    assert outputs.load(tmp_path / "o.json") == deployed


def test_a_stack_without_the_outputs_is_refused(tmp_path):
    client, stubber = cloudformation_answering([{"OutputKey": "ApiUrl", "OutputValue": "x"}])
    with stubber, pytest.raises(KeyError, match="UserPoolId"):
        outputs.from_stack("Turnstile", client)
    (tmp_path / "o.json").write_text('{"ApiUrl": "x"}')
    with pytest.raises(KeyError, match="UserPoolClientId"):
        outputs.load(tmp_path / "o.json")
