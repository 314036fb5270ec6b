"""Every AWS call a container makes, recorded as one JSON line: which function made it,
the service and operation, the parameters that name what it touches, and how it ended.

On when ``LOCAL_AWS_CALL_LOG`` names a directory: each container process (and the SQS
pollers, which in AWS call with the function's role) appends to a file of its own there.
The IAM test (tests/e2e/test_iam.py) evaluates every line against the role template.yaml
gives the function; a developer can read them to see what a request costs.

Only names are kept (bucket, key, table, queue, ...), never bodies or item values.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

#: the variable naming the directory of the call logs
CALL_LOG = "LOCAL_AWS_CALL_LOG"
#: the parameters that name what a call touches, kept as they are
_NAMES = (
    "Bucket",
    "Key",
    "Prefix",
    "VersionId",
    "CopySource",
    "TableName",
    "IndexName",
    "QueueUrl",
    "FunctionName",
    "Name",
    "SecretId",
    "modelId",
    "KeyId",
)


def _named(params: dict[str, Any]) -> dict[str, Any]:
    named = {k: params[k] for k in _NAMES if k in params}
    if "Delete" in params:  # DeleteObjects: each key (and version) deleted
        named["Objects"] = [
            {k: o[k] for k in ("Key", "VersionId") if k in o}
            for o in params["Delete"].get("Objects", [])
        ]
    if "TransactItems" in params:  # each write of a transaction, by kind and table
        named["TransactItems"] = [
            {kind: {"TableName": body.get("TableName")} for kind, body in item.items()}
            for item in params["TransactItems"]
        ]
    if "RequestItems" in params:  # BatchWriteItem / BatchGetItem: the tables
        named["Tables"] = sorted(params["RequestItems"])
    return named


class CallLog:
    """Appends one line per call to ``<directory>/<function>-<pid>.jsonl``."""

    def __init__(self, directory: Path, function_id: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.function_id = function_id
        self._path = directory / f"{function_id}-{os.getpid()}-{threading.get_ident()}.jsonl"
        self._lock = threading.Lock()

    def write(self, service: str, operation: str, params: dict[str, Any], outcome: str) -> None:
        line = {
            "function": self.function_id,
            "service": service,
            "operation": operation,
            "params": _named(params),
            "outcome": outcome,
        }
        with self._lock, self._path.open("a") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")


def _recording(log: CallLog, original: Any) -> Any:
    """``original`` (a client's ``_make_api_call``) writing each call to ``log``."""
    from botocore.exceptions import ClientError

    def recorded(client: Any, operation: str, params: dict[str, Any]) -> Any:
        service = client.meta.service_model.service_name
        try:
            result = original(client, operation, params)
        except ClientError as exc:
            log.write(service, operation, params, exc.response.get("Error", {}).get("Code", "?"))
            raise
        except Exception as exc:
            log.write(service, operation, params, type(exc).__name__)
            raise
        log.write(service, operation, params, "ok")
        return result

    return recorded


def call_log(function_id: str, directory: str | None = None) -> CallLog | None:
    """The call log of ``function_id`` when ``directory`` or $LOCAL_AWS_CALL_LOG is set."""
    where = directory or os.environ.get(CALL_LOG)
    return CallLog(Path(where), function_id) if where else None


def record_calls(function_id: str, directory: str | None = None) -> CallLog | None:
    """Record every botocore call of this process (a container: one function) as
    ``function_id``'s, from now on. Returns the log, or None when logging is off."""
    log = call_log(function_id, directory)
    if log is not None:
        from botocore.client import BaseClient

        BaseClient._make_api_call = _recording(log, BaseClient._make_api_call)  # type: ignore[method-assign]
    return log


def record_client(client: Any, log: CallLog | None) -> Any:
    """Record ``client``'s calls (only this client's) in ``log``; returns the client."""
    if log is not None:
        original = type(client)._make_api_call
        recorded = _recording(log, original)
        client._make_api_call = lambda operation, params: recorded(client, operation, params)
    return client


def read_calls(directory: Path) -> list[dict[str, Any]]:
    """Every call recorded under ``directory``."""
    calls: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        calls += [json.loads(line) for line in path.read_text().splitlines() if line]
    return calls
