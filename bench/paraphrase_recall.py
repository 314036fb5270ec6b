"""Paraphrase recall: does memory search find a fact asked about in other words?

The data (bench/data/paraphrase.json, hand-written, checked by
tests/unit/test_paraphrase_data.py): facts a user saves in the first person across many
domains ("My daughter Mia is allergic to peanuts."), each with one question worded unlike
it ("Which food must my kid never eat?") that shares no term with it under the product's
own ``agent_harness.text.terms`` (names included); distractors on nearby topics that
answer no question (some share words with other facts' questions, so a lexical search
finds them); and questions nothing in memory answers ("What is my blood type?"). The
facts are split into ``tune`` and ``held_out`` halves: fusion weights may be tuned on the
first only; the second is the scorecard.

One local stack (`python -m local_stack`, the real handlers on moto) per embedding
setting, ``HARNESS_EMBEDDING_MODEL`` ``off`` (lexical only) and the local model, flush
trigger ``never`` (the offline model writes nothing of its own) and the schedule parked,
so the memory holds exactly the saved lines. Through the public API only: every fact and
distractor saved with POST /v1/memory/save, one save per line, in a seeded shuffle; then
each question sent to POST /v1/memory/search twice, with ``match_mode`` ``ranked`` and
with only the query (what an MCP client sends), ``limit`` 5; and, for the held-out and
irrelevant questions, to the ``memory_search`` tool over the stack's /mcp with only
``{"query"}`` (the official MCP SDK's client), its first five hits counted.

A hit finds a fact when its text contains the fact's text (a hit is the stored line,
``- [save:api] <text>``). R@k: the share of questions whose fact is among the first k
hits, for tune and held-out separately; ``empty``: the share of irrelevant questions
answered with no hit at all. Latency: each search's round trip, p50 and p95.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from bench.common import ROOT, wait_jobs_done
from local_stack.process import LocalStackProcess, start_local_stack

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

TITLE = "Paraphrase recall (memory search by meaning, through the public API)"
DATA = ROOT / "bench" / "data" / "paraphrase.json"
SEED = 20260612
K = 5
TARGET_R5 = 0.90
#: label -> HARNESS_EMBEDDING_MODEL of its stack
SETTINGS = {"lexical": "off", "local e5-small": "local:multilingual-e5-small"}
#: the explicit search: what a client asking for hybrid ranking sends
EXPLICIT_MODE = "ranked"
#: label -> what it is
PATHS = {
    "api ranked": f'POST /v1/memory/search {{"query", "match_mode": "{EXPLICIT_MODE}", '
    f'"limit": {K}}}',
    "api default": f'POST /v1/memory/search {{"query", "limit": {K}}}',
    "mcp default": 'MCP memory_search {"query"} (held-out and irrelevant questions)',
}
SPLITS = ("tune", "held_out")
#: quick: this many facts of each half, and this many distractors
QUICK_PER_SPLIT, QUICK_DISTRACTORS = 15, 20
USER = "paraphrase-bench"


# -- the data ------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    id: str
    domain: str
    text: str
    question: str = ""  # empty for a distractor


@dataclass(frozen=True)
class Dataset:
    facts: tuple[Fact, ...]
    distractors: tuple[Fact, ...]
    irrelevant: tuple[tuple[str, str], ...]  # (id, question)
    split: dict[str, str]  # fact id -> "tune" | "held_out"


@cache
def raw_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def dataset(quick: bool = False) -> Dataset:
    """The whole set, or for ``quick`` a seeded sample: ``QUICK_PER_SPLIT`` facts of each
    half and ``QUICK_DISTRACTORS`` distractors (every irrelevant question either way)."""
    raw = raw_data()
    facts = [Fact(f["id"], f["domain"], f["text"], f["question"]) for f in raw["facts"]]
    distractors = [Fact(d["id"], d["domain"], d["text"]) for d in raw["distractors"]]
    split = {i: name for name in SPLITS for i in raw["split"][name]}
    if quick:
        rng = random.Random(SEED)
        chosen: set[str] = set()
        for name in SPLITS:
            chosen |= set(rng.sample([f.id for f in facts if split[f.id] == name], QUICK_PER_SPLIT))
        facts = [f for f in facts if f.id in chosen]
        kept = {d.id for d in rng.sample(distractors, QUICK_DISTRACTORS)}
        distractors = [d for d in distractors if d.id in kept]
    irrelevant = tuple((q["id"], q["question"]) for q in raw["irrelevant"])
    return Dataset(tuple(facts), tuple(distractors), irrelevant, split)


def save_order(data: Dataset) -> list[str]:
    """Every line to save, facts and distractors mixed in a seeded shuffle."""
    lines = [f.text for f in (*data.facts, *data.distractors)]
    random.Random(SEED).shuffle(lines)
    return lines


# -- searching -----------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    texts: tuple[str, ...]  # the first K hits' texts
    seconds: float
    mode: str | None  # the match mode the answer names


def rank(fact: str, texts: tuple[str, ...]) -> int:
    """1-based position of the first hit holding ``fact`` among the first K, else 0."""
    return next((n for n, text in enumerate(texts[:K], 1) if fact in text), 0)


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text}")
    body: dict[str, Any] = response.json() if response.content else {}
    return body


def search_api(client: httpx.Client, query: str, explicit: bool) -> Answer:
    body: dict[str, Any] = {"query": query, "limit": K}
    if explicit:
        body["match_mode"] = EXPLICIT_MODE
    started = time.perf_counter()
    answer = _ok(client.post("/v1/memory/search", json=body))
    seconds = time.perf_counter() - started
    texts = tuple(str(h["text"]) for h in answer["hits"][:K])
    return Answer(texts, seconds, answer.get("match_mode"))


def search_mcp(stack: LocalStackProcess, queries: list[str]) -> list[Answer] | None:
    """Each query to the ``memory_search`` tool with only ``{"query"}``, over one
    connection of the official SDK's client; None without the SDK."""
    try:
        import anyio
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:
        return None

    async def main() -> list[Answer]:
        out: list[Answer] = []
        async with (
            httpx2.AsyncClient(headers={"X-User-Id": USER}, timeout=120) as http,
            Client(streamable_http_client(f"{stack.url}/mcp", http_client=http)) as client,
        ):
            for query in queries:
                started = time.perf_counter()
                result = await client.call_tool("memory_search", {"query": query})
                seconds = time.perf_counter() - started
                if result.is_error:
                    raise RuntimeError(f"memory_search {query!r}: {result.content}")
                content = result.structured_content or {}
                texts = tuple(str(h["text"]) for h in content.get("hits", [])[:K])
                out.append(Answer(texts, seconds, content.get("match_mode")))
        return out

    with warnings.catch_warnings():  # the SDK warns that ping is gone at its newest protocol
        warnings.simplefilter("ignore", UserWarning)
        return anyio.run(main)


# -- one embedding setting on its own stack ------------------------------------------


def _stack(model: str) -> LocalStackProcess:
    return start_local_stack(
        {
            "HARNESS_MODEL": "offline",
            "HARNESS_MEMORY_MODEL": "offline",
            "HARNESS_COMPACTION_MODEL": "offline",
            "HARNESS_FLUSH_TRIGGER": "never",
            "HARNESS_EMBEDDING_MODEL": model,
        },
        schedule_seconds=86400,
        timeout=600,  # a local embedding model may be loaded (or fetched) at start
    )


def _load(client: httpx.Client, lines: list[str]) -> dict[str, int]:
    saved = held = 0
    for line in lines:
        answer = _ok(client.post("/v1/memory/save", json={"content": line}))
        saved += int(answer.get("saved", 0))
        held += int(answer.get("held", 0))
    if saved != len(lines) or held:
        raise RuntimeError(f"{len(lines)} lines saved as {saved}, {held} held for review")
    return {"saved": saved, "held": held}


def one_setting(model: str, data: Dataset) -> dict[str, Any]:
    """Load the memory on a fresh stack and ask every question by every path."""
    started = time.perf_counter()
    stack = _stack(model)
    boot = time.perf_counter() - started
    questions = [(f.id, f.question) for f in data.facts] + list(data.irrelevant)
    mcp_ids = [f.id for f in data.facts if data.split[f.id] == "held_out"]
    mcp_ids += [i for i, _ in data.irrelevant]
    text_of = dict(questions)
    answers: dict[str, dict[str, Answer]] = {}
    try:
        with stack.client(USER, timeout=120) as client:
            started = time.perf_counter()
            loaded = _load(client, save_order(data))
            wait_jobs_done(stack)  # every save's vectors stored by its index job
            load = time.perf_counter() - started
            started = time.perf_counter()
            for path, explicit in (("api ranked", True), ("api default", False)):
                answers[path] = {i: search_api(client, q, explicit) for i, q in questions}
        mcp = search_mcp(stack, [text_of[i] for i in mcp_ids])
        if mcp is not None:
            answers["mcp default"] = dict(zip(mcp_ids, mcp, strict=True))
        queries = time.perf_counter() - started
    finally:
        stack.stop()
    return {
        "model": model,
        **loaded,
        "boot_seconds": round(boot, 1),
        "load_seconds": round(load, 1),
        "query_seconds": round(queries, 1),
        "paths": {path: score(found, data) for path, found in answers.items()},
    }


# -- the figures ---------------------------------------------------------------------


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


def score(answers: dict[str, Answer], data: Dataset) -> dict[str, Any]:
    """R@1, R@5 and MRR@5 per half, the irrelevant questions' empty share, latency, the
    share of answers whose first K hits hold one line twice (a MEMORY.md line and its
    ledger copy), the match modes the answers named, and each question's rank (0: not in
    the first K)."""
    ranks = {f.id: rank(f.text, answers[f.id].texts) for f in data.facts if f.id in answers}
    out: dict[str, Any] = {}
    for split in SPLITS:
        got = [r for i, r in ranks.items() if data.split[i] == split]
        if got:
            out[split] = {
                "n": len(got),
                "r1": round(sum(r == 1 for r in got) / len(got), 3),
                "r5": round(sum(r > 0 for r in got) / len(got), 3),
                "mrr": round(sum(1 / r for r in got if r) / len(got), 3),
            }
    hits = {i: len(answers[i].texts) for i, _ in data.irrelevant if i in answers}
    if hits:
        out["irrelevant"] = {
            "n": len(hits),
            "empty": round(sum(n == 0 for n in hits.values()) / len(hits), 3),
            "mean_hits": round(statistics.fmean(hits.values()), 2),
        }
    ms = [a.seconds * 1000 for a in answers.values()]
    out["latency_ms"] = {
        "p50": round(_percentile(ms, 0.5), 1),
        "p95": round(_percentile(ms, 0.95), 1),
    }
    repeated = [len(set(a.texts)) < len(a.texts) for a in answers.values()]
    out["repeated"] = round(sum(repeated) / len(repeated), 3) if repeated else 0.0
    out["modes"] = dict(Counter(str(a.mode) for a in answers.values()))
    out["ranks"] = ranks
    out["irrelevant_hits"] = hits
    return out


def run(quick: bool = False) -> dict[str, Any]:
    data = dataset(quick)
    settings = {label: one_setting(model, data) for label, model in SETTINGS.items()}
    return {
        "facts": len(data.facts),
        "distractors": len(data.distractors),
        "irrelevant": len(data.irrelevant),
        "domains": len({f.domain for f in data.facts}),
        "by_split": dict(Counter(data.split[f.id] for f in data.facts)),
        "k": K,
        "target_r5": TARGET_R5,
        "explicit_mode": EXPLICIT_MODE,
        "paths": PATHS,
        "settings": settings,
    }


def _cell(row: dict[str, Any], split: str, key: str) -> str:
    return f"{row[split][key]:.3f}" if split in row else "–"


def _same_as_lexical(result: dict[str, Any], label: str) -> bool:
    """Whether a setting's answers ranked every fact exactly as lexical did (the stack
    then used no embedding model, whatever it was asked for)."""
    lexical, other = result["settings"].get("lexical"), result["settings"][label]
    if lexical is None or label == "lexical":
        return False
    return all(
        other["paths"].get(p, {}).get("ranks") == row.get("ranks")
        and other["paths"].get(p, {}).get("irrelevant_hits") == row.get("irrelevant_hits")
        for p, row in lexical["paths"].items()
    )


def report(result: dict[str, Any]) -> str:
    lines = [
        f"paraphrase recall: {result['facts']} facts ({result['by_split']}), "
        f"{result['distractors']} distractors, {result['irrelevant']} irrelevant questions; "
        f"target held-out R@{result['k']} >= {result['target_r5']}",
        f"  {'setting':<16}{'path':<13}{'tune R@1/R@5':>14}{'held-out R@1/R@5':>18}"
        f"{'empty':>7}{'p50 ms':>8}{'p95 ms':>8}  modes",
    ]
    for label, setting in result["settings"].items():
        for path, row in setting["paths"].items():
            tune = f"{_cell(row, 'tune', 'r1')}/{_cell(row, 'tune', 'r5')}"
            held = f"{_cell(row, 'held_out', 'r1')}/{_cell(row, 'held_out', 'r5')}"
            empty = f"{row['irrelevant']['empty']:.2f}" if "irrelevant" in row else "–"
            lat = row["latency_ms"]
            modes = ", ".join(f"{m} {n}" for m, n in sorted(row["modes"].items()))
            lines.append(
                f"  {label:<16}{path:<13}{tune:>14}{held:>18}{empty:>7}"
                f"{lat['p50']:>8.1f}{lat['p95']:>8.1f}  {modes}"
            )
        if _same_as_lexical(result, label):
            lines.append(f"  ({label}: every answer as lexical: no embedding model in use)")
        repeats = [
            f"{p} {r['repeated']:.0%}" for p, r in setting["paths"].items() if r.get("repeated")
        ]
        if repeats:
            lines.append(
                f"  ({label}: answers with a line twice in the first K: {', '.join(repeats)})"
            )
    return "\n".join(lines)


def _verdict(result: dict[str, Any]) -> str:
    out = []
    for label, setting in result["settings"].items():
        row = setting["paths"].get("api ranked", {})
        if "held_out" not in row:
            continue
        r5 = row["held_out"]["r5"]
        meets = "meets" if r5 >= result["target_r5"] else "misses"
        out.append(f"`{label}`: held-out R@{result['k']} {r5:.3f} {meets} the target")
    text = "; ".join(out) + "."
    same = [label for label in result["settings"] if _same_as_lexical(result, label)]
    if same:
        text += (
            f" {', '.join(f'`{s}`' for s in same)} answered every question exactly as "
            "`lexical` did: the stack used no embedding model (the setting is not in this "
            "build), so its rows are the lexical figures."
        )
    return text


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    from bench import plots

    k = result["k"]
    settings = ", ".join(
        f"`{label}` (`HARNESS_EMBEDDING_MODEL={s['model']}`)"
        for label, s in result["settings"].items()
    )
    parts = [
        f"Hand-written data (`bench/data/paraphrase.json`): {result['facts']} facts a user "
        f"saves in the first person across {result['domains']} domains, each with one "
        "question that shares no term with it under the product's own stemming (names "
        f"included), {result['distractors']} distractors on nearby topics (some sharing words with "
        f"other facts' questions) and {result['irrelevant']} questions nothing in memory "
        f"answers. Facts are split into tune ({result['by_split'].get('tune', 0)}) and "
        f"held-out ({result['by_split'].get('held_out', 0)}) halves; fusion weights may "
        "only be tuned on the first. One local stack per setting: "
        f"{settings}; every line saved with POST /v1/memory/save (one save each, seeded "
        "shuffle, flush trigger `never`), then each question asked by every path:",
        "",
        *(f"- **{path}**: {what}" for path, what in result["paths"].items()),
        "",
        f"R@k: the share of questions whose fact is among the first k hits; empty: the "
        f"share of irrelevant questions answered with no hit; latency per search (round "
        f"trip on this machine). Target: held-out R@{k} ≥ {result['target_r5']}.",
        "",
        _verdict(result),
        "",
        f"| setting | path | tune R@1 | tune R@{k} | held-out R@1 | held-out R@{k} | "
        "empty on irrelevant | p50 ms | p95 ms | answered as |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, setting in result["settings"].items():
        for path, row in setting["paths"].items():
            cells = [_cell(row, s, m) for s in SPLITS for m in ("r1", "r5")]
            empty = f"{row['irrelevant']['empty']:.2f}" if "irrelevant" in row else "–"
            lat = row["latency_ms"]
            modes = ", ".join(f"`{m}` {n}" for m, n in sorted(row["modes"].items()))
            parts.append(
                f"| `{label}` | {path} | {' | '.join(cells)} | {empty} | "
                f"{lat['p50']:.1f} | {lat['p95']:.1f} | {modes} |"
            )
    parts += ["", "*answered as*: the match mode each answer named, with its count."]
    repeats = [
        f"`{label}` {path} {row['repeated']:.0%}"
        for label, setting in result["settings"].items()
        for path, row in setting["paths"].items()
        if row.get("repeated")
    ]
    if repeats:
        parts[-1] += (
            f" Answers whose first {k} hits hold one saved line twice (its MEMORY.md line and "
            f"its ledger copy), so fewer than {k} facts: {'; '.join(repeats)}."
        )
    labels = list(result["settings"])
    paths = list(result["paths"])
    path = plots.bars(
        img_dir / "paraphrase_recall.png",
        f"paraphrase recall: held-out R@{k}",
        f"R@{k}",
        paths,
        {
            label: [
                result["settings"][label]["paths"].get(p, {}).get("held_out", {}).get("r5", 0.0)
                for p in paths
            ]
            for label in labels
        },
        hline=(result["target_r5"], "target"),
        ylim=(0, 1),
    )
    parts += ["", f"![paraphrase recall]({img_dir.name}/{path.name})"]
    return "\n".join(parts)
