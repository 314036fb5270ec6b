"""no-lost-turn, flush-once, consolidation-safe and failed-model-writes-nothing
(docs/design.md#invariants) under crashes: the process dies at each durable step of a turn,
a flush and a consolidation, then the call is retried (the client) or the job redelivered
(SQS). A crash here is a death, not an exception: from the fault on, every AWS call of
that invocation fails too, so no cleanup (`finally`, lease release) gets to run. After
the retry: 0 lost facts, 0 facts twice, and no version of MEMORY.md is empty or partial.

On the in-memory fakes (S3 and DynamoDB semantics, conditional writes), so each case
takes milliseconds and the fault lands exactly where it is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from agent_harness import markup
from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.models.base import ChatRequest, ChatResponse, Message
from tests.fakes import make_runtime

ALICE = User.from_id("alice")
FACTS = ["I like green tea", "I play jazz piano", "I hike on Sundays"]


class Crash(BaseException):
    """The process died (not an Exception: nothing may catch it and carry on)."""


@dataclass
class Fault:
    target: str  # "store" or "table"
    method: str
    when: str  # "before" or "after" the call
    path: str | None = None  # for store calls: a path fragment to match


class Dying:
    """Wraps a store or table: at the fault the process dies; after that every call
    of the invocation fails (the process is gone)."""

    def __init__(self, inner: Any, name: str, world: World) -> None:
        self._inner, self._name, self._world = inner, name, world

    def __getattr__(self, attr: str) -> Any:
        real = getattr(self._inner, attr)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            world = self._world
            if world.dead:
                raise Crash(f"{self._name}.{attr} after the crash")
            hit = world.armed and world.fault.target == self._name and world.fault.method == attr
            if hit and world.fault.path is not None:
                hit = len(args) > 1 and world.fault.path in str(args[1])
            if hit and world.fault.when == "before":
                world.die()
            result = real(*args, **kwargs)
            if hit:
                world.die()
            return result

        return call


@dataclass
class World:
    fault: Fault
    armed: bool = False
    dead: bool = False
    crashes: int = 0

    def die(self) -> None:
        self.armed, self.dead = False, True
        self.crashes += 1
        raise Crash(f"crash at {self.fault}")


class NaiveExtractor:
    """A memory model that states every remembered line it is shown, already known or
    not (the offline model skips what the ledger holds: here only our guards may)."""

    name = "naive-extractor"

    def __init__(self) -> None:
        from agent_harness.models.offline import OfflineChatModel

        self.merge = OfflineChatModel()

    def complete(self, request: ChatRequest) -> ChatResponse:
        if request.purpose != "flush":
            return self.merge.complete(request)
        talk = markup.extract(request.messages[-1].content, markup.CONVERSATION) or ""
        facts = [
            "- The user said: " + body.split("Remember that ", 1)[1].rstrip(".")
            for attrs, body in markup.read_messages(talk)
            if attrs.get("role") == "user" and body.startswith("Remember that ")
        ]
        text = "\n".join(facts) or "NO_REPLY"
        return ChatResponse(message=Message(role="assistant", content=text), model=self.name)


def build(fault: Fault):
    rt = make_runtime(memory=NaiveExtractor())  # offline agent and merge
    world = World(fault)
    rt.store = Dying(rt.store, "store", world)  # type: ignore[assignment]
    rt.table = Dying(rt.table, "table", world)  # type: ignore[assignment]
    return rt, world


def restart(rt, world: World, *, lease_seconds: int) -> None:
    """A new process: calls work again; leases held by the dead one expire."""
    world.dead = False
    rt.clock.advance(seconds=lease_seconds + 1)


def drain(rt) -> None:
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))


def consolidate_now(rt) -> None:
    job = ConsolidationJob(user_id=ALICE.id, force=True, requested_at="2026-11-30T09:00:00Z")
    consolidate(rt, job)


STEPS = {
    "turn: after the model reply": Fault("store", "put", "before", "/turns/"),
    "turn: after the log write": Fault("store", "put", "after", "/turns/"),
    "turn: after the context write": Fault("store", "put", "after", "context.json"),
    "turn: before the lease release": Fault("table", "commit_turn", "before"),
    "flush: after the ledger append": Fault("store", "append", "after", "memory/2026"),
    "flush: before the cursor update": Fault("table", "advance_flush_cursor", "before"),
    "consolidation: after the MEMORY.md write": Fault("store", "put", "after", "MEMORY.md"),
    "consolidation: before the watermark update": Fault(
        "table", "complete_consolidation", "before"
    ),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_crash_at_each_durable_step_loses_nothing_and_duplicates_nothing(
    step: str, record
) -> None:
    rt, world = build(STEPS[step])
    stage = step.split(":")[0]
    settings = rt.settings

    # turn 1 goes through everything before any fault
    run_turn(rt, ALICE, "s1", f"Remember that {FACTS[0]}.")
    drain(rt)
    consolidate_now(rt)

    # turn 2, with the fault armed at the named step, then the retry that follows a crash
    world.armed = True
    message = f"Remember that {FACTS[1]}."
    if stage == "turn":
        with pytest.raises(Crash):
            run_turn(rt, ALICE, "s1", message)
        restart(rt, world, lease_seconds=settings.session_lease_seconds)
        run_turn(rt, ALICE, "s1", message)  # the client retries the same message
        drain(rt)
        consolidate_now(rt)
    else:
        run_turn(rt, ALICE, "s1", message)
        if stage == "flush":
            job = rt.queue.post_turn.pop(0)
            with pytest.raises(Crash):
                run_post_turn_job(rt, job)
            restart(rt, world, lease_seconds=0)
            run_post_turn_job(rt, job)  # SQS redelivers the job
            consolidate_now(rt)
        else:
            drain(rt)
            with pytest.raises(Crash):
                consolidate_now(rt)
            restart(rt, world, lease_seconds=settings.consolidation_lease_seconds)
            consolidate_now(rt)  # the job is redelivered once its lease has expired
    assert world.crashes == 1

    # turn 3 after recovery, and the memory pipeline to the end
    run_turn(rt, ALICE, "s1", f"Remember that {FACTS[2]}.")
    drain(rt)
    consolidate_now(rt)

    store = rt.store._inner
    ledger = "".join(store.text(ALICE, info.path) or "" for info in store.list(ALICE, "memory"))
    memory = store.text(ALICE, "MEMORY.md") or ""
    in_ledger = [
        sum(line.count(f) for line in ledger.splitlines() if line.startswith("- ")) for f in FACTS
    ]
    in_memory = [memory.count(f) for f in FACTS]
    versions = store.objects[store.key(ALICE, "MEMORY.md")]
    bad_versions = [
        v
        for v in versions
        if not v.data.strip() or not v.data.endswith(b"\n") or not v.data.startswith(b"# ")
    ]
    turns = [info.path for info in store.list(ALICE, "sessions/s1/turns")]
    lost = sum(c == 0 for c in in_ledger) + sum(c == 0 for c in in_memory)
    twice = sum(c > 1 for c in in_ledger) + sum(c > 1 for c in in_memory)

    record(
        "no-lost-turn, flush-once, consolidation-safe",
        f"crash {step}: facts lost (ledger, MEMORY.md)",
        lost,
        "0",
        lost == 0,
    )
    record("flush-once, consolidation-safe", "  ... facts written twice", twice, "0", twice == 0)
    record(
        "consolidation-safe, failed-model-writes-nothing",
        "  ... MEMORY.md versions empty or partial",
        f"{len(bad_versions)} of {len(versions)}",
        "0",
        not bad_versions,
    )

    assert lost == 0, (in_ledger, in_memory, ledger, memory)
    assert twice == 0, (in_ledger, in_memory, ledger, memory)
    assert not bad_versions
    assert len(turns) >= 3  # every answered turn is in the log (a crashed one may be too)
