"""The local identity provider (local.identity, local.issue_token): moto's cognito-idp server
started in this process on a free port, provisioned from the synthesized template; loopback only."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from local import issue_token as token_cli
from local.identity import AuthConfig, IdentityProvider, user_pool_request
from local.template import resources
from service.domain.errors import Unauthorized
from service.policy import ADMINS_GROUP


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider() as running:
        yield running


@pytest.fixture(scope="module")
def auth(provider: IdentityProvider, template: dict[str, Any]) -> AuthConfig:
    return provider.provision(template)


def claims_of(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")

    def part(segment: str) -> dict[str, Any]:
        import base64

        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))

    return part(header), part(payload)


def test_pool_client_and_group_come_from_the_template(provider, auth, template):
    client = provider.client()
    pool = client.describe_user_pool(UserPoolId=auth.user_pool_id)["UserPool"]
    ((logical, resource),) = resources(template, "AWS::Cognito::UserPool").items()
    expected = resource["Properties"]
    assert pool["Name"] == logical
    assert pool["Policies"]["PasswordPolicy"] == expected["Policies"]["PasswordPolicy"]
    assert pool["AliasAttributes"] == expected["AliasAttributes"] == ["email"]
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["MfaConfiguration"] == expected["MfaConfiguration"]
    app = client.describe_user_pool_client(UserPoolId=auth.user_pool_id, ClientId=auth.client_id)
    (client_resource,) = resources(template, "AWS::Cognito::UserPoolClient").values()
    assert sorted(app["UserPoolClient"]["ExplicitAuthFlows"]) == sorted(
        client_resource["Properties"]["ExplicitAuthFlows"]
    )
    groups = client.list_groups(UserPoolId=auth.user_pool_id)["Groups"]
    assert [g["GroupName"] for g in groups] == [ADMINS_GROUP]


def test_user_pool_request_copies_only_what_create_user_pool_takes():
    request = user_pool_request(
        "Pool", {"Policies": {"x": 1}, "DeletionProtection": "ACTIVE", "UserPoolTier": "PLUS"}
    )
    assert request == {"PoolName": "Pool", "Policies": {"x": 1}}


def test_auth_file_has_exactly_the_contract_keys(auth, tmp_path):
    path = tmp_path / ".local" / "auth.json"
    text = auth.write(path)
    data = json.loads(path.read_text())
    assert json.loads(text) == data
    assert set(data) == {"endpoint", "region", "userPoolId", "clientId"}
    assert data["endpoint"].startswith("http://127.0.0.1:")
    assert AuthConfig.load(path) == auth


def test_make_token_flow_issues_an_rs256_id_token_with_moto_claims(auth):
    token = token_cli.id_token(auth, "alice-id", admin=True)
    header, claims = claims_of(token)
    assert header["alg"] == "RS256" and header["kid"] == "dummy"
    assert claims["iss"] == auth.issuer
    assert claims["iss"].startswith("https://cognito-idp.us-east-1.amazonaws.com/")
    assert claims["aud"] == auth.client_id
    assert claims["token_use"] == "id"
    assert claims["cognito:username"] == "alice-id"
    assert claims["cognito:groups"] == [ADMINS_GROUP]
    assert claims["exp"] - claims["iat"] == 3600


def test_without_admin_the_user_leaves_the_admins_group(auth):
    token_cli.id_token(auth, "bob-id", admin=True)
    _, claims = claims_of(token_cli.id_token(auth, "bob-id", admin=False))
    assert "cognito:groups" not in claims


def test_two_users_get_distinct_stable_subs(auth):
    first = claims_of(token_cli.id_token(auth, "carol-id"))[1]["sub"]
    again = claims_of(token_cli.id_token(auth, "carol-id"))[1]["sub"]
    other = claims_of(token_cli.id_token(auth, "dave-id"))[1]["sub"]
    assert first == again != other


def test_user_password_auth_works_for_any_standard_client(auth):
    token_cli.id_token(auth, "erin-id", password="Correct-Horse-9!")
    client = boto3.client(
        "cognito-idp",
        endpoint_url=auth.endpoint,
        region_name=auth.region,
        aws_access_key_id="any",
        aws_secret_access_key="any",
    )
    result = client.initiate_auth(
        ClientId=auth.client_id,
        AuthFlow="USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": "erin-id", "PASSWORD": "Correct-Horse-9!"},
    )
    assert claims_of(result["AuthenticationResult"]["IdToken"])[1]["cognito:username"] == "erin-id"


def test_jwks_is_served_and_is_motos_public_development_key(auth):
    from moto.utilities.utils import load_resource

    with urllib.request.urlopen(auth.jwks_url, timeout=5) as response:
        served = json.loads(response.read())
    shipped = load_resource("cognitoidp/resources/jwks-public.json")
    assert served == shipped
    assert [k["kid"] for k in served["keys"]] == ["dummy"]
    # and it verifies the provider's tokens
    token = token_cli.id_token(auth, "frank-id")
    assert jwt.decode(token, KeySet.import_key_set(served), algorithms=["RS256"]).claims


def test_verifier_accepts_the_providers_id_token_and_refuses_its_access_token(auth):
    verifier = auth.verifier()
    token_cli.id_token(auth, "grace-id", admin=True, password="Correct-Horse-9!")
    result = token_cli.cognito_client(auth.endpoint, auth.region).admin_initiate_auth(
        UserPoolId=auth.user_pool_id,
        ClientId=auth.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": "grace-id", "PASSWORD": "Correct-Horse-9!"},
    )["AuthenticationResult"]
    claims = verifier.verify(f"Bearer {result['IdToken']}")
    assert claims["cognito:username"] == "grace-id"
    assert claims["cognito:groups"] == ADMINS_GROUP
    assert claims["token_use"] == "id"
    with pytest.raises(Unauthorized):
        verifier.verify(result["AccessToken"])
    assert verifier.fetches == 1


def test_a_second_pool_on_the_same_provider_is_another_pool(provider, auth, template):
    # moto signs every pool with the same key: only iss/aud keep pools apart, and they do.
    other = provider.provision(template)
    assert other.user_pool_id != auth.user_pool_id
    verifier = auth.verifier()
    with pytest.raises(Unauthorized, match="iss"):
        verifier.verify(token_cli.id_token(other, "heidi-id"))


def test_token_cli_prints_a_token_and_explains_a_missing_file(auth, tmp_path, capsys):
    path = tmp_path / "auth.json"
    assert token_cli.main(["ivan-id", "--auth-file", str(path)]) == 2
    assert "start it with `make local`" in capsys.readouterr().err
    auth.write(path)
    assert token_cli.main(["ivan-id", "--admin", "--auth-file", str(path)]) == 0
    captured = capsys.readouterr()
    # stdout is the token alone (scripts capture it); stderr says whose it is
    token = captured.out.strip()
    assert captured.out == token + "\n" and token.count(".") == 2
    claims = claims_of(token)[1]
    assert claims["cognito:groups"] == [ADMINS_GROUP]
    assert captured.err.strip() == (
        f"user ivan-id  sub (user id) {claims['sub']}  groups {ADMINS_GROUP}"
    )
    assert token_cli.main(["ivan-id", "--auth-file", str(path)]) == 0
    assert capsys.readouterr().err.strip().endswith("groups (none)")


def test_token_cli_with_the_stack_stopped_says_to_start_it(auth, tmp_path, capsys):
    import socket

    # Given the auth file of a stack whose identity provider no longer answers
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    path = tmp_path / "auth.json"
    AuthConfig(dead, auth.region, auth.user_pool_id, auth.client_id).write(path)
    # Then make token says to start make local, instead of a connection error
    assert token_cli.main(["ivan-id", "--auth-file", str(path), "--port", "3001"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"nothing answers at {dead}" in captured.err
    assert "start it with `make local` PORT=3001" in captured.err


def test_make_local_serves_the_provider_and_writes_auth_json(
    template, assembly, tmp_path, monkeypatch
):
    from local import run
    from service import runtime

    # running() exports DynamoDB Local's endpoint into os.environ: keep that inside this test.
    monkeypatch.setattr(os, "environ", dict(os.environ))
    template_path = tmp_path / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    auth_file = tmp_path / ".local" / "auth.json"
    try:
        with run.running(
            port=0,
            template_path=template_path,
            auth_file=auth_file,
            assembly_dir=Path(assembly.directory),
        ) as stack:
            assert AuthConfig.load(auth_file) == stack.auth
            assert stack.auth.endpoint == stack.identity.endpoint
            token = token_cli.id_token(stack.auth, "judy-id", admin=True)
            verifier = stack.auth.verifier()
            assert verifier.verify(token)["cognito:groups"] == ADMINS_GROUP
        # A stopped stack leaves no file naming its dead servers (nor its empty folder)
        assert not auth_file.parent.exists()
    finally:
        runtime.Lazy.reset_all()


def test_a_stack_on_a_busy_port_starts_nothing_and_writes_nothing(tmp_path, monkeypatch):
    import socket

    from local import run

    monkeypatch.setattr(os, "environ", dict(os.environ))
    auth_file = tmp_path / ".local" / "auth.json"
    with socket.socket() as held:
        # Given the API's port already taken
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        # Then the stack refuses to start, naming the holder, before starting anything
        with (
            pytest.raises(run.PortsBusy, match=f"PORT={port} is in use: pid {os.getpid()}"),
            run.running(port=port, auth_file=auth_file, outputs_file=tmp_path / "o.json"),
        ):
            pass
    # And it wrote no state a running stack might have owned
    assert not auth_file.exists() and not (tmp_path / "o.json").exists()
