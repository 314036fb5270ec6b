"""The consolidation fan-out of one schedule tick: 10,000 due users within one invocation.

DynamoDB is a moto server on 127.0.0.1 (the local stack's) with the template's table;
10,000 users are marked due exactly as flushes mark them (sparse ``due-index`` GSI, 16
shards), and the tick's own code queries it over HTTP. SQS is a stub server speaking
the SQS JSON protocol that answers each SendMessageBatch after a fixed delay standing in
for an AWS round trip (``SQS_LATENCY``, pessimistic for in-region SQS): moto's SQS store
slows down with every message it holds (2,000 messages took it 37 s, growing
quadratically), which would measure moto rather than the tick. Every message body the
stub receives is parsed as a ConsolidationJob and counted.

Measured: wall time, requests, jobs received; compared with the function's timeout.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3

from agent_harness.clock import iso
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.consolidate import fan_out
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings
from local_stack.resources import create_resources, function_environment, load_template

USERS = 10_000
FUNCTION = "MemoryConsolidateFunction"
#: seconds the SQS stub takes per SendMessageBatch (an AWS round trip, pessimistic)
SQS_LATENCY = 0.025


class _SqsStub:
    """SendMessageBatch over HTTP (awsJson1_0), with a latency; records every job."""

    def __init__(self) -> None:
        self.jobs: list[ConsolidationJob] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                time.sleep(SQS_LATENCY)
                ok = []
                for entry in request.get("Entries", []):
                    body = entry["MessageBody"]
                    with stub.lock:
                        stub.jobs.append(ConsolidationJob.model_validate_json(body))
                    ok.append(
                        {
                            "Id": entry["Id"],
                            "MessageId": str(uuid.uuid4()),
                            "MD5OfMessageBody": hashlib.md5(body.encode()).hexdigest(),
                        }
                    )
                payload = json.dumps({"Successful": ok, "Failed": []}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/x-amz-json-1.0")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _mark_due(ddb: Any, table: str, shards: int, now: str) -> None:
    """The items mark_consolidation_due writes, in batches of 25."""
    from agent_harness.aws.state import due_shard

    items = []
    for n in range(USERS):
        user = User.from_id(f"user-{n:05d}")
        items.append(
            {
                "PutRequest": {
                    "Item": {
                        "pk": {"S": f"U#{user.key}"},
                        "sk": {"S": "USER"},
                        "user_id": {"S": user.id},
                        "due_shard": {"S": due_shard(user, shards)},
                        "due_at": {"S": now},
                        "due_seq": {"N": "1"},
                    }
                }
            }
        )
    for start in range(0, len(items), 25):
        ddb.batch_write_item(RequestItems={table: items[start : start + 25]})


def run() -> dict[str, object]:
    from moto.server import ThreadedMotoServer

    for key, value in {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    stub = _SqsStub()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        clients = {
            n: boto3.client(n, endpoint_url=endpoint, region_name="us-east-1")
            for n in ("s3", "dynamodb", "sqs")
        }
        template = load_template()
        resolver = create_resources(template, clients)
        env = function_environment(resolver, FUNCTION)
        settings = Settings.from_env({**env, "TIKTOKEN_CACHE_DIR": ""})
        # the function's own client configuration, pointed at the SQS stub
        from agent_harness.aws.clients import _CONFIG

        clients["sqs"] = boto3.client(
            "sqs", endpoint_url=stub.url, region_name="us-east-1", config=_CONFIG
        )
        rt = Runtime.from_settings(settings, clients=clients)
        _mark_due(clients["dynamodb"], settings.table, settings.due_shards, iso(rt.clock.now()))

        calls: Counter[str] = Counter()
        for name in ("dynamodb", "sqs"):
            clients[name].meta.events.register(
                f"before-call.{name}", lambda model, **_: calls.update([model.name])
            )
        with contextlib.redirect_stdout(io.StringIO()):
            started = time.perf_counter()
            queued = fan_out(rt)
            seconds = time.perf_counter() - started
    finally:
        server.stop()
        stub.server.shutdown()
    users = {job.user_id for job in stub.jobs}
    timeout = int(template["Resources"][FUNCTION]["Properties"]["Timeout"])
    return {
        "due_users": USERS,
        "queued": queued,
        "received": len(stub.jobs),
        "distinct_users": len(users),
        "sqs_latency_seconds": SQS_LATENCY,
        "seconds": round(seconds, 2),
        "requests": dict(calls),
        "function_timeout_seconds": timeout,
        "share_of_timeout": round(seconds / timeout, 3),
    }


def report(result: dict[str, object]) -> str:
    ok = result["queued"] == result["received"] == result["distinct_users"] == USERS
    return "\n".join(
        [
            f"consolidation fan-out of {result['due_users']} due users (one tick; DynamoDB on "
            f"a moto server, SQS a stub at {result['sqs_latency_seconds']} s a request)",
            f"  {result['seconds']} s for {result['requests']}",
            f"  queued {result['queued']}, received {result['received']} for "
            f"{result['distinct_users']} users: {'all there, once' if ok else 'MISSING JOBS'}",
            f"  {result['share_of_timeout']:.1%} of the {result['function_timeout_seconds']} s "
            "function timeout",
        ]
    )


if __name__ == "__main__":
    print(report(run()))
