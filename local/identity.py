"""The local identity provider of ``make local``: moto's Cognito (``cognito-idp``) server, in
this process, with the user pool, app client and groups of the synthesized template.

Why moto: it is the one Cognito emulator that runs without Docker (``ThreadedMotoServer``, a
Werkzeug server thread, ~0.6 s to import and start here), speaks the real ``cognito-idp`` wire
protocol (any boto3 / SDK client works with ``endpoint_url``) and issues RS256-signed ID and access
tokens. What moto 5.2.5 does, measured:

* ID token header ``{"kid": "dummy", "alg": "RS256"}``; claims ``iss =
  https://cognito-idp.<region>.amazonaws.com/<poolId>`` (the deployed issuer's shape), ``aud`` =
  the app client id, ``token_use = "id"``, ``sub``, ``exp`` = ``iat`` + 1 h, ``cognito:username``,
  ``cognito:groups`` (a JSON list) when the user is in a group. Access tokens carry ``client_id``
  instead of ``aud`` and ``token_use = "access"``.
* The JWKS is served, unauthenticated, at ``<endpoint>/<poolId>/.well-known/jwks.json``.
* The signing key is one RSA key shipped inside the moto package (``moto/cognitoidp/resources``),
  the same for every pool: **a public development key**. A local token proves nothing outside
  this machine; deployed tokens are signed by Cognito's own keys.
* Limits: sign-in by email alias is not emulated (moto only resolves ``UsernameAttributes``), so
  locally users sign in by username; pool-level ``MfaConfiguration = ON`` is only enforced on
  ``InitiateAuth`` (the stack's is ``OPTIONAL``); state lives in memory (users vanish at restart;
  ``make token`` recreates them); it shares moto's process-wide state, so a ``mock_aws`` started
  in the same process resets it.

Nothing here is created at import time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from local.dynamodb_local import CREDENTIALS
from local.preflight import state_dir
from local.template import resources
from local.tokens import TokenVerifier

REGION = CREDENTIALS["AWS_DEFAULT_REGION"]

# CreateUserPool / CreateUserPoolClient accept these template properties as they are.
_POOL_KEYS = (
    "Policies",
    "AliasAttributes",
    "UsernameAttributes",
    "UsernameConfiguration",
    "MfaConfiguration",
    "AdminCreateUserConfig",
    "AutoVerifiedAttributes",
    "AccountRecoverySetting",
    "Schema",
    "VerificationMessageTemplate",
)
_CLIENT_KEYS = (
    "ExplicitAuthFlows",
    "GenerateSecret",
    "PreventUserExistenceErrors",
    "EnableTokenRevocation",
    "IdTokenValidity",
    "AccessTokenValidity",
    "RefreshTokenValidity",
    "TokenValidityUnits",
    "SupportedIdentityProviders",
    "AllowedOAuthFlowsUserPoolClient",
)


@dataclass(frozen=True)
class AuthConfig:
    """What a client needs to get a token; serialized as ``.local/<PORT>/auth.json``."""

    endpoint: str
    region: str
    user_pool_id: str
    client_id: str

    @property
    def issuer(self) -> str:
        """The ``iss`` of the pool's tokens: Cognito's shape, which moto reproduces."""
        return f"https://cognito-idp.{self.region}.amazonaws.com/{self.user_pool_id}"

    @property
    def jwks_url(self) -> str:
        return f"{self.endpoint}/{self.user_pool_id}/.well-known/jwks.json"

    def verifier(self) -> TokenVerifier:
        """Verifies this pool's ID tokens as API Gateway would (``local.tokens``)."""
        return TokenVerifier(issuer=self.issuer, audience=self.client_id, jwks_url=self.jwks_url)

    def to_json(self) -> dict[str, str]:
        return {
            "endpoint": self.endpoint,
            "region": self.region,
            "userPoolId": self.user_pool_id,
            "clientId": self.client_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, str]) -> AuthConfig:
        return cls(data["endpoint"], data["region"], data["userPoolId"], data["clientId"])

    @classmethod
    def load(cls, path: Path) -> AuthConfig:
        return cls.from_json(json.loads(path.read_text()))

    def write(self, path: Path) -> str:
        """Write the file (creating its folder) and return its text."""
        text = json.dumps(self.to_json(), indent=2) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return text


def auth_file(port: int) -> Path:
    """The ``auth.json`` of the ``make local`` whose API listens on ``port``."""
    return state_dir(port) / "auth.json"


def cognito_client(endpoint: str, region: str = REGION) -> Any:
    """A ``cognito-idp`` client for the local provider (any credentials do)."""
    return boto3.session.Session().client(
        "cognito-idp",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def _only(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    found = resources(template, kind)
    if len(found) != 1:
        raise ValueError(f"expected exactly one {kind} in the template, found {sorted(found)}")
    logical, resource = next(iter(found.items()))
    return logical, resource.get("Properties") or {}


def user_pool_request(logical_id: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A CreateUserPool request for the template's ``AWS::Cognito::UserPool``."""
    request: dict[str, Any] = {"PoolName": logical_id}
    request.update({key: properties[key] for key in _POOL_KEYS if key in properties})
    return request


def client_request(logical_id: str, properties: dict[str, Any], pool_id: str) -> dict[str, Any]:
    """A CreateUserPoolClient request for the template's ``AWS::Cognito::UserPoolClient``."""
    request: dict[str, Any] = {"UserPoolId": pool_id, "ClientName": logical_id}
    request.update({key: properties[key] for key in _CLIENT_KEYS if key in properties})
    return request


def create_from_template(client: Any, template: dict[str, Any]) -> tuple[str, str]:
    """Create the template's user pool, its app client and its groups; returns (pool id,
    client id). Exactly one pool and one client are expected: that is the contract."""
    pool_logical, pool_properties = _only(template, "AWS::Cognito::UserPool")
    client_logical, client_properties = _only(template, "AWS::Cognito::UserPoolClient")
    if client_properties.get("UserPoolId") != {"Ref": pool_logical}:
        raise ValueError(f"{client_logical} does not belong to {pool_logical}")
    pool_id = client.create_user_pool(**user_pool_request(pool_logical, pool_properties))[
        "UserPool"
    ]["Id"]
    client_id = client.create_user_pool_client(
        **client_request(client_logical, client_properties, pool_id)
    )["UserPoolClient"]["ClientId"]
    for group in resources(template, "AWS::Cognito::UserPoolGroup").values():
        properties = group["Properties"]
        if properties.get("UserPoolId") != {"Ref": pool_logical}:
            raise ValueError(f"group {properties.get('GroupName')} of another user pool")
        client.create_group(
            UserPoolId=pool_id,
            GroupName=properties["GroupName"],
            **({"Description": properties["Description"]} if "Description" in properties else {}),
        )
    return pool_id, client_id


class IdentityProvider:
    """moto's server on ``host:port`` (0: a free port), in a daemon thread of this process."""

    def __init__(self, *, port: int = 0, host: str = "127.0.0.1", region: str = REGION) -> None:
        self.host = host
        self.port = port
        self.region = region
        self._server: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> IdentityProvider:
        from moto.server import ThreadedMotoServer  # imported late: ~0.6 s, only when used

        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        self.port = self._server.get_host_and_port()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client(self) -> Any:
        return cognito_client(self.endpoint, self.region)

    def provision(self, template: dict[str, Any]) -> AuthConfig:
        """Create the template's pool, client and groups; what ``auth.json`` holds."""
        pool_id, client_id = create_from_template(self.client(), template)
        return AuthConfig(self.endpoint, self.region, pool_id, client_id)

    def __enter__(self) -> IdentityProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
