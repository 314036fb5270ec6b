"""LoCoMo retrieval: recall@k of thread search (turns) and memory search (observations).

What is the dataset's and what is ours: the observations (LoCoMo's facts about each
session) and their links to turns (each observation's dia_ids) are the dataset's
annotations, written by its authors with a model; nothing here extracts them. The bench
stores them as a user's memory and measures how well the product's searches find them
and the turns.

Each LoCoMo conversation becomes one user of its own local stack (`python -m
local_stack`, the real handlers on moto; two stacks run at a time), loaded only through
the public API:

* every LoCoMo session is one session, imported with POST /v1/sessions/{id}/import; the
  first speaker's lines are ``user`` messages and the second's ``assistant`` ones, each
  with its session's date and the speaker's name in front ("Caroline: ..."), an image
  turn with its caption;
* every session's observations are saved with POST /v1/memory/save, one line per fact
  ending in ``[D<session>:<turn>]`` (how a hit is mapped back to its turns), dated with
  their session, in one save per session whose ``source`` names every turn of that
  session: the granularity a flush of an imported session writes (one section for the
  whole session), not the annotations' exact turns, which no flush knows.

The flush trigger is ``never`` (the offline stand-in model would otherwise write its own
lines next to the observations) and the schedule is parked, so the memory holds exactly
the observations and the thread index exactly the turns.

For every question with evidence, the question text is sent as the query to
POST /v1/sessions/search and POST /v1/memory/search (limit 25). Recall@k is LoCoMo's:
the share of a question's evidence dia_ids among the top k hits (a thread hit is mapped
back to its dia_id through its session, turn and text; a memory hit by the id at the end
of its line). Questions whose evidence names no real turn are left out; the nine
malformed evidence strings the data holds are split and normalised first.

More tables are computed in-process on the library's own index (no stack, seconds):

* plain BM25 (k1 1.5, b 0.75, lower-cased alphanumeric words, a small stop list, one
  index per conversation): the baseline a user would write in an afternoon;
* ``ranked`` without the links between facts and turns (``FACT_WEIGHT`` and
  ``SOURCE_WEIGHT`` 0), on tuning and held-out;
* the source granularity: the same memory with each save's source naming the exact turns
  of the annotations, 3-turn windows around them, the whole session, or nothing, on
  tuning and held-out;
* an ablation of what ``ranked`` does, one idea removed at a time, on the tuning
  conversations only; with the ideas tried and not kept (``bench.ranking_ideas``:
  pseudo-relevance feedback, query words side by side, query coverage) added one at a
  time.

Only conv-26, conv-30, conv-41, conv-42 and conv-43 were looked at while tuning; the
held-out five are the scorecard.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

from bench import ranking_ideas
from bench.common import (
    HELD_OUT,
    NEVER_ALIGN,
    TUNING,
    locomo,
    sessions,
    switched,
    turn_text,
    wait_jobs_done,
)
from local_stack.process import LocalStackProcess, start_local_stack

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

TITLE = "LoCoMo retrieval (turns and observations, through the public API)"
KS = (5, 10, 25)
LIMIT = max(KS)
MODES = ("ranked", "phrase", "all", "any")
CATEGORIES = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain", 5: "adversarial"}
TARGET, HEADING = 0.60, 0.70
#: the stacks' embedding model (``make dev``'s): ranked search fuses words and meaning
EMBEDDING = os.environ.get("BENCH_EMBEDDING_MODEL", "local:multilingual-e5-small")
#: LoCoMo paper, Table 3 (DRAGON retriever): recall@k overall and by category
DRAGON = {
    "turn": {
        5: {"all": 0.567, 4: 0.680, 1: 0.354, 2: 0.704, 3: 0.331, 5: 0.439},
        10: {"all": 0.662, 4: 0.777, 1: 0.466, 2: 0.773, 3: 0.408, 5: 0.547},
        25: {"all": 0.767, 4: 0.871, 1: 0.625, 2: 0.835, 3: 0.526, 5: 0.663},
    },
    "observation": {
        5: {"all": 0.562, 4: 0.671, 1: 0.414, 2: 0.731, 3: 0.351, 5: 0.377},
        10: {"all": 0.613, 4: 0.705, 1: 0.509, 2: 0.764, 3: 0.376, 5: 0.451},
        25: {"all": 0.675, 4: 0.747, 1: 0.606, 2: 0.803, 3: 0.490, 5: 0.535},
    },
}
_DIA = re.compile(r"D(\d+):0*(\d+)")
_LINE_IDS = re.compile(r"\[((?:D\d+:\d+)(?:, D\d+:\d+)*)\]\s*$")
_ZONE = ZoneInfo("UTC")


# -- the data ------------------------------------------------------------------------


def dia_ids(raw: str | list[str]) -> list[str]:
    """Normalised dia_ids in an evidence or observation field ("D8:6; D9:17", "D30:05")."""
    parts = [raw] if isinstance(raw, str) else raw
    return [f"D{int(s)}:{int(t)}" for part in parts for s, t in _DIA.findall(part)]


def session_start(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" -> an aware datetime (the data gives no zone: UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=_ZONE)


@dataclass
class Question:
    conv: str
    category: int
    text: str
    evidence: list[str]


def questions(conv: str) -> list[Question]:
    sample = locomo()[conv]
    real = {t["dia_id"] for _, _, turns in sessions(sample) for t in turns}
    out = []
    for qa in sample["qa"]:
        evidence = list(dict.fromkeys(e for e in dia_ids(qa.get("evidence", [])) if e in real))
        if evidence:
            out.append(Question(conv, int(qa["category"]), qa["question"], evidence))
    return out


def message_text(turn: dict[str, Any], speaker: bool = True) -> str:
    return f"{turn['speaker']}: {turn_text(turn)}" if speaker else turn_text(turn)


def observations(sample: dict[str, Any]) -> list[tuple[int, list[tuple[str, list[str]]]]]:
    """(session number, [(fact, dia_ids)]) in session order; a session's facts in the
    data's order (the first speaker's, then the second's)."""
    out = []
    for key, by_speaker in sample["observation"].items():
        number = int(key.split("_")[1])
        facts = [(text, dia_ids(ref)) for items in by_speaker.values() for text, ref in items]
        out.append((number, [(t, ids) for t, ids in facts if ids and t.strip()]))
    return sorted(out)


def fact_line(text: str, ids: list[str]) -> str:
    return f"- {' '.join(text.split())} [{', '.join(ids)}]"


TurnKey = tuple[str, int]  # (session id, turn number) in the product


def turn_keys(sample: dict[str, Any]) -> dict[str, TurnKey]:
    """dia_id -> the (session, turn) an import into fresh sessions gives it: a turn starts
    at each first-speaker (``user``) message and at a session's first message."""
    first_speaker = sample["conversation"]["speaker_a"]
    out: dict[str, TurnKey] = {}
    for number, _, turns in sessions(sample):
        turn = 0
        for i, t in enumerate(turns):
            if t["speaker"] == first_speaker or i == 0:
                turn += 1
            out[t["dia_id"]] = (f"s{number:02d}", turn)
    return out


#: what a save's ``source`` names: the annotations' exact turns, 3-turn windows around
#: them, every turn of the session (what a flush of an imported session names), nothing
Granularity = Literal["turns", "window", "session", "none"]
GRANULARITIES: tuple[Granularity, ...] = ("session", "window", "turns", "none")
#: the granularity of the public-API load and of every in-process table but the ablation's
HEADLINE: Granularity = "session"


def saves(
    facts: list[tuple[str, list[str]]],
    where: dict[str, TurnKey],
    source: Granularity = "turns",
) -> list[tuple[str | None, tuple[int, ...], list[str]]]:
    """A session's facts as memory saves: (source session, source turns, lines), one save
    per group of facts with the same source, in the order the groups first appear. The
    source is the turns the facts' dia_ids name (``turns``), those turns and their
    neighbours in the session (``window``), every turn of the session (``session``), or
    none. Facts whose dia_ids name no known turn, or turns of several sessions, have no
    source."""
    last: dict[str, int] = {}
    for session, turn in where.values():
        last[session] = max(last.get(session, 0), turn)
    groups: dict[tuple[TurnKey, ...], list[str]] = {}
    for text, ids in facts:
        known = all(i in where for i in ids)
        keys = tuple(sorted({where[i] for i in ids})) if known else ()
        if len({session for session, _ in keys}) != 1 or source == "none":
            keys = ()
        elif source == "window":
            keys = tuple(
                sorted(
                    {
                        (session, n)
                        for session, turn in keys
                        for n in range(max(1, turn - 1), min(last[session], turn + 1) + 1)
                    }
                )
            )
        elif source == "session":
            session = keys[0][0]
            keys = tuple((session, n) for n in range(1, last[session] + 1))
        groups.setdefault(keys, []).append(fact_line(text, ids))
    return [
        (keys[0][0] if keys else None, tuple(t for _, t in keys), lines)
        for keys, lines in groups.items()
    ]


def _normal(text: str) -> str:
    return " ".join(text.split())


# -- recall --------------------------------------------------------------------------


def recall(evidence: list[str], ranked: list[list[str]]) -> dict[int, float]:
    """The share of ``evidence`` among the ids of the top k hits, for each k."""
    wanted = set(evidence)
    return {k: len(wanted & {i for hit in ranked[:k] for i in hit}) / len(wanted) for k in KS}


Row = tuple[str, int, str, dict[int, float]]  # conv, category, "unit mode", recall


def aggregate(rows: list[Row], convs: tuple[str, ...]) -> dict[str, dict[str, dict[str, Any]]]:
    """{"unit mode": {"all"|"1-4"|"<category>": {"n": n, "5": r, "10": r, "25": r}}}."""
    sums: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, Counter[str]] = {}
    for conv, category, key, values in rows:
        if conv not in convs:
            continue
        for group in ("all", "1-4" if category != 5 else None, str(category)):
            if group is None:
                continue
            row = sums.setdefault(key, {}).setdefault(group, [0.0] * len(KS))
            for n, k in enumerate(KS):
                row[n] += values[k]
            counts.setdefault(key, Counter())[group] += 1
    return {
        key: {
            group: {
                "n": counts[key][group],
                **{str(k): round(total[n] / counts[key][group], 3) for n, k in enumerate(KS)},
            }
            for group, total in by_group.items()
        }
        for key, by_group in sums.items()
    }


# -- the local stack and the public API -----------------------------------------------


@contextmanager
def local_stack() -> Iterator[LocalStackProcess]:
    """`python -m local_stack` on free ports, flush trigger ``never``, schedule parked."""
    stack = start_local_stack(
        {
            "HARNESS_MODEL": "offline",
            "HARNESS_MEMORY_MODEL": "offline",
            "HARNESS_COMPACTION_MODEL": "offline",
            "HARNESS_FLUSH_TRIGGER": "never",
            "HARNESS_EMBEDDING_MODEL": EMBEDDING,
        },
        schedule_seconds=86400,
        timeout=120,
    )
    try:
        yield stack
    finally:
        stack.stop()


@dataclass
class Loaded:
    """Where each LoCoMo turn landed: (session id, turn) -> [(message text, dia_id)]."""

    conv: str
    user: str
    turns: dict[tuple[str, int], list[tuple[str, str]]]
    requests: int
    seconds: float


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text}")
    return response.json() if response.content else {}


def load(stack: LocalStackProcess, conv: str) -> Loaded:
    """Import every session and save every observation of ``conv`` as its own user."""
    started = time.perf_counter()
    sample = locomo()[conv]
    user = f"locomo-{conv}"
    first_speaker = sample["conversation"]["speaker_a"]
    where: dict[tuple[str, int], list[tuple[str, str]]] = {}
    requests = 0
    last_text = ""
    with stack.client(user, timeout=120) as client:
        for number, date, turns in sessions(sample):
            session_id = f"s{number:02d}"
            start = session_start(date)
            messages = [
                {
                    "role": "user" if t["speaker"] == first_speaker else "assistant",
                    "content": message_text(t),
                    "timestamp": (start + timedelta(seconds=30 * i)).isoformat(),
                }
                for i, t in enumerate(turns)
            ]
            body = _ok(
                client.post(f"/v1/sessions/{session_id}/import", json={"messages": messages})
            )
            requests += 1
            turn = body["first_turn"] - 1
            for i, (message, t) in enumerate(zip(messages, turns, strict=True)):
                if message["role"] == "user" or i == 0:
                    turn += 1  # the importer starts a turn at each user message
                where.setdefault((session_id, turn), []).append(
                    (_normal(message["content"]), t["dia_id"])
                )
            last_text = messages[-1]["content"]
        dates = {number: session_start(date) for number, date, _ in sessions(sample)}
        dia_where = {dia: key for key, pairs in where.items() for _, dia in pairs}
        for number, facts in observations(sample):
            if number not in dates:
                continue
            for source_session, source_turns, lines in saves(facts, dia_where, HEADLINE):
                # learned on the session's date, from the turns of that session
                save: dict[str, Any] = {
                    "content": "\n".join(lines),
                    "timestamp": dates[number].isoformat(),
                }
                if source_session is not None:
                    save["source"] = {"session_id": source_session, "turns": list(source_turns)}
                _ok(client.post("/v1/memory/save", json=save))
                requests += 1
        _wait_indexed(client, last_text)
    wait_jobs_done(stack)
    return Loaded(conv, user, where, requests, time.perf_counter() - started)


def _wait_indexed(client: httpx.Client, last_text: str, timeout: float = 600) -> None:
    """Post-turn jobs run in order per user, so the last message indexed means all are;
    with an embedding model, the last message found by meaning too means every message
    has its vector (the job embeds after indexing)."""
    deadline = time.monotonic() + timeout
    text = _normal(last_text)[:200]
    phrase = {"query": text, "match_mode": "phrase", "limit": 1}
    ranked = {"query": text, "match_mode": "ranked", "limit": 1}
    while time.monotonic() < deadline:
        if _ok(client.post("/v1/sessions/search", json=phrase))["hits"]:
            hits = _ok(client.post("/v1/sessions/search", json=ranked))["hits"]
            if hits and hits[0].get("matched", "both") != "words":
                return
        time.sleep(0.5)
    raise RuntimeError("the thread index (or its vectors) did not catch up")


def _thread_ids(loaded: Loaded, hit: dict[str, Any]) -> list[str]:
    candidates = loaded.turns.get((hit["session_id"], hit["turn"]), [])
    text = _normal(hit["text"])
    return [dia for message, dia in candidates if message == text][:1]


def _memory_ids(hit: dict[str, Any]) -> list[str]:
    found = _LINE_IDS.search(hit["text"])
    return found.group(1).split(", ") if found else []


def ask(
    stack: LocalStackProcess, loaded: Loaded, items: list[Question], modes: tuple[str, ...]
) -> list[Row]:
    """Every question to both searches in every mode: one recall row per (question, search)."""
    local = threading.local()

    def one(question: Question) -> list[Row]:
        if not hasattr(local, "client"):
            local.client = stack.client(loaded.user, timeout=120)
        out: list[Row] = []
        for mode in modes:
            body = {"query": question.text, "match_mode": mode, "limit": LIMIT}
            turns = _ok(local.client.post("/v1/sessions/search", json=body))["hits"]
            facts = _ok(local.client.post("/v1/memory/search", json=body))["hits"]
            found = [_thread_ids(loaded, h) for h in turns]
            out.append(
                (question.conv, question.category, f"turn {mode}", recall(question.evidence, found))
            )
            found = [_memory_ids(h) for h in facts]
            out.append(
                (
                    question.conv,
                    question.category,
                    f"observation {mode}",
                    recall(question.evidence, found),
                )
            )
        return out

    with ThreadPoolExecutor(max_workers=4) as pool:
        return [row for rows in pool.map(one, items) for row in rows]


def observation_ceiling(convs: tuple[str, ...]) -> float:
    """Recall any observation retriever could reach with unlimited k: the mean share of
    a question's evidence turns that have at least one observation."""
    shares = []
    for conv in convs:
        covered = {i for _, facts in observations(locomo()[conv]) for _, ids in facts for i in ids}
        shares += [len(covered & set(q.evidence)) / len(q.evidence) for q in questions(conv)]
    return round(sum(shares) / len(shares), 3) if shares else 0.0


# -- in-process: the library's own index, and plain BM25 ------------------------------


@dataclass
class Corpus:
    """One conversation as the two searches index it: texts, groups, dates and dia_ids."""

    turn_texts: list[str]
    turn_groups: list[str]
    turn_days: list[str]  # each message's date as words ("" without date fields)
    turn_ids: list[list[str]]
    turn_keys: list[TurnKey]  # each message's (session, turn) in the product
    fact_text: str  # MEMORY.md as the saves leave it: one block per save
    ledgers: dict[str, str]  # a ledger's date words -> its sections (the saves of that day)


def _day(date_text: str) -> str:
    from agent_harness.memory.engine.index import date_words

    day = session_start(date_text)
    return date_words(day.year, day.month, day.day)


def corpus(
    conv: str, *, speaker: bool = True, dates: bool = True, source: Granularity = HEADLINE
) -> Corpus:
    from agent_harness.memory.facts.ledger import Source

    sample = locomo()[conv]
    day_of = {number: _day(date) if dates else "" for number, date, _ in sessions(sample)}
    where = turn_keys(sample)
    blocks = []
    ledgers: dict[str, list[str]] = {}
    for number, facts in observations(sample):
        for session_id, source_turns, lines in saves(facts, where, source):
            blocks.append("\n".join(lines))
            provenance = (
                Source(session_id, source_turns, via="memory_save").render()
                if session_id is not None
                else "> source: api via=memory_save"
            )
            section = "\n".join(["## Memory Save — (the session's date)", provenance, *lines])
            ledgers.setdefault(day_of.get(number, ""), []).append(section)
    texts, groups, days, ids, keys = [], [], [], [], []
    for number, _, turns in sessions(sample):
        for t in turns:
            texts.append(_normal(message_text(t, speaker)))
            groups.append(str(number))
            days.append(day_of[number])
            ids.append([t["dia_id"]])
            keys.append(where[t["dia_id"]])
    memory = "# Memory\n\n" + "\n\n".join(blocks) + "\n"
    sections = {d: "\n\n".join(b) for d, b in ledgers.items()}
    return Corpus(texts, groups, days, ids, keys, memory, sections)


Searcher = Callable[[str], tuple[list[list[str]], list[list[str]]]]


def library_searcher(c: Corpus) -> Searcher:
    """``ranked`` exactly as the library runs it (under whatever switches are set)."""
    from agent_harness.memory.engine import index as ranking
    from agent_harness.memory.engine.file_index import FileIndex, Links
    from agent_harness.memory.engine.index import LinkedIndexes, search_files

    links = Links([s for s, _ in c.turn_keys], [t for _, t in c.turn_keys])
    turns = FileIndex.from_lines(
        c.turn_texts, 0, groups=c.turn_groups, fields=c.turn_days, links=links
    )
    facts = [("MEMORY.md", FileIndex.build(c.fact_text))] + [
        (f"memory/{n}.md", FileIndex.build(text, day))
        for n, (day, text) in enumerate(c.ledgers.items())
    ]
    source_texts = LinkedIndexes([turns])
    fact_texts = LinkedIndexes([f for _, f in facts if f.linked_groups()], [turns])

    def search(query: str) -> tuple[list[list[str]], list[list[str]]]:
        # the weights as set now (the ablation switches them)
        turn_hits = search_files(
            [("t", turns)], query, "ranked", LIMIT, fact_texts, ranking.FACT_WEIGHT
        )
        fact_hits = search_files(facts, query, "ranked", LIMIT, source_texts, ranking.SOURCE_WEIGHT)
        return (
            [c.turn_ids[h.line - 1] for h in turn_hits],
            [_memory_ids({"text": h.text}) for h in fact_hits],
        )

    return search


_PLAIN_STOP = frozenset(
    "a an the and or of to in on at for is are was were be it this that".split()
)


def _plain_tokens(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _PLAIN_STOP]


def plain_searcher(c: Corpus) -> Searcher:
    """Okapi BM25 (k1 1.5, b 0.75) over lower-cased words: the usual first attempt."""

    def index(docs: list[list[str]]) -> Callable[[list[str]], list[int]]:
        counts = [Counter(d) for d in docs]
        lengths = [len(d) or 1 for d in docs]
        average = sum(lengths) / len(lengths)
        df = Counter(t for d in counts for t in d)

        def top(query: list[str]) -> list[int]:
            scores: dict[int, float] = {}
            for term in dict.fromkeys(query):
                if not df[term]:
                    continue
                idf = math.log(1 + (len(docs) - df[term] + 0.5) / (df[term] + 0.5))
                for n, d in enumerate(counts):
                    tf = d.get(term)
                    if tf:
                        norm = tf + 1.5 * (1 - 0.75 + 0.75 * lengths[n] / average)
                        scores[n] = scores.get(n, 0.0) + idf * tf * 2.5 / norm
            return sorted(scores, key=lambda n: (-scores[n], n))[:LIMIT]

        return top

    fact_lines = [line for line in c.fact_text.splitlines() if line.startswith("- ")]
    turns = index([_plain_tokens(t) for t in c.turn_texts])
    facts = index([_plain_tokens(line) for line in fact_lines])

    def search(query: str) -> tuple[list[list[str]], list[list[str]]]:
        q = _plain_tokens(query)
        return (
            [c.turn_ids[n] for n in turns(q)],
            [_memory_ids({"text": fact_lines[n]}) for n in facts(q)],
        )

    return search


def in_process(convs: tuple[str, ...], make: Callable[[str], Searcher]) -> list[Row]:
    rows: list[Row] = []
    for conv in convs:
        search = make(conv)
        for q in questions(conv):
            turn_hits, fact_hits = search(q.text)
            rows.append((conv, q.category, "turn ranked", recall(q.evidence, turn_hits)))
            rows.append((conv, q.category, "observation ranked", recall(q.evidence, fact_hits)))
    return rows


def lexical_tables(convs: tuple[str, ...]) -> dict[str, Any]:
    """``ranked`` by words alone (the library in process, as the API ranks with
    HARNESS_EMBEDDING_MODEL=off: the same figures), on tuning and held-out."""
    rows = in_process(convs, _searcher)
    tuning = tuple(c for c in convs if c in TUNING)
    held_out = tuple(c for c in convs if c in HELD_OUT)
    return {
        "tuning": aggregate(rows, tuning) if tuning else {},
        "held_out": aggregate(rows, held_out) if held_out else {},
    }


def _searcher(conv: str, /, **options: Any) -> Searcher:
    """The library's ``ranked`` on ``corpus(conv, **options)``."""
    return library_searcher(corpus(conv, **options))


def _align_above() -> int:
    from agent_harness.memory.engine.alignment import ALIGN_ABOVE

    return ALIGN_ABOVE


def ablation(convs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``ranked`` with one idea taken out at a time on ``convs``."""
    from agent_harness.text import tokens

    def unstemmed(text: str, *, folded: bool = False) -> list[str]:
        return tokens(text)  # folding twice changes nothing

    variants: dict[str, tuple[dict[str, Any], dict[str, bool]]] = {
        "ranked as shipped": ({}, {}),
        "without facts read with their source turns": ({"SOURCE_WEIGHT": 0.0}, {}),
        "without turns read with the facts naming them": ({"FACT_WEIGHT": 0.0}, {}),
        "without a long section's facts aligned with the turns they match": (
            {"ALIGN_ABOVE": NEVER_ALIGN},
            {},
        ),
        "with a link to k turns counted whole, not shared (LINK_SHARE 0)": (
            {"LINK_SHARE": 0.0},
            {},
        ),
        "without neighbours as context": ({"CONTEXT_WEIGHT": 0.0}, {}),
        "without stemming and ranking stopwords": ({"terms": unstemmed}, {}),
        "without irregular forms ranked as their base word": ({"_IRREGULAR": {}}, {}),
        "with textbook BM25 (k1 1.2, b 0.75)": ({"K1": 1.2, "B": 0.75}, {}),
        "without speaker names in messages": ({}, {"speaker": False}),
        "without dates as words": ({}, {"dates": False}),
        "all nine removed": (
            {
                "ALIGN_ABOVE": NEVER_ALIGN,
                "SOURCE_WEIGHT": 0.0,
                "FACT_WEIGHT": 0.0,
                "CONTEXT_WEIGHT": 0.0,
                "terms": unstemmed,
                "K1": 1.2,
                "B": 0.75,
            },
            {"speaker": False, "dates": False},
        ),
    }
    from agent_harness.memory.engine import index

    for name, idea in ranking_ideas.tried(index.rank).items():
        variants[name] = ({"rank": idea}, {})
    out: dict[str, dict[str, Any]] = {}
    for name, (switches, options) in variants.items():
        with switched(**switches):
            rows = in_process(convs, partial(_searcher, **options))
        table = aggregate(rows, convs)
        out[name] = {unit: table[f"{unit} ranked"]["all"] for unit in ("turn", "observation")}
    return out


def _ideas_verdict(rows: dict[str, dict[str, Any]]) -> list[str]:
    """What the rows of ideas tried say against the shipped ranking, at recall@5: an idea
    would be kept only if it lifts one unit without lowering the other."""
    shipped = rows.get("ranked as shipped")
    ideas = {n: r for n, r in rows.items() if n.startswith("tried, not kept")}
    if shipped is None or not ideas:
        return []
    units = ("turn", "observation")

    def change(row: dict[str, Any]) -> tuple[list[str], list[str]]:
        delta = {u: row[u]["5"] - shipped[u]["5"] for u in units}
        return [u for u in units if delta[u] > 0], [u for u in units if delta[u] < 0]

    said = []
    for name, row in ideas.items():
        up, down = change(row)
        if up:
            idea = name.split(": ", 1)[1]
            lowers = f" but lowers {' and '.join(down)} recall@5" if down else ""
            said.append(f"{idea} lifts {' and '.join(up)} recall@5{lowers}")
    kept = [n for n, r in ideas.items() if change(r)[0] and not change(r)[1]]
    verdict = "; ".join(said) + ("; " if said else "")
    verdict += (
        "none lifts recall@5 of turns or of observations without lowering the other on the "
        "tuning conversations, so none is in `ranked`"
        if not kept
        else "the table shows a gain for " + ", ".join(n.split(": ", 1)[1] for n in kept)
    )
    return [
        "",
        f"The rows *tried, not kept* add one idea each to the shipped ranking: {verdict} "
        "(an idea is kept only when this table shows it).",
    ]


def _recall_at(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {unit: table[f"{unit} ranked"]["all"] for unit in ("turn", "observation")}


def granularity(splits: dict[str, tuple[str, ...]]) -> dict[str, dict[str, Any]]:
    """``ranked`` as shipped on the same memory with each save's source at each
    granularity: {granularity: {split: {"turn"|"observation": {n, 5, 10, 25}}}}."""
    out: dict[str, dict[str, Any]] = {}
    convs = tuple(c for part in splits.values() for c in part)
    for source in GRANULARITIES:
        rows = in_process(convs, partial(_searcher, source=source))
        out[source] = {
            split: _recall_at(aggregate(rows, part)) for split, part in splits.items() if part
        }
    # the headline as it ranked before links were shared among their turns (kept because
    # the tuning conversations gained; held-out shown, not tuned on)
    with switched(LINK_SHARE=0.0):
        rows = in_process(convs, partial(_searcher, source="session"))
    out["session, unshared"] = {
        split: _recall_at(aggregate(rows, part)) for split, part in splits.items() if part
    }
    return out


def without_links(convs: tuple[str, ...]) -> list[Row]:
    """``ranked`` with no fact read with its source turns and no turn with the facts
    naming it (``SOURCE_WEIGHT`` and ``FACT_WEIGHT`` 0): what the links add."""
    with switched(SOURCE_WEIGHT=0.0, FACT_WEIGHT=0.0):
        return in_process(convs, lambda conv: library_searcher(corpus(conv)))


# -- the benchmark -------------------------------------------------------------------


#: conversations evaluated at once, each on its own local stack (a stack is one process,
#: so two use both cores of the machines this runs on)
STACKS = 2


def evaluate(conv: str, modes: tuple[str, ...]) -> tuple[dict[str, float], list[Row]]:
    """One conversation on a fresh local stack: boot, load, ask. Returns the timings and
    request count, and the recall rows."""
    started = time.perf_counter()
    with local_stack() as stack:
        booted = time.perf_counter()
        loaded = load(stack, conv)
        asked = time.perf_counter()
        # the contrast modes on the tuning five only: they are filters, not rankers
        rows = ask(stack, loaded, questions(conv), modes if conv in TUNING else ("ranked",))
        done = time.perf_counter()
    timings = {
        "boot": booted - started,
        "load": asked - booted,
        "requests": loaded.requests,
        "query": done - asked,
    }
    return timings, rows


def run(quick: bool = False) -> dict[str, Any]:
    convs = ("conv-30",) if quick else TUNING + HELD_OUT
    modes = ("ranked",) if quick else MODES
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=STACKS) as pool:
        done = list(pool.map(lambda conv: evaluate(conv, modes), convs))
    wall = time.perf_counter() - started
    rows = [row for _, conv_rows in done for row in conv_rows]
    loads = {
        conv: {"requests": t["requests"], "seconds": round(t["load"], 1)}
        for conv, (t, _) in zip(convs, done, strict=True)
    }
    boot, load_seconds, ask_seconds = (
        sum(t[k] for t, _ in done) for k in ("boot", "load", "query")
    )
    tuning = tuple(c for c in convs if c in TUNING)
    held_out = tuple(c for c in convs if c in HELD_OUT)
    plain = in_process(convs, lambda conv: plain_searcher(corpus(conv)))
    words = lexical_tables(convs)
    unlinked = without_links(convs)
    return {
        "conversations": list(convs),
        "modes": list(modes),
        "ks": list(KS),
        "target_r5": TARGET,
        "heading_r5": HEADING,
        "embedding_model": EMBEDDING,
        "lexical": words,
        "stack": {
            "stacks": STACKS,
            "wall_seconds": round(wall, 1),
            "boot_seconds": round(boot, 1),
            "load_seconds": round(load_seconds, 1),
            "load_requests": sum(v["requests"] for v in loads.values()),
            "query_seconds": round(ask_seconds, 1),
            "query_requests": sum(
                2 * (len(modes) if c in TUNING else 1) * len(questions(c)) for c in convs
            ),
            "per_conversation": loads,
        },
        "api": {
            "tuning": aggregate(rows, tuning) if tuning else {},
            "held_out": aggregate(rows, held_out) if held_out else {},
            "all": aggregate(rows, convs),
        },
        "plain_bm25": {
            "tuning": aggregate(plain, tuning) if tuning else {},
            "held_out": aggregate(plain, held_out) if held_out else {},
            "all": aggregate(plain, convs),
        },
        "without_links": {
            "tuning": aggregate(unlinked, tuning) if tuning else {},
            "held_out": aggregate(unlinked, held_out) if held_out else {},
            "all": aggregate(unlinked, convs),
        },
        "headline_source": HEADLINE,
        "granularity": granularity({"tuning": tuning, "held_out": held_out}),
        "ablation_tuning": ablation(tuning or convs),
        "observation_ceiling": {
            "tuning": observation_ceiling(tuning),
            "held_out": observation_ceiling(held_out),
        },
        "dragon": {
            unit: {str(k): {str(g): v for g, v in row.items()} for k, row in by_k.items()}
            for unit, by_k in DRAGON.items()
        },
    }


def _r(table: dict[str, Any], key: str, group: str = "all", k: int = 5) -> str:
    row = table.get(key, {}).get(group)
    return f"{row[str(k)]:.3f}" if row else "–"


def report(result: dict[str, Any]) -> str:
    st = result["stack"]
    lines = [
        f"LoCoMo retrieval, {len(result['conversations'])} conversations through the public API "
        f"(loaded in {st['load_seconds']} s with {st['load_requests']} requests; "
        f"{st['query_requests']} searches in {st['query_seconds']} s; summed over "
        f"{st.get('stacks', 1)} stacks at a time, {st.get('wall_seconds', '–')} s in all)",
        f"  {'recall@5/10/25 (all questions)':<44}{'turns':>20}{'observations':>22}",
    ]
    sets = [("held-out", "held_out"), ("tuning", "tuning")]
    for label, part in sets:
        for name, table in (
            ("ours, ranked", result["api"][part]),
            ("plain BM25", result["plain_bm25"][part]),
        ):
            if not table:
                continue
            cells = [
                "/".join(_r(table, f"{unit} ranked", "all", k) for k in KS)
                for unit in ("turn", "observation")
            ]
            lines.append(f"  {label + ': ' + name:<44}{cells[0]:>20}{cells[1]:>22}")
    dragon = result["dragon"]
    cells = [
        "/".join(f"{dragon[u][str(k)]['all']:.3f}" for k in KS) for u in ("turn", "observation")
    ]
    lines.append(f"  {'LoCoMo paper, DRAGON':<44}{cells[0]:>20}{cells[1]:>22}")
    lines.append(f"  target recall@5 >= {result['target_r5']} (heading for {result['heading_r5']})")
    return "\n".join(lines)


def _verdicts(result: dict[str, Any]) -> str:
    """What the numbers say against the target, DRAGON and plain BM25 (read off them)."""
    api, plain, dragon = result["api"], result["plain_bm25"], result["dragon"]
    part = "held_out" if api.get("held_out") else "all"
    scope = "the held-out five" if part == "held_out" else "these conversations"
    out = []
    for unit, noun in (("turn", "Turns"), ("observation", "Observations")):
        ours = [float(_r(api[part], f"{unit} ranked", "all", k)) for k in KS]
        theirs = [dragon[unit][str(k)]["all"] for k in KS]
        base = float(_r(plain[part], f"{unit} ranked", "all"))
        gaps = [o - t for o, t in zip(ours, theirs, strict=True)]
        if min(gaps) > 0:
            against = f"above DRAGON's dense retriever at every k (@5: {theirs[0]:.3f})"
        elif min(gaps) >= -0.01:
            against = f"level with DRAGON (within {-min(gaps):.3f} at every k)"
        else:
            above = sum(g > 0 for g in gaps)
            against = f"above DRAGON at {above} of {len(KS)} k (@5: {theirs[0]:.3f})"
        meets = "meets" if ours[0] >= result["target_r5"] else "misses"
        model = result.get("embedding_model")
        words = result.get("lexical", {}).get(part)
        alone = (
            f"; by words alone (no embedding model) {_r(words, f'{unit} ranked')}" if words else ""
        )
        out.append(
            f"**{noun}**: recall@5 {ours[0]:.3f} on {scope} {meets} the "
            f"{result['target_r5']} target; plain BM25 gets {base:.3f} "
            f"({ours[0] - base:+.3f} for ours){alone}; {against}, "
            + (f"ranking by words and meaning ({model})." if model else "with no embedding model.")
        )
    words = result.get("lexical", {}).get(part)
    if words:
        pairs = [
            f"{noun.lower()} {_r(api[part], f'{unit} ranked', '1-4')} "
            f"(words alone {_r(words, f'{unit} ranked', '1-4')})"
            for unit, noun in (("turn", "Turns"), ("observation", "Observations"))
        ]
        out.append(f"On categories 1-4, recall@5 of {' and '.join(pairs)}.")
    ceiling = result.get("observation_ceiling", {}).get(part)
    if ceiling:
        out.append(
            "Not every evidence turn has an observation: a retriever returning every "
            f"observation of every evidence turn would reach {ceiling:.3f} on {scope}."
        )
    return " ".join(out)


def _row(label: str, table: dict[str, Any], key: str, group: str = "all") -> str:
    return f"| {label} | " + " | ".join(_r(table, key, group, k) for k in KS) + " |"


_SOURCE_NAMES = {
    "session": "naming the whole session",
    "window": "naming 3-turn windows around the annotated turns",
    "turns": "naming the annotated turns",
    "none": "naming no turn",
}


def _granularity_table(result: dict[str, Any]) -> list[str]:
    """Recall@5/10/25 by the granularity of the saves' sources, tuning and held-out."""
    table = result.get("granularity")
    if not table:
        return []
    splits = [s for s in ("tuning", "held_out") if any(s in row for row in table.values())]
    out = [
        "",
        "Source granularity (in-process on the library's index, recall@5 / @10 / @25): the "
        "same observations, each save's source naming the annotations' exact turns, "
        "3-turn windows around them (the turn before and after, within the session), the "
        "whole session (the headline: what a flush of an imported session writes), or "
        "nothing (no link between facts and turns at all). The source only changes "
        "ranking through the links: a fact read with its source turns' messages, a "
        "message read with the facts naming its turn; where a source names more than "
        f"{_align_above()} turns, with the few turns whose messages share the fact's "
        "words ([alignment](architecture.md#facts-read-with-their-turns)), so a whole "
        "session's source comes close to the windows without claiming them.",
        "",
        "| source names | "
        + " | ".join(
            f"{unit}, {split.replace('_', '-')}"
            for split in splits
            for unit in ("turns", "observations")
        )
        + " |",
        "|---|" + "---|" * (2 * len(splits)),
    ]
    labels = {
        "session": "the whole session (headline)",
        "session, unshared": "the whole session, each link counted whole (`LINK_SHARE` 0)",
        "window": "3-turn windows",
        "turns": "the annotated turns",
        "none": "no turn",
    }
    for source, row in table.items():
        cells = [
            " / ".join(f"{row[split][unit][str(k)]:.3f}" for k in KS)
            for split in splits
            for unit in ("turn", "observation")
        ]
        parts = " | ".join(cells)
        out.append(f"| {labels.get(source, source)} | {parts} |")
    return out


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    from bench import plots

    api, plain, dragon = result["api"], result["plain_bm25"], result["dragon"]
    st = result["stack"]
    unlinked = result.get("without_links", {})
    source = result.get("headline_source", "turns")
    parts = [
        f"Conversations: {', '.join(result['conversations'])} (tuning: {', '.join(TUNING)}; "
        f"the other five are held out and were never looked at while tuning). Recall@k is "
        f"LoCoMo's: the share of a question's evidence turns among the top k hits; every "
        f"question with evidence counts (adversarial ones too, as in the paper's overall). "
        f"Target: recall@5 ≥ {result['target_r5']} for turns and observations "
        f"(heading for {result['heading_r5']}).",
        "",
        "**What comes from the dataset**: the observations and their links to turns are "
        "LoCoMo's annotations (facts its authors generated from each session, each naming "
        "the turns it came from); no model of ours wrote or linked them. The turns are "
        "imported as sessions; the observations are saved as memory lines, each ending in "
        "its dia_ids so a hit maps back to its turns. "
        + (
            "Each session's observations are saved at once with a source naming every turn "
            "of that session: the granularity a flush of an imported session writes (one "
            "section per session), since no flush knows which turn a fact came from; "
            "ranking reads each fact with the turns of the session it matches best. The "
            "exact turns of the annotations are a best case, shown in the source-granularity "
            "table below."
            if source == "session"
            else "Each group of observations is saved with a source naming the exact turns "
            "the annotations give."
        ),
        "",
        f"Each conversation runs on its own local stack, {st.get('stacks', 1)} at a time "
        f"({st.get('wall_seconds', '–')} s in all). Loading: {st['load_requests']} API "
        f"requests (imports and saves) in {st['load_seconds']} s; then "
        f"{st['query_requests']} searches in {st['query_seconds']} s (4 clients per stack); "
        f"starting the stacks took {st['boot_seconds']} s (times summed over the "
        "conversations).",
    ]
    parts += ["", _verdicts(result)]
    for unit, label in (
        ("turn", "Turns (POST /v1/sessions/search)"),
        ("observation", "Observations (POST /v1/memory/search)"),
    ):
        parts += [
            "",
            f"**{label}**, recall@5 / @10 / @25:",
            "",
            "| | " + " | ".join(f"R@{k}" for k in KS) + " |",
            "|---|---|---|---|",
        ]
        links = "fact links" if unit == "turn" else "source links"
        for part, name in (("held_out", "held-out"), ("tuning", "tuning"), ("all", "all ten")):
            if api.get(part):
                with_links = f", with {links}" if unlinked.get(part) else ""
                parts.append(
                    _row(f"ours, `ranked`{with_links}, {name}", api[part], f"{unit} ranked")
                )
                if unlinked.get(part):
                    parts.append(
                        _row(
                            f"ours, `ranked`, without {links}, {name}",
                            unlinked[part],
                            f"{unit} ranked",
                        )
                    )
                parts.append(_row(f"plain BM25, {name}", plain[part], f"{unit} ranked"))
        parts.append(
            "| DRAGON (LoCoMo paper, all ten) | "
            + " | ".join(f"{dragon[unit][str(k)]['all']:.3f}" for k in KS)
            + " |"
        )
    main = "held_out" if api.get("held_out") else "all"
    parts += [
        "",
        f"By category, recall@5 ({'held-out' if main == 'held_out' else 'all'} conversations; "
        "DRAGON: all ten):",
        "",
        "| category | n | turns: ours | BM25 | DRAGON | observations: ours | BM25 | DRAGON |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cat, name in CATEGORIES.items():
        n = api[main].get("turn ranked", {}).get(str(cat), {}).get("n", 0)
        cells = []
        for unit in ("turn", "observation"):
            cells += [
                _r(api[main], f"{unit} ranked", str(cat)),
                _r(plain[main], f"{unit} ranked", str(cat)),
                f"{dragon[unit]['5'][str(cat)]:.3f}",
            ]
        parts.append(f"| {name} ({cat}) | {n} | " + " | ".join(cells) + " |")
    if len(result["modes"]) > 1:
        parts += [
            "",
            "The match modes side by side (tuning conversations, recall@5 / @10 / @25). "
            "`phrase`, `all` and `any` are filters in file order, built for an agent that "
            "knows the words it wants; a whole question as the query shows why `ranked` "
            "exists:",
            "",
            "| mode | turns | observations |",
            "|---|---|---|",
        ]
        for mode in result["modes"]:
            cells = [
                " / ".join(_r(api["tuning"], f"{unit} {mode}", "all", k) for k in KS)
                for unit in ("turn", "observation")
            ]
            parts.append(f"| `{mode}` | {cells[0]} | {cells[1]} |")
    parts += _granularity_table(result)
    parts += [
        "",
        "What each idea in `ranked` is worth (in-process on the library's index, tuning "
        f"conversations only, sources {_SOURCE_NAMES.get(source, source)}, "
        "recall@5 / @10 / @25):",
        "",
        "| variant | turns | observations |",
        "|---|---|---|",
    ]
    for name, row in result["ablation_tuning"].items():
        cells = [" / ".join(f"{row[u][str(k)]:.3f}" for k in KS) for u in ("turn", "observation")]
        parts.append(f"| {name} | {cells[0]} | {cells[1]} |")
    parts += _ideas_verdict(result["ablation_tuning"])
    groups = [f"R@{k}" for k in KS]
    scope = "held-out" if main == "held_out" else "all"
    for unit in ("turn", "observation"):
        path = plots.bars(
            img_dir / f"locomo_retrieval-{unit}.png",
            f"LoCoMo {unit}s: recall@k ({scope} conversations)",
            "recall",
            groups,
            {
                "ours, ranked": [float(_r(api[main], f"{unit} ranked", "all", k)) for k in KS],
                "plain BM25": [float(_r(plain[main], f"{unit} ranked", "all", k)) for k in KS],
                "DRAGON (paper)": [dragon[unit][str(k)]["all"] for k in KS],
            },
            hline=(result["target_r5"], "target R@5"),
            ylim=(0, 1),
        )
        parts += ["", f"![{unit} recall]({img_dir.name}/{path.name})"]
    names = [f"{n} ({c})" for c, n in CATEGORIES.items()]
    path = plots.bars(
        img_dir / "locomo_retrieval-categories.png",
        "recall@5 by category",
        "recall@5",
        names,
        {
            f"{unit}s, ours": [
                float(_r(api[main], f"{unit} ranked", str(c)).replace("–", "0")) for c in CATEGORIES
            ]
            for unit in ("turn", "observation")
        }
        | {
            f"{unit}s, DRAGON": [dragon[unit]["5"][str(c)] for c in CATEGORIES]
            for unit in ("turn", "observation")
        },
        ylim=(0, 1),
    )
    parts += ["", f"![recall by category]({img_dir.name}/{path.name})"]
    return "\n".join(parts)
