"""Each function's init time in the local stack's log, as Lambda's ``REPORT`` line shows it.

Lambda logs ``Init Duration: X ms`` for a cold start: the time spent importing the handler's
module (and running whatever it does at import). :func:`load` imports a handler the same way and
logs one line, so a change that makes a function slower to start shows up in ``make local``
without running the bench::

    INIT_REPORT Function: products Handler: service.handlers.products.handler \
        Init Duration: 412.31 ms

Measured in the process that imports it: what an earlier import already loaded (boto3,
Powertools, shared ``service`` modules) is not counted again, so in one process serving every
function only the first to import a library pays for it. A worker process per function (the
deploy-fidelity runner) makes every figure a true cold one; ``make bench`` (section
``coldstart``) measures them from the deployed trees in fresh interpreters.
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("local.init")


def load(handler: str, function: str | None = None) -> tuple[Callable[..., Any], float]:
    """Import ``module.attribute`` and log its init duration; returns (the handler, ms).

    A module imported before is not imported again: its duration is 0 and the line says so.
    """
    module_name, _, attribute = handler.rpartition(".")
    already = module_name in sys.modules
    started = time.perf_counter()
    module = importlib.import_module(module_name)
    found = getattr(module, attribute)
    elapsed_ms = (time.perf_counter() - started) * 1000
    log.info(
        "INIT_REPORT Function: %s Handler: %s Init Duration: %.2f ms%s",
        function or module_name.rpartition(".")[2],
        handler,
        elapsed_ms,
        " (already imported)" if already else "",
    )
    return found, elapsed_ms
