"""Wallets' answers: the success bodies their routes document (OpenAPI only, never validated).

Imported only when the document is built (``service.api.models.answer``), never by a request.
"""

from __future__ import annotations

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from service.api.models import Answer, absent


class TopUpReceipt(Answer):
    topUpId: str
    walletId: str
    amount: int = Field(ge=1)
    balance: int = Field(description="the wallet's balance after this top-up, in minor units")
    fence: int = Field(
        ge=1, description="the fence of the wallet's lease the credit was made under"
    )
    chargeId: str = Field(description="the payment provider's charge")


class Wallet(Answer):
    walletId: str
    balance: int = Field(description="in minor units")
    topUps: int = Field(ge=0)
    owner: str | SkipJsonSchema[None] = absent("who the wallet belongs to (since its first top-up)")
