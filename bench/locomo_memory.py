"""One LoCoMo conversation as a user's memory, built in-process through the product's own
paths; the agent model that records what it is shown; the questions asked through the
real turn and scored (for ``bench.locomo_context``).

The memory comes to be as it would for a user who imported this history:

* each LoCoMo session is imported as one session (``agent.importer.import_history``, the
  first speaker's lines as ``user`` messages, the second's as ``assistant``, each with
  the speaker's name in front and the session's date);
* the import's post-turn job runs (``memory.jobs.flush.run_post_turn_job``): it indexes the
  turns for thread search and flushes them, the whole session in one memory-model call,
  into the ledger of the session's day. The memory model's flush answer is the session's
  LoCoMo observations (the dataset's annotations, written by a model from that session),
  so the flush's own parsing, checks, de-duplication and source line apply to them;
* after each session a consolidation runs (``memory.jobs.consolidate.consolidate``, forced)
  with the ``offline`` memory model, which is what writes MEMORY.md.

Everything runs on the in-memory fakes of ``tests.fakes`` (the same services, no AWS),
with a manual clock set to each session's date while it is loaded, and to the day after
the last session while the questions are asked.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
from aws_lambda_powertools import Metrics

from agent_harness.agent.importer import ImportedMessage, import_history
from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.corpus import load_ledgers
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.jobs.schedule import forced_job
from agent_harness.memory.recall import recall_query
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, Usage
from agent_harness.models.offline import OfflineChatModel
from agent_harness.paths import LEDGER_DIR, MEMORY_FILE, turn_path
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings
from bench.common import locomo, sessions
from bench.locomo_retrieval import Question, message_text, observations, session_start
from tests.fakes import ManualClock, MemoryStore, MemoryTable, RecordingQueue

if TYPE_CHECKING:
    from agent_harness.tokens import TokenCounter

__all__ = [
    "REPLY",
    "AnnotationMemoryModel",
    "Evidence",
    "Memory",
    "RecordingEndpoint",
    "ask",
    "base_settings",
    "build_memory",
    "ceiling",
    "key_of",
    "parse_key",
    "summarise",
]

REPLY = "Noted."
#: the agent model's name and the fake endpoint behind it (never contacted: MockTransport)
AGENT_MODEL = "openai:recorder"
BASE_URL = "http://agent-model.invalid/v1"


Row = dict[str, Any]  # conv, category, key, all, any, tokens (and recalled lines)


def key_of(arm: str, budget: int = 0, floor: float = 0.0) -> str:
    """A setting's name: ``memory`` (recall off), or ``<arm> <budget> <floor>``."""
    return arm if arm == "memory" else f"{arm} {budget} {floor:g}"


def parse_key(key: str) -> tuple[str, int, float]:
    arm, *rest = key.split()
    return (arm, int(rest[0]), float(rest[1])) if rest else (arm, 0, 0.0)


def base_settings(**changes: Any) -> Settings:
    """The product's defaults, the agent on the fake endpoint, the offline memory model."""
    values: dict[str, Any] = {
        "agent_model": AGENT_MODEL,
        "memory_model": "offline",
        "compaction_model": "offline",
        "openai_base_url": BASE_URL,
        "openai_api_key": "bench",
        "consolidation_min_gap_seconds": 0,
    }
    return Settings(**(values | changes))


class RecordingEndpoint:
    """An OpenAI-compatible chat-completions server (``httpx.MockTransport``): keeps the
    body of every request and answers a fixed reply without tool calls."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{len(self.bodies)}",
                "object": "chat.completion",
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": REPLY},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 1},
            },
        )

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))


class AnnotationMemoryModel:
    """The memory role: a flush answers with the observations the bench has put up for
    the session being flushed (LoCoMo's annotations, as bullets); every other purpose
    (the consolidation) is the ``offline`` model."""

    def __init__(self, counter: TokenCounter) -> None:
        self.offline = OfflineChatModel(counter)
        self.pending: list[str] = []
        self.flush_calls = 0

    @property
    def name(self) -> str:
        return "locomo-annotations"

    def complete(self, request: ChatRequest) -> ChatResponse:
        if request.purpose != "flush":
            return self.offline.complete(request)
        self.flush_calls += 1
        lines, self.pending = self.pending, []  # the first call of a session: the rest get none
        answer = "\n".join(f"- {text}" for text in lines) or "NO_REPLY"
        return ChatResponse(
            message=Message(role="assistant", content=answer), usage=Usage(), model=self.name
        )


def _normal(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Evidence:
    """What stands for each turn (dia_id) of a conversation in a model's input: its own
    message, and the observations the annotations link to it."""

    turn_text: dict[str, str] = field(default_factory=dict)
    facts: dict[str, set[str]] = field(default_factory=dict)

    def present(self, dia: str, lines: list[str]) -> bool:
        """``dia`` is in the input ``lines`` (whitespace collapsed) when one line holds
        its message, or the whole text of an observation linked to it."""
        wanted = [self.turn_text[dia], *self.facts.get(dia, ())] if dia in self.turn_text else []
        return any(text in line for text in wanted for line in lines)


def input_lines(body: dict[str, Any]) -> list[str]:
    """Every line of every message in a chat-completions request, whitespace collapsed."""
    return [
        _normal(line)
        for message in body.get("messages", [])
        for line in str(message.get("content") or "").splitlines()
        if line.strip()
    ]


#: a fact line; its authority tag (``- [import] ...``) says who, not what
_BULLET = re.compile(r"^\s*[-*]\s+(?:\[[a-z]+(?::[\w.\-]+)?\]\s+)?(.*)$")


def bullets(text: str) -> set[str]:
    return {_normal(m.group(1)) for line in text.splitlines() if (m := _BULLET.match(line))}


@dataclass
class Memory:
    """A conversation loaded as one user's memory."""

    conv: str
    rt: Runtime
    user: User
    endpoint: RecordingEndpoint
    evidence: Evidence
    memory_md: str
    #: distinct observations given to the flush, and those the ledgers hold
    flushed: int = 0
    kept: int = 0
    #: every turn with at least one observation line in the ledgers
    covered: set[str] = field(default_factory=set)
    sessions: int = 0
    ledger_days: int = 0
    archived_days: int = 0
    consolidations: int = 0
    seconds: float = 0.0

    def memory_tokens(self) -> int:
        return self.rt.counter.count(self.memory_md)


def _runtime(
    settings: Settings,
    endpoint: RecordingEndpoint,
    memory: AnnotationMemoryModel,
    counter: TokenCounter,
) -> Runtime:
    """A Runtime on the in-memory fakes (as ``tests.fakes.make_runtime``), the agent model
    built by the registry (OpenAI provider, resilience wrapper) on ``endpoint``."""
    clock = ManualClock()
    ids = itertools.count(1)
    return Runtime(
        settings=settings,
        store=MemoryStore(clock),
        table=MemoryTable(),
        queue=RecordingQueue(clock),
        models=ModelRegistry(
            settings,
            counter=counter,
            overrides={"memory": memory},
            sleep=lambda _: None,
            http_client=endpoint.client(),
        ),
        counter=counter,
        clock=clock,
        new_id=lambda: f"id-{next(ids)}",
        sleep=lambda _: None,
    )


def build_memory(conv: str, counter: TokenCounter) -> Memory:
    """Import, flush and consolidate every session of ``conv``, in date order."""
    started = time.perf_counter()
    sample = locomo()[conv]
    first_speaker = sample["conversation"]["speaker_a"]
    facts_of = dict(observations(sample))
    endpoint = RecordingEndpoint()
    model = AnnotationMemoryModel(counter)
    rt = _runtime(base_settings(), endpoint, model, counter)
    assert isinstance(rt.clock, ManualClock)
    user = User.from_id(f"locomo-{conv}")
    evidence = Evidence()
    memory = Memory(conv, rt, user, endpoint, evidence, "")
    start = datetime.min
    for number, date, turns in sessions(sample):
        start = session_start(date)
        rt.clock.current = start + timedelta(hours=1)  # the import and its jobs: that day
        messages = [
            ImportedMessage(
                role="user" if t["speaker"] == first_speaker else "assistant",
                content=message_text(t),
                timestamp=start + timedelta(seconds=10 * i),
            )
            for i, t in enumerate(turns)
        ]
        for t, m in zip(turns, messages, strict=True):
            evidence.turn_text[t["dia_id"]] = _normal(m.content)
        lines = list(dict.fromkeys(_normal(text) for text, _ in facts_of.get(number, [])))
        for text, ids in facts_of.get(number, []):
            for dia in ids:
                evidence.facts.setdefault(dia, set()).add(_normal(text))
        model.pending = lines
        calls = model.flush_calls
        import_history(rt, user, f"s{number:02d}", messages)
        while rt.queue.post_turn:  # type: ignore[attr-defined]
            run_post_turn_job(rt, rt.queue.post_turn.pop(0))  # type: ignore[attr-defined]
        # a call for the first speaker's words (the user's), one for the second's (the
        # imported assistant's); the annotations are all answered by the first
        if model.flush_calls == calls or model.pending:
            raise RuntimeError(f"{conv} session {number}: its observations were not flushed")
        memory.sessions += 1
        outcome = consolidate(rt, forced_job(rt, user))
        memory.consolidations += outcome.status == "consolidated"
    rt.clock.current = start + timedelta(days=1)  # the questions come the day after
    written: set[str] = set()
    for info in rt.store.list(user, LEDGER_DIR):
        stored = rt.store.get(user, info.path)
        written |= bullets(stored.content if stored else "")
        memory.archived_days += "/archive/" in info.path
        memory.ledger_days += 1
    annotated = {_normal(t) for facts in facts_of.values() for t, _ in facts}
    memory.flushed, memory.kept = len(annotated), len(annotated & written)
    memory.covered = {
        dia for dia, texts in evidence.facts.items() if any(t in written for t in texts)
    }
    stored = rt.store.get(user, MEMORY_FILE)
    memory.memory_md = stored.content if stored else ""
    memory.seconds = time.perf_counter() - started
    return memory


# -- asking and scoring ----------------------------------------------------------------


def ask(memory: Memory, key: str, items: list[Question]) -> list[Row]:
    """Every question as the first message of a new session under setting ``key``
    (``arm budget floor``, or ``memory``): one row per question. Arms: ``memory``
    (MEMORY.md only), ``recall`` (recall alone), ``both``, ``messages`` (recall alone,
    past messages recalled too), ``shipped`` (MEMORY.md and recall with past messages)."""
    arm, budget, floor = parse_key(key)
    rt, user = memory.rt, memory.user
    messages = arm in ("messages", "shipped")
    # both of LoCoMo's speakers are people (the import gives the second the assistant's
    # role): the messages arm recalls both, as a deployment recording conversations
    # between people would configure it; shipped is the product's default (the user's own)
    roles = "user,assistant" if arm == "messages" else "user"
    rt.settings = base_settings(
        recall_max_tokens=budget,
        recall_min_score=floor,
        recall_messages=messages,
        recall_message_roles=roles,
    )
    present = rt.store.get(user, MEMORY_FILE) is not None
    alone = arm in ("recall", "messages")  # recall without MEMORY.md
    if alone and present:
        rt.store.delete(user, MEMORY_FILE)
    elif not alone and not present:
        rt.store.put(user, MEMORY_FILE, memory.memory_md)
    metrics = Metrics()
    rows: list[Row] = []
    for n, q in enumerate(items):
        session = f"q-{key.replace(' ', '-')}-{n}"
        result = run_turn(rt, user, session, q.text)
        record = json.loads(rt.store.text(user, turn_path(session, result.turn)))  # type: ignore[attr-defined]
        (body,) = memory.endpoint.bodies  # one model call: the reply has no tool call
        memory.endpoint.bodies.clear()
        rt.queue.post_turn.clear()  # type: ignore[attr-defined]  # never flushed: memory stays
        metrics.clear_metrics()  # in-process: no handler flushes them
        lines = input_lines(body)
        found = [memory.evidence.present(dia, lines) for dia in q.evidence]
        rows.append(
            {
                "conv": q.conv,
                "category": q.category,
                "key": key,
                "all": all(found),
                "any": any(found),
                "tokens": result.memory_tokens,
                "lines": len(record["memory"]["recalled"]),
            }
        )
    return rows


#: how deep in recall's ranking the evidence is looked for
RANK_CUTS = (10, 30, 70, 100, 200)


def evidence_ranks(memory: Memory, items: list[Question]) -> list[Row]:
    """Where recall's own ranking (``ranked`` over the ledgers, the question as query)
    puts each question's evidence: a row per question and cut N (key ``top N``), true
    when the evidence turns' observations are all (``all``) or some (``any``) among the
    N best lines. What no budget can beat: a line ranked below what it holds is never
    recalled."""
    files = load_ledgers(memory.rt, memory.user, MemoryIndexCache())
    total = sum(len(index.lines) for _, index in files)
    rows: list[Row] = []
    for q in items:
        hits = search_files(files, recall_query(q.text, None), "ranked", total)
        texts = [_normal(hit.text) for hit in hits]
        ranks = []
        for dia in q.evidence:
            facts = memory.evidence.facts.get(dia, set())
            found = (i for i, text in enumerate(texts) if any(f in text for f in facts))
            ranks.append(next(found, total))
        for cut in RANK_CUTS:
            row = {"conv": q.conv, "category": q.category, "key": f"top {cut}", "tokens": 0}
            rows.append(row | {"all": max(ranks) < cut, "any": min(ranks) < cut})
    return rows


def ceiling(memory: Memory, items: list[Question]) -> list[Row]:
    """What any arm could reach: every evidence turn with an observation in the ledgers."""
    return [
        {
            "conv": q.conv,
            "category": q.category,
            "key": "ceiling",
            "all": all(d in memory.covered for d in q.evidence),
            "any": any(d in memory.covered for d in q.evidence),
            "tokens": 0,
        }
        for q in items
    ]


def summarise(rows: list[Row], convs: tuple[str, ...]) -> dict[str, dict[str, dict[str, Any]]]:
    """{key: {"all" | "<category>": {n, all, any, tokens mean, p50, p90, max}}}."""
    groups: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["conv"] in convs:
            groups[row["key"]]["all"].append(row)
            groups[row["key"]][str(row["category"])].append(row)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key, by_group in groups.items():
        out[key] = {}
        for group, members in by_group.items():
            tokens = sorted(r["tokens"] for r in members)
            out[key][group] = {
                "n": len(members),
                "all": round(sum(r["all"] for r in members) / len(members), 3),
                "any": round(sum(r["any"] for r in members) / len(members), 3),
                "tokens_mean": round(statistics.fmean(tokens)),
                "tokens_p50": tokens[len(tokens) // 2],
                "tokens_p90": tokens[min(len(tokens) - 1, int(0.9 * len(tokens)))],
                "tokens_max": tokens[-1],
                "lines_mean": round(statistics.fmean(r.get("lines", 0) for r in members), 1),
            }
    return out
