"""The soak's clients, for Locust (``bench.soak`` runs ``locust -f`` on this file, headless).

Every route of the API, in the proportions a shop's traffic has (reads first, then purchases,
registrations, reservations, leases, top-ups; catalogue writes rare), with real contention: every
client works on the same few hot products, events near capacity, small and large skus and a few
lease resources. Each client is one person of the local identity provider, with the ID token minted
the documented way (``local.issue_token``) and refreshed with its refresh token now and then, as an
app does (Cognito's ``REFRESH_TOKEN_AUTH``).

Arrival rate: each Locust user waits with ``constant_throughput(r)``: it starts a task every
``1/r`` seconds whatever the task took (as long as a task takes less than that), so ``U`` users
offer ``U * r`` tasks a second. That is an open model as far as Locust goes: a slower server does
not slow the arrivals until a single task takes longer than ``1/r``; ``bench.soak`` keeps ``r``
low (many users, each slow) so there is room for that, and reports the achieved rate beside the
target. ``constant_pacing`` is the same thing stated as a period; a custom shape changes the user
count, not the rate per user, so it would not hold the rate when latency grows.

What each task did is written to the record file (``SOAK_RECORD``, JSON lines): ``req`` lines (one
per HTTP call: route, status, milliseconds) for the latency report and ``op`` lines (one per
logical operation: what, arguments, outcome, body) for the invariant checks (``bench.soak_checks``).
The set-up (people, tokens, products, events, skus, resources) comes from ``SOAK_SETUP``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
from typing import Any

from locust import HttpUser, constant, constant_throughput, events, task

_SETUP: dict[str, Any] = {}
_PEOPLE = itertools.count()
_RECORD: list[Any] = []  # the open record file, opened by the first user to start
_LOCK = threading.Lock()


def setup() -> dict[str, Any]:
    if not _SETUP:
        with open(os.environ["SOAK_SETUP"]) as file:
            _SETUP.update(json.load(file))
    return _SETUP


def record(line: dict[str, Any]) -> None:
    with _LOCK:
        if not _RECORD:
            _RECORD.append(open(os.environ["SOAK_RECORD"], "a", buffering=1))  # noqa: SIM115
        _RECORD[0].write(json.dumps(line, separators=(",", ":")) + "\n")


@events.request.add_listener
def _on_request(
    name: str,
    response_time: float,
    response: Any = None,
    exception: Any = None,
    start_time: float | None = None,
    **_: Any,
) -> None:
    status = getattr(response, "status_code", 0) or 0
    record(
        {
            "kind": "req",
            "t": start_time or time.time(),
            "name": name,
            "ms": round(response_time, 2),
            "status": status if exception is None or status else 0,
        }
    )


def _body(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


class Person(HttpUser):
    """One signed-in person of the shop."""

    wait_time = constant_throughput(float(os.environ.get("SOAK_USER_RATE", "0.5")))

    def on_start(self) -> None:
        plan = setup()
        people = plan["people"]
        number = next(_PEOPLE)
        me = people[number % len(people)]
        self.me = me["name"]
        # users beyond the people share a person, never a key or a name: a seed of their own
        self.caller = f"{self.me}.{number}"
        self.sub = me["sub"]
        self.token = me["token"]
        self.refresh_token = me["refresh"]
        self.admin = plan["admin"]
        self.plan = plan
        self.rng = random.Random(f"{plan['seed']}/{self.caller}")
        self.count = 0
        self.wallet = f"w-{self.me}"

    # -- helpers ---------------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{self.caller}-{prefix}{self.count}-{self.rng.randrange(10**6)}"

    def call(
        self,
        method: str,
        path: str,
        name: str,
        body: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        admin: bool = False,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, Any]:
        sent = {"Authorization": f"Bearer {self.admin if admin else self.token}", **(headers or {})}
        if key:
            sent["Idempotency-Key"] = key
        with self.client.request(
            method, path, name=name, json=body, headers=sent, catch_response=True
        ) as response:
            status = response.status_code
            if status < 500 and status != 0:
                response.success()  # a 4xx is a contract answer (OUT_OF_STOCK, EVENT_FULL, ...)
            return status, _body(response), response.headers

    def op(
        self, pattern: str, f: str, args: dict[str, Any], invoked: float, attempts: list[Any]
    ) -> None:
        status, body = attempts[-1]
        outcome = "unknown" if not status or status >= 500 else "ok" if status < 400 else "fail"
        record(
            {
                "kind": "op",
                "pattern": pattern,
                "process": self.me,
                "f": f,
                "args": args,
                "invoked": invoked,
                "completed": time.time(),
                "type": outcome,
                "status": status,
                "value": body,
                "attempts": attempts,
            }
        )

    # -- products --------------------------------------------------------------------------------

    @task(20)
    def read_product(self) -> None:
        product = self.rng.choice(self.plan["products"])
        self.call("GET", f"/products/{product}", "GET /products/{productId}")

    @task(12)
    def purchase(self) -> None:
        product = self.rng.choice(self.plan["products"])
        quantity = self.rng.randint(1, 2)
        strategy = self.rng.choice(["atomic", "atomic", "versioned"])
        key = self.fresh("k") if self.rng.random() < 0.5 else None
        invoked = time.time()
        status, body, _ = self.call(
            "POST",
            f"/products/{product}/purchases",
            "POST /products/{productId}/purchases",
            {"quantity": quantity, "strategy": strategy},
            key=key,
        )
        self.op(
            "purchases",
            "purchase",
            {"product": product, "quantity": quantity, "key": key},
            invoked,
            [(status, body)],
        )

    @task(1)
    def restock(self) -> None:
        product = self.rng.choice(self.plan["products"])
        units = self.rng.randint(5, 20)
        invoked = time.time()
        status, body, _ = self.call(
            "POST",
            f"/products/{product}/restocks",
            "POST /products/{productId}/restocks",
            {"units": units},
            admin=True,
        )
        self.op(
            "purchases", "restock", {"product": product, "units": units}, invoked, [(status, body)]
        )

    @task(1)
    def rename_product(self) -> None:
        """Read, then change the name at the version read (If-Match): a lost race is 412."""
        product = self.rng.choice(self.plan["products"])
        status, _, headers = self.call("GET", f"/products/{product}", "GET /products/{productId}")
        if status != 200 or not headers.get("ETag"):
            return
        self.call(
            "PATCH",
            f"/products/{product}",
            "PATCH /products/{productId}",
            {"name": f"hot {self.fresh('n')}"},
            admin=True,
            headers={"If-Match": headers["ETag"]},
        )

    @task(1)
    def new_product(self) -> None:
        product = self.fresh("p")
        self.call(
            "POST",
            "/products",
            "POST /products",
            {"productId": product, "name": "new", "stock": 10},
            key=self.fresh("k"),
            admin=True,
        )

    # -- events ----------------------------------------------------------------------------------

    @task(6)
    def read_event(self) -> None:
        event = self.rng.choice(self.plan["events"])
        self.call("GET", f"/events/{event}", "GET /events/{eventId}")

    @task(5)
    def register(self) -> None:
        event = self.rng.choice(self.plan["events"])
        key = self.fresh("k") if self.rng.random() < 0.5 else None
        invoked = time.time()
        status, body, _ = self.call(
            "POST",
            f"/events/{event}/registrations",
            "POST /events/{eventId}/registrations",
            {},
            key=key,
        )
        args = {"event": event, "user": self.sub, "key": key}
        self.op("registrations", "register", args, invoked, [(status, body)])

    @task(3)
    def cancel_registration(self) -> None:
        event = self.rng.choice(self.plan["events"])
        invoked = time.time()
        status, body, _ = self.call(
            "DELETE",
            f"/events/{event}/registrations/{self.sub}",
            "DELETE /events/{eventId}/registrations/{userId}",
        )
        args = {"event": event, "user": self.sub}
        self.op("registrations", "cancel", args, invoked, [(status, body)])

    @task(3)
    def request_registration(self) -> None:
        """The asynchronous way: ask, then look at the request once (a stream decides it)."""
        event = self.rng.choice(self.plan["events"])
        invoked = time.time()
        status, body, _ = self.call(
            "POST",
            f"/events/{event}/registration-requests",
            "POST /events/{eventId}/registration-requests",
            {},
            key=self.fresh("k"),
        )
        args = {"event": event, "user": self.sub}
        self.op("registrations", "request", args, invoked, [(status, body)])
        if status == 202 and isinstance(body, dict) and "requestId" in body:
            self.call(
                "GET",
                f"/events/{event}/registration-requests/{body['requestId']}",
                "GET /events/{eventId}/registration-requests/{requestId}",
            )

    @task(3)
    def my_registrations(self) -> None:
        self.call("GET", f"/users/{self.sub}/registrations", "GET /users/{userId}/registrations")

    # -- inventory -------------------------------------------------------------------------------

    @task(5)
    def read_sku(self) -> None:
        sku = self.rng.choice(self.plan["skus"])
        self.call("GET", f"/inventory/{sku}", "GET /inventory/{sku}")

    @task(1)
    def exact_sku(self) -> None:
        sku = self.rng.choice(self.plan["skus"])
        self.call("GET", f"/inventory/{sku}/exact", "GET /inventory/{sku}/exact", admin=True)

    @task(6)
    def reserve(self) -> None:
        """Hold a few units; then confirm (most), cancel, or let the hold lapse."""
        sku = self.rng.choice(self.plan["skus"])
        quantity = self.rng.randint(1, 3)
        hold = self.rng.choice([1.0, 2.0, 3.0])
        invoked = time.time()
        status, body, _ = self.call(
            "POST",
            f"/inventory/{sku}/reservations",
            "POST /inventory/{sku}/reservations",
            {"quantity": quantity, "holdSeconds": hold},
        )
        args = {"sku": sku, "quantity": quantity, "hold": hold}
        self.op("inventory", "reserve", args, invoked, [(status, body)])
        if status != 201 or not isinstance(body, dict):
            return
        reservation = body["reservationId"]
        roll = self.rng.random()
        if roll < 0.15:
            return  # let it lapse
        time.sleep(self.rng.uniform(0, hold * 0.5))
        f, method, path, name = (
            ("confirm", "POST", f"/{reservation}/confirm", "/{reservationId}/confirm")
            if roll < 0.75
            else ("cancel", "DELETE", f"/{reservation}", "/{reservationId}")
        )
        invoked = time.time()
        status, body, _ = self.call(
            method,
            f"/inventory/{sku}/reservations{path}",
            f"{method} /inventory/{{sku}}/reservations{name}",
        )
        args = {"sku": sku, "reservation": reservation}
        self.op("inventory", f, args, invoked, [(status, body)])

    @task(1)
    def new_sku(self) -> None:
        self.call(
            "POST",
            "/inventory",
            "POST /inventory",
            {"sku": self.fresh("s"), "units": 5},
            admin=True,
        )

    # -- leases ----------------------------------------------------------------------------------

    @task(5)
    def lease(self) -> None:
        """Acquire (queued behind the holder for a while, sometimes), renew once, release."""
        resource = self.rng.choice(self.plan["resources"])
        body: dict[str, Any] = {"ttlSeconds": 2.0}
        if self.rng.random() < 0.5:
            body["waitMs"] = self.rng.choice([300, 1000])
        invoked = time.time()
        status, answer, _ = self.call("POST", f"/locks/{resource}", "POST /locks/{resource}", body)
        args = {"resource": resource, "owner": self.sub}
        self.op("leases", "acquire", args, invoked, [(status, answer)])
        if status != 201 or not isinstance(answer, dict):
            return
        fence = int(answer["fence"])
        time.sleep(self.rng.uniform(0.05, 0.3))
        if self.rng.random() < 0.5:
            self.call(
                "PUT",
                f"/locks/{resource}",
                "PUT /locks/{resource}",
                {"fence": fence, "ttlSeconds": 2.0},
            )
        self.call("DELETE", f"/locks/{resource}", "DELETE /locks/{resource}", {"fence": fence})

    # -- wallets ---------------------------------------------------------------------------------

    @task(4)
    def top_up(self) -> None:
        """A keyed top-up of the person's own wallet; a third are sent again under the same key,
        as a client that lost the reply does: the retry must not credit twice."""
        amount = self.rng.randint(1, 50)
        key = self.fresh("k")
        invoked = time.time()
        path = f"/wallets/{self.wallet}/top-ups"
        name = "POST /wallets/{walletId}/top-ups"
        attempts = [self.call("POST", path, name, {"amount": amount}, key=key)[:2]]
        if self.rng.random() < 0.33:
            attempts.append(self.call("POST", path, name, {"amount": amount}, key=key)[:2])
        args = {"wallet": self.wallet, "amount": amount, "key": key}
        self.op("wallets", "top-up", args, invoked, attempts)

    @task(3)
    def read_wallet(self) -> None:
        self.call("GET", f"/wallets/{self.wallet}", "GET /wallets/{walletId}")

    # -- tokens ----------------------------------------------------------------------------------

    @task(1)
    def refresh(self) -> None:
        """A new ID token from the refresh token, as an app does before the old one expires."""
        started = time.time()
        exception: Exception | None = None
        status = 200
        try:
            result = cognito(self.plan).initiate_auth(
                ClientId=self.plan["client_id"],
                AuthFlow="REFRESH_TOKEN_AUTH",
                AuthParameters={"REFRESH_TOKEN": self.refresh_token},
            )
            self.token = result["AuthenticationResult"]["IdToken"]
        except Exception as error:  # noqa: BLE001 - reported as a failed request, not raised
            exception, status = error, 0
        events.request.fire(
            request_type="COGNITO",
            name="REFRESH_TOKEN_AUTH",
            response_time=(time.time() - started) * 1000,
            response_length=0,
            exception=exception,
            context={},
            start_time=started,
            response=type("Answer", (), {"status_code": status})(),
        )


_COGNITO: list[Any] = []


def cognito(plan: dict[str, Any]) -> Any:
    """One ``cognito-idp`` client for every user of this process (clients are thread-safe)."""
    with _LOCK:
        if not _COGNITO:
            import boto3

            _COGNITO.append(
                boto3.client(
                    "cognito-idp",
                    endpoint_url=plan["identity_endpoint"],
                    region_name=plan["region"],
                    aws_access_key_id="local",
                    aws_secret_access_key="local",
                )
            )
        return _COGNITO[0]


class Ping(HttpUser):
    """Step mode's yardstick: ``GET /_ping`` back to back, a route the local bridge answers itself
    (no token, no function, no table), so what it moves is the most the bridge and Locust move on
    this machine; ``bench.soak`` names this class or ``Person`` on Locust's command line."""

    wait_time = constant(0)

    @task
    def ping(self) -> None:
        self.client.get("/_ping", name="GET /_ping")
