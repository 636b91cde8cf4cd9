"""Verify a Cognito ID token as API Gateway's Cognito user-pool authorizer does, for the local
server (in AWS, API Gateway does this before a Lambda runs, so the Lambda code never verifies).

Checks, in order, each failure an ``Unauthorized`` (401): an ``Authorization`` value (the raw token
or ``Bearer <token>``); a compact JWS whose header says ``alg = RS256`` (pinned: ``none``, HS256
and every other algorithm are refused before any key is looked at) and names a ``kid``; that key in
the pool's JWKS; the RS256 signature; then the claims: ``iss`` = the pool, ``aud`` = the app client,
``token_use = "id"``, ``exp`` in the future (no leeway), ``sub`` present, and every date claim
(``exp``, ``iat``, ``nbf``, ``auth_time``) a date: a number between 1970 and the end of year 9999
(``service.policy.is_date``). A token Cognito signed always passes that last check; one whose
``exp`` is 10^20 or 2^63 (only a holder of the signing key can make it, as with moto's public
development key locally) is refused like any other invalid claim, rather than crashing the shaping
of its claims below.

The JWKS is fetched once and cached by ``kid``. A token naming an unknown ``kid`` triggers a refetch
(keys rotate), at most once per ``refetch_interval`` seconds, so forged ``kid`` values cannot make
the verifier hammer the provider. A JWKS that cannot be fetched is an outage, not a client error:
``JwksUnavailable`` propagates (a 5xx).

The signature and claim checks are joserfc's (a maintained JOSE library); what is hand-written here
is only the policy API Gateway applies on top (which algorithm, which claims, the key cache) and the
shape it hands the handler: ``requestContext.authorizer.claims``, where REST APIs give every claim
as a string (``exp``/``iat`` as ``"Fri Jul 29 18:52:53 UTC 2016"``, lists such as ``cognito:groups``
joined by commas).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import InvalidClaimError, JoseError
from joserfc.jwk import RSAKey

from service.domain.errors import Unauthorized
from service.policy import NUMERIC_DATE_CLAIMS, is_date, rest_time

ALGORITHM = "RS256"
MAX_TOKEN_BYTES = 16 * 1024
REFETCH_INTERVAL = 30.0

Fetch = Callable[[str], dict[str, Any]]


class JwksUnavailable(RuntimeError):
    """The pool's JWKS could not be fetched: an outage of the identity provider."""


def fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = json.loads(response.read())
    except (OSError, ValueError) as error:
        raise JwksUnavailable(f"cannot fetch {url}: {error}") from error
    if not isinstance(data, dict):
        raise JwksUnavailable(f"{url} is not a JWKS")
    return data


def authorization_header(headers: Mapping[str, str] | None) -> str | None:
    """The ``Authorization`` value of a request's headers (names are case-insensitive)."""
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            return value
    return None


def raw_token(authorization: str | None) -> str:
    """The token of an ``Authorization`` header: raw, or after ``Bearer``."""
    value = (authorization or "").strip()
    scheme, _, rest = value.partition(" ")
    if scheme.lower() == "bearer":
        value = rest.strip()
    if not value:
        raise Unauthorized("an Authorization header with an ID token is required")
    return value


class GatewayClaims(jwt.JWTClaimsRegistry):
    """joserfc's claim checks (``exp`` / ``nbf`` / ``iat``: a JSON number, not a bool, finite,
    compared with now), and every date claim a date (``is_date``): ``auth_time`` included, which
    joserfc does not look at."""

    def validate(self, claims: dict[str, Any]) -> None:
        for name in NUMERIC_DATE_CLAIMS:
            if name in claims and not is_date(claims[name]):
                raise InvalidClaimError(name, f"Claim '{name}' is not a date (1970 to 9999)")
        super().validate(claims)


def gateway_claims(claims: dict[str, Any]) -> dict[str, str]:
    """Claims as API Gateway (REST, Cognito authorizer) hands them to the handler. Never raises: a
    date claim that is no date (``GatewayClaims`` refuses it before this runs) stays as written."""
    shaped: dict[str, str] = {}
    for name, value in claims.items():
        written = rest_time(value) if name in ("exp", "iat") else None
        if written is not None:
            shaped[name] = written
        elif isinstance(value, bool):
            shaped[name] = "true" if value else "false"
        elif isinstance(value, list):
            shaped[name] = ",".join(str(item) for item in value)
        else:
            shaped[name] = str(value)
    return shaped


class TokenVerifier:
    """Verifies ID tokens of one user pool and app client. Thread-safe."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str,
        fetch: Fetch = fetch_json,
        refetch_interval: float = REFETCH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self.fetches = 0
        self._fetch = fetch
        self._refetch_interval = refetch_interval
        self._clock = clock
        self._keys: dict[str, RSAKey] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()
        self._registry = GatewayClaims(
            now=lambda: int(now()),
            leeway=0,
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": audience},
            token_use={"essential": True, "value": "id"},
            exp={"essential": True},
            sub={"essential": True},
        )

    @classmethod
    def for_pool(
        cls, *, region: str, user_pool_id: str, client_id: str, jwks_url: str | None = None
    ) -> TokenVerifier:
        """The verifier of a pool; the JWKS is Cognito's unless ``jwks_url`` says otherwise
        (the local provider serves it at ``<endpoint>/<poolId>/.well-known/jwks.json``)."""
        issuer = f"https://cognito-idp.{region}.amazonaws.com/{user_pool_id}"
        return cls(
            issuer=issuer,
            audience=client_id,
            jwks_url=jwks_url or f"{issuer}/.well-known/jwks.json",
        )

    def verify(self, authorization: str | None) -> dict[str, str]:
        """The caller's claims, as ``requestContext.authorizer.claims``; else ``Unauthorized``."""
        return gateway_claims(self.verify_claims(authorization))

    def verify_claims(self, authorization: str | None) -> dict[str, Any]:
        """The verified claims as the token carries them (numbers, lists)."""
        token = raw_token(authorization)
        if len(token) > MAX_TOKEN_BYTES:
            raise Unauthorized("the token is too large")
        try:
            header = jws.extract_compact(token.encode("ascii")).headers()
        except (JoseError, ValueError, TypeError) as error:
            raise Unauthorized("the token is not a signed JWT") from error
        if header.get("alg") != ALGORITHM:
            raise Unauthorized(f"the token must be signed with {ALGORITHM}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Unauthorized("the token names no signing key")
        key = self._key(kid)
        try:
            decoded = jwt.decode(token, key, algorithms=[ALGORITHM])
            claims = dict(decoded.claims)
            self._registry.validate(claims)
        except (JoseError, ValueError, TypeError) as error:
            reason = str(error).rstrip(": ") or type(error).__name__
            raise Unauthorized(f"the token is not valid here: {reason}") from error
        return claims

    def _key(self, kid: str) -> RSAKey:
        key = self._keys.get(kid)
        if key is not None:
            return key
        with self._lock:
            key = self._keys.get(kid)
            due = (
                self._fetched_at is None
                or self._clock() - self._fetched_at >= self._refetch_interval
            )
            if key is None and due:
                self._refresh()
                key = self._keys.get(kid)
        if key is None:
            raise Unauthorized("the token's signing key is not the user pool's")
        return key

    def _refresh(self) -> None:
        """Replace the cached keys with the JWKS's RS256 signing keys (caller holds the lock)."""
        data = self._fetch(self.jwks_url)
        self.fetches += 1
        keys: dict[str, RSAKey] = {}
        for entry in data.get("keys") or []:
            if not isinstance(entry, dict) or entry.get("kty") != "RSA":
                continue
            if entry.get("use", "sig") != "sig" or entry.get("alg", ALGORITHM) != ALGORITHM:
                continue
            if isinstance(entry.get("kid"), str):
                keys[entry["kid"]] = RSAKey.import_key(entry)
        self._keys = keys
        self._fetched_at = self._clock()
