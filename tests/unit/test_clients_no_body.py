"""The walkthrough's ``# 204`` lines are excused one mypy error only: the ``Any`` the Python
generator gives a 204 route's empty body (``Response[Any | <Op>Error]``). Any other error on such a
line (a wrong argument, an ``Any`` from anywhere else) is still reported, and a marked line whose
expected error is gone (the generator typed the body) is reported too, so the marker goes."""

from __future__ import annotations

from clients import generate

SOURCE = [
    "import x",
    'w.done("release_lock", release_lock.sync_detailed(lock, client=u, body=o), gone)  # 204',
    'w.ok("get_event", get_event.sync_detailed(talk, client=user), ok, Event)',
]
EMPTY_BODY = (
    'clients/walkthrough.py:2: error: Expression type contains "Any" '
    '(has type "Response[Any | ReleaseLockError]")  [misc]'
)


def test_the_empty_body_any_of_a_marked_line_is_excused():
    assert generate.unexcused([EMPTY_BODY], SOURCE) == []


def test_another_error_on_a_marked_line_is_reported():
    # Given a marked line that also passes a wrong argument
    wrong = (
        'clients/walkthrough.py:2: error: Argument "body" to "sync_detailed" has incompatible '
        'type "str"; expected "LockReleaseRequest"  [arg-type]'
    )
    # Then that error is reported, the empty body's Any is not
    assert generate.unexcused([EMPTY_BODY, wrong], SOURCE) == [wrong]


def test_an_any_that_is_not_the_empty_body_is_reported_on_a_marked_line():
    other_any = (
        'clients/walkthrough.py:2: error: Expression type contains "Any" '
        '(has type "dict[str, Any]")  [misc]'
    )
    assert generate.unexcused([EMPTY_BODY, other_any], SOURCE) == [other_any]


def test_any_error_on_an_unmarked_line_is_reported():
    unmarked = EMPTY_BODY.replace(":2:", ":3:")
    assert generate.unexcused([EMPTY_BODY, unmarked], SOURCE) == [unmarked]


def test_a_marked_line_without_its_empty_body_any_is_reported():
    # Given a generator that typed the 204 body (no error on the marked line)
    # Then the stale marker is named
    assert generate.unexcused([], SOURCE) == [
        "clients/walkthrough.py:2: marked # 204 but its answer has no Any body: drop the marker"
    ]
