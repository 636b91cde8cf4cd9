"""Seeds on which the simulator once found a real defect, replayed with the default
configuration: each must now run clean (docs/sim.md, "Found and fixed")."""

from __future__ import annotations

import pytest

from sim.run import describe, run_seed

# A reservation whose client paused between reading its candidates and sending its claim, so
# that the claim landed after the hold's own end: it was answered 201 with an expiresAt
# already past (dead on arrival), and a unit looked held twice. Now its units are given back
# and it is answered as lapsed (turnstile_ddb.claims.ClaimHoldLapsed, a 503). 418 and 631 were
# found first; the other four are the rest of that 10,000-seed run's violations, the same event.
DEAD_ON_ARRIVAL = (418, 631, 1563, 6587, 8108, 8596)


@pytest.mark.parametrize("seed", DEAD_ON_ARRIVAL)
def test_a_reservation_whose_claim_landed_after_its_hold_ended_is_not_answered_as_held(seed):
    result = run_seed(seed)
    assert result.violations == 0, describe(result)
