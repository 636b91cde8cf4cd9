"""local.tokens: ID tokens verified as API Gateway's Cognito authorizer does. Keys are made here
(no network): the pool's key, and an attacker's key published under the same ``kid``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from local.tokens import (
    JwksUnavailable,
    TokenVerifier,
    authorization_header,
    gateway_claims,
    raw_token,
)
from service.domain.errors import Unauthorized

REGION = "us-east-1"
POOL = "us-east-1_Pool0001"
OTHER_POOL = "us-east-1_Pool0002"
CLIENT = "client0001"
ISSUER = f"https://cognito-idp.{REGION}.amazonaws.com/{POOL}"
KID = "pool-key-1"


@pytest.fixture(scope="module")
def pool_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": KID})


@pytest.fixture(scope="module")
def attacker_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": KID})


def jwks(*keys: RSAKey) -> dict[str, Any]:
    return {"keys": [{**key.as_dict(private=False), "alg": "RS256", "use": "sig"} for key in keys]}


class Provider:
    """The JWKS endpoint, as a function the verifier calls; counts calls."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.calls = 0

    def __call__(self, url: str) -> dict[str, Any]:
        assert url == f"{ISSUER}/.well-known/jwks.json"
        self.calls += 1
        return self.document


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def verifier(provider: Provider, clock: Clock | None = None) -> TokenVerifier:
    return TokenVerifier(
        issuer=ISSUER,
        audience=CLIENT,
        jwks_url=f"{ISSUER}/.well-known/jwks.json",
        fetch=provider,
        clock=clock or Clock(),
    )


def id_claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": "11111111-aaaa-bbbb-cccc-000000000001",
        "aud": CLIENT,
        "token_use": "id",
        "iat": now,
        "auth_time": now,
        "exp": now + 3600,
        "cognito:username": "alice",
        "cognito:groups": ["admins"],
    }
    claims.update(overrides)
    return {key: value for key, value in claims.items() if value is not None}


def sign(key: RSAKey, claims: dict[str, Any], **header: Any) -> str:
    return jwt.encode({"alg": "RS256", "kid": KID, **header}, claims, key)


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


@pytest.fixture
def provider(pool_key: RSAKey) -> Provider:
    return Provider(jwks(pool_key))


def test_a_valid_id_token_is_accepted_raw_and_as_bearer(provider, pool_key):
    token = sign(pool_key, id_claims())
    v = verifier(provider)
    raw = v.verify(token)
    bearer = v.verify(f"Bearer {token}")
    lower = v.verify(f"bearer  {token} ")
    assert raw == bearer == lower
    assert raw["sub"] == "11111111-aaaa-bbbb-cccc-000000000001"
    assert raw["cognito:groups"] == "admins"
    assert provider.calls == 1  # fetched once, then cached


def test_claims_are_shaped_as_api_gateway_rest_hands_them_over():
    shaped = gateway_claims(
        {
            "exp": 1469814773,
            "iat": 1469811173,
            "auth_time": 1469811173,
            "sub": "s",
            "cognito:groups": ["admins", "ops"],
            "email_verified": True,
        }
    )
    assert shaped == {
        "exp": "Fri Jul 29 17:52:53 UTC 2016",
        "iat": "Fri Jul 29 16:52:53 UTC 2016",
        "auth_time": "1469811173",
        "sub": "s",
        "cognito:groups": "admins,ops",
        "email_verified": "true",
    }


@pytest.mark.parametrize("header", [None, "", "   ", "Bearer", "Bearer   "])
def test_no_token_is_refused(provider, header):
    with pytest.raises(Unauthorized, match="Authorization"):
        verifier(provider).verify(header)
    assert provider.calls == 0


def test_raw_token_takes_both_forms():
    assert raw_token("abc") == "abc"
    assert raw_token("Bearer abc") == "abc"


def test_a_token_signed_by_another_key_with_the_same_kid_is_refused(provider, attacker_key):
    forged = sign(attacker_key, id_claims())
    with pytest.raises(Unauthorized):
        verifier(provider).verify(forged)


def test_alg_none_is_refused(provider):
    unsigned = f"{b64({'alg': 'none', 'kid': KID})}.{b64(id_claims())}."
    with pytest.raises(Unauthorized, match="RS256"):
        verifier(provider).verify(unsigned)
    assert provider.calls == 0  # refused before any key is looked up


@pytest.mark.parametrize("secret", [b"secret", b"", "public-key-pem"])
def test_hs256_with_a_guessable_secret_is_refused(provider, pool_key, secret):
    if secret == "public-key-pem":  # the classic confusion: the RSA public key as HMAC secret
        secret = pool_key.as_pem(private=False)
    signing_input = f"{b64({'alg': 'HS256', 'kid': KID, 'typ': 'JWT'})}.{b64(id_claims())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    with pytest.raises(Unauthorized, match="RS256"):
        verifier(provider).verify(token)


def test_a_changed_claim_under_the_old_signature_is_refused(provider, pool_key):
    header, _, signature = sign(pool_key, id_claims()).split(".")
    tampered = f"{header}.{b64(id_claims(sub='someone-else'))}.{signature}"
    promoted = f"{header}.{b64(id_claims(**{'cognito:groups': ['admins', 'root']}))}.{signature}"
    for token in (tampered, promoted):
        with pytest.raises(Unauthorized):
            verifier(provider).verify(token)


def test_an_expired_token_is_refused(provider, pool_key):
    now = int(time.time())
    token = sign(pool_key, id_claims(iat=now - 7200, exp=now - 1))
    with pytest.raises(Unauthorized, match="exp"):
        verifier(provider).verify(token)


def test_a_token_without_exp_or_sub_is_refused(provider, pool_key):
    for claims in (id_claims(exp=None), id_claims(sub=None)):
        with pytest.raises(Unauthorized):
            verifier(provider).verify(sign(pool_key, claims))


def test_a_token_of_another_app_client_is_refused(provider, pool_key):
    with pytest.raises(Unauthorized, match="aud"):
        verifier(provider).verify(sign(pool_key, id_claims(aud="another-client")))


def test_a_token_of_another_user_pool_is_refused(provider, pool_key):
    # Same key on purpose: moto signs every pool with one key, so only iss tells them apart.
    other = id_claims(iss=f"https://cognito-idp.{REGION}.amazonaws.com/{OTHER_POOL}")
    with pytest.raises(Unauthorized, match="iss"):
        verifier(provider).verify(sign(pool_key, other))


def test_an_access_token_instead_of_an_id_token_is_refused(provider, pool_key):
    access = id_claims(token_use="access", aud=None, client_id=CLIENT, scope="openid")
    with pytest.raises(Unauthorized):
        verifier(provider).verify(sign(pool_key, access))
    with pytest.raises(Unauthorized, match="token_use"):  # even with an aud claim
        verifier(provider).verify(sign(pool_key, id_claims(token_use="access")))


@pytest.mark.parametrize(
    "garbage",
    [
        "garbage",
        "a.b.c",
        "....",
        "Bearer Bearer x",
        "eyJhbGciOiJSUzI1NiJ9.e30",
        "\u00e9t\u00e9.\u00e9t\u00e9.x",
        "x" * 20000,
    ],
)
def test_garbage_is_refused(provider, garbage):
    with pytest.raises(Unauthorized):
        verifier(provider).verify(garbage)
    assert provider.calls == 0


def test_unknown_kids_refetch_the_jwks_at_most_once_per_interval(provider, pool_key):
    clock = Clock()
    v = verifier(provider, clock)
    v.verify(sign(pool_key, id_claims()))
    assert provider.calls == 1
    for n in range(50):
        with pytest.raises(Unauthorized, match="signing key"):
            v.verify(sign(pool_key, id_claims(), kid=f"forged-{n}"))
    assert provider.calls == 1  # within the interval: no refetch
    clock.t += 31
    with pytest.raises(Unauthorized):
        v.verify(sign(pool_key, id_claims(), kid="forged-again"))
    assert provider.calls == 2


def test_a_rotated_key_is_picked_up_by_a_refetch(provider, pool_key):
    clock = Clock()
    v = verifier(provider, clock)
    v.verify(sign(pool_key, id_claims()))
    new_key = RSAKey.generate_key(2048, parameters={"kid": "pool-key-2"})
    provider.document = jwks(pool_key, new_key)
    clock.t += 31
    claims = v.verify(jwt.encode({"alg": "RS256", "kid": "pool-key-2"}, id_claims(), new_key))
    assert claims["cognito:username"] == "alice"
    assert provider.calls == 2


def test_an_unreachable_jwks_is_an_outage_not_a_client_error(pool_key):
    def down(url: str) -> dict[str, Any]:
        raise JwksUnavailable("connection refused")

    v = TokenVerifier(issuer=ISSUER, audience=CLIENT, jwks_url="http://x", fetch=down)
    with pytest.raises(JwksUnavailable):
        v.verify(sign(pool_key, id_claims()))


def test_for_pool_uses_cognitos_issuer_and_jwks_url():
    v = TokenVerifier.for_pool(region=REGION, user_pool_id=POOL, client_id=CLIENT)
    assert v.issuer == ISSUER and v.audience == CLIENT
    assert v.jwks_url == f"{ISSUER}/.well-known/jwks.json"


def test_the_authorization_header_is_found_whatever_its_case():
    assert authorization_header({"authorization": "Bearer x"}) == "Bearer x"
    assert authorization_header({"AUTHORIZATION": "y", "Other": "z"}) == "y"
    assert authorization_header({"Other": "z"}) is None
    assert authorization_header(None) is None


def test_many_threads_on_a_cold_verifier_fetch_the_jwks_once(provider, pool_key):
    import threading

    token = sign(pool_key, id_claims())
    v = verifier(provider)
    barrier = threading.Barrier(32)
    results: list[str] = []

    def call() -> None:
        barrier.wait()
        results.append(v.verify(token)["sub"])

    threads = [threading.Thread(target=call) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 32 and set(results) == {"11111111-aaaa-bbbb-cccc-000000000001"}
    assert provider.calls == 1


# A NumericDate claim a token can carry that no date can be written from: beyond year 9999 (10^20,
# 2^63, one second past 9999-12-31T23:59:59Z), before 1970, not finite, a bool or a string.
OUT_OF_RANGE = [
    10**20,
    2**63,
    253_402_300_800,
    -(10**20),
    -1,
    float("nan"),
    float("inf"),
    True,
    "1700000000",
]


@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=repr)
@pytest.mark.parametrize("claim", ["exp", "iat", "nbf", "auth_time"])
def test_a_numeric_claim_out_of_range_is_refused_never_a_crash(provider, pool_key, claim, value):
    # Given a token the pool's key signed, one of whose date claims is out of any range
    token = sign(pool_key, id_claims(**{claim: value}))
    # Then it is refused (401), as any other invalid claim: not OverflowError, not accepted
    with pytest.raises(Unauthorized, match="not valid here"):
        verifier(provider).verify(token)


def test_the_last_second_of_year_9999_is_still_a_date():
    # The bound of the check above: the last instant a REST claim can write (four-digit year)
    last = 253_402_300_799
    shaped = gateway_claims({"exp": last, "iat": 0, "auth_time": last})
    assert shaped["exp"] == "Fri Dec 31 23:59:59 UTC 9999"
    assert shaped["iat"] == "Thu Jan 01 00:00:00 UTC 1970"


@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=repr)
def test_shaping_claims_never_raises_whatever_a_date_claim_holds(value):
    # gateway_claims runs only on verified claims, but shaping must not be what fails
    shaped = gateway_claims({"exp": value, "iat": value, "sub": "s"})
    assert shaped["sub"] == "s" and set(shaped) == {"exp", "iat", "sub"}
