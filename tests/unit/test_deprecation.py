"""A deprecated public name keeps working for its minor version, and says so on every use."""

from __future__ import annotations

import types
import warnings

import pytest

from turnstile_ddb.deprecation import TurnstileDeprecationWarning, deprecated, renamed


def test_a_deprecated_function_works_and_warns_with_its_replacement() -> None:
    @deprecated(since="0.4.0", removed_in="0.5.0", use="new_add")
    def old_add(a: int, b: int) -> int:
        return a + b

    with pytest.warns(
        TurnstileDeprecationWarning,
        match=r"old_add is deprecated since "
        r"turnstile-ddb 0\.4\.0 and will be removed in 0\.5\.0; use new_add",
    ) as seen:
        assert old_add(1, 2) == 3
    # the warning points at the caller, not at the helper
    assert seen[0].filename == __file__
    assert old_add.__name__ == "old_add"


def test_a_deprecated_class_warns_when_constructed() -> None:
    @deprecated(since="0.4.0", removed_in="0.5.0", use="Better")
    class Old:
        def __init__(self, value: int) -> None:
            self.value = value

    with pytest.warns(TurnstileDeprecationWarning, match="Old is deprecated"):
        assert Old(3).value == 3


def test_a_renamed_module_name_answers_with_the_new_value_and_warns() -> None:
    module = types.ModuleType("fake")
    module.__getattr__ = renamed(  # type: ignore[method-assign]
        "fake", {"OLD_LIMIT": ("0.4.0", "0.5.0", "fake.LIMIT", lambda: 7)}
    )
    with pytest.warns(TurnstileDeprecationWarning, match=r"fake\.OLD_LIMIT .* use fake\.LIMIT"):
        assert module.OLD_LIMIT == 7
    with pytest.raises(AttributeError):
        _ = module.NEVER_THERE


def test_it_is_a_deprecation_warning_that_a_filter_can_make_an_error() -> None:
    assert issubclass(TurnstileDeprecationWarning, DeprecationWarning)

    @deprecated(since="0.4.0", removed_in="0.5.0", use="nothing")
    def old() -> None:
        return None

    with warnings.catch_warnings():
        warnings.simplefilter("error", TurnstileDeprecationWarning)
        with pytest.raises(TurnstileDeprecationWarning):
            old()
