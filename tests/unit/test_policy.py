"""service.policy: every rule of docs/identity.md, with two users (alice, bob) and an
administrator."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from service import policy
from service.api import routes
from service.domain.errors import Forbidden, Unauthorized
from service.policy import Caller

ALICE = Caller("sub-alice", frozenset(), "alice")
BOB = Caller("sub-bob", frozenset({"readers"}), "bob")
ADMIN = Caller("sub-admin", frozenset({"admins"}), "root")


def claims(sub: str, groups: str | None = None) -> dict[str, str]:
    shaped = {"sub": sub, "token_use": "id", "cognito:username": sub.removeprefix("sub-")}
    if groups is not None:
        shaped["cognito:groups"] = groups
    return shaped


# --- the caller comes from verified claims, and only from them ---------------------------------


def test_caller_is_the_claims_sub_and_admins_are_the_admins_group():
    assert policy.caller_from_claims(claims("sub-alice")) == ALICE
    assert policy.caller_from_claims(claims("sub-admin", "admins")).is_admin
    assert not policy.caller_from_claims(claims("sub-bob", "readers")).is_admin
    assert not policy.caller_from_claims(claims("sub-bob", "administrators")).is_admin


def id_token(payload: dict[str, object]) -> str:
    """A compact JWS of ``payload`` as it sits in the Authorization header API Gateway verified
    (the signature is not checked again behind the gateway, so any bytes serve here)."""

    def b64(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'RS256', 'kid': 'k'})}.{b64(payload)}.c2ln"


def signed_event(groups: list[str], *, flattened: str | None = None, **headers: object):
    """A REST proxy event of a caller in ``groups``: the authorizer's flattened claim (REST
    joins a list with commas) and the verified token itself in the Authorization header."""
    payload = {"sub": "s", "token_use": "id", "exp": 1_900_000_000, "cognito:groups": groups}
    shaped = {"sub": "s", "token_use": "id", "exp": "Sun Mar 17 17:46:40 UTC 2030"}
    shaped["cognito:groups"] = ",".join(groups) if flattened is None else flattened
    token = f"Bearer {id_token(payload)}"
    return {
        "headers": {"Authorization": token, **headers},
        "multiValueHeaders": {"Authorization": [token]},
        "requestContext": {"authorizer": {"claims": shaped}},
    }


@pytest.mark.parametrize("groups", ["admins", ["readers", "admins"], ("admins",)])
def test_groups_are_read_from_an_unambiguous_claim(groups):
    # Given a claim that can name only one list of groups: one bare name, or a real list
    assert policy.caller_from_claims({"sub": "s", "cognito:groups": groups}).is_admin


@pytest.mark.parametrize(
    "groups",
    [
        "admins2",
        "[xadmins]",
        "",
        None,
        [],
        "Admins",
        "ADMINS",
        "admins ",
        " admins",
        "admins\n",
        # flattened strings that a single hostile group name produces: never an administrator
        "staff,admins",
        "[staff,admins]",
        "[staff admins]",
        " admins]",
        "[admins",
        "admins,",
        ",admins",
        "admins,admins",
        ["staff,admins"],
        ["[staff admins]"],
        ["Admins"],
        ["admins "],
    ],
)
def test_hostile_or_near_group_names_never_make_an_administrator(groups):
    # Given only the authorizer's claim (no token to read the real list from)
    caller = policy.caller_from_claims({"sub": "s", "cognito:groups": groups})
    # Then nobody is an administrator by a name that merely contains or resembles "admins"
    assert not caller.is_admin


@pytest.mark.parametrize(
    "hostile", ["staff,admins", "[staff,admins]", "admins,", "[staff", " admins]", "Admins"]
)
def test_a_hostile_group_name_in_a_signed_token_is_still_not_admins(hostile):
    # Given a user whose only group has a hostile name: REST flattens it to a string that also
    # reads as several groups
    event = signed_event([hostile])
    # Then the signed list in the token decides: one group, not named exactly "admins"
    assert not policy.caller_from_event(event).is_admin


def test_a_hostile_pair_of_groups_is_read_exactly():
    # Given a user in "[staff" and "admins]" (flattened "[staff,admins]")
    assert not policy.caller_from_event(signed_event(["[staff", "admins]"])).is_admin


@pytest.mark.parametrize("groups", [["staff", "admins"], ["admins", "readers,x"], ["admins"]])
def test_an_administrator_in_several_groups_is_read_from_the_signed_token(groups):
    # Given a real member of "admins" (and maybe of others): the flattened claim is ambiguous
    event = signed_event(groups)
    # Then the verified token's list decides, and it says admins
    caller = policy.caller_from_event(event)
    assert caller.is_admin
    assert caller.groups == frozenset(groups)


def test_an_ambiguous_claim_without_the_token_is_no_group():
    # Given the flattened claim of staff + admins but no Authorization header to read the list
    event = signed_event(["staff", "admins"])
    event.pop("headers")
    event.pop("multiValueHeaders")
    # Then the caller is authenticated but in no group (fail closed)
    caller = policy.caller_from_event(event)
    assert caller.sub == "s" and caller.groups == frozenset()


def test_a_token_of_another_caller_is_not_read():
    # Given the claims of "s" but a token (say, a second header) of someone else
    event = signed_event(["staff", "admins"])
    other = id_token({"sub": "mallory", "exp": 1_900_000_000, "cognito:groups": ["admins"]})
    event["headers"]["Authorization"] = other
    event["multiValueHeaders"]["Authorization"] = [other]
    assert not policy.caller_from_event(event).is_admin


def test_two_authorization_headers_are_not_read():
    # Given two Authorization values (which one did the gateway verify?)
    event = signed_event(["staff", "admins"])
    token = event["headers"]["Authorization"]
    event["multiValueHeaders"] = {"Authorization": [token], "authorization": ["x.e30.y"]}
    assert not policy.caller_from_event(event).is_admin


def test_a_token_whose_expiry_is_not_the_claims_is_not_read():
    event = signed_event(["staff", "admins"])
    event["requestContext"]["authorizer"]["claims"]["exp"] = "Mon Mar 18 17:46:40 UTC 2030"
    assert not policy.caller_from_event(event).is_admin


@pytest.mark.parametrize("moment", ["exp", "iat"])
@pytest.mark.parametrize(
    "value", [10**20, 2**63, -(10**20), 253_402_300_800, float("nan"), float("inf")], ids=repr
)
def test_a_token_with_an_impossible_date_is_read_as_no_group_never_a_crash(moment, value):
    # Given the ambiguous claim of staff + admins and, in the Authorization header, a token whose
    # exp or iat no date can be written from (the gateway would not have passed it)
    event = signed_event(["staff", "admins"])
    payload = {"sub": "s", "token_use": "id", "exp": 1_900_000_000, "cognito:groups": ["admins"]}
    token = f"Bearer {id_token({**payload, moment: value})}"
    event["headers"]["Authorization"] = token
    event["multiValueHeaders"]["Authorization"] = [token]
    event["requestContext"]["authorizer"]["claims"]["iat"] = "Sun Mar 17 16:46:40 UTC 2030"
    # Then the caller is authenticated, in no group (fail closed), and nothing raised
    caller = policy.caller_from_event(event)
    assert caller.sub == "s" and caller.groups == frozenset()


@pytest.mark.parametrize("missing", [None, {}, {"sub": ""}, {"sub": "  "}, {"email": "a@b"}])
def test_a_request_without_claims_or_sub_is_unauthorized(missing):
    with pytest.raises(Unauthorized) as raised:
        policy.caller_from_claims(missing)
    assert raised.value.code == "UNAUTHORIZED"


def test_caller_from_event_reads_request_context_authorizer_claims():
    event = {"requestContext": {"authorizer": {"claims": claims("sub-bob")}}, "body": "{}"}
    assert policy.caller_from_event(event).sub == "sub-bob"
    anonymous_events: list[dict[str, Any]] = [
        {},
        {"requestContext": {}},
        {"requestContext": {"authorizer": None}},
    ]
    for anonymous in anonymous_events:
        with pytest.raises(Unauthorized):
            policy.caller_from_event(anonymous)


def test_a_body_cannot_make_a_caller():
    # A body userId / owner is never the caller: only the claims are read.
    event = {"body": '{"userId": "sub-admin", "sub": "sub-admin"}', "requestContext": {}}
    with pytest.raises(Unauthorized):
        policy.caller_from_event(event)


# --- catalogue writes: administrators only ------------------------------------------------------


@pytest.mark.parametrize("method, path", sorted(policy.CATALOGUE_WRITES))
def test_catalogue_writes_are_for_administrators(method, path):
    policy.admit(ADMIN, method, path)
    for user in (ALICE, BOB):
        with pytest.raises(Forbidden) as raised:
            policy.admit(user, method, path)
        assert raised.value.code == "FORBIDDEN"


def test_catalogue_writes_are_the_contracts_routes_and_restocks():
    assert {
        ("POST", "/products"),
        ("PATCH", "/products/{productId}"),
        ("POST", "/products/{productId}/restocks"),  # adds stock: a catalogue write
        ("POST", "/events"),
        ("POST", "/inventory"),
    } == policy.CATALOGUE_WRITES
    # reads and purchases stay open to every verified caller
    for method, path in (
        ("GET", "/products/{productId}"),
        ("POST", "/products/{productId}/purchases"),
    ):
        policy.admit(ALICE, method, path)
    policy.admit(ALICE, "post", "/products/{productId}/purchases")
    with pytest.raises(Forbidden):
        policy.admit(BOB, "post", "/products")


def test_exact_counts_read_every_unit_and_are_for_administrators_only():
    # (a read, not a catalogue write: but a loop of them by anyone would be a cost attack)
    assert policy.ACCESS[("GET", "/inventory/{sku}/exact")] is policy.Access.ADMINISTRATORS
    policy.admit(ADMIN, "GET", "/inventory/{sku}/exact")
    with pytest.raises(Forbidden):
        policy.admit(ALICE, "GET", "/inventory/{sku}/exact")
    policy.admit(ALICE, "GET", "/inventory/{sku}")  # the summary stays open


def test_a_declared_route_without_a_rule_is_refused_to_everyone(monkeypatch):
    monkeypatch.delitem(policy.ACCESS, ("POST", "/products/{productId}/purchases"))
    for caller in (ALICE, ADMIN):
        with pytest.raises(Forbidden, match="no access rule"):
            policy.admit(caller, "POST", "/products/{productId}/purchases")
    # a path no route declares is left to the router (404), not refused here
    policy.admit(ALICE, "POST", "/products/{productId}/giveaways")


def test_every_declared_route_has_exactly_one_rule():
    declared = {(route.method, route.path) for route in routes.ROUTES}
    assert set(policy.ACCESS) == declared
    assert all(policy.access_of(route) is not None for route in routes.ROUTES)


def access_table() -> dict[tuple[str, str], str]:
    """The "Who may call each route" table of docs/identity.md, as (method, path) -> who."""
    text = (Path(__file__).parents[2] / "docs" / "identity.md").read_text()
    section = text.split("### Who may call each route", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \| (.+?) \|$", section, re.MULTILINE)
    table = {(method, path): who for method, path, who in rows}
    assert len(table) == len(rows), "a route is listed twice"
    return table


def test_the_docs_table_says_what_the_policy_says_for_every_route():
    documented = access_table()
    assert set(documented) == {(route.method, route.path) for route in routes.ROUTES}
    assert documented == {key: who.value for key, who in policy.ACCESS.items()}


# --- body userId / owner ------------------------------------------------------------------------


def test_a_missing_body_user_defaults_to_the_caller():
    assert policy.acting_for(ALICE, None) == "sub-alice"
    assert policy.acting_for(BOB, "") == "sub-bob"
    assert policy.acting_for(ADMIN, None) == "sub-admin"


def test_a_body_user_that_is_the_callers_own_is_fine():
    assert policy.acting_for(ALICE, "sub-alice") == "sub-alice"


def test_naming_another_user_in_the_body_is_for_administrators_only():
    with pytest.raises(Forbidden, match="userId"):
        policy.acting_for(ALICE, "sub-bob")
    with pytest.raises(Forbidden):
        policy.acting_for(BOB, "sub-alice")
    assert policy.acting_for(ADMIN, "sub-alice") == "sub-alice"  # on alice's behalf


def test_a_body_lease_owner_not_the_callers_is_403():
    with pytest.raises(Forbidden, match="owner"):
        policy.lease_owner(BOB, "sub-alice")
    assert policy.lease_owner(ALICE, None) == "sub-alice"
    assert policy.lease_owner(ADMIN, "sub-alice") == "sub-alice"


# --- paths naming a user ------------------------------------------------------------------------


def test_a_path_naming_a_user_is_that_users_or_an_administrators():
    policy.require_self_or_admin(ALICE, "sub-alice")
    policy.require_self_or_admin(ADMIN, "sub-alice")
    with pytest.raises(Forbidden):
        policy.require_self_or_admin(BOB, "sub-alice")
    with pytest.raises(Forbidden):
        policy.require_self_or_admin(ALICE, "alice")  # the username is not the identity


# --- owned things: registration requests, reservations, wallets ---------------------------------


@pytest.mark.parametrize("what", ["registration request", "reservation", "wallet"])
def test_owned_things_are_their_owners_and_administrators_may_only_read(what):
    policy.require_owner(ALICE, "sub-alice", write=False, what=what)
    policy.require_owner(ALICE, "sub-alice", write=True, what=what)
    policy.require_owner(ADMIN, "sub-alice", write=False, what=what)
    with pytest.raises(Forbidden, match=what):
        policy.require_owner(ADMIN, "sub-alice", write=True, what=what)
    for write in (False, True):
        with pytest.raises(Forbidden):
            policy.require_owner(BOB, "sub-alice", write=write, what=what)


def test_an_item_without_owner_is_nobodys():
    with pytest.raises(Forbidden):
        policy.require_owner(ALICE, None, write=False, what="reservation")
    policy.require_owner(ADMIN, None, write=False, what="reservation")


def test_a_wallet_belongs_to_whoever_made_its_first_top_up():
    assert policy.wallet_owner(BOB, None) == "sub-bob"  # first top-up: bob's from now on
    assert policy.wallet_owner(BOB, "sub-bob") == "sub-bob"
    with pytest.raises(Forbidden, match="wallet"):
        policy.wallet_owner(ALICE, "sub-bob")
    with pytest.raises(Forbidden):
        policy.wallet_owner(ADMIN, "sub-bob")  # administrators read wallets, they do not pay in


# --- idempotency keys ---------------------------------------------------------------------------


def test_an_idempotency_key_is_scoped_to_its_caller():
    keys = {policy.idempotency_scope(user, "key-1") for user in (ALICE, BOB, ADMIN)}
    assert len(keys) == 3
    assert policy.idempotency_scope(ALICE, "key-1") == policy.idempotency_scope(ALICE, "key-1")
    assert policy.idempotency_scope(ALICE, "key-1") != policy.idempotency_scope(ALICE, "key-2")


# --- leases: someone else's is LOCK_LOST, as for a stale holder --------------------------------


def test_renewing_or_releasing_someone_elses_lease_is_lock_lost(moto_ddb, moto_tables):
    from service.domain import locks as domain
    from service.domain.errors import LockLost
    from tests.helpers import scan_all

    locks = domain.Locks(domain.leases(moto_ddb, moto_tables["leases"]))
    # Given alice holds r-policy (owner resolved from her token, no body owner)
    held = locks.acquire("r-policy", policy.lease_owner(ALICE, None), 30)
    before = scan_all(moto_ddb, moto_tables["leases"])
    # When bob renews and releases it with alice's fence, his own identity as owner
    with pytest.raises(LockLost):
        locks.renew("r-policy", policy.lease_owner(BOB, None), held["fence"], 30)
    with pytest.raises(LockLost):
        locks.release("r-policy", policy.lease_owner(BOB, None), held["fence"])
    # Then nothing changed, and naming alice in the body is 403 before the table is touched
    assert scan_all(moto_ddb, moto_tables["leases"]) == before
    with pytest.raises(Forbidden):
        policy.lease_owner(BOB, "sub-alice")
    # while alice herself still renews it
    assert locks.renew("r-policy", policy.lease_owner(ALICE, None), held["fence"], 30)["owner"] == (
        "sub-alice"
    )
