"""Edit, save, see (``local.watch``): while the local stack runs, a handler's source saved under
``functions/`` is rebuilt by the synth and served over HTTP, with DynamoDB Local's data, the
identity provider and its users kept, and no request failing while the function restarts.

The stack here is a dedicated one, as ``make local`` starts it (``local.run.running``, free
ports), on a temp copy of the sources synthesized there: the edit is made to the copy, never to
the real tree. Every wait has a deadline, and failing one says what was waited for.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from infra import layer
from local import run, synth, watch, workers
from local.issue_token import id_token
from service import runtime
from tests.helpers import Person

ROOT = Path(__file__).resolve().parents[2]
COPIED = (
    "app.py",
    "cdk.json",
    "infra",
    "functions",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements.lock",
)
HANDLER = "service.handlers.products.handler"
SOURCE = Path("functions/service/handlers/products.py")
# The edit: the read route answers one more field. The anchor is get_product's return statement.
ANCHOR = (
    '    product = products.get().get(productId)\n    return ok(product, etag=product["version"])\n'
)
RELOAD_DEADLINE = 600.0  # seconds: a synth takes 7 s idle, over a minute on a loaded machine


def edited(source: str, marker: str) -> str:
    assert source.count(ANCHOR) == 1, f"get_product's return is no longer {ANCHOR!r}: update me"
    return source.replace(
        ANCHOR,
        "    product = products.get().get(productId)\n"
        f'    return ok({{**product, "reloaded": "{marker}"}}, etag=product["version"])\n',
    )


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the synth reads (the layer linked, not copied), synthesized."""
    root = tmp_path_factory.mktemp("edit-reload")
    for entry in COPIED:
        if (ROOT / entry).is_dir():
            shutil.copytree(
                ROOT / entry, root / entry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(ROOT / entry, root / entry)
    (root / "build").mkdir()
    (root / "build" / "layer").symlink_to(layer.LAYER_ROOT.resolve(), target_is_directory=True)
    synth.synthesize(root)
    return root


@dataclass
class Stack:
    url: str
    admin: Person
    watcher: watch.Watcher
    functions: workers.Workers


@pytest.fixture(scope="module")
def stack(sources: Path) -> Iterator[Stack]:
    """The copy's stack on free ports, watched; ``os.environ`` restored afterwards (``running``
    exports the endpoints the handlers read)."""
    saved = dict(os.environ)
    try:
        with (
            run.running(
                port=0,
                template_path=sources / synth.OUTDIR / synth.TEMPLATE,
                assembly_dir=sources / synth.OUTDIR,
            ) as local,
            watch.watching(local.functions, root=sources) as watcher,
        ):
            token = id_token(local.auth, "reload-admin", admin=True)
            admin = Person("reload-admin", token, local.auth.verifier().verify_claims(token)["sub"])
            yield Stack(local.url, admin, watcher, local.functions)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.Lazy.reset_all()


@dataclass
class Reader:
    """Reads one product over and over on a thread of its own, keeping every status it got."""

    url: str
    person: Person
    statuses: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        session = self.person.session()
        while not self.stop.is_set():
            try:
                self.statuses.append(session.get(self.url, timeout=60).status_code)
            except requests.RequestException as error:
                self.errors.append(repr(error))


def test_a_saved_handler_edit_is_served_and_the_data_is_kept(stack, sources):
    # Given a product created through the API before any edit, read without the new field
    product_id = f"p-{uuid.uuid4().hex[:10]}"
    created = stack.admin.post(
        f"{stack.url}/products",
        json={"productId": product_id, "name": "Tea", "stock": 7},
        timeout=60,
    )
    assert created.status_code == 201, created.text
    url = f"{stack.url}/products/{product_id}"
    before = stack.admin.get(url, timeout=60)
    assert before.status_code == 200 and "reloaded" not in before.json(), before.text
    old_asset = stack.functions[HANDLER].function.asset
    # And a reader calling the function all through the reload
    reader = Reader(url, stack.admin)
    reading = threading.Thread(target=reader.run, name="reader", daemon=True)
    reading.start()

    # When the handler's source is edited and saved in the watched tree
    marker = uuid.uuid4().hex[:8]
    source = sources / SOURCE
    source.write_text(edited(source.read_text(), marker))

    # Then, within the deadline, the API answers with the new code
    deadline = time.monotonic() + RELOAD_DEADLINE
    answer: dict[str, object] = {}
    while time.monotonic() < deadline and answer.get("reloaded") != marker:
        response = stack.admin.get(url, timeout=60)
        assert response.status_code == 200, response.text
        answer = response.json()
        if answer.get("reloaded") != marker:
            time.sleep(0.5)
    reader.stop.set()
    reading.join(timeout=120)
    assert answer.get("reloaded") == marker, (
        f"the edit was not served within {RELOAD_DEADLINE:.0f} s; reloads so far: "
        f"{stack.watcher.reloads}"
    )
    # And the product created before the edit is still there, as it was (DynamoDB Local kept)
    assert answer["productId"] == product_id and answer["stock"] == 7
    # And the function runs from the new asset the synth built, not the old one
    assert stack.functions[HANDLER].function.asset != old_asset
    assert stack.functions[HANDLER].function.asset.parent == sources / synth.OUTDIR
    # And the watcher reports that reload once all its functions are swapped
    while time.monotonic() < deadline and not stack.watcher.reloads:
        time.sleep(0.2)
    assert stack.watcher.reloads, f"no reload was reported within {RELOAD_DEADLINE:.0f} s"
    assert any(HANDLER in reload.restarted for reload in stack.watcher.reloads), (
        stack.watcher.reloads
    )
    # And no request made while the function restarted failed
    assert not reader.errors, reader.errors[:5]
    assert reader.statuses and set(reader.statuses) == {200}, sorted(set(reader.statuses))
