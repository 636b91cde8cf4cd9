"""Edit, save, see: while ``make local`` runs, a change saved under ``functions/`` is rebuilt and
served, without a restart.

A saved change (watchdog's file events, coalesced until :data:`SETTLE` seconds pass without
another) runs the synth as ``make synth`` does (``local.synth``: the same ``python app.py``, so
the new asset is what ``cdk deploy`` would upload; skipped when the content hash of its inputs
did not change, a save without an edit). The template is read again, and every function whose
definition changed (its asset above all: the asset's name is the hash of its sources) is given
its new asset with :meth:`local.workers.Worker.replace`, all in parallel: the new process
serves from the moment it is ready, calls under way finish on the old one, so no request sees a
restart. Functions whose definition did not change keep their process. DynamoDB Local, its
tables and data, the identity provider and its users are not touched.

A synth that fails (a syntax error), an input it cannot read (an editor's temp file deleted
while it was hashed, a file of another user) or a function that fails to start is logged and the
old code keeps serving until the next save: the watcher itself goes on. What is not reloaded:
the tables, the routes and the user pool (the parent process read them at start, from ``infra/``
and the service's catalog): changing those needs a restart of ``make local``.

watchdog (a maintained cross-platform file-watching library: inotify here) is used rather than
polling modification times.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from local import iam, synth, workers
from local import template as cfn

WATCHED = "functions"
SETTLE = 0.3  # seconds without a new event before a rebuild starts (an editor saves in bursts)
# Events that change a file; opening or reading one (the synth reads every source) is not one.
CHANGES = frozenset({"created", "modified", "moved", "deleted", "closed"})
MAX_RELOADS = 100  # rebuilds a watcher remembers (tests read the last; nothing reads the first)

log = logging.getLogger("local.watch")


@dataclass
class Reload:
    """What one rebuild did: whether the synth ran, which functions (handler paths) now run the
    new code, which failed to start (with why), and how long each part took."""

    synthesized: bool
    restarted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    synth_seconds: float = 0.0
    restart_seconds: float = 0.0
    error: str | None = None  # the synth failed: nothing was restarted


class _Changed(FileSystemEventHandler):
    """Calls ``notify`` for every event that changes a watched file (not bytecode or caches)."""

    def __init__(self, root: Path, notify: Callable[[], None]) -> None:
        self.root = root.resolve()
        self.notify = notify

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in CHANGES:
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = raw.decode() if isinstance(raw, bytes) else raw
            if not path:
                continue
            try:
                relative = Path(path).resolve().relative_to(self.root)
            except ValueError:
                continue
            if not synth.ignored(relative):
                self.notify()
                return


class Watcher:
    """Rebuilds ``root``'s stack when ``root/functions`` changes and swaps the changed functions'
    processes in ``functions`` (the running stack's workers)."""

    def __init__(
        self,
        functions: workers.Workers,
        *,
        root: Path = synth.ROOT,
        settle: float = SETTLE,
        synthesize: Callable[[Path, Path], bool] | None = None,
        outdir: Path | None = None,
    ) -> None:
        self.functions = functions
        self.root = root
        self.settle = settle
        # where each rebuild is synthesized (default root/cdk.out): a stack of its own, its own
        # folder, or two stacks of one checkout would write into one another's (local.run)
        self.outdir = synth.output_dir(root, outdir)
        self.synthesize = synthesize or _synthesize
        # the last MAX_RELOADS rebuilds, oldest first (one a save: make local lives for hours)
        self.reloads: deque[Reload] = deque(maxlen=MAX_RELOADS)
        self._pending = threading.Condition()
        self._saved_at: float | None = None  # the first unprocessed change (monotonic)
        self._last_event = 0.0
        self._stop = threading.Event()
        self._observer = Observer()
        self._thread = threading.Thread(target=self._loop, name="watch", daemon=True)

    def changed(self) -> None:
        """Note a change (the observer calls it; a test may too)."""
        with self._pending:
            now = time.monotonic()
            self._saved_at = self._saved_at or now
            self._last_event = now
            self._pending.notify_all()

    def start(self) -> Watcher:
        self._observer.schedule(
            _Changed(self.root, self.changed), str(self.root / WATCHED), recursive=True
        )
        self._observer.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._pending:
            self._pending.notify_all()
        self._observer.stop()
        self._observer.join(timeout=10)
        self._thread.join(timeout=120)  # a rebuild under way finishes: never a half-swapped stack

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._pending:
                while self._saved_at is None and not self._stop.is_set():
                    self._pending.wait()
                # quiet for `settle` seconds: the editor is done saving
                while not self._stop.is_set():
                    quiet = self._last_event + self.settle - time.monotonic()
                    if quiet <= 0:
                        break
                    self._pending.wait(quiet)
                saved_at, self._saved_at = self._saved_at, None
            if self._stop.is_set() or saved_at is None:
                return
            try:
                reload = self.rebuild()
            except Exception:  # a failure rebuild() did not foresee: never the watcher's end
                log.exception("reload failed; the running code is unchanged until the next save")
                continue
            if reload.synthesized and not reload.error:
                log.info(
                    "reload: %s in %.1f s from the save (synth %.1f s, restart %.1f s)%s",
                    ", ".join(name.rsplit(".", 1)[0] for name in reload.restarted)
                    or "no function changed",
                    time.monotonic() - saved_at,
                    reload.synth_seconds,
                    reload.restart_seconds,
                    "".join(
                        f"\n  {handler} did not start:\n{why}"
                        for handler, why in reload.failed.items()
                    ),
                )

    def rebuild(self) -> Reload:
        """Synthesize if an input changed, then give each changed function its new definition."""
        started = time.monotonic()
        log.info("reload: %s/ changed, synthesizing (python app.py) ...", WATCHED)
        try:
            ran = self.synthesize(self.root, self.outdir)
        except (subprocess.CalledProcessError, OSError) as failed:
            # OSError: an input that cannot be read (an editor's temp file deleted mid-read, a
            # file of another user); the next save tries again
            why = (
                f"exit {failed.returncode}"
                if isinstance(failed, subprocess.CalledProcessError)
                else str(failed)
            )
            reload = Reload(True, error=f"the synth failed ({why})")
            log.error("reload: %s; the running code is unchanged until the next save", reload.error)
            self.reloads.append(reload)
            return reload
        reload = Reload(ran, synth_seconds=time.monotonic() - started)
        if ran:
            self._swap(reload)
        else:
            log.info("reload: no input of the synth changed, nothing to do")
        self.reloads.append(reload)
        return reload

    def _swap(self, reload: Reload) -> None:
        started = time.monotonic()
        assembly = self.outdir
        loaded = cfn.load(assembly / synth.TEMPLATE)
        definitions = {each.handler: each for each in workers.functions(loaded, assembly)}
        policies = iam.policies(loaded)
        changed = {
            handler: definitions[handler]
            for handler, worker in self.functions.items()
            if handler in definitions and not _same(definitions[handler], worker.function)
        }

        # Spawned here, in the watcher's own thread: a worker dies with the thread that spawned
        # it (Worker.successor), and the pool's threads below end after this reload.
        successors = {}
        for handler, definition in changed.items():
            worker = self.functions[handler]
            policy = None if worker.policy is None else policies[definition.logical_id].config()
            successors[handler] = worker.successor(definition, policy)
        with ThreadPoolExecutor(max_workers=max(1, len(changed))) as pool:
            done = {
                handler: pool.submit(self.functions[handler].take_over, successor)
                for handler, successor in successors.items()
            }
        for handler, future in done.items():
            error = future.exception()
            if error is None:
                reload.restarted.append(handler)
            else:
                reload.failed[handler] = str(error)
        reload.restart_seconds = time.monotonic() - started


def _synthesize(root: Path, outdir: Path) -> bool:
    return synth.synthesize(root, outdir=outdir)


def _same(new: workers.FunctionDef, running: workers.FunctionDef) -> bool:
    """The same definition, wherever its asset folder is: an asset's name is the hash of its
    content, so one synthesized into another folder is the same code."""
    return new.asset.name == running.asset.name and replace(new, asset=running.asset) == running


@contextmanager
def watching(
    functions: workers.Workers,
    *,
    root: Path = synth.ROOT,
    settle: float = SETTLE,
    outdir: Path | None = None,
) -> Iterator[Watcher]:
    """A started :class:`Watcher` over ``functions``, stopped on exit."""
    watcher = Watcher(functions, root=root, settle=settle, outdir=outdir).start()
    try:
        yield watcher
    finally:
        watcher.stop()
