"""cdk-nag AwsSolutions acknowledgements: always scoped to one construct, always with a reason."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge AwsSolutions finding ``rule`` (e.g. ``"L1"`` or ``"IAM4[Policy::...]"``) on
    ``scope`` and everything under it."""
    cdk.Validations.of(scope).acknowledge(
        cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason=reason)
    )
