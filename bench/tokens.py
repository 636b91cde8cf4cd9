"""What verifying an ID token costs the local server, against one raw DynamoDB write.

    python -m bench.tokens [--n 2000]

Starts the local identity provider (pool, client and group from the synthesized template, so run
``make synth`` first) and DynamoDB Local; times ``local.tokens.TokenVerifier.verify`` on one real
token with the JWKS cached, and sequential unconditional ``PutItem`` calls in the same run. Prints
a markdown table: microseconds per operation and the ratio to the raw write. Single-threaded: the
figure is CPU per token, which a threaded server pays once per request.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))

from local import template  # noqa: E402
from local.dynamodb_local import DynamoDBLocal  # noqa: E402
from local.identity import IdentityProvider  # noqa: E402
from local.issue_token import id_token  # noqa: E402


def per_op_us(operation: Callable[[], object], n: int, rounds: int = 3) -> float:
    """Median over ``rounds`` of the mean time of ``n`` calls, in microseconds."""
    means = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(n):
            operation()
        means.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(means)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args(argv)
    loaded = template.load()
    with IdentityProvider() as provider, DynamoDBLocal() as db:
        auth = provider.provision(loaded)
        token = id_token(auth, "bench-user", admin=True)
        verifier = auth.verifier()
        verifier.verify(token)  # fetch the JWKS once
        client = db.client()
        client.create_table(
            TableName="bench-raw",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        item = {"pk": {"S": "one"}, "n": {"N": "1"}}
        for _ in range(200):  # warm up the JVM
            client.put_item(TableName="bench-raw", Item=item)
        raw_us = per_op_us(lambda: client.put_item(TableName="bench-raw", Item=item), args.n // 4)
        verify_us = per_op_us(lambda: verifier.verify(f"Bearer {token}"), args.n)
        assert verifier.fetches == 1
    print("| operation | us per op | / raw write |")
    print("|---|---|---|")
    print(f"| raw PutItem on DynamoDB Local (ceiling) | {raw_us:.0f} | 1.00 |")
    print(f"| verify one ID token, JWKS cached | {verify_us:.0f} | {verify_us / raw_us:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
