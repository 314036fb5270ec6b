"""The workspace the search benchmark (bench/memory_search.py) measures: synthetic ledgers
and thread history, stored as the product leaves them, and an S3 request log for moto.

The corpora are synthetic (a seeded Zipf-like draw over 34 function words, 30 topic
words and 3,000 made-up words, with a few planted facts the queries look for), so they
can be generated at any size; no LoCoMo text is used. Thread history: one session a day,
``TURNS_PER_DAY`` turns each (a user message of 8-25 words and a reply of 20-60), from
2025-01-01.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import accumulate, groupby
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

from agent_harness.memory.engine.corpus import refresh_snapshots
from agent_harness.memory.facts.ledger import day_of
from agent_harness.memory.threads import index_turns
from agent_harness.models.base import Message
from agent_harness.paths import LEDGER_DIR, SEGMENT_DIR, SNAPSHOT_DIR, ledger_path, segment_path
from agent_harness.records import TurnRecord
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings
from bench.common import embedded_aws_env
from local_stack.resources import create_resources, function_environment, load_template

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agent_harness.ids import User

FUNCTION = "AgentCallFunction"
START = datetime(2025, 1, 1, tzinfo=UTC)
TURNS_PER_DAY = 20

FUNCTION_WORDS = (
    "the to and a of in is for on that with at it was from about after before next this "
    "we they she he my our will be has have by as not but"
).split()
TOPIC_WORDS = (
    "user prefers window seats tea coffee lisbon march launch deadline project atlas "
    "postgres decided review meeting friday allergic peanuts dentist silva budget "
    "migration kafka invoice design team berlin flight hotel"
).split()
SYLLABLES = "ka lo mi ren tas vo pel dri su nor gan bi te ro shu fa zel mon ir quo".split()
FACTS = (
    "The user prefers window seats on long flights.",
    "The atlas project deadline moved to Friday after the review.",
    "User is allergic to peanuts and told the dentist.",
)


# synthetic text -------------------------------------------------------------------------
class Text:
    """Seeded sentences: Zipf-like word frequencies, a fact planted now and then."""

    def __init__(self, seed: int, fact_rate: float = 1 / 400) -> None:
        self.rng = random.Random(seed)
        made_up = sorted({"".join(self.rng.sample(SYLLABLES, 3)) for _ in range(3_500)})[:3_000]
        words = list(FUNCTION_WORDS)
        for i, word in enumerate(made_up):
            words.append(word)
            if i % 8 == 7 and i // 8 < len(TOPIC_WORDS):
                words.append(TOPIC_WORDS[i // 8])
        self.words = words
        self.cum = list(accumulate(1 / rank**1.07 for rank in range(1, len(words) + 1)))
        self.fact_rate = fact_rate

    def sentence(self, low: int, high: int) -> str:
        if self.rng.random() < self.fact_rate:
            return self.rng.choice(FACTS)
        chosen = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(low, high))
        return " ".join(chosen).capitalize() + "."


def ledger_files(days: int, lines: int, *, whole: bool = False) -> dict[str, str]:
    """MEMORY.md and ``days`` daily ledgers of ``lines`` lines in all: sections of a
    header, a provenance line and up to eight bullets, as flushes write them; each
    section names two turns of that day's session of ``turn_records`` (``whole``: every
    turn of it, as the flush of an imported session does)."""
    text = Text(seed=7)
    files = {"MEMORY.md": "# Memory\n" + "\n".join(f"- {fact}" for fact in FACTS) + "\n"}
    for day in range(days):
        per_day = lines * (day + 1) // days - lines * day // days
        date = (START + timedelta(days=day)).date().isoformat()
        body: list[str] = []
        section = 0
        while len(body) < per_day:
            section += 1
            first = (section * 2 - 2) % TURNS_PER_DAY + 1
            body += [
                f"## Flush — {date}T{8 + section % 12:02d}:00:00Z",
                f"> source: session=s-{date.replace('-', '')} "
                f"turns={f'1-{TURNS_PER_DAY}' if whole else f'{first}-{first + 1}'} "
                "model=offline",
            ]
            body += [f"- {text.sentence(8, 16)}" for _ in range(min(8, per_day - len(body)))]
        files[f"memory/{date}.md"] = "\n".join(body[:per_day])
    return files


def turn_records(days: int) -> list[TurnRecord]:
    """``TURNS_PER_DAY`` turns a day, one session a day, user message and reply each."""
    text = Text(seed=11)
    records = []
    for day in range(days):
        date = START + timedelta(days=day)
        for turn in range(1, TURNS_PER_DAY + 1):
            at = date + timedelta(hours=8, minutes=30 * turn)
            messages = [
                Message(role="user", content=text.sentence(8, 25)),
                Message(role="assistant", content=text.sentence(20, 60)),
            ]
            records.append(
                TurnRecord(
                    session_id=f"s-{date:%Y%m%d}",
                    turn=turn,
                    created_at=at.isoformat().replace("+00:00", "Z"),
                    messages=messages,
                )
            )
    return records


def by_month(records: list[TurnRecord]) -> list[list[TurnRecord]]:
    return [list(g) for _, g in groupby(records, key=lambda r: r.created_at[:7])]


def next_turn(record: TurnRecord, after: int = 1) -> TurnRecord:
    """A turn ``after`` turns past ``record`` in its session (the same day and month)."""
    return record.model_copy(update={"turn": record.turn + after})


# the workspace as the product leaves it ---------------------------------------------------
def store_memory(
    rt: Runtime,
    user: User,
    files: dict[str, str],
    history: list[TurnRecord],
    *,
    snapshots: bool = True,
) -> None:
    """The memory files, a thread history indexed a month at a time, then (``snapshots``)
    every ranked-index snapshot written, as consolidation leaves them (the post-turn job
    refreshes the months it wrote)."""
    for path, content in files.items():
        rt.store.put(user, path, content)
    for month in by_month(history):
        index_turns(rt, user, month)
    if snapshots:
        refresh_snapshots(rt, user)


def job_paths(rt: Runtime, records: list[TurnRecord]) -> set[str]:
    """The files whose snapshots the post-turn job refreshes after ``records``: their days'
    ledgers and their months' segments (as memory.jobs.flush computes them)."""
    zone = rt.settings.zone
    moments = [r.created().astimezone(zone) for r in records]
    return {ledger_path(day_of(m, zone)) for m in moments} | set(map(segment_path, moments))


def snapshot_names(rt: Runtime, user: User) -> list[str]:
    return [i.path for i in rt.store.list(user, SNAPSHOT_DIR)]


def drop_snapshots(rt: Runtime, user: User) -> None:
    """Delete every ranked-index snapshot: the workspace as it was before they existed."""
    for path in snapshot_names(rt, user):
        rt.store.delete(user, path)


@contextmanager
def without_snapshots(rt: Runtime, user: User) -> Iterator[None]:
    """The snapshots deleted for the block, then put back as they were (their entries
    hold the files' ETags, which did not change)."""
    saved = {path: rt.store.get(user, path) for path in snapshot_names(rt, user)}
    drop_snapshots(rt, user)
    try:
        yield
    finally:
        for path, obj in saved.items():
            if obj is not None:
                rt.store.put(user, path, obj.content)


def stored_bytes(rt: Runtime, user: User) -> dict[str, int]:
    """Bytes of the ledgers and segments, and of the snapshots indexing each."""
    ledgers = [i for i in rt.store.list(user, LEDGER_DIR) if i.path.endswith(".md")]
    segments = rt.store.list(user, SEGMENT_DIR)
    snaps = rt.store.list(user, SNAPSHOT_DIR)
    threads = [i for i in snaps if i.path.startswith(f"{SNAPSHOT_DIR}threads-")]
    return {
        "ledgers": sum(i.size for i in ledgers),
        "segments": sum(i.size for i in segments),
        "snapshot_files": len(snaps),
        "snapshots_memory": sum(i.size for i in snaps) - sum(i.size for i in threads),
        "snapshots_threads": sum(i.size for i in threads),
    }


# request counting on moto ----------------------------------------------------------------
#: how long each request is held before it is sent (a stand-in for the network): moto
#: answers in-process in well under a millisecond, so without it requests issued together
#: often finish before the next starts, and the peak in flight would depend on timing
LATENCY_S = 0.01


class RequestLog:
    """Every S3 API call of one client, by operation and key, and the peak in flight
    (each request held ``LATENCY_S`` first)."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, str]] = []
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()
        events = client.meta.events
        events.register("before-parameter-build.s3", self._record)
        events.register("before-call.s3", self._start)
        events.register("after-call.s3", self._end)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            self.calls.append((model.name, str(params.get("Key") or params.get("Prefix") or "")))

    def _start(self, **_: Any) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        time.sleep(LATENCY_S)

    def _end(self, **_: Any) -> None:
        with self._lock:
            self.in_flight -= 1

    def take(self, classify: Callable[[str, str], str]) -> dict[str, int]:
        """Counts since the last take, by ``classify(operation, key)``, plus the peak."""
        with self._lock:
            counts = Counter(classify(op, key) for op, key in self.calls)
            out = {**counts, "total": len(self.calls), "peak_in_flight": self.peak}
            self.calls, self.peak = [], 0
        return out


@contextmanager
def s3_runtime() -> Iterator[tuple[Runtime, RequestLog]]:
    """A Runtime on the real S3 store, moto in-process, resources from template.yaml."""
    embedded_aws_env()
    with mock_aws():
        clients = {n: boto3.client(n, region_name="us-east-1") for n in ("s3", "dynamodb", "sqs")}
        resolver = create_resources(load_template(), clients)
        env = function_environment(resolver, FUNCTION)
        settings = Settings.from_env({**env, "TIKTOKEN_CACHE_DIR": ""})
        yield Runtime.from_settings(settings, clients=clients), RequestLog(clients["s3"])
