"""The synth's skip (``local.synth``): ``python app.py`` runs again exactly when something it reads
changed. On a small fake project tree; the synth itself is a fake that writes the template."""

from __future__ import annotations

from pathlib import Path

import pytest

from local import synth


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A tree with every input of the synth, small."""
    (tmp_path / "app.py").write_text("print('app')\n")
    (tmp_path / "cdk.json").write_text("{}\n")
    for name in ("requirements.txt", "requirements-dev.txt", "requirements.lock"):
        (tmp_path / name).write_text("x==1\n")
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "stack.py").write_text("STACK = 1\n")
    handlers = tmp_path / "functions" / "service" / "handlers"
    handlers.mkdir(parents=True)
    (handlers / "products.py").write_text("def handler(event, context):\n    return 1\n")
    (tmp_path / "build" / "layer").mkdir(parents=True)
    (tmp_path / "build" / "layer" / "arm64.stamp").write_text("lock-a\n")
    return tmp_path


class FakeApp:
    """Stands in for ``python app.py``: counts its runs and writes a template (or fails)."""

    def __init__(self, fail: bool = False) -> None:
        self.runs = 0
        self.fail = fail

    def __call__(self, root: Path, outdir: Path) -> None:
        self.runs += 1
        if self.fail:
            raise RuntimeError("synth failed")
        outdir.mkdir(exist_ok=True)
        (outdir / synth.TEMPLATE).write_text("{}")


def test_the_synth_runs_once_then_is_skipped_while_nothing_changed(project):
    app = FakeApp()
    # Given a tree never synthesized: the synth runs and stamps its inputs
    assert synth.synthesize(project, run=app) is True
    assert synth.current(project)
    # When it is asked again with nothing changed, then it is skipped
    assert synth.synthesize(project, run=app) is False
    assert app.runs == 1
    # And force runs it regardless
    assert synth.synthesize(project, run=app, force=True) is True
    assert app.runs == 2
    # And the stamp says how long it took (make local's banner quotes it)
    seconds = synth.last_seconds(project)
    assert seconds is not None and seconds >= 0


def test_no_stamp_no_duration(project):
    assert synth.last_seconds(project) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "functions/service/handlers/products.py").write_text("# edited\n"),
        lambda root: (root / "functions/service/handlers/new.py").write_text(""),
        lambda root: (root / "functions/service/handlers/products.py").unlink(),
        lambda root: (root / "functions/service/handlers/products.py").rename(
            root / "functions/service/handlers/renamed.py"
        ),
        lambda root: (root / "infra/stack.py").write_text("STACK = 2\n"),
        lambda root: (root / "app.py").write_text("print('other')\n"),
        lambda root: (root / "cdk.json").write_text('{"context": {}}\n'),
        lambda root: (root / "cdk.context.json").write_text("{}\n"),  # created: was missing
        lambda root: (root / "requirements.lock").write_text("x==2\n"),
        lambda root: (root / "build/layer/arm64.stamp").write_text("lock-b\n"),
    ],
    ids=[
        "handler-edited",
        "module-added",
        "module-deleted",
        "module-renamed",
        "infra-edited",
        "app-edited",
        "cdk-json-edited",
        "context-file-created",
        "lock-edited",
        "layer-rebuilt",
    ],
)
def test_any_change_to_an_input_runs_the_synth_again(project, change):
    app = FakeApp()
    synth.synthesize(project, run=app)
    # When an input changes
    change(project)
    # Then the stamp no longer matches, and the synth runs again
    assert not synth.current(project)
    assert synth.synthesize(project, run=app) is True
    assert app.runs == 2


@pytest.mark.parametrize(
    "noise",
    [
        "functions/service/handlers/__pycache__/products.cpython-312.pyc",
        "functions/service/handlers/products.pyc",
        "functions/service/handlers/.products.py.swp",
        "functions/service/handlers/products.py~",
        "infra/.mypy_cache/x.json",
        "README.md",  # not read by the synth at all
        "tests/test_x.py",
    ],
)
def test_bytecode_editor_files_and_other_folders_are_not_inputs(project, noise):
    app = FakeApp()
    synth.synthesize(project, run=app)
    # When a file that is not an input appears
    path = project / noise
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("noise")
    # Then the synth is still skipped
    assert synth.synthesize(project, run=app) is False
    assert app.runs == 1


def test_a_failed_synth_leaves_no_stamp_so_the_next_one_runs(project):
    synth.synthesize(project, run=FakeApp())
    (project / "infra" / "stack.py").write_text("STACK = 3\n")
    # When the synth of a changed tree fails
    with pytest.raises(RuntimeError):
        synth.synthesize(project, run=FakeApp(fail=True))
    # Then no stamp claims cdk.out/ is current, even once the tree is as it was
    (project / "infra" / "stack.py").write_text("STACK = 1\n")
    assert not synth.current(project)
    again = FakeApp()
    assert synth.synthesize(project, run=again) is True
    assert again.runs == 1


def test_a_missing_template_is_never_current(project):
    synth.synthesize(project, run=FakeApp())
    # When cdk.out/ lost its template (the stamp survived)
    (project / synth.OUTDIR / synth.TEMPLATE).unlink()
    # Then the synth runs
    assert not synth.current(project)


def test_the_same_content_in_another_tree_has_the_same_fingerprint(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    for path in sorted(project.rglob("*")):
        target = other / path.relative_to(project)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.write_bytes(path.read_bytes())
    assert synth.fingerprint(other) == synth.fingerprint(project)
    # And moving content between two files is a change (paths are hashed with contents)
    (other / "infra" / "stack.py").rename(other / "infra" / "stack2.py")
    assert synth.fingerprint(other) != synth.fingerprint(project)
