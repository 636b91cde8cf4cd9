"""The stack's tables and the functions' table variables, as a checked-in snapshot for the unit
tier, so ``pytest tests/unit`` needs neither Node nor a CDK synth.

The unit tier's moto tables are created from ``tests/unit/stack_tables.json``: one CreateTable
request per table of the synthesized template (with its TTL attribute), and the environment the
stack gives the functions. ``tests/infra/test_stack_tables_snapshot.py`` synthesizes the stack
and fails when the snapshot differs from it, so it cannot drift from what ``cdk deploy`` creates.
After a change to the tables or to the functions' variables, rewrite it with::

    .venv/bin/python -m tests.tables --update
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from local import template as cfn
from tests.helpers import table_environment

SNAPSHOT = Path(__file__).parent / "unit" / "stack_tables.json"


def from_template(template: dict[str, Any]) -> dict[str, Any]:
    """What the unit tier needs of a synthesized template: its tables, and the variables."""
    tables: dict[str, Any] = {}
    for logical, resource in sorted(cfn.resources(template, "AWS::DynamoDB::Table").items()):
        properties = resource["Properties"]
        ttl = properties.get("TimeToLiveSpecification") or {}
        tables[logical] = {
            "request": cfn.table_request(logical, properties),
            "ttl": ttl["AttributeName"] if ttl.get("Enabled") else None,
        }
    return {"tables": tables, "environment": dict(sorted(table_environment(template).items()))}


def load(path: Path = SNAPSHOT) -> dict[str, Any]:
    snapshot: dict[str, Any] = json.loads(path.read_text())
    return snapshot


def create_tables(client: Any, snapshot: dict[str, Any]) -> None:
    """Create every table of the snapshot (as ``local.template.create_tables`` does from the
    template: physical name = logical id)."""
    for logical, table in snapshot["tables"].items():
        client.create_table(**table["request"])
        if table["ttl"]:
            client.update_time_to_live(
                TableName=logical,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": table["ttl"]},
            )


def text(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {SNAPSHOT}")
    args = parser.parse_args(argv)
    import app  # synthesizes offline; Node runs here, never in the unit tier

    with tempfile.TemporaryDirectory() as outdir:
        assembly = app.build(outdir=outdir).synth()
        template = dict(assembly.get_stack_by_name(app.STACK_NAME).template)
    snapshot = text(from_template(template))
    if args.update:
        SNAPSHOT.write_text(snapshot)
        print(f"{SNAPSHOT}: {len(from_template(template)['tables'])} tables")
    else:
        sys.stdout.write(snapshot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
