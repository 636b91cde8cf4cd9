"""The turnstile stack: it only composes the constructs, one per concern."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct

from infra.api import RestApi
from infra.auth import Auth
from infra.functions import Functions
from infra.monitoring import ITERATOR_AGE_MS, Monitoring
from infra.outputs import API_URL, USER_POOL_CLIENT_ID, USER_POOL_ID
from infra.tables import Tables
from service import catalog
from turnstile_ddb.cdk import OrderedStreamConsumer

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
        # Each stream consumer in order, stopping at its first failed record, with its own
        # dead-letter queue and alarms; the mapping invokes the SnapStart alias, never $LATEST.
        consumers = Construct(self, "Consumers")
        self.consumers = [
            OrderedStreamConsumer(
                consumers,
                spec.name.capitalize(),
                table=self.tables[spec.source].table,
                function=self.functions.alias(spec.name),
                batch_size=spec.batch_size,
                retry_attempts=spec.retry_attempts,
                max_record_age=Duration.seconds(spec.max_record_age_seconds),
                iterator_age_alarm=Duration.millis(ITERATOR_AGE_MS),
                filters=spec.filters,
            )
            for spec in catalog.STREAM_CONSUMERS
        ]
        self.monitoring = Monitoring(self, "Monitoring", api=self.api.api, consumers=self.consumers)
        # The post-deploy tier reads these (infra.outputs); make local writes the same keys.
        CfnOutput(self, API_URL, value=self.api.api.url)
        CfnOutput(self, USER_POOL_ID, value=self.auth.user_pool.user_pool_id)
        CfnOutput(self, USER_POOL_CLIENT_ID, value=self.auth.client.user_pool_client_id)
