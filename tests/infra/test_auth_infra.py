"""The identity part of the stack (``infra.auth``, and its authorizer on ``infra.api``): the user
pool, its app client, the ``admins`` group and the API's Cognito authorizer, asserted property by
property; cdk-nag runs in the ``template`` fixture. Every method's authorization and the gateway's
401/403 answers are checked in ``test_stack.py`` against the written-out route list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import pytest
from aws_cdk import aws_apigateway as apigw
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from infra.api import RestApi
from infra.auth import MIN_PASSWORD_LENGTH, Auth
from local import bridge
from local import template as cfn
from service.policy import ADMINS_GROUP


def only(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    found = cfn.resources(template, kind)
    assert len(found) == 1, sorted(found)
    return next(iter(found.items()))


def test_user_pool_password_policy_is_strong(template):
    _, pool = only(template, "AWS::Cognito::UserPool")
    assert pool["Properties"]["Policies"]["PasswordPolicy"] == {
        "MinimumLength": MIN_PASSWORD_LENGTH,
        "RequireLowercase": True,
        "RequireUppercase": True,
        "RequireNumbers": True,
        "RequireSymbols": True,
        "TemporaryPasswordValidityDays": 3,
    }
    assert MIN_PASSWORD_LENGTH >= 12


def test_user_pool_signs_in_by_username_or_email_and_refuses_self_sign_up(template):
    _, pool = only(template, "AWS::Cognito::UserPool")
    properties = pool["Properties"]
    # Username is the sign-in name; email is an alias (UsernameAttributes would replace it).
    assert properties["AliasAttributes"] == ["email"]
    assert "UsernameAttributes" not in properties
    assert properties["UsernameConfiguration"] == {"CaseSensitive": False}
    assert properties["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True


def test_user_pool_mfa_is_totp_only_and_the_pool_is_retained(template):
    _, pool = only(template, "AWS::Cognito::UserPool")
    properties = pool["Properties"]
    assert properties["MfaConfiguration"] == "OPTIONAL"
    assert properties["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
    assert properties["DeletionProtection"] == "ACTIVE"
    assert pool["DeletionPolicy"] == pool["UpdateReplacePolicy"] == "Retain"


def test_app_client_is_public_with_exactly_the_password_srp_and_refresh_flows(template):
    pool_id, _ = only(template, "AWS::Cognito::UserPool")
    _, client = only(template, "AWS::Cognito::UserPoolClient")
    properties = client["Properties"]
    assert properties["UserPoolId"] == {"Ref": pool_id}
    assert sorted(properties["ExplicitAuthFlows"]) == [
        "ALLOW_ADMIN_USER_PASSWORD_AUTH",
        "ALLOW_REFRESH_TOKEN_AUTH",
        "ALLOW_USER_PASSWORD_AUTH",
        "ALLOW_USER_SRP_AUTH",
    ]
    assert properties["GenerateSecret"] is False
    assert properties["AllowedOAuthFlowsUserPoolClient"] is False
    assert properties["PreventUserExistenceErrors"] == "ENABLED"
    assert properties["IdTokenValidity"] == 60
    assert properties["TokenValidityUnits"]["IdToken"] == "minutes"


def test_admins_group_belongs_to_the_pool(template):
    pool_id, _ = only(template, "AWS::Cognito::UserPool")
    _, group = only(template, "AWS::Cognito::UserPoolGroup")
    assert group["Properties"]["GroupName"] == ADMINS_GROUP == "admins"
    assert group["Properties"]["UserPoolId"] == {"Ref": pool_id}


def test_stack_outputs_pool_and_client_ids(template):
    pool_id, _ = only(template, "AWS::Cognito::UserPool")
    client_id, _ = only(template, "AWS::Cognito::UserPoolClient")
    assert template["Outputs"]["UserPoolId"]["Value"] == {"Ref": pool_id}
    assert template["Outputs"]["UserPoolClientId"]["Value"] == {"Ref": client_id}


def synth_alone(tmp_path: Any, *, with_api: bool) -> dict[str, Any]:
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "AuthOnly")
    auth = Auth(stack, "Auth")
    if with_api:
        api = apigw.RestApi(stack, "Api", deploy=False, cloud_watch_role=False)
        api.root.add_method(
            "GET",
            apigw.MockIntegration(),
            authorizer=auth.authorizer(stack, "Authorizer"),
            authorization_type=apigw.AuthorizationType.COGNITO,
        )
    else:  # the API here is a bare test double; the real stack's API is checked by nag
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return dict(app.synth().get_stack_by_name("AuthOnly").template)


def test_auth_alone_is_cdk_nag_clean_with_only_its_own_justified_exceptions(tmp_path):
    # Given the construct in an otherwise empty stack, with the AwsSolutions checks live:
    # synthesis succeeds, so COG2 / COG8 are the only findings and both are acknowledged inside
    # the construct (an unacknowledged one would raise ValidationFailed here).
    template = synth_alone(tmp_path, with_api=False)
    assert set(cfn.resources(template, "AWS::Cognito::UserPool"))


def test_authorizer_is_a_cognito_user_pool_authorizer_on_the_authorization_header(tmp_path):
    # The hook infra/api.py uses for every method (test_stack checks them all).
    template = Template.from_json(synth_alone(tmp_path, with_api=True))
    resources = Template.to_json(template)["Resources"]
    pool_id = next(k for k, v in resources.items() if v["Type"] == "AWS::Cognito::UserPool")
    template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {
            "Type": "COGNITO_USER_POOLS",
            "IdentitySource": "method.request.header.Authorization",
            "ProviderARNs": [{"Fn::GetAtt": [pool_id, "Arn"]}],
        },
    )
    template.has_resource_properties(
        "AWS::ApiGateway::Method",
        {"AuthorizationType": "COGNITO_USER_POOLS", "AuthorizerId": Match.any_value()},
    )


def test_cdk_nag_would_refuse_the_pool_without_the_acknowledgements(tmp_path):
    """The acknowledgements are not decoration: MFA-optional is a live finding (COG2)."""
    import aws_cdk.aws_cognito as cognito

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Bare")
    cognito.UserPool(stack, "Pool", mfa=cognito.Mfa.OPTIONAL)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match="AwsSolutions-COG2"):
        app.synth()


# -- the authorizer in the real stack ------------------------------------------------------


def test_the_stack_has_one_authorizer_for_the_pools_id_tokens_in_authorization(template):
    pool_id, _ = only(template, "AWS::Cognito::UserPool")
    api_id, _ = only(template, "AWS::ApiGateway::RestApi")
    _, authorizer = only(template, "AWS::ApiGateway::Authorizer")
    properties = authorizer["Properties"]
    assert properties["Type"] == "COGNITO_USER_POOLS"
    assert properties["ProviderARNs"] == [{"Fn::GetAtt": [pool_id, "Arn"]}]
    assert properties["IdentitySource"] == "method.request.header.Authorization"
    assert properties["RestApiId"] == {"Ref": api_id}
    # No validation expression: it would refuse the raw-token form before the pool is asked.
    assert "IdentityValidationExpression" not in properties
    # Answers are kept per token as long as the local bridge keeps its verified ones.
    assert properties["AuthorizerResultTtlInSeconds"] == bridge.AUTHORIZER_CACHE_SECONDS == 300


def test_cdk_nag_passed_without_acknowledging_apig4_or_cog4(assembly):
    # Given the session's synth (AwsSolutions checks live): nag's own report says it passed,
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    # with every acknowledged finding justified, and none of them about the API's authorization
    suppressed = {v["ruleName"]: v["reason"] for v in nag["suppressedViolations"]}
    assert suppressed and all(reason.strip() for reason in suppressed.values())
    assert not [rule for rule in suppressed if rule.split("[")[0] in OPEN_API_RULES]
    # and no construct or resource carries an acknowledgement or suppression of them.
    directory = Path(assembly.directory)
    acknowledged = json.dumps(
        [
            entry["data"]
            for path in [directory / "manifest.json", *directory.glob("*.metadata.json")]
            for entry in metadata_entries(json.loads(path.read_text()))
            if entry.get("type") == "aws:cdk:acknowledged-rules"
        ]
    )
    assert "AwsSolutions-APIG3" in acknowledged  # the lookup itself finds acknowledgements
    stack = assembly.get_stack_by_name("Turnstile")
    resource_metadata = json.dumps([r.get("Metadata") for r in template_of(stack).values()])
    for rule in OPEN_API_RULES:
        assert rule not in acknowledged
        assert rule not in resource_metadata


OPEN_API_RULES = ("AwsSolutions-APIG4", "AwsSolutions-COG4")


def metadata_entries(document: Any) -> list[dict[str, Any]]:
    """Every construct metadata entry in a manifest or metadata file, wherever it is nested."""
    if isinstance(document, list):
        return [entry for item in document for entry in metadata_entries(item)]
    if not isinstance(document, dict):
        return []
    if "type" in document and "data" in document:
        return [document]
    return [entry for value in document.values() for entry in metadata_entries(value)]


def template_of(stack: Any) -> dict[str, Any]:
    return dict(stack.template["Resources"])


def api_alone(tmp_path: Any, *, nag: bool) -> tuple[cdk.App, RestApi]:
    """infra.api's RestApi with no routes, in a stack of its own (with cdk-nag if ``nag``)."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "ApiOnly")
    api = RestApi(stack, "Http", routes=[], functions=cast(Any, None), auth=Auth(stack, "Auth"))
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, api


def test_a_method_added_later_needs_a_token_too(tmp_path):
    # Given the API construct and a method added after it, saying nothing about authorization
    app, api = api_alone(tmp_path, nag=True)
    api.api.root.add_resource("later").add_method("GET", apigw.MockIntegration())
    # When synthesized with the AwsSolutions checks live (an open method would fail them)
    template = dict(app.synth().get_stack_by_name("ApiOnly").template)
    # Then it has the Cognito authorizer, by the API's default method options
    authorizer_id, _ = only(template, "AWS::ApiGateway::Authorizer")
    _, method = only(template, "AWS::ApiGateway::Method")
    assert method["Properties"]["AuthorizationType"] == "COGNITO_USER_POOLS"
    assert method["Properties"]["AuthorizerId"] == {"Ref": authorizer_id}


def test_cdk_nag_refuses_a_method_that_opts_out_of_the_authorizer(tmp_path):
    """APIG4 and COG4 are live findings: passing without acknowledging them means something."""
    app, api = api_alone(tmp_path, nag=True)
    api.api.root.add_resource("guarded").add_method("GET", apigw.MockIntegration())
    api.api.root.add_resource("open").add_method(
        "GET", apigw.MockIntegration(), authorization_type=apigw.AuthorizationType.NONE
    )
    with pytest.raises(Exception) as refused:
        app.synth()
    for rule in OPEN_API_RULES:
        assert rule in str(refused.value)
