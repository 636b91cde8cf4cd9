"""The lease module's renamed and retired public names keep working for one minor version, each
warning with what to use instead; and the stored-names object refuses a layout it cannot read."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_ddb import _lease_item, codec, lease, lease_queue, retry
from turnstile_ddb.deprecation import TurnstileDeprecationWarning

# old module-level name -> (what it now answers, the replacement its warning names)
RETIRED = {
    "FREE_AND_NO_QUEUE": (_lease_item.FREE_AND_NO_QUEUE, "the lease item's schema is private"),
    "STALE_HEAD": (_lease_item.STALE_HEAD, "the lease item's schema is private"),
    "SILENT_HEAD": (_lease_item.SILENT_HEAD, "the lease item's schema is private"),
    "STALE_QUEUE": (_lease_item.STALE_QUEUE, "the lease item's schema is private"),
    "QUEUE_EXPIRY_MS": (1500, "QueueSettings().expiry_ms"),
    "REAP_ATTRIBUTE": ("reapAt", "LeaseAttributes().ttl_attribute"),
    "QueueSettings": (lease_queue.QueueSettings, "turnstile_ddb.lease_queue.QueueSettings"),
    "new_acquisition": (_lease_item.new_acquisition, "the lease item's schema is private"),
}


@pytest.mark.parametrize("name", sorted(RETIRED))
def test_a_retired_module_name_still_answers_and_warns_with_its_replacement(name: str) -> None:
    value, replacement = RETIRED[name]
    # Given a name that left lease.__all__
    assert name not in lease.__all__
    # When it is used, Then it answers as before and warns, naming what to use
    with pytest.warns(TurnstileDeprecationWarning, match=r"since turnstile-ddb 1\.0\.0") as seen:
        assert getattr(lease, name) == value
    assert f"turnstile_ddb.lease.{name} is deprecated" in str(seen[0].message)
    assert replacement in str(seen[0].message)


def test_the_old_attribute_names_helper_still_maps_placeholders_to_the_default_names() -> None:
    with pytest.warns(
        TurnstileDeprecationWarning, match=r"lease\.attribute_names .* Leases\.names"
    ):
        names = lease.attribute_names("#expiresAt", "#head", "#resource")  # type: ignore[operator]
    assert names == {"#expiresAt": "expiresAt", "#head": "head", "#resource": "resource"}


class _Recording:
    """A DynamoDB client that records the one UpdateItem it is sent and answers it applied."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.answer = answer if answer is not None else {"fence": 4}

    def update_item(self, **request: Any) -> dict[str, Any]:
        self.sent.append(request)
        return {"Attributes": codec.encode_item(self.answer)}


def leases(client: Any) -> lease.Leases:
    return lease.Leases(client=client, table="leases", backoff=retry.Backoff(attempts=1))


def test_key_is_renamed_wire_key_and_warns() -> None:
    mine = leases(_Recording())
    assert mine.wire_key("r1") == {"resource": {"S": "r1"}}
    with pytest.warns(
        TurnstileDeprecationWarning, match=r"Leases\.key is deprecated .*Leases\.wire_key"
    ):
        assert mine.key("r1") == mine.wire_key("r1")


def test_take_still_makes_the_acquisition_write_and_warns() -> None:
    client = _Recording()
    with pytest.warns(TurnstileDeprecationWarning, match=r"Leases\.take is deprecated"):
        before = leases(client).take(
            "r1", "o1", 2_000, 1_000, _lease_item.FREE_AND_NO_QUEUE, acquisition="id-1"
        )
    # the same write as before: its update, its condition, its values
    assert before == {"fence": 4}
    (sent,) = client.sent
    assert sent["ConditionExpression"] == _lease_item.FREE_AND_NO_QUEUE
    assert sent["UpdateExpression"].startswith("SET #owner = :owner, #expiresAt = :expiresAt")
    assert sent["ExpressionAttributeValues"][":acquisition"] == {"S": "id-1"}
    assert sent["ExpressionAttributeNames"]["#expiresAt"] == "expiresAt"


def test_a_table_with_other_stored_names_gets_them_in_every_expression_of_the_write() -> None:
    # Given a table whose items store the expiry as "until" and the fence as "token"
    client = _Recording(answer={"token": 4, "until": 0})
    custom = lease.Leases(
        client=client,  # type: ignore[arg-type]
        table="leases",
        backoff=retry.Backoff(attempts=1),
        key_attr="lockId",
        attributes=lease.LeaseAttributes(expires_at_ms="until", fence="token"),
        clock=lambda: 1.0,
    )
    # When it acquires
    held = custom.acquire("r1", "o1", 1_000)
    # Then the placeholders name the stored attributes, and what it read (the old item) came back
    # under the default names
    names = client.sent[0]["ExpressionAttributeNames"]
    assert (names["#expiresAt"], names["#fence"], names["#resource"]) == (
        "until",
        "token",
        "lockId",
    )
    assert held.fence == 5 and held.previous == {"fence": 4, "expiresAt": 0}


def test_lease_attributes_refuse_two_attributes_under_one_name() -> None:
    with pytest.raises(ValueError, match="distinct"):
        lease.LeaseAttributes(expires_at_ms="owner")
    with pytest.raises(ValueError, match="distinct"):
        lease.LeaseAttributes(ttl_attribute="")


def test_expires_at_is_renamed_expires_at_ms_on_the_lease_and_on_held_and_warns() -> None:
    # Given a lease built with the old keyword, and a refusal
    with pytest.warns(TurnstileDeprecationWarning, match=r"Lease\(expires_at=\.\.\.\)"):
        old = lease.Lease("r1", "o1", 3, expires_at=5_000, acquired_at=1_000)
    new = lease.Lease("r1", "o1", 3, expires_at_ms=5_000, acquired_at=1_000)
    held = lease.Held("r1", "o1", 5_000, 3)
    # Then both are the same lease, and the old attribute answers with a warning
    assert old == new and new.expires_at_ms == held.expires_at_ms == 5_000
    with pytest.warns(TurnstileDeprecationWarning, match=r"use Lease\.expires_at_ms"):
        assert new.expires_at == 5_000
    with pytest.warns(TurnstileDeprecationWarning, match=r"use Held\.expires_at_ms"):
        assert held.expires_at == 5_000
    with pytest.raises(TypeError, match="expires_at_ms"):
        lease.Lease("r1", "o1", 3)
