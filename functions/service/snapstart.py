"""SnapStart: what must be unique per execution environment is made after a restore, never at init.

With SnapStart, Lambda runs a function's init once when a version is published, snapshots the
memory, and starts every later execution environment from that one snapshot. Whatever init left in
memory is therefore shared by every environment restored from it. For turnstile that means:

* the ``random`` module's generator (retry jitter, claim tickets, shard picks): restored
  environments would draw the same sequence, so retries would stay in lockstep and claim tickets
  collide. It is reseeded from ``os.urandom`` after every restore.
* lazily built dependencies (``service.runtime.Lazy``: boto3 clients with their connection pools,
  the idempotency store): one built during init would carry another environment's open sockets.
  They are forgotten after a restore and rebuilt on first use.
* ids: lease owner ids (``top-up/<uuid4>``), request tokens (``turnstile_ddb.transact.new_token``)
and
  idempotency claim tokens are drawn per request from ``uuid.uuid4`` (``os.urandom``, which a
  snapshot cannot replay), never at init; the restore test checks that they differ.

Lambda's Python runtime provides ``snapshot_restore_py`` (AWS's runtime-hooks module; also on
PyPI as ``snapshot-restore-py``) and runs its registered hooks. Elsewhere (tests, local runs) it is
absent and :func:`after_restore` keeps the hooks in a registry of its own; :func:`restored` runs
the hooks as the runtime would, which is how the tests simulate a restore.

Priming: :func:`before_snapshot` hooks run once before the snapshot; ``service.observability``
builds its Logger and Tracer there (imports, the X-Ray SDK's patching of botocore), so restored
environments start with them. Nothing built there may be unique or hold a connection.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Hook = Callable[..., Any]

try:  # provided by Lambda's runtime when SnapStart is on
    import snapshot_restore_py as _runtime_hooks
except ImportError:  # tests, local runs: nothing restores, so nothing calls the hooks
    _runtime_hooks = None

_registry: list[tuple[Hook, tuple[Any, ...], dict[str, Any]]] = []
_before: list[tuple[Hook, tuple[Any, ...], dict[str, Any]]] = []


def before_snapshot(hook: Hook, *args: Any, **kwargs: Any) -> Hook:
    """Run ``hook`` once, at the end of init, before Lambda snapshots the environment (priming:
    work every restored environment would otherwise repeat; nothing unique, no connection)."""
    if _runtime_hooks is not None:
        _runtime_hooks.register_before_snapshot(hook, *args, **kwargs)
    else:
        _before.append((hook, args, kwargs))
    return hook


def snapshotting() -> None:
    """Run the before-snapshot hooks (what the runtime does before it takes the snapshot)."""
    found = _runtime_hooks.get_before_snapshot() if _runtime_hooks is not None else _before
    for hook, args, kwargs in list(found):
        hook(*args, **kwargs)


def after_restore(hook: Hook, *args: Any, **kwargs: Any) -> Hook:
    """Run ``hook(*args, **kwargs)`` after each restore from a snapshot (usable as a decorator)."""
    if _runtime_hooks is not None:
        _runtime_hooks.register_after_restore(hook, *args, **kwargs)
    else:
        _registry.append((hook, args, kwargs))
    return hook


def hooks() -> list[tuple[Hook, tuple[Any, ...], dict[str, Any]]]:
    """The registered after-restore hooks, with their arguments."""
    if _runtime_hooks is not None:
        return list(_runtime_hooks.get_after_restore())
    return list(_registry)


def restored() -> None:
    """Run the after-restore hooks, in registration order (what the runtime does on restore)."""
    for hook, args, kwargs in hooks():
        hook(*args, **kwargs)


def reseed_random() -> None:
    """A fresh seed from ``os.urandom`` for the ``random`` module's shared generator."""
    random.seed()


after_restore(reseed_random)
