"""Lambda's shapes for the real handlers: events, contexts, and a handler imported in
this process (for tests and benchmarks that invoke it one event at a time).

Each handler module is imported under *its own* function environment (Globals plus the
function's variables from template.yaml, resolved), because handlers read their
configuration once at import, as in a Lambda container. Events are built in the exact
shapes Lambda delivers: API Gateway HTTP API v2 payloads and SQS batch records. The
local stack runs its containers as processes (``local_stack.containers``): copies of a
handler module in one process share Powertools' class-level state, so they must not
serve events at the same time.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import itertools
import os
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

    from local_stack.resources import Resolver

_IMPORT_LOCK = threading.Lock()
_CONTAINERS = itertools.count(1)
ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Temporarily set process variables; restore the previous values afterwards."""
    saved = {k: os.environ.get(k) for k in env}
    try:
        for key, value in env.items():
            os.environ[key] = value
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def handler_module_name(template: dict[str, Any], function_id: str) -> str:
    props = template["Resources"][function_id]["Properties"]
    module = props["Handler"].rsplit(".", 1)[0]
    return props["CodeUri"].strip("/").replace("/", ".") + "." + module


def handler_path(template: dict[str, Any], function_id: str) -> Path:
    props = template["Resources"][function_id]["Properties"]
    module = props["Handler"].rsplit(".", 1)[0]
    return ROOT / props["CodeUri"] / f"{module}.py"


def import_handler(resolver: Resolver, function_id: str, env: dict[str, str]) -> ModuleType:
    """Load a fresh copy of a function's handler module under ``env``: a cold start of one
    container in this process. Copies have their own module globals but share every
    library's class-level state (Powertools keeps the current event on a class), so
    invoke them one event at a time; concurrency needs ``local_stack.containers``."""
    name = f"{handler_module_name(resolver.template, function_id)}__container{next(_CONTAINERS)}"
    spec = importlib.util.spec_from_file_location(
        name, handler_path(resolver.template, function_id)
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _IMPORT_LOCK, environment(env):
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


@dataclass
class LambdaContext:
    """The attributes Powertools reads from a Lambda context. The remaining time counts
    down from the function's timeout, as in Lambda."""

    function_name: str
    aws_request_id: str
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    timeout_ms: int = 30_000
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.timeout_ms - int((time.monotonic() - self.started) * 1000))


def function_timeout(template: dict[str, Any], function_id: str) -> int:
    """The function's Timeout in seconds (its own, else the Globals', else Lambda's 3)."""
    props = template["Resources"][function_id]["Properties"]
    globals_ = template.get("Globals", {}).get("Function", {})
    return int(props.get("Timeout", globals_.get("Timeout", 3)))


def context_for(function_id: str, timeout_seconds: int = 30) -> LambdaContext:
    return LambdaContext(
        function_name=function_id,
        aws_request_id=str(uuid.uuid4()),
        timeout_ms=timeout_seconds * 1000,
    )


def http_event(
    method: str,
    raw_path: str,
    *,
    query: str = "",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    source_ip: str = "127.0.0.1",
    authorizer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as the `$default` route sends it
    (``authorizer``: what the JWT authorizer passed, local_stack.authorizer)."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    now = time.time()
    query_params: dict[str, str] = {}
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        key, value = unquote_plus(key), unquote_plus(value)
        query_params[key] = f"{query_params[key]},{value}" if key in query_params else value
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": query,
        "headers": lowered,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": lowered.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": bool(body),
    }
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    if query_params:
        event["queryStringParameters"] = query_params
    if body:
        event["body"] = base64.b64encode(body).decode()
    return event


def sqs_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """A received SQS message (ReceiveMessage with all attributes) as a Lambda record."""
    body = message["Body"]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": queue_arn.split(":")[3],
    }


def scheduled_event(rule_arn: str) -> dict[str, Any]:
    """The EventBridge "Scheduled Event" a `Type: Schedule` rule sends."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": "us-east-1",
        "resources": [rule_arn],
        "detail": {},
    }
