"""Contention made visible: the primitives report what contention cost them, here.

Every conflict, retry, lost claim, lease wait, replay or throttle that a primitive meets is one
call of :func:`count` (or :func:`timing` for a duration), named after what happened and tagged with
the pattern it happened in (``versioned``, ``lease``, ``claims``...). The library knows nothing of
Lambda or CloudWatch, so the figures go to sinks its host adds: the service layer adds one that
writes Powertools EMF metrics; the bench and the tests read the process-wide :data:`tally`.

Reporting never fails the caller: a sink that raises is the host's bug, not the request's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

__all__ = [
    "COUNT",
    "MILLISECONDS",
    "Figure",
    "Sink",
    "Tally",
    "add_sink",
    "count",
    "remove_sink",
    "tally",
    "timing",
]

COUNT = "Count"
MILLISECONDS = "Milliseconds"


class Figure(NamedTuple):
    pattern: str
    name: str
    value: float
    unit: str


Sink = Callable[[Figure], None]


class Tally:
    """Thread-safe running totals per ``(pattern, name)``; what the bench compares with its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[tuple[str, str], float] = {}

    def __call__(self, figure: Figure) -> None:
        key = (figure.pattern, figure.name)
        with self._lock:
            self._totals[key] = self._totals.get(key, 0.0) + figure.value

    def get(self, pattern: str, name: str) -> float:
        with self._lock:
            return self._totals.get((pattern, name), 0.0)

    def snapshot(self) -> dict[tuple[str, str], float]:
        with self._lock:
            return dict(self._totals)

    def reset(self) -> None:
        with self._lock:
            self._totals.clear()


tally = Tally()
_sinks: list[Sink] = [tally]
_sinks_lock = threading.Lock()


def add_sink(sink: Sink) -> None:
    """Send every later figure to ``sink`` as well (idempotent for the same sink)."""
    global _sinks
    with _sinks_lock:
        if sink not in _sinks:
            _sinks = [*_sinks, sink]


def remove_sink(sink: Sink) -> None:
    global _sinks
    with _sinks_lock:
        _sinks = [each for each in _sinks if each != sink]


def _emit(figure: Figure) -> None:
    for sink in _sinks:  # a copy-on-write list: no lock needed to read it
        try:
            sink(figure)
        except Exception:  # noqa: BLE001 - see the module docstring
            continue


def count(name: str, *, pattern: str, value: float = 1) -> None:
    """``value`` more of ``name`` (``VersionConflict``, ``Throttle``, ``ClaimLost``...)."""
    _emit(Figure(pattern, name, float(value), COUNT))


def timing(name: str, milliseconds: float, *, pattern: str) -> None:
    """A duration spent on contention (``LeaseWait``...), in milliseconds."""
    _emit(Figure(pattern, name, float(milliseconds), MILLISECONDS))
