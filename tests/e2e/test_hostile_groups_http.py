"""Group names that read like "admins" once flattened, through the real path: the local identity
provider issues the token, the bridge verifies it and hands API Gateway REST's flattened claim
(``"staff,admins"``) to the handler, whose policy decides (docs/identity.md)."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from local.identity import cognito_client
from local.issue_token import id_token
from tests.helpers import Person


def member_of(identity: Any, verifier: Any, username: str, groups: list[str]) -> Person:
    client = cognito_client(identity.endpoint, identity.region)
    for group in groups:
        with contextlib.suppress(client.exceptions.GroupExistsException):
            client.create_group(UserPoolId=identity.user_pool_id, GroupName=group)
    token = id_token(identity, username, admin=False, client=client)  # in no group yet
    for group in groups:
        client.admin_add_user_to_group(
            UserPoolId=identity.user_pool_id, Username=username, GroupName=group
        )
    token = id_token(identity, username, admin="admins" in groups, client=client)
    return Person(username, token, verifier.verify_claims(token)["sub"])


def create_product(api_url: str, who: Person) -> int:
    body: dict[str, Any] = {
        "productId": f"hostile-{uuid.uuid4().hex[:10]}",
        "name": "n",
        "stock": 1,
    }
    return who.post(f"{api_url}/products", json=body, timeout=30).status_code


@pytest.mark.parametrize(
    "groups",
    [["staff,admins"], ["[staff,admins]"], ["[staff", "admins]"], ["admins,"], ["Admins"]],
)
def test_a_hostile_group_name_is_not_an_administrator(api_url, identity, verifier, groups):
    # Given a user whose groups only look like "admins" once REST flattens them
    user = member_of(identity, verifier, f"hostile-{uuid.uuid4().hex[:8]}", groups)
    listed = verifier.verify_claims(user.token)["cognito:groups"]
    assert sorted(listed) == sorted(groups)
    assert verifier.verify(user.token)["cognito:groups"] == ",".join(listed)
    # When they write the catalogue, Then it is refused
    assert create_product(api_url, user) == 403


def test_an_administrator_in_several_groups_still_is_one(api_url, identity, verifier):
    # Given a real member of admins who is also in a group whose name holds a comma
    user = member_of(identity, verifier, f"multi-{uuid.uuid4().hex[:8]}", ["staff,x", "admins"])
    # Then the flattened claim is ambiguous, and the signed token says admins
    assert create_product(api_url, user) == 201
