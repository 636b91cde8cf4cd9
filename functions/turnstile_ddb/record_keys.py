"""The keys of idempotency records, in a module without boto3, so deploy-time code (an IAM policy
that confines a writer to its own records) can build them without loading botocore.
``turnstile_ddb.idempotency`` uses and re-exports :func:`record_id`."""

from __future__ import annotations

__all__ = ["record_id"]


def record_id(partition: str, scope: str) -> str:
    """The record's key: ``<partition>#<scope>``. A grant of ``dynamodb:LeadingKeys`` like
    ``record_id(partition, "*")`` confines a writer to the records of its own partition; what a
    partition is (a function, a tenant, a route family) is the caller's choice."""
    return f"{partition}#{scope}"
