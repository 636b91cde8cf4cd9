"""The names renamed for the library's vocabulary ("claim" is a reservation's hold on a unit, in
``turnstile_ddb.claims``) still answer, for one minor version, with the new object and a warning."""

from __future__ import annotations

import warnings

import pytest

from turnstile_ddb import idempotency, slots
from turnstile_ddb.deprecation import TurnstileDeprecationWarning

RENAMED = [
    (idempotency, "Claim", "InProgress"),
    (slots, "claim", "book"),
    (slots, "claim_any", "book_any"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_an_old_name_is_the_new_object_and_warns(module, old, new):
    with pytest.warns(TurnstileDeprecationWarning, match=rf"{old} is deprecated .* use .*\.{new}"):
        found = getattr(module, old)
    assert found is getattr(module, new)
    assert old not in module.__all__ and new in module.__all__


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_the_new_name_does_not_warn(module, old, new):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(module, new)
