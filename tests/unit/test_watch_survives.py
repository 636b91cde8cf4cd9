"""The hot-reload watcher (``local.watch``) outlives a rebuild that fails in a way the synth does
not report (an unreadable file under ``functions/``): it logs it and picks up the next save.

The watcher's own thread is driven by ``changed()`` (what the file observer calls); every wait is
on an event, with a deadline."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from local import watch, workers

DEADLINE = 30.0  # seconds; reached only when the watcher no longer answers


class Synth:
    """A synth whose first run fails reading an input, as an editor's temp file deleted
    mid-read makes the fingerprint fail (``unreadable``), or else reports a synth whose output
    is then missing; later runs find nothing changed."""

    def __init__(self, *, unreadable: bool = True) -> None:
        self.runs: list[threading.Event] = [threading.Event(), threading.Event()]
        self.count = 0
        self.unreadable = unreadable

    def __call__(self, root: Path, outdir: Path) -> bool:
        self.count += 1
        if self.count <= len(self.runs):
            self.runs[self.count - 1].set()
        if self.count == 1 and self.unreadable:
            raise FileNotFoundError(2, "No such file or directory", "functions/.#products.py")
        return self.count == 1  # the first "ran", though it wrote no template


def saves(watcher: watch.Watcher, synth: Synth) -> None:
    """Two saves, each waited for: the second is rebuilt only if the watcher outlived the first."""
    watcher.start()
    try:
        watcher.changed()
        assert synth.runs[0].wait(DEADLINE), "the first save was never rebuilt"
        watcher.changed()
        assert synth.runs[1].wait(DEADLINE), "the watcher died: the later save was not rebuilt"
    finally:
        watcher.stop()


def test_an_unreadable_file_fails_one_reload_and_the_next_save_is_still_picked_up(tmp_path, caplog):
    # Given a watcher over a tree, whose first rebuild fails reading a file
    (tmp_path / watch.WATCHED).mkdir()
    synth = Synth()
    watcher = watch.Watcher(workers.Workers(), root=tmp_path, settle=0.0, synthesize=synth)
    # When a save triggers that rebuild, and a later save comes
    with caplog.at_level(logging.INFO, logger="local.watch"):
        saves(watcher, synth)  # Then the watcher is still there and rebuilds it
    # And the failure was logged, saying the running code stays until the next save
    failed, later = list(watcher.reloads)[:2]
    assert failed.error is not None and "functions/.#products.py" in failed.error
    assert later.error is None and not later.synthesized
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("unchanged until the next save" in message for message in errors), errors


def test_a_rebuild_failing_after_the_synth_is_logged_and_the_watcher_goes_on(tmp_path, caplog):
    # Given a watcher whose first rebuild finds no template where the synth should have written it
    (tmp_path / watch.WATCHED).mkdir()
    synth = Synth(unreadable=False)
    watcher = watch.Watcher(workers.Workers(), root=tmp_path, settle=0.0, synthesize=synth)
    # When two saves come, then the second is rebuilt too, and the failure was logged
    with caplog.at_level(logging.INFO, logger="local.watch"):
        saves(watcher, synth)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "reload failed; the running code is unchanged until the next save"
    ]
    assert errors[0].exc_info is not None and isinstance(errors[0].exc_info[1], OSError)
