"""boto3 client construction, in one place.

Endpoints come from boto3's own ``AWS_ENDPOINT_URL`` handling (the local stack points it
at the moto server), so nothing here knows about local runs. Clients are thread-safe
and created once per container by the composition root (``runtime.Runtime``).
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

__all__ = ["aws_clients", "lambda_client"]

_CONFIG = Config(
    retries={"max_attempts": 3, "mode": "standard"},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=16,
)


def aws_clients(session: boto3.Session | None = None) -> dict[str, Any]:
    """The S3, DynamoDB and SQS clients every handler needs."""
    sess = session or boto3.Session()
    return {name: sess.client(name, config=_CONFIG) for name in ("s3", "dynamodb", "sqs")}


def lambda_client(session: boto3.Session | None = None) -> Any:
    """A Lambda client for a synchronous invocation of up to the forget function's
    timeout (made on first use: a handler's init builds none)."""
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=3, read_timeout=120)
    return (session or boto3.Session()).client("lambda", config=config)
