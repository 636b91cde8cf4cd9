"""The turnstile stack: it only composes the constructs, one per concern."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.api import RestApi
from infra.auth import Auth
from infra.consumers import StreamConsumers
from infra.functions import Functions
from infra.monitoring import Monitoring
from infra.outputs import API_URL, USER_POOL_CLIENT_ID, USER_POOL_ID
from infra.tables import Tables
from service import catalog

FUNCTIONS_DIR = str(Path(__file__).resolve().parent.parent / "functions")


class TurnstileStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.auth = Auth(self, "Auth")
        self.tables = Tables(self, "Tables")
        self.functions = Functions(
            self,
            "Functions",
            specs=catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS,
            tables=self.tables,
            code_path=FUNCTIONS_DIR,
        )
        self.api = RestApi(
            self, "Http", routes=catalog.api_routes(), functions=self.functions, auth=self.auth
        )
        consumers = None
        if catalog.STREAM_CONSUMERS:
            consumers = StreamConsumers(
                self,
                "Consumers",
                specs=catalog.STREAM_CONSUMERS,
                functions=self.functions,
                tables=self.tables,
            )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            api=self.api.api,
            consumers=[(spec.name, self.functions[spec.name]) for spec in catalog.STREAM_CONSUMERS],
            dead_letters=consumers.dead_letters if consumers else None,
            dead_letters_alarm=consumers.dead_letters_alarm if consumers else None,
        )
        # The post-deploy tier reads these (infra.outputs); make local writes the same keys.
        CfnOutput(self, API_URL, value=self.api.api.url)
        CfnOutput(self, USER_POOL_ID, value=self.auth.user_pool.user_pool_id)
        CfnOutput(self, USER_POOL_CLIENT_ID, value=self.auth.client.user_pool_client_id)
