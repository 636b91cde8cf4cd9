"""A take from a sharded counter (:func:`turnstile_ddb.sharded.take`), as one protocol.

Private: :mod:`turnstile_ddb.sharded`'s docstring says how a take goes, step by step; this module
is those steps (:class:`_Take`, one protocol a step: see :mod:`turnstile_ddb._core`) and the
writes they send.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from turnstile_ddb import _core, codec, errors, metrics, retry, transact
from turnstile_ddb._sharded_counter import (
    PATTERN,
    Exhausted,
    Missing,
    Moved,
    ShardedCounter,
    Taken,
    read_shards_protocol,
    read_with_protocol,
)
from turnstile_ddb._sharded_hints import Hints, TakeOptions, learn


def _decrement(counter: ShardedCounter, shard: int, quantity: int) -> _core.Call:
    return _core.Call(
        "update_item",
        {
            "TableName": counter.table,
            "Key": counter.wire_key(shard),
            "UpdateExpression": "SET #count = #count - :q",
            "ConditionExpression": "attribute_exists(#pk) AND #count >= :q",
            "ExpressionAttributeNames": {"#pk": counter.key_attr, "#count": counter.count_attr},
            "ExpressionAttributeValues": codec.values(q=quantity),
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    )


def _decrement_many(counter: ShardedCounter, takes: dict[int, int]) -> _core.Call:
    """One transaction taking ``takes[k]`` from each shard ``k``, each guarded by its own
    ``#count >= :take``: the shards cannot go below zero whatever sold meanwhile."""
    return _core.Call(
        "transact_write_items",
        {
            "TransactItems": [
                {
                    "Update": {
                        "TableName": counter.table,
                        "Key": counter.wire_key(shard),
                        "UpdateExpression": "SET #count = #count - :take",
                        "ConditionExpression": "#count >= :take",
                        "ExpressionAttributeNames": {"#count": counter.count_attr},
                        "ExpressionAttributeValues": codec.values(take=take),
                    }
                }
                for shard, take in takes.items()
            ],
            "ClientRequestToken": transact.new_token(),
        },
    )


def spread(counts: Sequence[int], quantity: int, rand: random.Random) -> dict[int, int]:
    """Shards (largest first) whose counts add up to ``quantity``: how much to take from each."""
    order = sorted(range(len(counts)), key=lambda k: (-counts[k], rand.random()))
    takes: dict[int, int] = {}
    left = quantity
    for k in order:
        if left == 0 or counts[k] == 0:
            break
        takes[k] = min(counts[k], left)
        left -= takes[k]
    return takes


class _Take:
    """One :func:`take`: what it has spent and learned across its rounds, one protocol a step
    (each a generator: see :mod:`turnstile_ddb._core`)."""

    def __init__(self, counter: ShardedCounter, quantity: int, options: TakeOptions) -> None:
        self.built = counter  # as the caller built it: the hints' key
        self.quantity = quantity
        self.options = options
        self.rand = options.rand or random.Random()
        self.hints = options.hints if options.hints is not None else Hints()
        self.layout = self.hints.shards.layout(counter)
        self.counter = counter.with_shards(self.layout.shards)  # the layout believed now
        self.moved = False  # a shard answered a newer layout, or was gone: read them all
        self.calls = 0
        self.throttled_rounds = 0
        self.total = 0  # the counts last read added up to this
        self.saw_enough = False  # a read showed enough units at least once
        # the last round's writes met a throttle: it lost no race, so it counts towards the
        # backoff's attempts (StayedThrottled), never towards the rounds of a refusal
        self.throttled_round = False

    def run(self) -> _core.Steps[Taken]:
        self.refuse_from_hints()
        candidates = self.first_choice()
        round_ = 0  # rounds that lost a race; a throttled one is bounded by the backoff instead
        for read in itertools.count():
            taken, answered = yield from self.try_shards(candidates)
            if taken is not None:
                return taken
            if not self.throttled_round:
                round_ += 1
            if round_ > self.options.rounds:
                break
            if self.moved:
                answered = {}  # counts of another layout: they bound nothing now
            counts, items, candidates = yield from self.read_counts(read, answered)
            if not candidates:  # only a sum of shards holds q
                taken = yield from self.take_across(counts, items)
                if taken is not None:
                    return taken
        if not self.saw_enough:  # no read decided yet: a refusal rests on one, never a guess
            yield from self.read_counts(self.options.rounds, {})
        metrics.count("ShardRaceRefusal", pattern=PATTERN)
        self.hints.saw(self.built, "refused", self.quantity)
        raise Exhausted(self.total, raced=True)

    def learned(self, items: dict[int, dict[str, Any]]) -> dict[int, int]:
        """:func:`learn` what ``items`` show; a newer layout among them sets :attr:`moved` and
        moves the take to it."""
        counts = learn(self.hints, self.built, items)
        layout = self.hints.shards.layout(self.built)
        if layout != self.layout:
            self.layout, self.moved = layout, True
            self.counter = self.built.with_shards(layout.shards)
        return counts

    def refuse_from_hints(self) -> None:
        """Step 0: refuse without a call when the hints alone show too few units."""
        if self.hints.sold_out.fresh(self.counter):
            metrics.count("SoldOutHint", pattern=PATTERN)
            self.hints.saw(self.built, "refused", self.quantity)
            raise Exhausted(0)
        fresh = self.hints.shards.known(self.counter)
        if len(fresh) == self.counter.shards and sum(fresh.values()) < self.quantity:
            metrics.count("ShortHint", pattern=PATTERN)
            self.hints.saw(self.built, "refused", self.quantity)
            raise Exhausted(sum(fresh.values()))

    def first_choice(self) -> list[int]:
        """Step 1's shard, or none when the counter was last read empty (read at once)."""
        if self.hints.sold_out.empty(self.counter):
            return []
        return [self.hints.shards.choose(self.counter, self.rand, self.quantity)]

    def try_shards(
        self, candidates: Sequence[int]
    ) -> _core.Steps[tuple[Taken | None, dict[int, int]]]:
        """Steps 1 and 3: each candidate's conditional write until one takes ``q``; else the
        counts the refused writes answered (after a wait if one was throttled)."""
        answered: dict[int, int] = {}
        throttled: BaseException | None = None
        for shard in candidates:
            outcome = yield from self.try_one(shard)
            if isinstance(outcome, Taken):
                return outcome, answered
            if self.moved:
                break  # the next candidates were chosen in another layout: read first
            if isinstance(outcome, BaseException):
                throttled = outcome
            elif outcome is not None:
                answered[shard] = outcome
        self.throttled_round = throttled is not None
        if throttled is not None:
            self.throttled_rounds += 1
            if self.throttled_rounds >= self.options.backoff.attempts:
                raise errors.StayedThrottled(
                    self.throttled_rounds, f"the shards of {self.counter.base!r}", throttled
                )
            yield from retry.pause(self.options.backoff, self.throttled_rounds)
        return None, answered

    def try_one(self, shard: int) -> _core.Steps[Taken | int | BaseException | None]:
        """One shard's write: what it took, the count it answered, the throttle (or the
        refused connection) that kept it from being sent, or None: it lost to a transaction on
        the shard (a resize, a restock), or the shard is gone (a resize dropped it)."""
        counter = self.counter
        self.calls += 1
        try:
            response = yield _decrement(counter, shard, self.quantity)
        except retry.MAYBE_APPLIED_ERRORS as exc:
            raise retry.OutcomeUnknown(str(exc)) from exc
        except retry.NOT_SENT_ERRORS as exc:
            return exc
        except ClientError as exc:
            if retry.is_throttle(exc):
                metrics.count("Throttle", pattern=PATTERN)
                metrics.count("ShardFailover", pattern=PATTERN)
                self.hints.shards.throttled(self.built, shard)
                self.hints.saw(self.built, "throttled")
                return exc
            if retry.error_code(exc) == "TransactionConflictException":
                metrics.count("ShardConflict", pattern=PATTERN)
                self.hints.saw(self.built, "conflict")
                return None
            if not retry.condition_failed(exc):
                raise
            metrics.count("ShardFailover", pattern=PATTERN)
            old = codec.old_item(exc)
            if old is None:
                if shard == 0:  # shard 0 is never dropped: the counter is gone
                    raise Missing(counter.base) from exc
                self.moved = True
                return None
            return self.learned({shard: old})[shard]
        item = codec.decode_item(response["Attributes"]) or {}
        left = self.learned({shard: item})[shard]
        self.hints.saw(self.built, "taken", self.quantity)
        return Taken((shard,), left, self.calls, item)

    def read_counts(
        self, round_: int, answered: dict[int, int]
    ) -> _core.Steps[tuple[dict[int, int], dict[int, dict[str, Any]], list[int]]]:
        """Step 2: every shard's count, reading only what is not known, then the shards that
        hold ``q`` in the order to try them; refuses (:class:`Exhausted`) when the counts add up
        to fewer than ``q``. Known: the counts the writes just answered, and on the first read
        those learned within the trust window too (each an upper bound of the count now: counts
        only go down between restocks). Later rounds read the rest again, so a refusal for lost
        races always rests on counts read or answered in that round. When no shard holds ``q``
        alone, every shard is read (unless just done): the transaction over several needs them
        all read now."""
        fresh = self.moved or round_ > 0
        counts = {**({} if fresh else self.hints.shards.known(self.counter)), **answered}
        unknown = [k for k in range(self.counter.shards) if k not in counts]
        items: dict[int, dict[str, Any]] = {}
        candidates: list[int] = []
        for _ in range(2):
            if unknown or self.moved:
                items, read, whole = yield from self.read(unknown)
                counts = read if whole else {**counts, **read}
            self.total = sum(counts.values())
            self.hints.sold_out.mark(self.counter, self.total == 0)
            if self.total < self.quantity:
                metrics.count("SoldOutRead", pattern=PATTERN)
                self.hints.saw(self.built, "refused", self.quantity)
                raise Exhausted(self.total)
            self.saw_enough = True
            candidates = [k for k, count in counts.items() if count >= self.quantity]
            if candidates or len(items) == self.counter.shards:
                break
            unknown = list(range(self.counter.shards))
        self.rand.shuffle(candidates)
        return counts, items, self.hints.shards.order(self.counter, candidates)

    def read(
        self, shards: list[int]
    ) -> _core.Steps[tuple[dict[int, dict[str, Any]], dict[int, int], bool]]:
        """The items of ``shards`` and their counts, and False; or, when one of them is gone or
        shows another layout (a resize ran), every shard of the layout now, and True."""
        self.calls += 1
        if not self.moved:
            try:
                items = yield from read_shards_protocol(self.counter, shards, self.options.backoff)
            except Moved:
                self.moved = True
            else:
                counts = self.learned(items)
                if not self.moved:
                    return items, counts, False
            self.calls += 1
        every, _ = yield from read_with_protocol(self.counter, self.options.backoff)
        items = dict(enumerate(every))
        counts = self.learned(items)
        self.counter = self.built.with_shards(len(every))
        self.moved = False
        return items, counts, True

    def take_across(
        self, counts: dict[int, int], items: dict[int, dict[str, Any]]
    ) -> _core.Steps[Taken | None]:
        """Step 3's fallback: ``q`` from several shards in one transaction (each guarded by its
        own count, see :func:`_decrement_many`); ``None`` when it lost a race or was throttled."""
        counter = self.counter
        ordered = [counts[k] for k in range(counter.shards)]
        takes = spread(ordered, self.quantity, self.rand)
        self.calls += 1
        try:
            yield _decrement_many(counter, takes)
        except retry.MAYBE_APPLIED_ERRORS as exc:
            raise retry.OutcomeUnknown(str(exc)) from exc
        except ClientError as exc:
            code = retry.error_code(exc)
            if code != "TransactionCanceledException" and not retry.is_throttle(exc):
                raise
            metrics.count("ShardFailover", pattern=PATTERN)
            self.hints.saw(self.built, "conflict")
            return None
        left = {shard: ordered[shard] - taken for shard, taken in takes.items()}
        layout = {
            counter.shards_attr: self.layout.shards,
            counter.layout_attr: self.layout.generation,
        }
        self.learned({shard: {counter.count_attr: n, **layout} for shard, n in left.items()})
        self.hints.saw(self.built, "taken", self.quantity)
        return Taken(tuple(takes), sum(left.values()), self.calls, items[next(iter(takes))])
