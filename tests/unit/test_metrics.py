"""The contention figures the primitives report: totals per pattern, extra sinks, faulty sinks."""

from __future__ import annotations

import threading

from turnstile_ddb import metrics


def test_counts_add_up_per_pattern_and_name_across_threads() -> None:
    # Given a fresh tally
    tally = metrics.Tally()
    metrics.add_sink(tally)
    try:
        # When 8 threads each count 500 conflicts in one pattern and 1 throttle in another
        def work() -> None:
            for _ in range(500):
                metrics.count("VersionConflict", pattern="versioned")
            metrics.count("Throttle", pattern="claims")

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        metrics.remove_sink(tally)
    # Then no increment is lost and the patterns are kept apart
    assert tally.get("versioned", "VersionConflict") == 4000
    assert tally.get("claims", "Throttle") == 8
    assert tally.get("claims", "VersionConflict") == 0


def test_a_sink_sees_figures_with_their_unit_until_removed() -> None:
    seen: list[metrics.Figure] = []
    metrics.add_sink(seen.append)
    metrics.timing("LeaseWait", 12.5, pattern="lease")
    metrics.remove_sink(seen.append)
    metrics.count("LeaseAttempt", pattern="lease")
    assert seen == [metrics.Figure("lease", "LeaseWait", 12.5, metrics.MILLISECONDS)]


def test_a_failing_sink_neither_fails_the_caller_nor_starves_the_others() -> None:
    def broken(figure: metrics.Figure) -> None:
        raise RuntimeError("sink down")

    tally = metrics.Tally()
    metrics.add_sink(broken)
    metrics.add_sink(tally)
    try:
        metrics.count("ClaimLost", pattern="claims", value=3)
    finally:
        metrics.remove_sink(broken)
        metrics.remove_sink(tally)
    assert tally.get("claims", "ClaimLost") == 3


def test_the_process_wide_tally_is_always_a_sink() -> None:
    before = metrics.tally.get("unit-test", "Replay")
    metrics.count("Replay", pattern="unit-test")
    assert metrics.tally.get("unit-test", "Replay") == before + 1
