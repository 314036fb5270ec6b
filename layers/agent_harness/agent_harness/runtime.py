"""The composition root: every seam the services use, in one injectable object.

Handlers build one ``Runtime`` per container (``Runtime.from_settings``, cheap: boto3
clients only); tests build one from fakes or moto clients. Services never reach for
globals, environment variables or clients of their own.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_harness.clock import Clock, SystemClock
from agent_harness.errors import ConfigError
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.listings import RecentListings
from agent_harness.models import ModelRegistry
from agent_harness.models.resilience import Deadline
from agent_harness.settings import ENV
from agent_harness.tokens import TokenCounter

if TYPE_CHECKING:
    from collections.abc import Callable

    import boto3

    from agent_harness.embeddings.embedder import Embedder
    from agent_harness.ids import User
    from agent_harness.ports import (
        Budget,
        Eraser,
        ForgetOutcome,
        JobQueue,
        SessionState,
        StateTable,
        ToolServers,
        WorkspaceStore,
    )
    from agent_harness.settings import Settings

__all__ = ["Runtime"]


def _new_id() -> str:
    return uuid.uuid4().hex


class _DeferredEraser:
    """The forget function's eraser (``aws.eraser.LambdaEraser``), its module loaded by
    the first ``DELETE /v1/memory``, not by a container's init."""

    def __init__(self, function: str, client: Callable[[], Any]) -> None:
        self.function = function
        self._make_client = client  # as LambdaEraser names it (a test swaps it)

    def forget(self, user: User) -> ForgetOutcome:
        from agent_harness.aws.eraser import LambdaEraser

        return LambdaEraser(self.function, self._make_client).forget(user)


@dataclass
class Runtime:
    settings: Settings
    store: WorkspaceStore
    table: StateTable
    queue: JobQueue
    models: ModelRegistry
    counter: TokenCounter
    clock: Clock = field(default_factory=SystemClock)
    new_id: Callable[[], str] = _new_id
    #: warm, bounded per-container cache of indexed memory files (keyed by user and ETag)
    search_cache: MemoryIndexCache = field(default_factory=MemoryIndexCache)
    #: each user's last LIST of ledgers, which automatic recall reuses for a few seconds
    listings: RecentListings = field(default_factory=RecentListings)
    sleep: Callable[[float], None] = time.sleep
    #: the boto3 clients behind the stores (for instrumentation: request counts)
    clients: dict[str, Any] = field(default_factory=dict)
    #: when this invocation's model work must end; handlers start it from their context
    deadline: Deadline = field(default_factory=Deadline)
    #: per container, by user key: budget overrides as last seen (when, what) and what
    #: the user's committed turns cost on average (a running turn's reservation)
    budget_cache: dict[str, tuple[float, Budget | None]] = field(default_factory=dict)
    turn_costs: dict[str, int] = field(default_factory=dict)
    #: by (user key, session id): each session as this container last left it, which the
    #: lease write checks when budgets are on (agent.lease)
    sessions_seen: dict[tuple[str, str], SessionState] = field(default_factory=dict)
    #: the remote tool servers (MCP) of this container: built on first use, so importing
    #: a handler imports no MCP code and opens no connection
    tool_servers: ToolServers | None = None
    #: where forgetting a user runs when not here (deployed: the forget function)
    eraser: Eraser | None = None
    #: the embedding model behind recall by meaning, built on first use from the
    #: settings (``embeddings``): a test sets one, or sets ``embeddings_built`` with None
    embedder: Embedder | None = None
    embeddings_built: bool = False
    #: by (owner key, path): a memory's vectors as last read here (monotonic time,
    #: ETag, the decoded set), reused for a few seconds (memory.vectors)
    vector_cache: dict[tuple[str, str], tuple[float, str, Any]] = field(default_factory=dict)
    #: vectors of lines a search embedded because the stored ones lacked them (by key)
    caught_up: dict[str, Any] = field(default_factory=dict)

    def reconnect(self) -> None:
        """New AWS clients behind new stores: a new boto3 session (the credentials the
        environment has now) and none of the old connections; what a SnapStart restore
        needs (agent_harness.snapstart). A runtime on fakes (no clients) is left as is."""
        if not self.clients:
            return
        from agent_harness.aws.clients import aws_clients

        made = aws_clients()
        self.clients.update(made)
        self.store, self.table, self.queue = _aws_ports(self.settings, made, self.sleep)

    def embeddings(self) -> Embedder | None:
        """The embedder of HARNESS_EMBEDDING_MODEL (None: ``off``, ranking is lexical)."""
        if self.embedder is None and not self.embeddings_built:
            from agent_harness.embeddings import embedder_for

            self.embedder = embedder_for(self.settings, self.counter)
        self.embeddings_built = True
        return self.embedder

    def remote_tool_servers(self) -> ToolServers | None:
        if self.tool_servers is None and self.settings.mcp_servers:
            from agent_harness.mcp.remote_tools import RemoteToolServers

            self.tool_servers = RemoteToolServers(self.settings.mcp_servers)
        return self.tool_servers

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        session: boto3.Session | None = None,
        clients: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **model_deps: Any,
    ) -> Runtime:
        """Wire the AWS implementations. Creates clients, nothing else: no I/O. ``sleep``
        is the one wait every backoff uses (S3 appends, DynamoDB retries, model retries,
        a busy session's lease), so a test can run them without waiting."""
        from agent_harness.aws.clients import aws_clients

        missing = [
            ENV[name]
            for name in ("bucket", "table", "flush_queue_url", "consolidation_queue_url")
            if not getattr(settings, name)
        ]
        if missing:
            raise ConfigError(f"missing configuration: {', '.join(missing)}")
        made = clients or aws_clients(session)
        eraser = None
        if settings.forget_function:
            from agent_harness.aws.clients import lambda_client

            function = settings.forget_function
            eraser = _DeferredEraser(function, lambda: lambda_client(session))
        counter = TokenCounter(settings.token_encoding, settings.tiktoken_cache_dir)
        deadline = Deadline(settings.deadline_margin_seconds)
        store, table, queue = _aws_ports(settings, made, sleep)
        return cls(
            settings=settings,
            store=store,
            table=table,
            queue=queue,
            models=ModelRegistry(
                settings, counter=counter, deadline=deadline, sleep=sleep, **model_deps
            ),
            counter=counter,
            sleep=sleep,
            clients=made,
            deadline=deadline,
            eraser=eraser,
        )


def _aws_ports(
    settings: Settings, made: dict[str, Any], sleep: Callable[[float], None]
) -> tuple[WorkspaceStore, StateTable, JobQueue]:
    """The stores and the queue on ``made``'s clients."""
    from agent_harness.aws.queues import SqsJobQueue
    from agent_harness.aws.state import DynamoStateTable
    from agent_harness.aws.workspace import S3WorkspaceStore

    return (
        S3WorkspaceStore(made["s3"], settings.bucket, sleep=sleep),
        DynamoStateTable(made["dynamodb"], settings.table, sleep=sleep),
        SqsJobQueue(
            made["sqs"],
            settings.flush_queue_url,
            settings.consolidation_queue_url,
            (settings.flush_dlq_url, settings.consolidation_dlq_url),
        ),
    )
