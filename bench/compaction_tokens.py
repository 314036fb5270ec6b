"""Prompt tokens per agent call over a 500-turn replay: bounded by compaction
(docs/design.md#budgets: "flat, not growing with history"), against the full history
sent on every call.

The replay stitches the LoCoMo tuning conversations (``bench.common.TUNING``, in order)
into one session: speaker A is the user, consecutive lines of one speaker are one
message, and each of A's messages is a turn whose answer is B's next message. Every turn
goes through the real turn path (``agent.turn.run_turn`` on the in-memory fakes of
``tests.fakes.make_runtime``) with compaction on. The agent role is a replay model that
answers with B's message; the compaction role is the offline model (an extractive
summary). Both sit behind a meter that counts every request they receive with the
shipped tokenizer (cl100k, the message contents; the tool definitions, the same on
every call, are left out).

The baseline sends the whole history on every call: the same system prompt, every
message so far and the new one, counted the same way (its first calls, before any
compaction, are checked to equal ours). Compaction settings, each run separately:

* ``32k window, token trigger``: ``model_context_window=32768`` with the message-count
  trigger off: compaction when the context reaches the window minus the 20,000-token
  reserve (12,768 tokens), keeping the newest quarter of that (3,192 tokens);
* ``32k window, shipped defaults``: the same window with the default 50-message trigger
  also on;
* ``window unknown, shipped defaults``: the offline model's unknown window, so the fixed
  fallbacks: compaction at 50 messages, keeping the newest 20.

No MEMORY.md exists (post-turn jobs are not run), so no memory reference is injected.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from itertools import accumulate
from statistics import mean
from typing import TYPE_CHECKING, Any

from agent_harness.agent.compaction import keep_tokens, trigger_tokens
from agent_harness.agent.context import system_prompt
from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, Usage
from agent_harness.models.offline import OfflineChatModel
from agent_harness.settings import Settings
from agent_harness.tokens import TokenCounter
from bench import plots
from bench.common import TUNING, locomo, sessions, turn_text
from tests.fakes import make_runtime

if TYPE_CHECKING:
    from pathlib import Path

    from agent_harness.models.base import ChatModel

TITLE = "Prompt tokens per call over a 500-turn replay"
TURNS = 500
QUICK_TURNS = 100
#: ours is "flat" when its largest call in the replay's second half is at most this
#: many times its largest in the first half
FLAT_TOLERANCE = 1.1
USER = User.from_id("bench-user")
SESSION = "replay"
PRIMARY = "32k window, token trigger"
CONFIGS: dict[str, dict[str, int]] = {
    PRIMARY: {"model_context_window": 32_768, "compaction_trigger_messages": 0},
    "32k window, shipped defaults": {"model_context_window": 32_768},
    "window unknown, shipped defaults": {},
}

Exchange = tuple[str, str]


def _runs(sample: dict[str, Any]) -> list[tuple[str, str]]:
    """(speaker, text) with consecutive lines of one speaker joined, across sessions."""
    runs: list[tuple[str, list[str]]] = []
    for _, _, turns in sessions(sample):
        for turn in turns:
            if runs and runs[-1][0] == turn["speaker"]:
                runs[-1][1].append(turn_text(turn))
            else:
                runs.append((turn["speaker"], [turn_text(turn)]))
    return [(speaker, "\n".join(lines)) for speaker, lines in runs]


def exchanges(n: int) -> tuple[list[Exchange], dict[str, int]]:
    """The first ``n`` (user, assistant) exchanges of the stitched tuning conversations,
    and how many each conversation gave. A reply without a message before it (a
    conversation opened by B) and a last message without a reply are left out."""
    out: list[Exchange] = []
    used: dict[str, int] = {}
    for sample_id in TUNING:
        sample = locomo()[sample_id]
        speaker_a = sample["conversation"]["speaker_a"]
        pending: str | None = None
        for speaker, text in _runs(sample):
            if speaker == speaker_a:
                pending = text
            elif pending is not None:
                out.append((pending, text))
                used[sample_id] = used.get(sample_id, 0) + 1
                pending = None
                if len(out) == n:
                    return out, used
    raise ValueError(f"the tuning conversations give {len(out)} exchanges, not {n}")


@dataclass
class Meter:
    """Wraps a role's model; counts the prompt tokens of every request, by turn."""

    inner: ChatModel
    counter: TokenCounter
    turn: int = 0
    calls: list[tuple[int, int]] = field(default_factory=list)  # (turn, prompt tokens)

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        tokens = sum(self.counter.count(m.content) for m in request.messages)
        self.calls.append((self.turn, tokens))
        return self.inner.complete(request)


class Replay:
    """The agent: answers each turn with the conversation's next reply, no tool calls."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = iter(replies)

    @property
    def name(self) -> str:
        return "replay"

    def complete(self, request: ChatRequest) -> ChatResponse:
        message = Message(role="assistant", content=next(self.replies))
        return ChatResponse(message=message, usage=Usage(), model=self.name)


def run_ours(settings: Settings, replay: list[Exchange]) -> dict[str, Any]:
    counter = TokenCounter()
    agent = Meter(Replay([reply for _, reply in replay]), counter)
    summary = Meter(OfflineChatModel(counter=counter), counter)
    rt = make_runtime(settings=settings)
    rt.models = ModelRegistry(
        settings, counter=counter, overrides={"agent": agent, "compaction": summary}
    )
    for n, (message, _) in enumerate(replay, start=1):
        agent.turn = summary.turn = n
        run_turn(rt, USER, SESSION, message)
        rt.queue.post_turn.clear()  # post-turn jobs are not this benchmark's
    per_turn = [tokens for _, tokens in agent.calls]
    if [turn for turn, _ in agent.calls] != list(range(1, len(replay) + 1)):
        raise AssertionError("expected exactly one agent call per turn")
    return {
        "trigger_tokens": trigger_tokens(settings),
        "keep_tokens": keep_tokens(settings),
        "agent_tokens": per_turn,
        "compactions": [list(call) for call in summary.calls],
        **_totals(per_turn, [tokens for _, tokens in summary.calls]),
    }


def _totals(per_call: list[int], compaction: list[int]) -> dict[str, Any]:
    half = len(per_call) // 2
    return {
        "agent_total": sum(per_call),
        "compaction_total": sum(compaction),
        "total": sum(per_call) + sum(compaction),
        "max_per_call": max(per_call),
        "mean_per_call": round(mean(per_call), 1),
        "max_first_half": max(per_call[:half]),
        "max_second_half": max(per_call[half:]),
    }


def run_baseline(replay: list[Exchange]) -> list[int]:
    """Prompt tokens of each call when the whole history goes every time (the counts are
    per message, so the history's count is a running sum)."""
    counter = TokenCounter()
    system = counter.count(system_prompt(None, tools=True, hooks=True))
    history, out = 0, []
    for message, reply in replay:
        out.append(system + history + counter.count(message))
        history += counter.count(message) + counter.count(reply)
    return out


def _check_same_counting(ours: dict[str, Any], baseline: list[int]) -> None:
    first = min((turn for turn, _ in ours["compactions"]), default=len(baseline) + 1)
    if ours["agent_tokens"][: first - 1] != baseline[: first - 1]:
        raise AssertionError("before any compaction, ours and the baseline must match")


def run(quick: bool = False) -> dict[str, Any]:
    with contextlib.redirect_stdout(io.StringIO()):  # Powertools' metric lines
        return _run(QUICK_TURNS if quick else TURNS)


def _run(turns: int) -> dict[str, Any]:
    replay, used = exchanges(turns)
    baseline = run_baseline(replay)
    configs: dict[str, Any] = {}
    for label, overrides in CONFIGS.items():
        ours = run_ours(Settings(**overrides), replay)
        _check_same_counting(ours, baseline)
        ours["settings"] = overrides
        ours["compaction_count"] = len(ours["compactions"])
        ours["ratio"] = round(sum(baseline) / ours["total"], 2)
        ours["flat"] = ours["max_second_half"] <= FLAT_TOLERANCE * ours["max_first_half"]
        configs[label] = ours
    return {
        "turns": turns,
        "conversations": used,
        "baseline": {"agent_tokens": baseline, **_totals(baseline, [])},
        "configs": configs,
        "flat_tolerance": FLAT_TOLERANCE,
        "message_tokens_mean": round(_mean_message_tokens(replay), 1),
    }


def _mean_message_tokens(replay: list[Exchange]) -> float:
    counter = TokenCounter()
    return mean(counter.count(text) for pair in replay for text in pair)


def _row(label: str, r: dict[str, Any]) -> tuple[str, ...]:
    return (
        label,
        str(r.get("compaction_count", "-")),
        f"{r['agent_total']:,}",
        f"{r['compaction_total']:,}",
        f"{r['total']:,}",
        f"{r['max_per_call']:,}",
        f"{r['mean_per_call']:,.0f}",
        f"{r['ratio']}x" if "ratio" in r else "1x",
    )


HEADER = (
    "run",
    "compactions",
    "agent calls",
    "summary calls",
    "total",
    "max/call",
    "mean/call",
    "baseline/ours",
)


def report(result: dict[str, Any]) -> str:
    rows = [HEADER, _row("baseline: full history", result["baseline"])]
    rows += [_row(label, r) for label, r in result["configs"].items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = [f"prompt tokens over a {result['turns']}-turn replay (one agent call per turn)"]
    for row in rows:
        pairs = zip(row[1:], widths[1:], strict=True)
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in pairs]
        lines.append("  " + "  ".join(cells))
    for label, r in result["configs"].items():
        lines.append(
            f"  {label}: largest call {r['max_first_half']:,} (first half), "
            f"{r['max_second_half']:,} (second half): {'flat' if r['flat'] else 'GROWING'}"
        )
    return "\n".join(lines)


def _plots(result: dict[str, Any], img_dir: Path) -> tuple[str, str]:
    xs = list(range(1, result["turns"] + 1))
    baseline = result["baseline"]["agent_tokens"]
    per_call = {"baseline: full history": (xs, baseline)}
    cumulative = {"baseline: full history": (xs, list(accumulate(baseline)))}
    for label, r in result["configs"].items():
        per_call[label] = (xs, r["agent_tokens"])
        spent = list(r["agent_tokens"])
        for turn, tokens in r["compactions"]:
            spent[turn - 1] += tokens
        cumulative[f"{label} (with summary calls)"] = (xs, list(accumulate(spent)))
    one = plots.lines(
        img_dir / "compaction_tokens-per-call.png",
        "Prompt tokens per agent call",
        "turn",
        "prompt tokens (cl100k)",
        per_call,
    )
    two = plots.lines(
        img_dir / "compaction_tokens-cumulative.png",
        "Prompt tokens, cumulative (agent and summary calls)",
        "turn",
        "prompt tokens (cl100k)",
        cumulative,
    )
    return (
        f"![prompt tokens per agent call against the full history](img/{one.name})",
        f"![cumulative prompt tokens against the full history](img/{two.name})",
    )


def _settings_text(label: str, r: dict[str, Any]) -> str:
    given = ", ".join(f"`{k}={v}`" for k, v in r["settings"].items()) or "none"
    trigger = f"{r['trigger_tokens']:,} tokens"
    if r["settings"].get("compaction_trigger_messages", 50):
        trigger = f"50 messages or {trigger}"
    keep = f"{r['keep_tokens']:,} tokens" if r["keep_tokens"] else "20 messages"
    if r["keep_tokens"] and r["settings"].get("compaction_trigger_messages", 50):
        keep += ", at most 20 messages"  # the tail never holds what triggers a compaction
    return f"| {label} | {given} | {trigger} | {keep} |"


def _interpretation(result: dict[str, Any]) -> str:
    """A few sentences read off the numbers (they hold for a quick run too)."""
    turns, b = result["turns"], result["baseline"]
    primary = result["configs"][PRIMARY]
    if primary["compaction_count"]:
        text = [
            f"With the token trigger ({PRIMARY}) each call grows until the context reaches "
            f"the trigger and drops after a compaction ({primary['compaction_count']} in "
            f"{turns} turns): a sawtooth peaking at {primary['max_per_call']:,} tokens, while "
            f"the full history grows linearly to {b['max_per_call']:,} tokens a call. Over "
            f"the replay the baseline sends {primary['ratio']}x what we send, summary calls "
            "included; the baseline grows with every turn and ours does not, so the ratio "
            "grows with the session's length."
        ]
    else:
        text = [
            f"In {turns} turns the history stayed under the token trigger "
            f"({primary['trigger_tokens']:,} tokens): no compaction, ours is the baseline."
        ]
    window = primary["settings"].get("model_context_window", 0)
    over = next((n for n, t in enumerate(b["agent_tokens"], 1) if t > window), None)
    if window and over:
        text.append(f"The full history no longer fits a {window:,}-token window from turn {over}.")
    per_message = result["message_tokens_mean"]
    for label, r in result["configs"].items():
        if r["compaction_count"] <= turns // 4:
            continue
        share = r["compaction_total"] / r["total"]
        text.append(f'"{label}" compacts on {r["compaction_count"]} of {turns} turns.')
        held = r["keep_tokens"] / per_message
        if r["settings"].get("compaction_trigger_messages", 50) and held > 50:
            text.append(
                f"Its kept tail's token budget ({r['keep_tokens']:,} tokens, about {held:.0f} "
                f"messages of {per_message:.0f} tokens here) holds more than the 50 messages "
                "that trigger a compaction, so once the context is over the budget every turn "
                "triggers one and it cuts about a turn's worth."
            )
        text.append(f"Its calls stay flat, but summary calls are {share:.0%} of its tokens.")
    return " ".join(text)


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    configs = result["configs"]
    used = ", ".join(f"{v} from {k}" for k, v in result["conversations"].items())
    table = [
        "| " + " | ".join(HEADER) + " |",
        "|---|" + "---:|" * (len(HEADER) - 1),
        "| " + " | ".join(_row("baseline: full history", result["baseline"])) + " |",
    ] + ["| " + " | ".join(_row(label, r)) + " |" for label, r in configs.items()]
    settings = [
        "| run | settings | compaction when the context reaches | keeps |",
        "|---|---|---|---|",
    ] + [_settings_text(label, r) for label, r in configs.items()]
    flat = [
        f"| {label} | {r['max_first_half']:,} | {r['max_second_half']:,} | "
        f"{'met' if r['flat'] else 'missed'} |"
        for label, r in configs.items()
    ]
    per_call, cumulative = _plots(result, img_dir)
    return f"""\
{result["turns"]} turns replayed through the real turn path (`run_turn` on the in-memory
fakes), one agent call per turn: the LoCoMo tuning conversations stitched in order
(exchanges: {used}), speaker A as the user, the agent answering with B's reply. Every
request the agent and the compaction (summary) model receive is counted with cl100k
(message contents; the tool definitions, the same on every call, are left out). The
baseline sends the system prompt and every message so far on every call, counted the
same way (its calls before the first compaction equal ours exactly). The summary comes
from the offline model (extractive), so summary sizes are indicative. No MEMORY.md is
injected.

{chr(10).join(settings)}

{chr(10).join(table)}

Target ([budgets](design.md#budgets)): prompt tokens per call flat, bounded by
compaction, not growing with history. Read as: the largest call in the second half of
the replay is at most {result["flat_tolerance"]}x the largest in the first half.

| run | largest call, first half | largest call, second half | target |
|---|---:|---:|---|
{chr(10).join(flat)}

{_interpretation(result)}

{per_call}

{cumulative}
"""


if __name__ == "__main__":
    from bench.common import bench_environment

    bench_environment()
    print(report(run()))
