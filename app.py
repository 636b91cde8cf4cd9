#!/usr/bin/env python3
"""CDK entry point: ``python app.py`` synthesizes the stack offline into ``cdk.out/``.

cdk-nag's AwsSolutions rules run as a validation plugin during synthesis: a finding that is not
acknowledged (with a reason, next to the resource it concerns) fails the synth.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "functions"))

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.settings import DEFAULT_STACK_NAME, Settings  # noqa: E402
from infra.stack import TurnstileStack  # noqa: E402

STACK_NAME = DEFAULT_STACK_NAME  # unless the context names another (infra.settings)


def build(outdir: str | None = None, context: dict[str, Any] | None = None) -> cdk.App:
    """The app; ``context``: CDK context on top of cdk.json's (what ``-c key=value`` gives the
    CLI): stack name, stage, region, destroy-with-stack (``infra.settings``)."""
    # The CDK CLI sets CDK_OUTDIR; run directly, write where the CLI would (not a temp dir).
    app = cdk.App(
        outdir=outdir or os.environ.get("CDK_OUTDIR") or str(ROOT / "cdk.out"), context=context
    )
    settings = Settings.of(app)
    TurnstileStack(
        app,
        settings.stack_name,
        description="turnstile: concurrency control on DynamoDB",
        env=cdk.Environment(region=settings.region) if settings.region else None,
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build().synth()
