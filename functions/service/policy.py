"""Who may do what: the authorization rules of the HTTP contract (docs/identity.md), in one
place, as pure functions over the verified caller and what the request names.

The caller comes only from ``requestContext.authorizer.claims`` (put there by API Gateway's
Cognito authorizer, or by the local bridge after ``local.tokens`` verified the token): ``sub`` is
the identity, membership of the group ``admins`` makes an administrator. A request that reaches a
handler without claims is refused (``Unauthorized``, 401), so a route added later without the
authorizer does not become anonymous. A verified caller who may not do something gets
``Forbidden`` (403). Both are raised before anything is written.

Rules. ``ACCESS`` names, for every declared route, who may call it; the table of
``docs/identity.md`` says the same and ``tests/unit/test_policy.py`` walks both, so a route added
without a rule fails a test (and is refused at run time: ``admit`` fails closed).

* catalogue writes (``CATALOGUE_WRITES``: every ``Access.ADMINISTRATORS`` route but the exact
  counts of a sku, which read every unit) are for administrators (``require_admin``);
* a body ``userId`` / ``owner`` defaults to the caller; naming someone else needs an
  administrator, acting on their behalf (``acting_for``, ``lease_owner``);
* a path naming a user is the caller's own or an administrator's (``require_self_or_admin``);
* registration requests, reservations and wallets belong to whoever made them (a wallet: its first
  top-up, ``wallet_owner``); others get 403, administrators may read (``require_owner``);
* a lease belongs to its owner: renewing or releasing with ``lease_owner(caller, None)`` uses the
  caller's own ``sub``, so someone else's lease answers ``LOCK_LOST`` from the lease condition
  itself, exactly as for a stale holder; a body ``owner`` not the caller's is 403;
* an ``Idempotency-Key`` is scoped to its caller (``idempotency_scope``).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeGuard

from service.api import routes
from service.domain.errors import Forbidden, Unauthorized

ADMINS_GROUP = "admins"


class Access(StrEnum):
    """Who may call a route. The value is the sentence the docs' table and the OpenAPI document
    show; the rules that need the item (an owner, a path's user) run in the handler."""

    ADMINISTRATORS = "administrators only"
    ANY_CALLER = "any signed-in caller"
    FOR_THEMSELVES = (
        "any signed-in caller, for themselves; naming another user in the body is for "
        "administrators"
    )
    LEASE_OWNER = "the lease's owner (anyone else gets 409 LOCK_LOST, as a stale holder does)"
    SELF_OR_ADMIN = "the user the path names, or an administrator"
    OWNER = "its owner: whoever made it (a wallet: whoever made its first top-up)"
    OWNER_OR_ADMIN_READS = "its owner: whoever made it; administrators may read it"


# Every route of ``service.api.routes``, by (method, resource path): one line a route.
ACCESS: dict[tuple[str, str], Access] = {
    ("POST", "/products"): Access.ADMINISTRATORS,
    ("GET", "/products/{productId}"): Access.ANY_CALLER,
    ("PATCH", "/products/{productId}"): Access.ADMINISTRATORS,
    ("POST", "/products/{productId}/restocks"): Access.ADMINISTRATORS,
    ("POST", "/products/{productId}/purchases"): Access.ANY_CALLER,
    ("POST", "/locks/{resource}"): Access.FOR_THEMSELVES,
    ("PUT", "/locks/{resource}"): Access.LEASE_OWNER,
    ("DELETE", "/locks/{resource}"): Access.LEASE_OWNER,
    ("POST", "/wallets/{walletId}/top-ups"): Access.OWNER,
    ("GET", "/wallets/{walletId}"): Access.OWNER_OR_ADMIN_READS,
    ("POST", "/inventory"): Access.ADMINISTRATORS,
    ("GET", "/inventory/{sku}"): Access.ANY_CALLER,
    ("GET", "/inventory/{sku}/exact"): Access.ADMINISTRATORS,
    ("POST", "/inventory/{sku}/reservations"): Access.ANY_CALLER,
    ("POST", "/inventory/{sku}/reservations/{reservationId}/confirm"): Access.OWNER,
    ("DELETE", "/inventory/{sku}/reservations/{reservationId}"): Access.OWNER,
    ("POST", "/events"): Access.ADMINISTRATORS,
    ("GET", "/events/{eventId}"): Access.ANY_CALLER,
    ("POST", "/events/{eventId}/registrations"): Access.FOR_THEMSELVES,
    ("DELETE", "/events/{eventId}/registrations/{userId}"): Access.SELF_OR_ADMIN,
    ("GET", "/users/{userId}/registrations"): Access.SELF_OR_ADMIN,
    ("POST", "/events/{eventId}/registration-requests"): Access.FOR_THEMSELVES,
    ("GET", "/events/{eventId}/registration-requests/{requestId}"): Access.OWNER_OR_ADMIN_READS,
}

# (method, resource path) of the routes that change the catalogue (stock included). The exact
# counts (``GET /inventory/{sku}/exact``) are administrators' too, but they read: they read every
# unit of the sku, which a loop of requests would turn into a cost attack.
CATALOGUE_WRITES = frozenset(
    key for key, who in ACCESS.items() if who is Access.ADMINISTRATORS and key[0] != "GET"
)


_DECLARED = frozenset((route.method, route.path) for route in routes.ROUTES)


def access_of(route: routes.Route) -> Access | None:
    """The rule of a declared route; None for a route nobody wrote a rule for."""
    return ACCESS.get((route.method, route.path))


@dataclass(frozen=True)
class Caller:
    """A verified caller: the token's ``sub`` and its groups."""

    sub: str
    groups: frozenset[str] = frozenset()
    username: str | None = None

    @property
    def is_admin(self) -> bool:
        return ADMINS_GROUP in self.groups


# Characters that make a flattened ``cognito:groups`` claim ambiguous. Cognito group names are
# ``[\p{L}\p{M}\p{S}\p{N}\p{P}]+``: commas and brackets are punctuation, so they may be part of
# a name; whitespace may not, but a gateway's flattening adds it.
_FLATTENING = re.compile(r"[,\[\]\s]")
_REST_TIME = "%a %b %d %H:%M:%S UTC %Y"  # how REST claims carry exp / iat

# The NumericDate claims of an ID token (``exp``, ``iat``, ``nbf``, ``auth_time``) are dates only
# between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the last second a REST claim (a four-digit
# year) can write. Any other value (10^20, 2^63, negative, NaN, infinite, a bool, a string) is no
# date: the local verifier refuses the token (401) and ``_signed_groups`` reads no group.
NUMERIC_DATE_CLAIMS = ("exp", "iat", "nbf", "auth_time")
LAST_DATE = 253_402_300_799  # 9999-12-31T23:59:59Z


def is_date(value: object) -> TypeGuard[int | float]:
    """Whether a NumericDate claim's value is a date (see ``LAST_DATE``): a finite int or float,
    not a bool, between 0 and ``LAST_DATE``. Never raises, whatever the value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0 <= value <= LAST_DATE  # NaN compares false; inf and any big int fall outside


def rest_time(value: object) -> str | None:
    """A NumericDate as API Gateway REST writes ``exp`` / ``iat`` in the claims (``Fri Jul 29
    18:52:53 UTC 2016``); None when the value is no date (``is_date``). Never raises."""
    if not is_date(value):
        return None
    return time.strftime(_REST_TIME, time.gmtime(value))


def _signed_groups(claims: Mapping[str, Any], headers: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The ``cognito:groups`` list of the one verified ID token of the request, or no group.

    API Gateway verified the token of the ``Authorization`` header before the Lambda runs (and
    the bridge does the same locally), so its payload is read as it stands, without the signature
    check again. It is read only when it is certainly that token: exactly one ``Authorization``
    value in the request, the same ``sub`` as the claims, and the same ``exp`` / ``iat`` when the
    claims carry them (each a date, ``rest_time``). Anything else is no group (fail closed).
    Hand-written: reading the payload of an already verified compact JWS is a base64url decode,
    and the Lambda code ships no JOSE library."""
    values = {value for name, value in headers if name.lower() == "authorization"}
    if len(values) != 1:
        return frozenset()
    token = values.pop().strip()
    scheme, _, rest = token.partition(" ")
    if scheme.lower() == "bearer":
        token = rest.strip()
    parts = token.split(".")
    if len(parts) != 3:
        return frozenset()
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError):
        return frozenset()
    if not isinstance(payload, dict) or payload.get("sub") != claims.get("sub"):
        return frozenset()
    for moment in ("exp", "iat"):
        if moment in claims:
            written = rest_time(payload.get(moment))  # None for no date: never raises
            if written is None or written != claims[moment]:
                return frozenset()
    listed = payload.get("cognito:groups")
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        return frozenset()
    return frozenset(listed)


def groups_of(claims: Mapping[str, Any], headers: Iterable[tuple[str, str]] = ()) -> frozenset[str]:
    """The caller's groups, by exact name.

    API Gateway REST flattens the token's ``cognito:groups`` list into one string (``"a,b"``;
    HTTP APIs give ``"[a b]"``), and a Cognito group name may itself hold commas and brackets:
    ``"staff,admins"`` is both the groups ``staff`` + ``admins`` and the one group
    ``staff,admins``. So the flattened string is read only when it cannot be split (one bare name,
    no comma, bracket or space); a real list is read as it is; anything else comes from the signed
    list of the verified token (``_signed_groups``), never from splitting the string."""
    value = claims.get("cognito:groups")
    if isinstance(value, list | tuple):
        return frozenset(value) if all(isinstance(name, str) for name in value) else frozenset()
    if not isinstance(value, str) or not value:
        return frozenset()
    if not _FLATTENING.search(value):
        return frozenset({value})
    return _signed_groups(claims, headers)


def caller_from_claims(
    claims: Mapping[str, Any] | None, headers: Iterable[tuple[str, str]] = ()
) -> Caller:
    """The caller of verified claims; ``Unauthorized`` when there are none or no ``sub``.
    ``headers``: the request's (name, value) pairs, where the verified token is (``groups_of``)."""
    if not claims:
        raise Unauthorized("this route needs a verified caller (an ID token)")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.strip():
        raise Unauthorized("the token names no subject")
    username = claims.get("cognito:username")
    return Caller(
        sub=sub,
        groups=groups_of(claims, headers),
        username=username if isinstance(username, str) else None,
    )


def request_headers(event: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (name, value) of a REST proxy event's ``headers`` and ``multiValueHeaders``."""
    pairs: list[tuple[str, str]] = []
    single = event.get("headers")
    if isinstance(single, Mapping):
        pairs.extend((str(name), str(value)) for name, value in single.items())
    multi = event.get("multiValueHeaders")
    if isinstance(multi, Mapping):
        for name, values in multi.items():
            if isinstance(values, list):
                pairs.extend((str(name), str(value)) for value in values)
    return pairs


def caller_from_event(event: Mapping[str, Any]) -> Caller:
    """The caller of an API Gateway REST proxy event (``requestContext.authorizer.claims``)."""
    context = event.get("requestContext") or {}
    authorizer = (context.get("authorizer") or {}) if isinstance(context, Mapping) else {}
    claims = authorizer.get("claims") if isinstance(authorizer, Mapping) else None
    return caller_from_claims(
        claims if isinstance(claims, Mapping) else None, request_headers(event)
    )


def require_admin(caller: Caller, what: str) -> None:
    if not caller.is_admin:
        raise Forbidden(f"only administrators may {what}")


def admit(caller: Caller, method: str, path: str) -> None:
    """The route-level rule, before anything else runs: ``Forbidden`` for a declared route
    without a rule in ``ACCESS`` (fail closed) and for a non-administrator on an administrators'
    route; a path no route declares passes, to be answered 404 by the router. The rules that
    need the item or the body run later, in the handler."""
    key = (method.upper(), path)
    who = ACCESS.get(key)
    if who is None and key in _DECLARED:
        raise Forbidden(f"{method.upper()} {path} has no access rule")
    if who is Access.ADMINISTRATORS:
        require_admin(caller, f"{method.upper()} {path}")


def acting_for(caller: Caller, named: str | None, field: str = "userId") -> str:
    """The identity a request acts for: the body's ``field`` if given, else the caller. Naming
    someone else is for administrators (on that user's behalf)."""
    if named is None or named == "" or named == caller.sub:
        return caller.sub
    if caller.is_admin:
        return named
    raise Forbidden(f"{field} must be your own (the token's sub) unless you are an administrator")


def lease_owner(caller: Caller, named: str | None) -> str:
    """The lease owner for acquire, renew and release (see the module docstring)."""
    return acting_for(caller, named, field="owner")


def require_self_or_admin(caller: Caller, user_id: str) -> None:
    """A path naming a user (``/users/{userId}/...``, ``.../registrations/{userId}``)."""
    if user_id != caller.sub and not caller.is_admin:
        raise Forbidden("this path names another user")


def require_owner(caller: Caller, owner: str | None, *, write: bool, what: str) -> None:
    """A registration request, reservation or wallet (``owner`` as recorded on the item; an item
    without one, written before identities, is treated as nobody's: administrators may read it)."""
    if owner is not None and owner == caller.sub:
        return
    if caller.is_admin and not write:
        return
    raise Forbidden(f"this {what} belongs to another user")


def wallet_owner(caller: Caller, current_owner: str | None) -> str:
    """The owner to record on a top-up: the wallet's, which must be the caller's; a wallet without
    one yet becomes the caller's (its first top-up)."""
    if current_owner is None:
        return caller.sub
    require_owner(caller, current_owner, write=True, what="wallet")
    return current_owner


def idempotency_scope(caller: Caller, key: str) -> str:
    """The stored key of an ``Idempotency-Key``: the same key from two callers is two requests.
    The ``sub`` is length-prefixed, so no two callers' scoped keys can be equal whatever
    characters a ``sub`` holds (Cognito's are UUIDs)."""
    return f"{len(caller.sub)}:{caller.sub}#{key}"
