"""The keys of Idempotency-Key records, in a module without boto3: the stack (``infra``) grants
each function its own partitions of the shared table from these, at deploy time, without loading
the Lambda runtime's modules. ``turnstile.idempotency`` uses and re-exports them."""

from __future__ import annotations

__all__ = ["partition_of", "record_id"]


def record_id(partition: str, scope: str) -> str:
    """The record's key: ``<partition>#<scope>``; IAM grants a function ``<partition>#*``."""
    return f"{partition}#{scope}"


def partition_of(path: str) -> str:
    """The partition of a request path: its first segment (``/wallets/w1/top-ups`` -> wallets).

    Every route under one first segment is served by one function, so this names the function
    without the library knowing any; the stack grants each function exactly its partitions."""
    return path.strip("/").split("/", 1)[0]
