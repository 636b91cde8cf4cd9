"""Each install reads a hashed lock cut from the one full lock (``requirements.lock``), so no two
environments can disagree on a version: ``make local`` installs ``requirements-local.lock`` (the
functions' requirements plus synth and the local stack), the installer itself comes from
``requirements-uv.lock``, and ``make test`` adds the rest of ``requirements.lock``.
"""

from __future__ import annotations

import ast
import sys
from importlib import metadata
from pathlib import Path

import pytest

from infra import layer, locks

ROOT = Path(__file__).resolve().parents[2]

# What only make test runs: none of it may reach make local's environment.
TEST_ONLY = {"pytest", "ruff", "mypy", "matplotlib", "locust", "mkdocs-material", "schemathesis"}
TEST_ONLY |= {"openapi-python-client", "boto3-stubs", "hatchling", "build", "mkdocs", "cfn-lint"}
# What moto's server extra would add (cfn-lint and what it pulls in: sympy, networkx; the OpenAPI
# and JSONPath validators): about 80 MB that make local never imports. It runs moto's server
# with the Cognito backend, and make sim moto's DynamoDB, which need none of it.
SERVER_EXTRA_ONLY = {"cfn-lint", "sympy", "networkx", "mpmath", "regex", "openapi-spec-validator"}
SERVER_EXTRA_ONLY |= {"jsonschema", "jsonpath-ng", "antlr4-python3-runtime", "graphql-core"}
# moto's parts make local and make sim run: the server (local.identity's ThreadedMotoServer), the
# backends it serves (Cognito; DynamoDB for sim.ddb) and the core both load.
MOTO_PARTS = ("moto_server", "core", "moto_api", "utilities", "cognitoidp", "dynamodb")


@pytest.fixture(scope="module")
def full() -> dict[str, layer.Pin]:
    return layer.parse_lock((ROOT / "requirements.lock").read_text())


@pytest.mark.parametrize("name", sorted(locks.DERIVED))
def test_each_install_lock_is_written_from_the_current_full_lock(name):
    # A smaller lock left from an older relock would install versions nothing tested
    expected = locks.derive(name, (ROOT / "requirements.lock").read_text())
    assert (ROOT / name).read_text() == expected, f"{name} is stale: run make lock"


@pytest.mark.parametrize("name", sorted(locks.DERIVED))
def test_each_install_lock_is_hashed_and_a_subset_of_the_full_lock(name, full):
    derived = layer.parse_lock((ROOT / name).read_text())
    for pin in derived.values():
        # Then every entry carries hashes, and is the full lock's entry: version and hashes
        assert "--hash=sha256:" in pin.requirement, (name, pin.name)
        assert pin.name in full, (name, pin.name)
        assert pin.requirement == full[pin.name].requirement, (name, pin.name)


def test_the_local_lock_holds_synth_and_the_local_stack_and_no_test_tool(full):
    local = layer.parse_lock((ROOT / "requirements-local.lock").read_text())
    assert set(layer.runtime_pins()) < set(local) < set(full)
    assert {"aws-cdk-lib", "constructs", "cdk-nag", "moto", "werkzeug", "watchdog"} <= set(local)
    assert {"joserfc", "uv", "jsii"} <= set(local)
    assert not TEST_ONLY & set(local), TEST_ONLY & set(local)


def test_the_installer_lock_is_uv_alone_at_the_full_locks_pin(full):
    (pin,) = layer.parse_lock((ROOT / "requirements-uv.lock").read_text()).values()
    assert pin.name == "uv" and pin.requirement == full["uv"].requirement


def test_a_derived_lock_follows_the_annotations_from_its_inputs():
    # Given a full lock where each input file pulls in a package and that package another
    lock = (
        "a==1 \\\n    --hash=sha256:00\n    # via -r requirements.txt\n"
        "b==2 \\\n    --hash=sha256:11\n    # via -r requirements-local.txt\n"
        "c==3 \\\n    --hash=sha256:22\n    # via b\n"
        "uv==4 \\\n    --hash=sha256:33\n    # via -r requirements-local.txt\n"
        "tool==5 \\\n    --hash=sha256:44\n    # via -r requirements-dev.txt\n"
        "d==6 \\\n    --hash=sha256:55\n    # via\n    #   c\n    #   tool\n"
    )
    # Then the local lock is what requirements.txt and requirements-local.txt reach, and only that
    local = layer.parse_lock(locks.derive("requirements-local.lock", lock))
    assert {name: pin.version for name, pin in local.items()} == {
        "a": "1", "b": "2", "c": "3", "d": "6", "uv": "4"
    }  # fmt: skip
    assert list(layer.parse_lock(locks.derive("requirements-uv.lock", lock))) == ["uv"]


def _imports(path: Path, *, optional: bool = True) -> set[str]:
    """Top-level modules ``path`` imports, leaving out what is guarded (``if TYPE_CHECKING``,
    ``try: ... except ImportError``): those need not be installed. ``optional=False``: a guarded
    import counts too (a module whose ``except ImportError`` raises again)."""
    tree = ast.parse(path.read_text())
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded |= {id(child) for child in ast.walk(node)}
        if (
            optional
            and isinstance(node, ast.Try)
            and any(
                "ImportError" in ast.unparse(handler.type or ast.Name(""))
                for handler in node.handlers
            )
        ):
            guarded |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_local_lock_installs_every_module_synth_and_the_local_stack_import():
    # Given what make local and synth run: app.py, infra/, local/, the functions
    sources = [ROOT / "app.py"]
    for folder in ("infra", "local", "functions"):
        sources += sorted((ROOT / folder).rglob("*.py"))
    ours = {"infra", "local", "service", "turnstile_ddb", "app"}
    modules = set().union(*map(_imports, sources)) - ours - set(sys.stdlib_module_names)
    # Then each third-party module comes from a distribution of the local lock
    missing = _not_in_the_local_lock(modules)
    assert not missing, f"imported by make local or synth, not in the local lock: {missing}"


def _not_in_the_local_lock(modules: set[str]) -> dict[str, list[str] | None]:
    local = set(layer.parse_lock((ROOT / "requirements-local.lock").read_text()))
    providers = metadata.packages_distributions()
    return {
        module: providers.get(module)
        for module in modules
        if not {layer.canonical(dist) for dist in providers.get(module, [])} & local
    }


def test_the_local_lock_leaves_out_what_only_motos_server_extra_brings():
    # Given make local's lock, cut from the full lock by what its inputs pull in
    local = set(layer.parse_lock((ROOT / "requirements-local.lock").read_text()))
    # Then none of what only moto's server extra would bring has crept back in
    assert not SERVER_EXTRA_ONLY & local, sorted(SERVER_EXTRA_ONLY & local)


def test_the_local_lock_installs_every_module_the_parts_of_moto_make_local_runs_import():
    # Given the parts of the installed moto that local.identity and sim.ddb run
    root = Path(str(metadata.distribution("moto").locate_file("moto")))
    modules: set[str] = set()
    for part in MOTO_PARTS:
        # The server's ImportError handler raises again: its guarded imports are needed too
        for path in sorted((root / part).rglob("*.py")):
            modules |= _imports(path, optional=part != "moto_server")
    modules -= {"moto"} | set(sys.stdlib_module_names)
    # Then each third-party module they import comes from a distribution of the local lock
    missing = _not_in_the_local_lock(modules)
    assert not missing, f"imported by moto's server or backends, not in the local lock: {missing}"
