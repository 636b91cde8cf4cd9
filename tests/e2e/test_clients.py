"""The generated clients (``make clients``, clients/generate.py): generated from the served document
by the pinned generators without a warning, the TypeScript program type-checked against the
generated types, and every route walked through the generated Python client against the e2e
tier's local stack, the walkthrough type-checked by ``mypy --strict``.

No ``Any`` (Python) or ``unknown`` (TypeScript) reaches a caller on a success path with a body:
``mypy --disallow-any-expr`` over the walkthrough and ``tsc`` over clients/ts/typed.ts, which
names every operation whose success body is untyped.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from clients import generate
from clients.generate import Generated, GenerationError


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    return generate.generate(tmp_path_factory.mktemp("clients"))


def operations(document: dict[str, Any]) -> set[str]:
    return {op["operationId"] for item in document["paths"].values() for op in item.values()}


def test_the_generators_print_no_warning(generated):
    # Given both clients generated from the served document (the module's fixture)
    # Then neither generator printed anything but its banner
    assert generated.warnings == []
    assert (generated.python / generate.PACKAGE / "client.py").exists()
    assert "export interface paths" in generated.typescript.read_text()


def test_what_a_generator_warns_about_is_reported(generated, tmp_path):
    # Given the served document with a response pointing at a schema that does not exist
    document = json.loads(generated.document.read_text())
    operation = document["paths"]["/products"]["post"]
    operation["responses"]["201"]["content"]["application/json"]["schema"] = {
        "$ref": "#/components/schemas/Nowhere"
    }
    broken = tmp_path / "openapi.json"
    broken.write_text(json.dumps(document))
    # When the Python client is generated from it, then its warning (the response it dropped) is
    # reported; openapi-typescript refuses the document outright
    assert any("Nowhere" in line for line in generate.python_client(broken, tmp_path / "p"))
    with pytest.raises(GenerationError, match="Can't resolve"):
        generate.typescript_types(broken, tmp_path / "t.d.ts")


def test_only_the_generators_banners_are_clean_output():
    clean = (
        "Generating /x/turnstile_client\n✨ openapi-typescript 7.13.0\n🚀 a.json → b.d.ts [1.5s]\n"
    )
    assert generate.warnings(clean) == []
    warned = clean + ' \u26a0  Could not resolve $ref "#/x"\n'
    assert generate.warnings(warned) == ['\u26a0  Could not resolve $ref "#/x"']


def test_the_typescript_program_type_checks(generated):
    # When tsc --noEmit checks clients/ts/walkthrough.ts against the generated types
    # Then no error (its @ts-expect-error lines are errors, as each must be)
    generate.typescript(generated)


def test_tsc_refuses_a_body_the_document_does_not_allow(generated, tmp_path):
    # Given a program sending a purchase without its required quantity, unmarked
    program = tmp_path / "wrong.ts"
    program.write_text(
        'import type { paths } from "turnstile-api";\n'
        'type Body = paths["/products/{productId}/purchases"]["post"]["requestBody"];\n'
        'export const body: Body = { content: { "application/json": {} } };\n'
    )
    # Then tsc fails, naming the missing field
    with pytest.raises(GenerationError, match="quantity"):
        generate.typescript(generated, [program])


def test_the_walkthrough_passes_mypy_strict(generated):
    # When mypy --strict checks clients/walkthrough.py with the generated package on its path
    # Then no error
    generate.mypy(generated)


def test_no_any_reaches_the_python_caller_on_a_success_path(generated):
    generate.mypy(generated, any_expr=True)


def test_no_unknown_reaches_the_typescript_caller_on_a_success_path(generated):
    generate.typescript(generated, [generate.TYPED_TS])


def test_the_walkthrough_calls_every_route(generated, api_url, admin, alice, monkeypatch, capsys):
    # Given the generated package importable, as a service using it has it installed
    monkeypatch.syspath_prepend(str(generated.python))
    walkthrough = importlib.import_module("clients.walkthrough")
    # When the walkthrough runs against the local stack, as an administrator and a user
    walked = walkthrough.walk(api_url, admin.token, alice.token)
    # Then every operation of the document answered its success, once (twice: a top-up replayed
    # by its Idempotency-Key, and two reservations, one confirmed, one released)
    document = json.loads(generated.document.read_text())
    names = [name for name, _ in walked.calls]
    assert set(names) == operations(document)
    assert len(names) == len(operations(document)) + 2
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"{status} {name}" for name, status in walked.calls]
