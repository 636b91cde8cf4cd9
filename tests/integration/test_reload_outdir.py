"""Two stacks started from one checkout (``make local PORT=3000`` and ``PORT=3001``) re-synthesize
on a save into folders of their own: into one ``cdk.out/`` they would run ``python app.py`` at
once into one folder, and each swap in assets the other wrote."""

from __future__ import annotations

from pathlib import Path

from local import preflight, run, synth, watch, workers


def test_two_stacks_of_one_checkout_resynthesize_into_folders_of_their_own():
    written: dict[int, Path] = {}
    for port in (3000, 3001):

        def synthesize(root: Path, outdir: Path, port: int = port) -> bool:
            written[port] = outdir
            return False  # nothing changed: no swap

        # Given the watcher of the stack on that port, as make local starts it
        watcher = run.reloader(workers.Workers(), port, synthesize=synthesize)
        # When a save is rebuilt
        watcher.rebuild()
    # Then each stack synthesized into a folder of its own, in its state folder, not cdk.out/
    assert written[3000] != written[3001]
    for port, outdir in written.items():
        assert outdir == preflight.state_dir(port) / synth.OUTDIR
    assert synth.ROOT / synth.OUTDIR not in written.values()


def definition(asset: Path, timeout: int = 10) -> workers.FunctionDef:
    return workers.FunctionDef("ProductsFn", "h.handler", asset, {"A": "1"}, timeout, 512, "Role")


def test_a_function_whose_asset_is_the_same_elsewhere_is_not_restarted():
    # Given a function running from make synth's cdk.out/, rebuilt into the stack's own folder
    running = definition(Path("/repo/cdk.out/asset.aaa"))
    # Then the same asset (its name is its content's hash) in another folder is the same function
    assert watch._same(definition(Path("/repo/.local/3000/cdk.out/asset.aaa")), running)
    # And another asset, or another setting, is a change
    assert not watch._same(definition(Path("/repo/.local/3000/cdk.out/asset.bbb")), running)
    assert not watch._same(definition(Path("/repo/cdk.out/asset.aaa"), timeout=20), running)
