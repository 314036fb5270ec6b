"""Flush input tokens over a 100-turn session against the tokens of the turns themselves.

The session is real dialogue: the first 100 exchanges of LoCoMo conv-26 (a tuning
conversation), one turn a minute. The memory model is the offline stand-in wrapped in a
counter, so the ledger really fills up as the session goes and every request is
counted with the shipped tokenizer (cl100k). Strategies:

* ours under ``always``: one flush per turn, each turn sent once (the flush cursor);
* ours under ``throttled:10m``: one flush per 10 minutes, the tail by the schedule tick;
* the reference's: every flush re-sends the whole working context (compacted at 50
  messages to the last 20, as its defaults do) with the same prompt. It also sends
  MEMORY.md and today's ledger whole on every call; they are left out of its line here,
  so its figures are a lower bound.

"turn tokens" is what the 100 turns weigh rendered as the flush sees them; "conversation
tokens" is the part of the flush input that is the session itself; "total" adds the
fixed part of each call (the instructions, MEMORY.md and today's ledger, both capped).
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agent_harness import markup
from agent_harness.ids import User
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.flush import run_post_turn_job, sweep_flush_tails
from agent_harness.memory.prompts import flush_messages, render_messages
from agent_harness.models.base import ChatRequest, ChatResponse, Message
from agent_harness.models.offline import OfflineChatModel
from agent_harness.records import TurnRecord
from agent_harness.settings import Settings
from agent_harness.tokens import TokenCounter
from tests.fakes import ManualClock, make_runtime

#: the first 200 dialogue lines of LoCoMo conv-26, extracted from locomo10.json
SESSION_FILE = Path(__file__).resolve().parent / "data" / "locomo-conv-26-first-200-lines.json"
CONVERSATION = "conv-26"
TURNS = 100
TARGET = 1.1
USER = User.from_id("bench-user")
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def load_turns(n: int = TURNS) -> list[tuple[str, str]]:
    """(user text, assistant text) pairs from the conversation, in order."""
    data = json.loads(SESSION_FILE.read_text(encoding="utf-8"))
    lines = [line["text"] for line in data["lines"]]
    return [(lines[i], lines[i + 1]) for i in range(0, 2 * n, 2)]


@dataclass
class Counted:
    """Wraps the memory model; counts what every flush request weighs."""

    inner: OfflineChatModel
    counter: TokenCounter
    calls: int = 0
    total: int = 0
    conversation: int = 0
    sizes: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        size = sum(self.counter.count(m.content) for m in request.messages)
        self.total += size
        self.sizes.append(size)
        talk = markup.extract(request.messages[-1].content, markup.CONVERSATION)
        self.conversation += self.counter.count(talk)
        return self.inner.complete(request)


def _turn(turn: int, pair: tuple[str, str]) -> TurnRecord:
    return TurnRecord(
        session_id="s1",
        turn=turn,
        created_at=START.replace(minute=0).isoformat(),
        messages=[
            Message(role="user", content=pair[0]),
            Message(role="assistant", content=pair[1]),
        ],
    )


def run_ours(trigger: str, pairs: list[tuple[str, str]]) -> dict[str, object]:
    counter = TokenCounter()
    model = Counted(OfflineChatModel(counter=counter), counter)
    clock = ManualClock(START)
    rt = make_runtime(memory=model, settings=Settings(flush_trigger=trigger), clock=clock)
    for n, pair in enumerate(pairs, start=1):
        record = _turn(n, pair).model_copy(update={"created_at": clock.now().isoformat()})
        rt.store.put(USER, f"sessions/s1/turns/{n:08d}.json", record.model_dump_json())
        rt.table.acquire_session_lease(USER, "s1", f"o{n}", 0, 1)
        rt.table.commit_turn(USER, "s1", f"o{n}", n, clock.now().isoformat())
        job = PostTurnJob(
            user_id=USER.id, session_id="s1", turn=n, queued_at=clock.now().isoformat()
        )
        run_post_turn_job(rt, job)
        clock.advance(minutes=1)
    clock.advance(minutes=15)  # the session ends; the next ticks flush any tail
    for _ in range(2):
        sweep_flush_tails(rt)
        while rt.queue.post_turn:
            run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    flushed = rt.table.get_session(USER, "s1").flush_cursor
    return {
        "calls": model.calls,
        "total_tokens": model.total,
        "conversation_tokens": model.conversation,
        "largest_call": max(model.sizes),
        "turns_flushed": flushed,
    }


def run_reference(pairs: list[tuple[str, str]]) -> dict[str, object]:
    """Every call: the flush prompt over the whole working context (compacted at 50
    messages down to the last 20 plus a summary, the reference's defaults)."""
    counter = TokenCounter()
    context: list[Message] = []
    total = conversation = calls = 0
    summary = ""
    for pair in pairs:
        context += [
            Message(role="user", content=pair[0]),
            Message(role="assistant", content=pair[1]),
        ]
        if len(context) > 50:
            dropped, context = context[:-20], context[-20:]
            summary = "Summary of earlier conversation: " + " ".join(
                m.content[:40] for m in dropped[-10:]
            )
        messages = ([Message(role="user", content=summary)] if summary else []) + context
        talk = render_messages(messages)
        request = flush_messages(talk, "", "")
        calls += 1
        total += sum(counter.count(m.content) for m in request)
        conversation += counter.count(talk)
    return {
        "calls": calls,
        "total_tokens": total,
        "conversation_tokens": conversation,
        "turns_flushed": len(pairs),
    }


def run() -> dict[str, object]:
    with contextlib.redirect_stdout(io.StringIO()):  # Powertools' metric lines
        return _run()


def _run() -> dict[str, object]:
    pairs = load_turns()
    counter = TokenCounter()
    turn_tokens = sum(
        counter.count(render_messages(_turn(n, p).messages)) for n, p in enumerate(pairs, 1)
    )
    strategies = {
        "ours always": run_ours("always", pairs),
        "ours throttled:10m": run_ours("throttled:10m", pairs),
        "reference (whole context per flush)": run_reference(pairs),
    }
    for result in strategies.values():
        result["conversation_ratio"] = round(result["conversation_tokens"] / turn_tokens, 3)
        result["total_ratio"] = round(result["total_tokens"] / turn_tokens, 3)
    return {
        "session": f"LoCoMo {CONVERSATION}, first {TURNS} exchanges, one turn a minute",
        "turn_tokens": turn_tokens,
        "target_conversation_ratio": TARGET,
        "strategies": strategies,
    }


def report(result: dict[str, object]) -> str:
    lines = [
        f"flush input tokens over {result['session']}",
        f"  the turns themselves: {result['turn_tokens']} tokens",
        f"  {'strategy':<38}{'calls':>6}{'conversation':>14}{'ratio':>7}{'total':>9}{'ratio':>7}",
    ]
    for name, r in result["strategies"].items():  # type: ignore[attr-defined]
        lines.append(
            f"  {name:<38}{r['calls']:>6}{r['conversation_tokens']:>14}"
            f"{r['conversation_ratio']:>7}{r['total_tokens']:>9}{r['total_ratio']:>7}"
        )
    ours = result["strategies"]["ours always"]  # type: ignore[index]
    verdict = "within" if ours["conversation_ratio"] <= TARGET else "OVER"
    lines.append(
        f"  each turn is sent once: conversation ratio {ours['conversation_ratio']}x "
        f"({verdict} the {TARGET}x target); every turn flushed: "
        f"{all(r['turns_flushed'] == TURNS for r in result['strategies'].values())}"  # type: ignore[attr-defined]
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
