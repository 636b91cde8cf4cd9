"""What a reservation answers: the units it took (:class:`Claimed`) or why it took none (the
errors), and the private tally of what it cost on the way.

Private: the public names are :mod:`turnstile_ddb.claims`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from turnstile_ddb import errors, retry
from turnstile_ddb._claims_units import Key


class NotEnough(errors.Refused):
    """Fewer than ``wanted`` units could be claimed; the ones taken have been given back."""

    def __init__(self, wanted: int, got: int) -> None:
        super().__init__(f"only {got} of {wanted} units could be claimed")
        self.wanted = wanted
        self.got = got


class Unsettled(errors.Retryable):
    """The reads stopped at their bound (:data:`PAGES_PER_POOL` Queries per pool) with fewer than
    ``wanted`` claimable units seen and some pool not read to its end: not a refusal (the pools
    may hold enough units further on), so a later attempt may succeed. Nothing was written.

    Where every unit listed in the index is claimable this does not happen in practice: a page
    holds a few more units than a read needs. It happens when most units the index lists are not
    ``eligible`` (units of a sku still being created, say): without the bound a reservation
    would page through all of them."""

    def __init__(self, wanted: int, got: int, pages: int) -> None:
        super().__init__(
            f"{got} of {wanted} units seen in at most {pages} Queries per pool; "
            "the pools were not read to their end"
        )
        self.wanted = wanted
        self.got = got
        self.pages = pages


class ClaimHoldLapsed(retry.RetriesExhausted):
    """The hold ended, on the caller's clock (``ReserveOptions.clock_ms``), before the
    reservation could be answered: not a refusal (the units may well be there), a retryable
    answer (it is a :class:`turnstile_ddb.retry.RetriesExhausted`, so a ``Retryable``), counted
    as ``ClaimHoldLapsed``. Retry with a new hold.

    Either no round started (the clock had reached ``until_ms`` before one could be sent:
    nothing was written, ``keys`` is empty), or the round that took every unit was answered
    after the hold's end (the request paused between its read and its claim, or the reply was
    slow): answering it would hand out a hold that has already ended, dead on arrival. Its
    units are then given back (:func:`release`, on condition that this holder still holds each
    one, so a unit a rival claimed since stays the rival's) and listed in ``keys``.
    ``given_back`` is False when giving them back failed (the exception's ``__cause__`` says
    how): they may still name this holder, with a hold that has ended, which anyone may claim.
    ``until_ms``: when the hold ended."""

    def __init__(
        self, until_ms: int, rounds: int, keys: Sequence[Key] = (), *, given_back: bool = True
    ) -> None:
        if not keys:
            what = "no round was sent after it"
        elif given_back:
            what = f"the claim of {len(keys)} unit(s) was answered after it and given back"
        else:
            what = f"the claim of {len(keys)} unit(s) was answered after it; giving it back failed"
        super().__init__(rounds, None)
        self._say(
            f"the hold ended (at {until_ms} epoch ms) before the reservation was answered: {what}"
        )
        self.until_ms = until_ms
        self.keys = [dict(key) for key in keys]
        self.given_back = given_back


@dataclass
class Claimed:
    """What :func:`reserve` took, and what it cost (for tests and benchmarks)."""

    keys: list[Key] = field(default_factory=list)
    holder: str = ""
    lost: int = 0  # candidates someone else claimed first (replaced)
    queries: int = 0
    transactions: int = 0
    failovers: int = 0  # pools left for later because their key throttled
    cached: int = 0  # units first tried straight from the :class:`UnitCache` (no Query)
    guessed: int = 0  # units first tried as the caller guessed them (no Query)


class HoldLost(errors.Refused):
    """A sale failed: at least one unit is no longer held (validly) by this holder."""

    def __init__(self, keys: Sequence[Key], current: Sequence[dict[str, Any] | None]) -> None:
        super().__init__(f"{len(keys)} unit(s) no longer held")
        self.keys = list(keys)
        self.current = list(current)


@dataclass
class _Cost:
    """What one reservation has spent so far, counted as it goes (private: a caller reads the
    totals on the :class:`Claimed` it is given, a copy made once the reservation is done)."""

    lost: int = 0  # candidates someone else claimed first (replaced)
    queries: int = 0
    transactions: int = 0
    failovers: int = 0  # pools left for later because their key throttled
    cached: int = 0  # units first tried straight from the unit cache (no Query)
    guessed: int = 0  # units first tried as the caller guessed them (no Query)

    def claimed(self, keys: Sequence[Key], holder: str) -> Claimed:
        """The answer of a reservation that took ``keys`` for ``holder`` at this cost."""
        return Claimed(
            keys=list(keys),
            holder=holder,
            lost=self.lost,
            queries=self.queries,
            transactions=self.transactions,
            failovers=self.failovers,
            cached=self.cached,
            guessed=self.guessed,
        )


for _public in (NotEnough, Unsettled, ClaimHoldLapsed, Claimed, HoldLost):
    _public.__module__ = "turnstile_ddb.claims"  # shown, pickled and documented there
