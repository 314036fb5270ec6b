"""The agent-call hot path: AWS requests per turn, and what memory costs in latency.

Both run the real AgentCall handler (``local_stack.lambdas.import_handler``: the module
imported under its template environment, as a Lambda container) on the embedded AWS
(moto, in-process), with HTTP API v2 events.

Requests per turn (docs/design.md#budgets: at most 8 without compaction, 7 without
automatic recall): counted with botocore event hooks on the handler's own clients, default
settings and the offline model, for the first turn of a new session, a later one, one in a
container new to the session, and one after the container's listing window.

Memory latency ratio (target <= 1.10): two containers of the same handler, one with the
default settings (memory on) and one with memory off (HARNESS_DISABLE_MEMORY_TOOLS and
HARNESS_DISABLE_MEMORY_HOOKS both true: no memory tools offered, no MEMORY.md reference
message, no memory guidance in the system prompt, no flush of the turn's facts). The agent
model of both is a stub whose ``complete`` sleeps a fixed time and answers plainly; it is
wrapped for its role as every model is (``ResilientModel``). The user has a synthetic
MEMORY.md of about 3,500 tokens, near the 4,000-token injection cap (a mature memory, the
worst case for memory on). Turns alternate between the containers (on, off, off, on, ...),
each arm rotating to a new session every few turns so no compaction runs; warm-up turns
are dropped; medians and p90 are kept. Automatic recall is measured the same way: a third
container with the defaults but HARNESS_RECALL_MAX_TOKENS=0, against memory on, with
the user's ledgers (``LEDGER_DAYS`` days of dated facts) and thread history (the same
days, indexed for thread search: past messages) for recall to rank. Each turn's
time is split into the stub's sleep, the AWS calls (union of their intervals, as the GETs
run concurrently) and the rest.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

from agent_harness.ids import User
from agent_harness.memory.threads import index_turns
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, Usage
from agent_harness.models.resilience import ResilientModel, RetryPolicy
from agent_harness.paths import MEMORY_FILE
from bench.common import embedded_aws_env
from bench.plots import bars, lines
from bench.search_corpus import by_month, turn_records
from local_stack.lambdas import context_for, http_event, import_handler
from local_stack.resources import create_resources, function_environment, load_template

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from types import ModuleType

    from local_stack.resources import Resolver

TITLE = "Agent-call hot path: AWS requests and memory latency"
FN = "AgentCallFunction"
USER = "bench"
REQUEST_BUDGET = 8
RATIO_BUDGET = 1.10
MEMORY_TOKENS = 3_500
#: (stub model latency in seconds, measured turns per arm, warm-up turns per arm)
SIZES = {True: (0.1, 8, 2), False: (0.3, 40, 3)}
TURNS_PER_SESSION = 8  # 16 messages: far below the compaction trigger of 50
MEMORY_OFF = {"HARNESS_DISABLE_MEMORY_TOOLS": "true", "HARNESS_DISABLE_MEMORY_HOOKS": "true"}
RECALL_OFF = {"HARNESS_RECALL_MAX_TOKENS": "0"}
LEDGER_DAYS = 90
#: the shared scopes of the scoped runs: each has a MEMORY.md and ledgers of its own
SCOPES = ("project:apollo", "agent:support")
SCOPE_MEMORY_TOKENS = 1_500
SCOPE_LEDGER_DAYS = 30
#: what two bound scopes may add to a turn's AWS requests (docs/design.md#memory-scopes)
SCOPE_REQUEST_BUDGET = 2


# -- the handler on the embedded AWS ------------------------------------------------------


def post(app: ModuleType, session: str, text: str) -> dict[str, Any]:
    return post_body(app, session, {"message": text})


def post_body(app: ModuleType, session: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST a body to the session's messages route; the answer, which must be a 200."""
    event = http_event(
        "POST",
        f"/v1/sessions/{session}/messages",
        headers={"x-user-id": USER, "content-type": "application/json"},
        body=json.dumps(payload).encode(),
    )
    response = app.lambda_handler(event, context_for(FN))
    if response["statusCode"] != 200:
        raise RuntimeError(f"request failed: {response}")
    return dict(json.loads(response["body"]))


@contextmanager
def embedded_stack() -> Iterator[tuple[Resolver, dict[str, str]]]:
    """moto with the template's resources, and the AgentCall environment (dev auth: the
    X-User-Id header is the user)."""
    embedded_aws_env()
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # read when flushing
    with mock_aws():
        clients = {n: boto3.client(n, region_name="us-east-1") for n in ("s3", "dynamodb", "sqs")}
        resolver = create_resources(load_template(), clients)
        env = function_environment(resolver, FN)
        env["HARNESS_AUTH_MODE"] = "dev"
        env.pop("TIKTOKEN_CACHE_DIR")  # the layer's path; the repo copy is the default
        env["POWERTOOLS_LOG_LEVEL"] = "ERROR"  # the dev-mode warning and turn lines are noise here
        yield resolver, env


@dataclass
class AwsMeter:
    """Counts and times the AWS calls of one container's clients (botocore hooks)."""

    operations: list[str] = field(default_factory=list)
    intervals: list[tuple[float, float]] = field(default_factory=list)

    def attach(self, clients: dict[str, Any]) -> AwsMeter:
        for client in clients.values():
            client.meta.events.register("before-call", self._before)
            client.meta.events.register("after-call", self._after)
        return self

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        context["bench_started"] = time.perf_counter()
        self.operations.append(model.name)

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        self.intervals.append((context["bench_started"], time.perf_counter()))

    def reset(self) -> None:
        self.operations.clear()
        self.intervals.clear()

    def busy_ms(self) -> float:
        """Wall time with at least one call in flight (concurrent calls counted once)."""
        total, end = 0.0, float("-inf")
        for start, stop in sorted(self.intervals):
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total * 1000


#: per-user daily budgets high enough never to refuse: what a budget costs a turn
BUDGETS_ON = {"HARNESS_USER_DAILY_TURNS": "100000", "HARNESS_USER_DAILY_TOKENS": "1000000000"}
#: automatic recall of memory lines only (past messages are recalled by default)
MESSAGES_OFF = {"HARNESS_RECALL_MESSAGES": "false"}
#: every turn lists the user's folders, as when the listing window has passed
LISTING_EVERY_TURN = {"HARNESS_RECALL_LISTING_SECONDS": "0"}
#: recall by meaning with the local model (make dev's): the query embedded in the turn
MEANING_ON = {"HARNESS_EMBEDDING_MODEL": "local:multilingual-e5-small"}


def write_vectors(app: ModuleType) -> None:
    """The user's memory vectors, as the post-turn job and consolidation leave them."""
    from agent_harness.memory.vectors import refresh_vectors

    refresh_vectors(app.runtime, User.from_id(USER))


def count_requests(resolver: Resolver, env: dict[str, str]) -> dict[str, Any]:
    """AWS requests of a first and a later turn, offline model, then of the session's
    next turn in another container (one that never saw it), then of a new session's
    first turn in a container that served the user before but whose listing window has
    passed: default settings, then with per-user budgets on, then with past messages
    off (new containers, a new session each)."""
    turns = {}
    variants = (
        ("", "count", {}),
        (", budgets on", "budgets", BUDGETS_ON),
        (", past messages off", "lines", MESSAGES_OFF),
        (", recall by meaning (local model)", "meaning", MEANING_ON),
    )
    for suffix, session, extra in variants:
        first = import_handler(resolver, FN, {**env, **extra})
        relisting = import_handler(resolver, FN, {**env, **extra, **LISTING_EVERY_TURN})
        post(relisting, f"{session}-before", "Remember that I prefer green tea.")
        if extra is MEANING_ON:
            write_vectors(first)
        for label, app, name in (
            ("first turn of a new session", first, session),
            ("later turn", first, session),
            ("later turn, in a container new to the session", None, session),
            (
                "first turn of a new session, the container's listing window passed",
                relisting,
                f"{session}-after",
            ),
        ):
            app = app or import_handler(resolver, FN, {**env, **extra})
            meter = AwsMeter().attach(app.runtime.clients)
            post(app, name, "Remember that I prefer green tea.")
            turns[label + suffix] = {
                "requests": len(meter.operations),
                "operations": sorted(meter.operations),
            }
    return turns


def shared_memories(rt: Any, user: User) -> None:
    """``user`` a member of both ``SCOPES``, each with a MEMORY.md and ledgers."""
    for scope in SCOPES:
        rt.table.put_member(scope, user, "member", "2026-01-01T00:00:00Z")
        owner = User.for_scope(scope)
        rt.store.put(owner, MEMORY_FILE, synthetic_memory(SCOPE_MEMORY_TOKENS, rt.counter.count))
        for path, text in synthetic_ledgers(SCOPE_LEDGER_DAYS).items():
            rt.store.put(owner, path, text)


def count_scoped_requests(resolver: Resolver, env: dict[str, str]) -> dict[str, Any]:
    """A later turn's AWS requests without and with two bound scopes (each in a container
    of its own after the same first turn): within the listing window, and once it has
    passed (every turn relists)."""
    out: dict[str, Any] = {}
    for suffix, extra in (("", {}), (", the listing window passed", LISTING_EVERY_TURN)):
        tag = "window" if extra else "warm"
        for label, scopes in (("no scope", []), ("two bound scopes", list(SCOPES))):
            # a container each, the same two turns: the difference is the scopes'
            app = import_handler(resolver, FN, {**env, **extra})
            shared_memories(app.runtime, User.from_id(USER))
            session = f"scoped-{tag}-{len(scopes)}"
            first = {"message": "Remember that I prefer green tea."}
            post_body(app, session, first | ({"scopes": scopes} if scopes else {}))
            meter = AwsMeter().attach(app.runtime.clients)
            post(app, session, "Remember that I prefer green tea.")
            out[f"later turn, {label}{suffix}"] = {
                "requests": len(meter.operations),
                "operations": sorted(meter.operations),
            }
    return out


# -- memory on vs off ---------------------------------------------------------------------


class FixedLatencyModel:
    """The agent model of the latency runs: sleeps a fixed time, answers plainly."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.slept = 0.0
        self.prompt_chars = 0
        self.tools = 0

    @property
    def name(self) -> str:
        return f"stub:fixed-{self.seconds * 1000:.0f}ms"

    def complete(self, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        time.sleep(self.seconds)
        self.slept += time.perf_counter() - started
        self.prompt_chars = sum(len(m.content) for m in request.messages)
        self.tools = len(request.tools)
        return ChatResponse(
            message=Message(role="assistant", content="Noted, thank you."),
            usage=Usage(input_tokens=self.prompt_chars // 4, output_tokens=5),
            model=self.name,
            finish_reason="stop",
        )


@dataclass
class Arm:
    """One container of the handler with the stub model, and what its turns took."""

    name: str
    app: ModuleType
    model: FixedLatencyModel
    meter: AwsMeter
    turns: list[dict[str, float]] = field(default_factory=list)
    warmup_ms: list[float] = field(default_factory=list)
    memory_tokens: list[int] = field(default_factory=list)
    #: the shared scopes every session of the arm binds (its first message names them)
    scopes: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, name: str, resolver: Resolver, env: dict[str, str], seconds: float) -> Arm:
        app = import_handler(resolver, FN, env)
        rt = app.runtime
        model = FixedLatencyModel(seconds)
        wrapped = ResilientModel(
            model,
            role="agent",
            timeout=rt.settings.model_timeout_seconds,
            deadline=rt.deadline,
            policy=RetryPolicy(max_attempts=rt.settings.model_max_attempts),
            counter=rt.counter,
        )
        rt.models = ModelRegistry(
            rt.settings, counter=rt.counter, deadline=rt.deadline, overrides={"agent": wrapped}
        )
        return cls(name, app, model, AwsMeter().attach(rt.clients))

    def turn(self, number: int, *, warmup: bool = False) -> None:
        session = f"{self.name}-warmup" if warmup else f"{self.name}-{number // TURNS_PER_SESSION}"
        self.meter.reset()
        slept = self.model.slept
        started = time.perf_counter()
        text = f"Turn {number}: what should I drink this afternoon?"
        payload: dict[str, Any] = {"message": text} | (
            {"scopes": self.scopes} if self.scopes else {}
        )
        body = post_body(self.app, session, payload)
        total = (time.perf_counter() - started) * 1000
        if warmup:
            self.warmup_ms.append(total)
            return
        model = (self.model.slept - slept) * 1000
        aws = self.meter.busy_ms()
        self.memory_tokens.append(int(body["usage"]["memory_tokens"]))
        self.turns.append(
            {
                "total": total,
                "model": model,
                "aws": aws,
                "harness": total - model - aws,
                "requests": len(self.meter.operations),
            }
        )


def synthetic_memory(tokens: int, count: Any) -> str:
    """A MEMORY.md of about ``tokens`` tokens: curated sections of dated facts (made up
    here, not taken from any data set)."""
    topics = ("tea", "cycling", "the Lisbon trip", "the garden", "Python", "the book club")
    facts = (
        "prefers {t} in the afternoon",
        "asked to be reminded about {t} on Mondays",
        "decided to spend less time on {t}",
        "mentioned a friend who also likes {t}",
        "finds {t} relaxing after work",
    )
    parts = ["# MEMORY.md\n"]
    n = 0
    while count("\n".join(parts)) < tokens:
        section = [f"\n## {topics[n % len(topics)].capitalize()} ({n // len(topics) + 1})"]
        for i in range(10):
            fact = facts[(n + i) % len(facts)].format(t=topics[(n + 2 * i) % len(topics)])
            section.append(f"- The user {fact} (2024-{1 + (n + i) % 12:02d}-{1 + i * 2:02d}).")
        parts.append("\n".join(section))
        n += 1
    return "\n".join(parts) + "\n"


def synthetic_ledgers(days: int) -> dict[str, str]:
    """``days`` daily ledgers of flushed facts (made up here), by path."""
    things = ("green tea", "oolong", "espresso", "the Lisbon trip", "the garden", "cycling")
    out = {}
    for n in range(days):
        month, day = 1 + n // 28 % 12, 1 + n % 28
        facts = [
            f"- The user said a drink of {things[(n + i) % len(things)]} helps in the "
            f"afternoon ({i})"
            for i in range(8)
        ]
        out[f"memory/2024-{month:02d}-{day:02d}.md"] = (
            f"\n## Flush — 2024-{month:02d}-{day:02d}T18:00:00Z\n"
            f"> source: session=s{n} turns=1 model=offline\n" + "\n".join(facts) + "\n"
        )
    return out


def _stats(values: list[float]) -> dict[str, float]:
    p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
    return {"median": round(statistics.median(values), 1), "p90": round(p90, 1)}


def measure_latency(resolver: Resolver, env: dict[str, str], quick: bool) -> dict[str, Any]:
    seconds, turns, warmup = SIZES[quick]
    on = Arm.start("on", resolver, env, seconds)
    off = Arm.start("off", resolver, {**env, **MEMORY_OFF}, seconds)
    no_recall = Arm.start("recall_off", resolver, {**env, **RECALL_OFF}, seconds)
    scoped = Arm.start("scoped", resolver, env, seconds)
    scoped.scopes = list(SCOPES)
    meaning = Arm.start("meaning", resolver, {**env, **MEANING_ON}, seconds)
    memory = synthetic_memory(MEMORY_TOKENS, on.app.runtime.counter.count)
    user = User.from_id(USER)
    on.app.runtime.store.put(user, MEMORY_FILE, memory)
    for path, text in synthetic_ledgers(LEDGER_DAYS).items():
        on.app.runtime.store.put(user, path, text)
    history = turn_records(LEDGER_DAYS)  # past messages for recall to rank
    for month in by_month(history):
        index_turns(on.app.runtime, user, month)
    shared_memories(on.app.runtime, user)
    write_vectors(meaning.app)
    every = (on, off, no_recall, scoped, meaning)
    for i in range(warmup):
        for arm in every:
            arm.turn(i, warmup=True)
    for i in range(turns):
        n = i % len(every)
        for arm in every[n:] + every[:n]:  # each arm first as often as the others
            arm.turn(i)
    arms: dict[str, Any] = {}
    for arm in every:
        series = {k: [t[k] for t in arm.turns] for k in ("total", "model", "aws", "harness")}
        without_aws = [t["total"] - t["aws"] for t in arm.turns]
        arms[arm.name] = {
            **{k: _stats(v) for k, v in series.items()},
            "without_aws": _stats(without_aws),
            "requests": sorted({int(t["requests"]) for t in arm.turns}),
            "prompt_chars": arm.model.prompt_chars,
            "tools_offered": arm.model.tools,
            "memory_tokens": max(arm.memory_tokens),
            "warmup_ms": [round(v, 1) for v in arm.warmup_ms],
            "samples_ms": [round(v, 1) for v in series["total"]],
        }

    def ratio(key: str, stat: str = "median", base: str = "off") -> float:
        return round(arms["on"][key][stat] / arms[base][key][stat], 3)

    def ratio_of(arm: str, base: str, stat: str = "median") -> float:
        return round(arms[arm]["total"][stat] / arms[base]["total"][stat], 3)

    return {
        "model_ms": round(seconds * 1000),
        "turns_per_arm": turns,
        "warmup_turns": warmup,
        "memory_md_tokens": on.app.runtime.counter.count(memory),
        "budget": RATIO_BUDGET,
        "ratio": ratio("total"),
        "ratio_p90": ratio("total", "p90"),
        "ratio_without_aws": ratio("without_aws"),
        "within_budget": ratio("total") <= RATIO_BUDGET,
        "ledgers": LEDGER_DAYS,
        "past_messages": 2 * len(history),
        "recall_ratio": ratio("total", base="recall_off"),
        "recall_ratio_p90": ratio("total", "p90", base="recall_off"),
        "recall_within_budget": ratio("total", base="recall_off") <= RATIO_BUDGET,
        "scopes": list(SCOPES),
        "meaning_model": MEANING_ON["HARNESS_EMBEDDING_MODEL"],
        "meaning_ratio": ratio_of("meaning", "off"),
        "meaning_ratio_p90": ratio_of("meaning", "off", "p90"),
        "meaning_within_budget": ratio_of("meaning", "off") <= RATIO_BUDGET,
        "meaning_vs_on": ratio_of("meaning", "on"),
        "scoped_ratio": round(arms["scoped"]["total"]["median"] / arms["on"]["total"]["median"], 3),
        "scoped_ratio_p90": round(arms["scoped"]["total"]["p90"] / arms["on"]["total"]["p90"], 3),
        "arms": arms,
    }


def run(quick: bool = False) -> dict[str, Any]:
    with embedded_stack() as (resolver, env):
        turns = count_requests(resolver, env)
        scoped = count_scoped_requests(resolver, env)
        latency = measure_latency(resolver, env, quick)
    added = {
        suffix: scoped[f"later turn, two bound scopes{suffix}"]["requests"]
        - scoped[f"later turn, no scope{suffix}"]["requests"]
        for suffix in ("", ", the listing window passed")
    }
    return {
        "budget": REQUEST_BUDGET,
        "turns": turns,
        "scoped": {"turns": scoped, "added": added, "budget": SCOPE_REQUEST_BUDGET},
        "latency": latency,
    }


# -- reporting ----------------------------------------------------------------------------


def report(result: dict[str, Any]) -> str:
    out = ["AWS requests per agent turn (no compaction, no tool calls):"]
    for label, row in result["turns"].items():
        out.append(f"  {label:<28} {row['requests']}   {', '.join(row['operations'])}")
    out.append(f"  budget: <= {result['budget']} (docs/design.md#budgets)")
    if "scoped" in result:
        sc = result["scoped"]
        out.append("two bound shared scopes (a later turn, one container):")
        for label, row in sc["turns"].items():
            out.append(f"  {label:<28} {row['requests']}   {', '.join(row['operations'])}")
        for suffix, n in sc["added"].items():
            ok = "ok" if n <= sc["budget"] else "OVER BUDGET"
            out.append(f"  added by the scopes{suffix}: {n} (budget <= {sc['budget']})   {ok}")
    lat = result["latency"]
    on, off = lat["arms"]["on"], lat["arms"]["off"]
    verdict = "ok" if lat["within_budget"] else "OVER BUDGET"
    out += [
        f"memory on vs off, stub model {lat['model_ms']} ms, {lat['turns_per_arm']} turns each "
        f"(MEMORY.md {lat['memory_md_tokens']} tokens, {on['memory_tokens']} injected):",
        f"  on   median {on['total']['median']:7.1f} ms  p90 {on['total']['p90']:7.1f}  "
        f"(AWS {on['aws']['median']:.1f}, rest {on['harness']['median']:.1f})",
        f"  off  median {off['total']['median']:7.1f} ms  p90 {off['total']['p90']:7.1f}  "
        f"(AWS {off['aws']['median']:.1f}, rest {off['harness']['median']:.1f})",
        f"  ratio {lat['ratio']:.3f} (p90 {lat['ratio_p90']:.3f}, without AWS time "
        f"{lat['ratio_without_aws']:.3f})   budget <= {lat['budget']}   {verdict}",
    ]
    if "scoped_ratio" in lat:
        sc_arm = lat["arms"]["scoped"]
        out.append(
            f"two bound scopes vs none ({', '.join(lat['scopes'])}; memory on otherwise): median "
            f"{sc_arm['total']['median']:.1f} ms, ratio {lat['scoped_ratio']:.3f} "
            f"(p90 {lat['scoped_ratio_p90']:.3f}), "
            f"requests {'/'.join(map(str, sc_arm['requests']))}"
        )
    if "meaning_ratio" in lat:
        mean = lat["arms"]["meaning"]
        ok = "ok" if lat["meaning_within_budget"] else "OVER BUDGET"
        out.append(
            f"recall by meaning ({lat['meaning_model']}) vs memory off: median "
            f"{mean['total']['median']:.1f} ms, ratio {lat['meaning_ratio']:.3f} "
            f"(p90 {lat['meaning_ratio_p90']:.3f}; {lat['meaning_vs_on']:.3f} of memory on "
            f"without it), requests {'/'.join(map(str, mean['requests']))}   "
            f"budget <= {lat['budget']}   {ok}"
        )
    if "recall_ratio" in lat:
        rec = lat["arms"]["recall_off"]
        ok = "ok" if lat["recall_within_budget"] else "OVER BUDGET"
        out += [
            f"automatic recall on vs off ({lat['ledgers']} ledgers; memory on otherwise):",
            f"  off  median {rec['total']['median']:7.1f} ms  p90 {rec['total']['p90']:7.1f}  "
            f"requests {'/'.join(map(str, rec['requests']))} vs "
            f"{'/'.join(map(str, on['requests']))} with recall",
            f"  ratio {lat['recall_ratio']:.3f} (p90 {lat['recall_ratio_p90']:.3f})   "
            f"budget <= {lat['budget']}   {ok}",
        ]
    return "\n".join(out)


def _requests_table(result: dict[str, Any]) -> list[str]:
    lat = result["latency"]
    rows = ["| turn | AWS requests | operations | budget |", "|---|---:|---|---|"]
    for label, row in result["turns"].items():
        verdict = "ok" if row["requests"] <= result["budget"] else "**over**"
        ops = ", ".join(row["operations"])
        rows.append(f"| {label} | {row['requests']} | {ops} | ≤ {result['budget']}: {verdict} |")
    for arm in ("on", "off"):
        counts = "/".join(str(n) for n in lat["arms"][arm]["requests"])
        rows.append(f"| latency run, memory {arm} (every turn) | {counts} | | |")
    if "scoped" in result:
        sc = result["scoped"]
        for label, row in sc["turns"].items():
            rows.append(f"| {label} | {row['requests']} | {', '.join(row['operations'])} | |")
        for suffix, n in sc["added"].items():
            verdict = "ok" if n <= sc["budget"] else "**over**"
            rows.append(
                f"| added by two bound scopes{suffix} | +{n} | | ≤ +{sc['budget']}: {verdict} |"
            )
    return rows


def _latency_table(lat: dict[str, Any]) -> list[str]:
    on, off = lat["arms"]["on"], lat["arms"]["off"]
    rows = [
        "| ms per turn | memory on | memory off | on / off |",
        "|---|---:|---:|---:|",
    ]
    for label, key, stat in (
        ("total, median", "total", "median"),
        ("total, p90", "total", "p90"),
        ("stub model (fixed sleep), median", "model", "median"),
        ("AWS calls on moto, median", "aws", "median"),
        ("harness (the rest), median", "harness", "median"),
        ("total without AWS time, median", "without_aws", "median"),
    ):
        a, b = on[key][stat], off[key][stat]
        ratio = f"{a / b:.3f}" if b else "–"
        rows.append(f"| {label} | {a:.1f} | {b:.1f} | {ratio} |")
    rows += [
        f"| prompt characters sent to the model | {on['prompt_chars']:,} | "
        f"{off['prompt_chars']:,} | |",
        f"| tools offered | {on['tools_offered']} | {off['tools_offered']} | |",
        f"| MEMORY.md tokens injected | {on['memory_tokens']:,} | {off['memory_tokens']:,} | |",
    ]
    return rows


def _plots(lat: dict[str, Any], img_dir: Path) -> list[str]:
    series = {}
    for arm in ("on", "off"):
        values = sorted(lat["arms"][arm]["samples_ms"])
        xs = [100 * (i + 0.5) / len(values) for i in range(len(values))]
        series[f"memory {arm}"] = (xs, values)
    lines(
        img_dir / "hot_path-latency.png",
        f"Agent turn latency, stub model {lat['model_ms']} ms (sorted turns)",
        "percentile of turns",
        "ms per turn",
        series,
        hline=(lat["model_ms"], "stub model latency"),
    )
    on, off = lat["arms"]["on"], lat["arms"]["off"]
    parts = ("harness", "aws", "total")
    bars(
        img_dir / "hot_path-split.png",
        "Where a turn's time goes (medians)",
        "ms",
        ["harness (the rest)", "AWS calls (moto)", "total"],
        {f"memory {n}": [arm[p]["median"] for p in parts] for n, arm in (("on", on), ("off", off))},
    )
    return [
        "![turn latency, memory on vs off](img/hot_path-latency.png)",
        "",
        "![where a turn's time goes](img/hot_path-split.png)",
    ]


def _interpretation(lat: dict[str, Any]) -> str:
    """What the split says, read from the numbers."""
    on, off = lat["arms"]["on"], lat["arms"]["off"]
    extra = on["harness"]["median"] - off["harness"]["median"]
    if on["requests"] == off["requests"]:
        aws = (
            "Both arms make the same AWS requests (memory off still reads MEMORY.md, in the "
            "same concurrent pair of GETs as the context, and still queues the post-turn job), "
            "so AWS time is not a cost of memory; but moto in-process (about "
            f"{on['aws']['median']:.0f} ms a turn here, pure Python) is not AWS either. "
            "Removing each turn's AWS time shrinks both sides and gives the stricter ratio "
            f"({lat['ratio_without_aws']:.3f}); real AWS round trips, slower than moto's, "
            "would move the ratio towards 1."
        )
    else:
        aws = (
            f"Memory on makes {on['requests']} AWS requests a turn and memory off "
            f"{off['requests']}; on moto in-process (pure Python) their time is not what AWS "
            f"would take, so the ratio without AWS time ({lat['ratio_without_aws']:.3f}) is "
            "the one to read for the harness itself."
        )
    return (
        f"{aws} What memory adds on this path is CPU in the harness, {extra:.1f} ms a turn at "
        "the median: tokenizing MEMORY.md to fit its cap and building a larger request. A "
        "real model's latency also grows with the prompt "
        f"({on['prompt_chars'] - off['prompt_chars']:,} characters more here, about "
        f"{on['memory_tokens']:,} tokens of memory), which a fixed-latency stub does not show."
    )


def _scoped_text(result: dict[str, Any]) -> list[str]:
    """What two bound shared scopes add to a turn, in requests and in latency."""
    if "scoped" not in result or "scoped_ratio" not in result["latency"]:
        return []
    sc, lat = result["scoped"], result["latency"]
    added = sc["added"]
    return [
        f"**Two bound shared scopes** (target: at most {sc['budget']} requests more than "
        f"without). The user is a member of {' and '.join(f'`{x}`' for x in lat['scopes'])}, "
        f"each with a MEMORY.md of about {SCOPE_MEMORY_TOKENS:,} tokens and "
        f"{SCOPE_LEDGER_DAYS} ledgers; each row is a container of its own after the same "
        f"first turn. A later turn adds **{added['']}** (the `Query` of the caller's "
        "memberships, which grants both scopes again), and "
        f"**{added[', the listing window passed']}** once the listing window has passed "
        "(one scope's `ListObjectsV2` a turn, the oldest; a scope's MEMORY.md comes from the "
        "container's cache while its listed ETag holds). In the latency run the same "
        f"handler with both scopes bound takes **{lat['scoped_ratio']:.3f}×** the time of "
        f"memory on without scopes (median; p90 {lat['scoped_ratio_p90']:.3f}), requests "
        f"{'/'.join(map(str, lat['arms']['scoped']['requests']))} per turn.",
        "",
    ]


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    lat = result["latency"]
    verdict = "within" if lat["within_budget"] else "over"
    return "\n".join(
        [
            f"**AWS requests per turn** (target ≤ {result['budget']}, no compaction, no tool "
            "calls): the real AgentCall handler on moto in-process, requests counted with "
            "botocore hooks on its own clients.",
            "",
            *_requests_table(result),
            "",
            "*Budgets on* sets per-user daily turn and token budgets (high enough never to "
            "refuse). The write that takes the session lease becomes a `TransactWriteItems` "
            "that also admits the turn on the user's day and checks the user's budget "
            "override, so a budget adds no request; the commit that counts the usage is the "
            "same single request either way. A transaction cannot return the session item, "
            "so the lease is conditioned on the session being as the container last left "
            "it: a container that has not seen the session (its last turn ran elsewhere) "
            "is refused with the item and tries once more (*later turn, in a container new to "
            "the session, budgets on*; that container also lists, as any container's first "
            "turn for a user does).",
            "",
            "The default recall lists `memory/` and `index/threads/` (past messages) in one "
            "`ListObjectsV2`: the two folders are neighbours in the key order, so one page "
            "starting at the first holds both, sized by how many files the container saw "
            "last time (64 at first) plus a few keys past the last; the files themselves "
            "come from the container's cache while their ETags hold (a GET for a month's "
            "segment or a day's ledger that changed since; none here, as no post-turn job "
            "runs). Within `HARNESS_RECALL_LISTING_SECONDS` (30 s) the listing is reused, as "
            "the later turn shows; the last row of each setting is a container that served "
            "the user before, with the window set to 0 so that it lists again. *Past "
            "messages off* (`HARNESS_RECALL_MESSAGES=false`) lists `memory/` alone: the same "
            "count.",
            "",
            *_scoped_text(result),
            f"**Memory on vs off** (target: median latency ratio ≤ {lat['budget']}). The same "
            "handler in two containers, the agent model a stub that sleeps "
            f"{lat['model_ms']} ms and answers plainly (no tool calls). *On* is the default "
            "settings; *off* sets `HARNESS_DISABLE_MEMORY_TOOLS=true` and "
            "`HARNESS_DISABLE_MEMORY_HOOKS=true`: no memory tools offered, no MEMORY.md "
            "reference message, no memory guidance in the system prompt and no flush of the "
            "turn (its post-turn job is still queued, for thread search). The user has a "
            f"synthetic MEMORY.md of {lat['memory_md_tokens']:,} tokens, near the 4,000-token "
            "injection cap. Turns alternate between the two containers "
            f"({lat['turns_per_arm']} measured turns each after {lat['warmup_turns']} warm-up "
            "turns; a new session every few turns, so no compaction).",
            "",
            f"Ratio of medians: **{lat['ratio']:.3f}** ({verdict} the {lat['budget']} budget); "
            f"of p90s {lat['ratio_p90']:.3f}; with each turn's AWS time removed "
            f"{lat['ratio_without_aws']:.3f}.",
            "",
            *_latency_table(lat),
            "",
            _interpretation(lat),
            "",
            *_recall_section(lat),
            *_meaning_section(lat),
            *_plots(lat, img_dir),
        ]
    )


def _meaning_section(lat: dict[str, Any]) -> list[str]:
    """Recall by meaning on vs memory off (results from before it existed have no arm)."""
    if "meaning_ratio" not in lat:
        return []
    arm = lat["arms"]["meaning"]
    verdict = "within" if lat["meaning_within_budget"] else "**over**"
    return [
        f"**Recall by meaning** (target: median latency ratio ≤ {lat['budget']} against "
        f"memory off). A fifth container with the defaults and "
        f"`HARNESS_EMBEDDING_MODEL={lat['meaning_model']}` (the model in process, its "
        "vectors of the user's memory written beforehand, as the post-turn job leaves "
        "them): each turn embeds its message once, while recall's reads are in flight, "
        "and ranks by words and meaning. Ratio of medians "
        f"**{lat['meaning_ratio']:.3f}** ({verdict} the budget), of p90s "
        f"{lat['meaning_ratio_p90']:.3f}; {lat['meaning_vs_on']:.3f}× memory on without it; "
        f"median {arm['total']['median']:.1f} ms; requests per turn "
        f"{'/'.join(map(str, arm['requests']))}.",
        "",
    ]


def _recall_section(lat: dict[str, Any]) -> list[str]:
    """Automatic recall on vs off (results from before it existed have no such arm)."""
    if "recall_ratio" not in lat:
        return []
    on, off = lat["arms"]["on"], lat["arms"]["recall_off"]
    verdict = "within" if lat["recall_within_budget"] else "**over**"
    return [
        f"**Automatic recall on vs off** (target: median latency ratio ≤ {lat['budget']}). "
        "A third container with the defaults but `HARNESS_RECALL_MAX_TOKENS=0`, in the same "
        f"rotation, the user holding {lat['ledgers']} daily ledgers for recall to rank. "
        f"Ratio of medians **{lat['recall_ratio']:.3f}** ({verdict} the budget), of p90s "
        f"{lat['recall_ratio_p90']:.3f}; medians {on['total']['median']:.1f} ms with recall, "
        f"{off['total']['median']:.1f} ms without; requests per turn "
        f"{'/'.join(map(str, on['requests']))} with recall (the LIST of memory/ and "
        f"index/threads/), {'/'.join(map(str, off['requests']))} without. Recall ranks "
        f"the ledgers' lines and, by default, {lat.get('past_messages', 0):,} past "
        "messages of the user's earlier sessions (synthetic, 20 turns a day over the "
        "same days).",
        "",
    ]
