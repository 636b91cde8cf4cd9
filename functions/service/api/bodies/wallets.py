"""Wallets' request bodies (their answers: ``service.api.answers.wallets``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from service import config
from service.api.models import INTEGRAL, Body


class TopUpRequest(Body):
    amount: Annotated[int, Field(ge=1, le=config.MAX_TOP_UP), INTEGRAL]
