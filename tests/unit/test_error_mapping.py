"""Every domain error code maps to a 4xx in the one place that maps codes (service.api.errors)."""

from __future__ import annotations

import importlib
import pkgutil

import service.domain
from service.api.errors import STATUS
from service.domain.errors import DomainError


def all_subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= all_subclasses(sub)
    return found


def test_every_domain_error_has_a_client_status():
    for module in pkgutil.iter_modules(service.domain.__path__):
        importlib.import_module(f"service.domain.{module.name}")
    codes = {error.code for error in all_subclasses(DomainError)}
    assert codes, "no domain errors found"
    missing = sorted(code for code in codes if code not in STATUS)
    assert missing == []
    # A domain refusal is about the request, never an outage: 4xx (or 502 for a failed upstream
    # the client may retry).
    assert all(400 <= STATUS[code] < 500 or STATUS[code] == 502 for code in codes)
