"""What the stack's own modules load: synthesizing the stack must not import the Lambda runtime
(boto3, Powertools, the domain, the handlers), so ``cdk synth`` stays light and the routes are
read from plain declarations. Importing ``infra`` starts Node (aws-cdk-lib), hence this tier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_time_code_does_not_load_the_lambda_runtime():
    # Given a fresh interpreter that imports the stack's modules and reads every route
    script = (
        "import sys; sys.path.insert(0, 'functions');"
        "import infra.stack, infra.api; from service import catalog; catalog.api_routes();"
        "runtime = ('boto3', 'botocore', 'aws_lambda_powertools', 'service.domain', "
        "'service.handlers');"
        "print(sorted({m.split('.')[0] if m.startswith(('b', 'a')) else m "
        "for m in sys.modules if m.startswith(runtime) and m != 'service.domain.errors'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    # Then none of the Lambda runtime's modules were imported (service.domain.errors, plain
    # exception classes, is read by service.policy for the stack's admin group)
    assert out.stdout.strip() in ("[]", "['service.domain']")
