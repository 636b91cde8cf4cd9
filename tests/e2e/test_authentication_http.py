"""Authentication over HTTP against the local server and its own identity provider:
every token API Gateway's Cognito authorizer would refuse is 401 ``UNAUTHORIZED`` with the
``{"error","message"}`` body, the handler is never called and nothing is written (every table is
compared, item by item, before and after). Forged tokens are made with joserfc; the expired one is
signed with moto's private key, which ships inside the moto package: the local signing key is
public, so a local token proves nothing outside this machine."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import RSAKey
from werkzeug.test import Client

from local import bridge
from local.identity import AuthConfig, cognito_client
from local.issue_token import id_token
from local.tokens import JwksUnavailable, TokenVerifier, gateway_claims
from service import config, runtime
from service.domain.errors import Unauthorized
from tests.helpers import Person

PASSWORD = "Correct-Horse-9!"  # mallory's, so other app clients can sign her in too
MOTO_KID = "dummy"  # the kid of moto's one signing key


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(data: dict[str, Any]) -> str:
    return b64(json.dumps(data).encode())


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def moto_private_key() -> RSAKey:
    from moto.utilities.utils import load_resource

    return RSAKey.import_key(load_resource("cognitoidp/resources/jwks-private.json"))


def snapshot(ddb: Any, tables: config.Tables) -> dict[str, list[str]]:
    """Every item of every table, comparable: what "writes nothing" is checked against."""
    everything = {}
    for name in sorted(set(tables.names.values())):
        items: list[str] = []
        kwargs: dict[str, Any] = {"TableName": name, "ConsistentRead": True}
        while True:
            page = ddb.scan(**kwargs)
            items += [json.dumps(item, sort_keys=True) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        everything[name] = sorted(items)
    return everything


@pytest.fixture(scope="module")
def product(api_url: str, admin: Person) -> str:
    product_id = f"auth-{uuid.uuid4().hex[:10]}"
    created = admin.post(
        f"{api_url}/products", json={"productId": product_id, "name": "Tea", "stock": 5}, timeout=10
    )
    assert created.status_code == 201, created.text
    return product_id


@pytest.fixture(scope="module")
def mallory(identity: AuthConfig) -> tuple[str, str]:
    """An ordinary user with a known password: (username, ID token)."""
    return "e2e-mallory", id_token(identity, "e2e-mallory", password=PASSWORD)


def sign_in(auth: AuthConfig, client_id: str, pool_id: str, username: str) -> dict[str, str]:
    result = cognito_client(auth.endpoint, auth.region).admin_initiate_auth(
        UserPoolId=pool_id,
        ClientId=client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": username, "PASSWORD": PASSWORD},
    )
    return dict(result["AuthenticationResult"])


def other_client_token(auth: AuthConfig, mallory: tuple[str, str]) -> str:
    """Mallory's real ID token, issued to another app client of the same pool."""
    client_id = cognito_client(auth.endpoint, auth.region).create_user_pool_client(
        UserPoolId=auth.user_pool_id,
        ClientName="another-app",
        ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    return sign_in(auth, client_id, auth.user_pool_id, mallory[0])["IdToken"]


def other_pool_token(auth: AuthConfig, mallory: tuple[str, str]) -> str:
    """A real ID token of another user pool (same provider, same moto key, same kid)."""
    client = cognito_client(auth.endpoint, auth.region)
    pool_id = client.create_user_pool(PoolName="another-pool")["UserPool"]["Id"]
    client_id = client.create_user_pool_client(
        UserPoolId=pool_id,
        ClientName="another-pool-app",
        ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    client.admin_create_user(UserPoolId=pool_id, Username=mallory[0], MessageAction="SUPPRESS")
    client.admin_set_user_password(
        UserPoolId=pool_id, Username=mallory[0], Password=PASSWORD, Permanent=True
    )
    return sign_in(auth, client_id, pool_id, mallory[0])["IdToken"]


def hs256(token: str, secret: bytes) -> str:
    """The token's claims under HS256 with ``secret`` (``kid`` kept)."""
    header = segment({"alg": "HS256", "typ": "JWT", "kid": MOTO_KID})
    signing_input = f"{header}.{token.split('.')[1]}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


def changed(token: str, **claims: Any) -> str:
    """The token with some claims changed, its signature kept."""
    header, _, signature = token.split(".")
    return f"{header}.{segment({**claims_of(token), **claims})}.{signature}"


def minted(token: str, key: RSAKey, **claims: Any) -> str:
    """The token's claims (with changes) signed RS256 by ``key`` under moto's kid."""
    return jwt.encode({"alg": "RS256", "kid": MOTO_KID}, {**claims_of(token), **claims}, key)


@dataclass(frozen=True)
class Cast:
    auth: AuthConfig
    alice: Person
    bob: Person
    mallory: tuple[str, str]


def _payload(token: str) -> str:
    return token.split(".")[1]


# What each case sends as the Authorization header (None: no header at all).
FORGERIES: dict[str, Callable[[Cast], str | None]] = {
    "no Authorization header": lambda c: None,
    "an empty Bearer": lambda c: "Bearer ",
    "another key under the same kid": lambda c: minted(
        c.alice.token, RSAKey.generate_key(2048, parameters={"kid": MOTO_KID})
    ),
    "alg none": lambda c: f"{segment({'alg': 'none', 'kid': MOTO_KID})}.{_payload(c.alice.token)}.",
    "alg none without a kid, as Bearer": lambda c: (
        f"Bearer {segment({'alg': 'none', 'typ': 'JWT'})}.{_payload(c.alice.token)}."
    ),
    "HS256 with a guessable secret": lambda c: hs256(c.alice.token, b"secret"),
    "HS256 keyed with the public key": lambda c: hs256(
        c.alice.token, moto_private_key().as_pem(private=False)
    ),
    "admins group added under the old signature": lambda c: changed(
        c.alice.token, **{"cognito:groups": ["admins"]}
    ),
    "sub changed to bob's under the old signature": lambda c: changed(c.alice.token, sub=c.bob.sub),
    "expired (signed with moto's public development key)": lambda c: minted(
        c.alice.token,
        moto_private_key(),
        iat=int(time.time()) - 7200,
        auth_time=int(time.time()) - 7200,
        exp=int(time.time()) - 60,
    ),
    # date claims no date can be written from, under a valid signature (moto's shipped key)
    "exp of 10^20 (signed)": lambda c: minted(c.alice.token, moto_private_key(), exp=10**20),
    "exp of 2^63 (signed)": lambda c: minted(c.alice.token, moto_private_key(), exp=2**63),
    "iat of -10^20 (signed)": lambda c: minted(c.alice.token, moto_private_key(), iat=-(10**20)),
    "auth_time of 10^20 (signed)": lambda c: minted(
        c.alice.token, moto_private_key(), auth_time=10**20
    ),
    "exp of NaN (signed)": lambda c: minted(c.alice.token, moto_private_key(), exp=float("nan")),
    "another app client of the same pool": lambda c: other_client_token(c.auth, c.mallory),
    "another user pool": lambda c: other_pool_token(c.auth, c.mallory),
    "an access token instead of an ID token": lambda c: sign_in(
        c.auth, c.auth.client_id, c.auth.user_pool_id, c.mallory[0]
    )["AccessToken"],
    "garbage": lambda c: "garbage",
    "three dots of garbage": lambda c: "Bearer a.b.c",
    "Basic credentials": lambda c: "Basic " + b64(b"alice:password"),
    "a token beyond any size": lambda c: "Bearer " + "a" * 20_000,
}


@pytest.mark.parametrize("case", list(FORGERIES))
def test_a_refused_token_is_401_and_writes_nothing(
    case, api_url, identity, alice, bob, mallory, product, ddb, tables
):
    # Given what this case sends instead of a valid ID token
    authorization = FORGERIES[case](Cast(identity, alice, bob, mallory))
    headers = {} if authorization is None else {"Authorization": authorization}
    before = snapshot(ddb, tables)
    # When it buys, creates a product and changes one, on one keep-alive connection
    with requests.Session() as session:
        answers = [
            session.post(
                f"{api_url}/products/{product}/purchases",
                json={"quantity": 1},
                headers=headers,
                timeout=10,
            ),
            session.post(
                f"{api_url}/products",
                json={"productId": f"forged-{uuid.uuid4().hex[:8]}", "name": "X", "stock": 9},
                headers=headers,
                timeout=10,
            ),
            session.patch(
                f"{api_url}/products/{product}",
                json={"stock": 1000},
                headers={**headers, "If-Match": '"1"'},
                timeout=10,
            ),
        ]
    # Then each is 401 UNAUTHORIZED in the contract's shape, and no table changed
    for response in answers:
        assert response.status_code == 401, (case, response.text)
        body = response.json()
        assert set(body) == {"error", "message"} and body["error"] == "UNAUTHORIZED"
        assert body["message"]
    assert snapshot(ddb, tables) == before


def test_the_raw_and_bearer_forms_of_a_valid_token_are_both_accepted(api_url, alice, product):
    # Given alice's real ID token, sent raw and after "Bearer"
    url = f"{api_url}/products/{product}/purchases"
    stock = alice.get(f"{api_url}/products/{product}", timeout=10).json()["stock"]
    raw = requests.post(
        url, json={"quantity": 1}, headers={"Authorization": alice.token}, timeout=10
    )
    bearer = requests.post(
        url, json={"quantity": 1}, headers={"Authorization": f"Bearer {alice.token}"}, timeout=10
    )
    # Then both are served and both wrote
    assert raw.status_code == bearer.status_code == 201, (raw.text, bearer.text)
    assert alice.get(f"{api_url}/products/{product}", timeout=10).json()["stock"] == stock - 2


def test_a_token_minted_with_motos_shipped_key_is_accepted_locally(api_url, alice, product):
    # The control of the expired case: the same key with a live exp passes, which is why local
    # tokens prove nothing outside this machine (the README says so)
    now = int(time.time())
    token = minted(alice.token, moto_private_key(), iat=now, auth_time=now, exp=now + 300)
    answer = requests.get(
        f"{api_url}/products/{product}", headers={"Authorization": token}, timeout=10
    )
    assert answer.status_code == 200, answer.text


def test_every_declared_route_needs_a_token_and_the_documentation_does_not(api_url):
    # Given every method of the API (the declared routes, as API Gateway's), ids made up
    routes = bridge.Bridge().targets
    assert len(routes) >= 19
    with requests.Session() as anonymous:
        for route in routes:
            path = "/".join(
                f"x{uuid.uuid4().hex[:6]}" if part.startswith("{") else part
                for part in route.path.split("/")
            )
            # When called without a token, then 401 in the contract shape
            response = anonymous.request(route.method, f"{api_url}{path}", json={}, timeout=10)
            assert response.status_code == 401, (route.method, route.path, response.text)
            assert response.json()["error"] == "UNAUTHORIZED"
        # And the documentation stays open
        assert anonymous.get(f"{api_url}/openapi.json", timeout=10).status_code == 200
        assert anonymous.get(f"{api_url}/swagger", timeout=30).status_code == 200


# -- what the handler is handed (the bridge in-process, one route's handler recording its events)


Recording = Callable[[TokenVerifier], tuple[Client, list[dict[str, Any]]]]


@pytest.fixture
def recording(api_url: str) -> Recording:
    """``recording(verifier)``: an in-process bridge whose GET /products/{productId} handler
    records the events it is handed (``api_url``: the session's tables are in the environment)."""

    def make(verifier: TokenVerifier) -> tuple[Client, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []
        local = bridge.Bridge(verifier=verifier)

        def recorder(real: Any) -> Any:
            def record(event: dict[str, Any], context: Any) -> Any:
                seen.append(event)
                return real(event, context)

            return record

        local.targets = [
            replace(target, handler=recorder(target.handler))
            if (target.method, target.path) == ("GET", "/products/{productId}")
            else target
            for target in local.targets
        ]
        return Client(local), seen

    return make


def test_the_handler_gets_the_verified_claims_and_nothing_a_client_sent(
    recording, verifier, alice, product
):
    client, seen = recording(verifier)
    # Given alice's token, and a request that tries to smuggle claims in headers and the query
    forged_context = json.dumps(
        {"authorizer": {"claims": {"sub": "root", "cognito:groups": "admins"}}}
    )
    answer = client.get(
        f"/products/{product}?requestContext={forged_context}",
        headers={
            "Authorization": f"Bearer {alice.token}",
            "requestContext": forged_context,
            "X-Amzn-Oidc-Data": "forged",
        },
    )
    # Then the handler ran with exactly the verified claims of alice's token
    assert answer.status_code == 200
    (event,) = seen
    assert event["requestContext"]["authorizer"] == {"claims": verifier.verify(alice.token)}
    assert event["requestContext"]["authorizer"]["claims"]["sub"] == alice.sub
    assert "cognito:groups" not in event["requestContext"]["authorizer"]["claims"]


def test_an_unauthenticated_request_never_reaches_the_handler(recording, verifier, product):
    client, seen = recording(verifier)
    assert client.get(f"/products/{product}").status_code == 401
    assert client.get(f"/products/{product}", headers={"Authorization": "x"}).status_code == 401
    assert seen == []


def test_a_jwks_outage_is_503_with_retry_after_and_reaches_no_handler(
    recording, identity, alice, product
):
    # Given a verifier whose JWKS cannot be fetched (the identity provider is down)
    def unreachable(url: str) -> dict[str, Any]:
        raise JwksUnavailable(f"cannot fetch {url}: connection refused")

    down = TokenVerifier(
        issuer=identity.issuer, audience=identity.client_id, jwks_url="x", fetch=unreachable
    )
    client, seen = recording(down)
    # When alice's valid token comes
    answer = client.get(f"/products/{product}", headers={"Authorization": alice.token})
    # Then 503 THROTTLED (retry shortly, nothing was done) with Retry-After, no handler called
    assert answer.status_code == 503
    assert answer.json["error"] == "THROTTLED" and answer.json["message"]
    assert int(answer.headers["Retry-After"]) >= 1
    assert seen == []


# -- the bridge keeps verified answers as the deployed authorizer does (bridge.CachedVerifier)


class CountingVerifier:
    """Accepts only the header value "good", with claims expiring at ``exp``; counts calls."""

    def __init__(self, exp: int) -> None:
        self.calls = 0
        self.claims = gateway_claims({"sub": "someone", "token_use": "id", "exp": exp})

    def verify(self, authorization: str | None) -> dict[str, str]:
        self.calls += 1
        if authorization != "good":
            raise Unauthorized("not a token of this pool")
        return dict(self.claims)


def test_a_verified_answer_is_kept_until_the_ttl_and_never_past_the_tokens_exp():
    start = 1_800_000_000
    now = [float(start)]
    inner = CountingVerifier(exp=start + 100)
    cached = bridge.CachedVerifier(inner, ttl_seconds=30, clock=lambda: now[0])
    # Within the TTL the header value is verified once
    assert cached.verify("good") == cached.verify("good") == inner.claims
    assert inner.calls == 1
    # After the TTL it is verified again
    now[0] = start + 31
    cached.verify("good")
    assert inner.calls == 2
    # And an answer kept near the end of the token's life ends at its exp, not 30 s later
    now[0] = start + 99
    cached.verify("good")
    now[0] = start + 99.5
    cached.verify("good")
    assert inner.calls == 3
    now[0] = start + 100
    cached.verify("good")
    assert inner.calls == 4


def test_refusals_are_never_kept():
    inner = CountingVerifier(exp=int(time.time()) + 3600)
    cached = bridge.CachedVerifier(inner)
    for _ in range(2):
        with pytest.raises(Unauthorized):
            cached.verify("forged")
        with pytest.raises(Unauthorized):
            cached.verify(None)
    assert inner.calls == 4


def test_make_local_serves_the_api_behind_its_own_providers_tokens(
    template, assembly, tmp_path, monkeypatch
):
    from local import run

    # running() exports its DynamoDB Local into os.environ: keep that inside this test
    monkeypatch.setattr(os, "environ", dict(os.environ))
    template_path = tmp_path / "Turnstile.template.json"
    template_path.write_text(json.dumps(template))
    runtime.Lazy.reset_all()  # the handlers' clients are built again for its DynamoDB Local
    try:
        with run.running(
            port=0,
            template_path=template_path,
            auth_file=None,
            assembly_dir=Path(assembly.directory),
        ) as stack:
            # Given make local's stack and a token of its provider
            url = f"{stack.url}/products/nope"
            token = id_token(stack.auth, "e2e-local-user")
            # Then without a token 401, with one of the provider's tokens the handler answers
            anonymous = requests.get(url, timeout=10)
            assert (anonymous.status_code, anonymous.json()["error"]) == (401, "UNAUTHORIZED")
            signed_in = requests.get(url, headers={"Authorization": token}, timeout=10)
            assert (signed_in.status_code, signed_in.json()["error"]) == (404, "NOT_FOUND")
    finally:
        runtime.Lazy.reset_all()
