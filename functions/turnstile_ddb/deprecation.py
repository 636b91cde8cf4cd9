"""How a public name leaves: a warning for one minor version, then removal.

A name in an ``__all__`` is removed or renamed only after one minor release in which using it
warns with :class:`TurnstileDeprecationWarning`, saying since when, until when and what to use
instead (CHANGELOG.md, "Versioning policy"). Two helpers make the warning:

- :func:`deprecated` wraps a function, method or class that stays for now::

      @deprecated(since="1.0.0", removed_in="2.0.0", use="turnstile_ddb.lease.Leases.acquire")
      def acquire_lease(...): ...

- :func:`renamed` builds a module ``__getattr__`` that answers an old module-level name with the
  new object, warning on each use (the old name leaves the module's ``__all__`` at once)::

      __getattr__ = renamed(
          __name__, {"OLD_NAME": ("1.0.0", "2.0.0", "NEW_NAME", lambda: NEW_NAME)}
      )

``TurnstileDeprecationWarning`` is a ``DeprecationWarning``: Python shows it in tests and in
``__main__``; to find every use before upgrading, make it an error with
``-W error::turnstile_ddb.deprecation.TurnstileDeprecationWarning``.
This module imports only the standard library.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["TurnstileDeprecationWarning", "deprecated", "renamed"]

F = TypeVar("F", bound=Callable[..., Any])


class TurnstileDeprecationWarning(DeprecationWarning):
    """A public name still works but will be removed: the message says in which version, and
    what to use instead."""


def _message(name: str, since: str, removed_in: str, use: str) -> str:
    return (
        f"{name} is deprecated since turnstile-ddb {since} and will be removed in {removed_in}; "
        f"use {use} instead"
    )


def deprecated(*, since: str, removed_in: str, use: str) -> Callable[[F], F]:
    """Warn on every call of the decorated function (or construction of the decorated class)."""

    def decorate(obj: F) -> F:
        message = _message(f"{obj.__module__}.{obj.__qualname__}", since, removed_in, use)

        if isinstance(obj, type):
            original_init: Callable[..., None] = obj.__init__  # type: ignore[misc]

            @functools.wraps(original_init)
            def init(self: Any, *args: Any, **kwargs: Any) -> None:
                warnings.warn(message, TurnstileDeprecationWarning, stacklevel=2)
                original_init(self, *args, **kwargs)

            obj.__init__ = init  # type: ignore[misc]
            return obj

        @functools.wraps(obj)
        def warned(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, TurnstileDeprecationWarning, stacklevel=2)
            return obj(*args, **kwargs)

        return warned  # type: ignore[return-value]

    return decorate


def renamed(
    module: str, names: Mapping[str, tuple[str, str, str, Callable[[], object]]]
) -> Callable[[str], object]:
    """A module ``__getattr__``: each old name in ``names`` maps to ``(since, removed_in, use,
    value)``, where ``value()`` gives what the old name now stands for (read at use, not at
    import). Any other missing name raises ``AttributeError`` as usual."""

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        since, removed_in, use, value = names[name]
        warnings.warn(
            _message(f"{module}.{name}", since, removed_in, use),
            TurnstileDeprecationWarning,
            stacklevel=2,
        )
        return value()

    return __getattr__
