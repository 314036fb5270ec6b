# ruff: noqa: E501  (the phrasing tables and report rows read best one per line)
"""Memory that stays true: facts that change over sessions, given right judgements.

Generated users (``bench.stays_true_data``: 44, quick 8) with 4-8 sessions each over
several simulated weeks: moves, new jobs, switched tools, a changed preference, a trip
with an end date, a plan often cancelled, and the home's cascades (a commute stated with
the home: the implicit dependents rule; a gym stated a session later with ``(depends
<id>)``), and for some users up to 120 unrelated facts.

The real AgentCall handler on moto in-process (``bench.hot_path.embedded_stack``), its
clock a ``ManualClock`` set to each session's day. Each session is imported with
``POST /v1/sessions/{id}/import`` (turns dated on the session's day); the jobs it queues on
FlushQueue are received and run by the real post-turn job (``run_post_turn_job`` on the
handler's runtime). The memory model is ``ScriptedMemory``: for a flush it finds the
conversation's user messages in the dataset and answers the dataset's facts in the
lifecycle contract, naming an old fact's id only when that fact is among the
``<current_facts>`` it was shown (read from its prompt, as a real model would); for a
consolidation it merges the new entries into MEMORY.md, leaving out the lines named in
``<retired_facts>`` and those a new entry changes (as a model reading both would); for a
re-check it answers the dataset's truth for each fact shown; for the second look it
retracts a left-out fact the dataset says one of the shown new facts ended.
A forced consolidation (``consolidate``) runs after the middle session and the last.

Then, on the day after the last session plus one, each changing attribute's question is
the first message of a new session (``POST /v1/sessions/{id}/messages``) to an agent model
that records its first request; ``as_of`` searches (``POST /v1/memory/search``) ask for
each version on the day of its statement and on the next version's; fact pages
(``GET /v1/memory/facts/{id}``) say whether the cascade's dependents were marked after the
flush that retired their home, and where they stand after the consolidation.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agent_harness import markup
from agent_harness.ids import User as HarnessUser
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.engine.truth import Truth
from agent_harness.memory.facts.lifecycle import FACT_ID, ledger_fact_id, lifecycle_of
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.jobs.schedule import forced_job, sweep_expiries
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, Usage
from agent_harness.paths import MEMORY_FILE
from bench.stays_true_data import ACK, Fact, User, generate
from local_stack.lambdas import context_for, http_event, import_handler
from tests.fakes import ManualClock

#: the AgentCall function (bench.hot_path's, which loads the plots: imported in ``run``)
FN = "AgentCallFunction"

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

TITLE = "Memory that stays true: changing facts, given right judgements"
TARGETS = {
    "now_current_share": (">=", 0.95),
    "now_retired_shown": ("==", 0),
    "as_of_share": (">=", 1.0),
    "cascade_marked_share": (">=", 1.0),
    "cascade_settled_share": (">=", 1.0),
    "memory_md_retired_lines": ("==", 0),
    "conflicts_shown_share": (">=", 0.95),
}
LABELS = {
    "now_current_share": '"what is true now": the current fact in the first model call',
    "now_retired_shown": '"what is true now": questions whose first call shows a retired '
    "version of the asked fact (unlabelled)",
    "as_of_share": "`as_of` searches answered from the right version",
    "cascade_marked_share": "cascade dependents marked `recheck` (or already settled by "
    "the same change) after the flush that retired their home",
    "cascade_settled_share": "cascade dependents where the dataset says after the "
    "consolidation (retracted, or current when they still hold)",
    "memory_md_retired_lines": "MEMORY.md lines restating a retired fact (final)",
    "conflicts_shown_share": "true conflicts whose old fact was among the related facts "
    "shown to the memory model (default 30)",
}
KEEP_FAILURES = 40


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(".")


def _untagged(line: str) -> str:
    """A bullet's text without its bullet and authority tag."""
    return re.sub(r"^\s*- (\[[^\]]+\] )?", "", line)


# -- the scripted memory model ----------------------------------------------------------


class ScriptedMemory:
    """The memory role, answering the dataset's correct judgements from its prompt only.
    ``active`` is the user whose memory is being worked on (the bench sets it, as a
    deployment's one model serves one request at a time)."""

    name = "bench:stays-true"

    def __init__(self, users: list[User]) -> None:
        self.by_message: dict[str, dict[str, list[Fact]]] = {}
        self.by_text: dict[str, dict[str, Fact]] = {}
        self.facts: dict[str, Fact] = {}
        for user in users:
            messages = self.by_message.setdefault(user.id, {})
            texts = self.by_text.setdefault(user.id, {})
            for fact in user.facts.values():
                messages.setdefault(fact.message, []).append(fact)
                texts[_norm(fact.text)] = fact
                self.facts[fact.key] = fact
        self.active = ""
        #: every true conflict flushed: (user, fact key, kind, wording, old fact shown)
        self.conflicts: list[dict[str, Any]] = []
        #: every explicit dependent flushed: (user, key, ground shown)
        self.depends: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {"flush": 0, "consolidate": 0, "recheck": 0, "second_look": 0}
        #: dataset facts the re-check retracted (a dependent of a retired home)
        self.rechecked_away: set[str] = set()

    def complete(self, request: ChatRequest) -> ChatResponse:
        text = request.messages[-1].content
        if request.purpose == "flush":
            answer = self.flush(text)
        elif markup.extract(text, markup.RECHECK_FACTS) is not None:
            answer = self.recheck(text)
        elif markup.extract(text, markup.LEFT_OUT_FACTS) is not None:
            answer = self.second_look(text)
        else:
            answer = self.consolidate(text)
        return ChatResponse(
            message=Message(role="assistant", content=answer), usage=Usage(), model=self.name
        )

    @staticmethod
    def shown(prompt: str) -> dict[str, str]:
        """The ``<current_facts>`` block: normalised text -> id."""
        block = markup.extract(prompt, markup.CURRENT_FACTS) or ""
        out = {}
        for line in block.splitlines():
            match = re.match(rf"^\[({FACT_ID.pattern})\] (.*)$", line.strip())
            if match:
                out[_norm(match.group(2))] = match.group(1)
        return out

    def flush(self, prompt: str) -> str:
        self.calls["flush"] += 1
        shown = self.shown(prompt)
        conversation = markup.extract(prompt, markup.CONVERSATION) or ""
        said = [c for attrs, c in markup.read_messages(conversation) if attrs["role"] == "user"]
        mine = self.by_message.get(self.active, {})
        bullets = []
        for message in said:
            for fact in mine.get(message, []):
                bullets.append(self._bullet(fact, shown))
        return "\n".join(bullets) or "NO_REPLY"

    def _bullet(self, fact: Fact, shown: dict[str, str]) -> str:
        old_key = fact.supersedes or fact.retracts
        old_id = shown.get(_norm(self.facts[old_key].text)) if old_key else None
        # an old version the re-check already retracted (the cascade of an earlier move)
        # is no longer current: nothing to show, nothing to mark
        if old_key and old_key not in self.rechecked_away:
            self.conflicts.append(
                {
                    "user": self.active,
                    "fact": fact.key,
                    "kind": fact.kind,
                    "wording": fact.wording or "-",
                    "old": old_key,
                    "shown": old_id is not None,
                    "shown_count": len(shown),
                }
            )
        if fact.retracts:
            return f"- (retracts {old_id}) {fact.text}" if old_id else f"- {fact.text}"
        marks = f" (supersedes {old_id})" if old_id else ""
        if fact.depends:
            ground = shown.get(_norm(self.facts[fact.depends].text))
            self.depends.append({"user": self.active, "fact": fact.key, "shown": bool(ground)})
            if ground:
                marks += f" (depends {ground})"
        if fact.until:
            marks += f" (until {fact.until})"
        return f"- {fact.text}{marks}"

    def recheck(self, prompt: str) -> str:
        self.calls["recheck"] += 1
        block = markup.extract(prompt, markup.RECHECK_FACTS) or ""
        lines = block.splitlines()
        out = []
        for n, line in enumerate(lines):
            match = re.match(rf"^\[({FACT_ID.pattern})\] (.*)$", line.strip())
            if not match:
                continue
            changed = lines[n + 1] if n + 1 < len(lines) else ""
            fact = self.by_text.get(self.active, {}).get(_norm(match.group(2)))
            ground = self.facts[fact.ground] if fact and fact.ground else None
            if fact and ground and ground.text.rstrip(".") in changed and not fact.survives:
                city = ground.text.rsplit(" ", 1)[-1].rstrip(".")
                self.rechecked_away.add(fact.key)
                out.append(f"- (retracts {match.group(1)}) The user no longer lives in {city}.")
            else:
                out.append(f"- (confirms {match.group(1)}) Still true after the change.")
        return "\n".join(out) or "NO_REPLY"

    def second_look(self, prompt: str) -> str:
        """The dataset's judgement of each left-out fact: retracted by the shown new fact
        that supersedes or retracts it, else confirmed."""
        self.calls["second_look"] += 1
        texts = self.by_text.get(self.active, {})
        new = {}
        for line in (markup.extract(prompt, markup.NEW_FACTS) or "").splitlines():
            match = re.match(rf"^\[({FACT_ID.pattern})\] (.*)$", line.strip())
            fact = texts.get(_norm(match.group(2))) if match else None
            if match and fact is not None and (fact.supersedes or fact.retracts):
                old = fact.supersedes or fact.retracts or ""
                new[old] = match.group(1)
                for dep in texts.values():  # a dependent ends with its ground
                    if dep.ground == old and not dep.survives:
                        new.setdefault(dep.key, match.group(1))
        out = []
        for line in (markup.extract(prompt, markup.LEFT_OUT_FACTS) or "").splitlines():
            match = re.match(rf"^\[({FACT_ID.pattern})\] (.*)$", line.strip())
            fact = texts.get(_norm(match.group(2))) if match else None
            if match is None:
                continue
            cause = new.get(fact.key) if fact is not None else None
            if cause:
                out.append(f"- (retracts {match.group(1)}) {cause}")
            else:
                out.append(f"- (confirms {match.group(1)}) still true")
        return "\n".join(out) or "NO_REPLY"

    def consolidate(self, prompt: str) -> str:
        self.calls["consolidate"] += 1
        current = markup.extract(prompt, markup.CURRENT_MEMORY) or ""
        entries = markup.extract(prompt, markup.NEW_ENTRIES) or ""
        retired = {
            _norm(x) for x in (markup.extract(prompt, markup.RETIRED_FACTS) or "").splitlines()
        }
        # a right judgement: a line a new entry changes leaves the memory (the second
        # look then asks about it, when the flush could not mark the change)
        texts = self.by_text.get(self.active, {})
        for line in entries.splitlines():
            fact = texts.get(_norm(_untagged(line)))
            old = fact and (fact.supersedes or fact.retracts)
            if old:
                retired.add(_norm("- " + self.facts[old].text))
                for dep in texts.values():  # and what held only while it held
                    if dep.ground == old and not dep.survives:
                        retired.add(_norm("- " + dep.text))
        kept: dict[str, str] = {}
        for line in [*current.splitlines(), *entries.splitlines()]:
            line = line.strip()
            if (
                line.startswith("- ")
                and _norm(re.sub(r"^- \[[^\]]+\] ", "- ", line)) not in retired
                and _norm(line) not in retired
            ):
                kept.setdefault(_norm(re.sub(r"^- \[[^\]]+\] ", "- ", line)), line)
        return "# Memory\n\n## About the user\n" + "\n".join(kept.values()) + "\n"


class FirstCall:
    """The agent model of the questions: records each request, answers plainly."""

    name = "bench:first-call"

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return ChatResponse(
            message=Message(role="assistant", content="Noted."), usage=Usage(), model=self.name
        )


# -- the API ----------------------------------------------------------------------------


def api(app: ModuleType, method: str, path: str, user: str, payload: Any = None) -> Any:
    body = json.dumps(payload).encode() if payload is not None else b""
    headers = {"x-user-id": user, "content-type": "application/json"}
    response = app.lambda_handler(
        http_event(method, path, headers=headers, body=body), context_for(FN)
    )
    if response["statusCode"] >= 300:
        raise RuntimeError(f"{method} {path}: {response['statusCode']} {response['body'][:300]}")
    return json.loads(response["body"]) if response.get("body") else None


def drain_flush_queue(app: ModuleType, queue_url: str) -> int:
    """Run the post-turn jobs queued on FlushQueue (continuations too) with the real job."""
    sqs, rt, jobs = app.runtime.clients["sqs"], app.runtime, 0
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return jobs
        for message in got:
            run_post_turn_job(rt, PostTurnJob.model_validate_json(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            jobs += 1


def purge(app: ModuleType, queue_url: str) -> None:
    sqs = app.runtime.clients["sqs"]
    while got := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        for message in got:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def _at(day: str, hour: int, minute: int = 0) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, minute=minute, tzinfo=UTC)


# -- the dataset's truth ----------------------------------------------------------------


def day_of_fact(user: User) -> dict[str, str]:
    return {f.key: s.day for s in user.sessions for f in s.facts}


def final_truth(user: User) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """Per attribute: the key of its current fact on the question day (None: nothing
    holds), and its retired versions' keys."""
    versions: dict[str, list[Fact]] = {}
    for session in user.sessions:
        for fact in session.facts:
            versions.setdefault(fact.attribute, []).append(fact)
    homes = [f.key for f in versions["home"]]
    current: dict[str, str | None] = {}
    retired: dict[str, list[str]] = {}
    for attribute, facts in versions.items():
        stated = [f for f in facts if f.kind != "cancel"]
        last = stated[-1]
        gone = (
            facts[-1].kind == "cancel"
            or bool(last.until and last.until < user.question_day)
            or bool(last.ground and last.ground != homes[-1] and not last.survives)
        )
        now: Fact | None = None if gone else last
        current[attribute] = now.key if now else None
        retired[attribute] = [f.key for f in stated if now is None or f.key != now.key]
    return current, retired


def retired_by_dataset(user: User) -> set[str]:
    return {k for keys in final_truth(user)[1].values() for k in keys}


# -- reading a first model call --------------------------------------------------------


def call_lines(request: ChatRequest) -> list[str]:
    return [
        " ".join(line.split())
        for m in request.messages
        for line in (m.content or "").splitlines()
        if line.strip()
    ]


def shows(lines: list[str], text: str) -> str | None:
    """``text`` as a line of the call: "current", "outdated" (labelled possibly outdated),
    or None."""
    wanted = " ".join(text.split()).casefold()
    found = None
    for line in lines:
        if wanted in line.casefold():
            if "possibly outdated" not in line:
                return "current"
            found = "outdated"
    return found


# -- the run ----------------------------------------------------------------------------


#: the embedding model of the run whose figures are the bench's (what ``make dev`` runs);
#: the same users also run with words alone, for the old facts a change found
EMBEDDING = "local:multilingual-e5-small"


def run(quick: bool = False) -> dict[str, Any]:
    out = _run(generate(quick), EMBEDDING)
    words = _run(generate(quick), "off")
    out["embedding_model"] = EMBEDDING
    out["words_alone"] = {
        "conflicts_shown_share": words["figures"]["conflicts_shown_share"],
        "conflicts_by_wording": words["conflicts_by_wording"],
        "passed": words["passed"],
        "figures": words["figures"],
    }
    return out


def _run(users: list[User], embedding: str) -> dict[str, Any]:
    memory, agent = ScriptedMemory(users), FirstCall()
    out: dict[str, Any] = {
        "users": len(users),
        "sessions": sum(len(u.sessions) for u in users),
        "facts": sum(len(u.facts) for u in users),
        "facts_per_user_max": max(len(u.facts) for u in users),
        "kinds": {},
        "failures": {k: [] for k in TARGETS},
    }
    for u in users:
        for f in u.facts.values():
            out["kinds"][f.kind] = out["kinds"].get(f.kind, 0) + 1
    now_total = now_hit = now_stale = now_labelled = msg_recalled = 0
    as_total = as_hit = settled_total = settled_hit = 0
    memory_stale = memory_stale_system = spurious = 0
    #: dependents: counted, marked; of those whose home the ledger retired, counted, marked
    tally = {"total": 0, "hit": 0, "given": 0, "given_hit": 0, "by_consolidation": 0}
    from bench.hot_path import embedded_stack  # its plots need the bench requirements

    with embedded_stack() as (resolver, env):
        env["HARNESS_EMBEDDING_MODEL"] = embedding
        app = import_handler(resolver, FN, env)
        rt = app.runtime
        clock = ManualClock(_at(users[0].sessions[0].day, 9))
        rt.clock = clock
        rt.models = ModelRegistry(rt.settings, overrides={"agent": agent, "memory": memory})
        queue = resolver.refs["FlushQueue"]
        for user in users:
            memory.active = user.id
            harness_user = HarnessUser.from_id(user.id)
            days = day_of_fact(user)
            middle = len(user.sessions) // 2
            #: (move, dependent) whose move the ledger has not retired yet
            waiting: list[tuple[Fact, Fact]] = []
            for n, session in enumerate(user.sessions):
                clock.current = _at(session.day, 9)
                if not session.facts:  # nothing said that day: no import
                    if n in (middle, len(user.sessions) - 1):
                        consolidate(rt, forced_job(rt, harness_user))
                        last = n == len(user.sessions) - 1
                        waiting = _check_waiting(
                            app,
                            user,
                            days,
                            memory,
                            waiting,
                            out,
                            tally,
                            consolidated=True,
                            final=last,
                        )
                    continue
                messages = []
                for k, fact in enumerate(session.facts):
                    stamp = _at(session.day, 9, 0) + timedelta(seconds=10 * k)
                    messages.append(
                        {"role": "user", "content": fact.message, "timestamp": stamp.isoformat()}
                    )
                    messages.append(
                        {"role": "assistant", "content": ACK, "timestamp": stamp.isoformat()}
                    )
                api(
                    app,
                    "POST",
                    f"/v1/sessions/{session.id}/import",
                    user.id,
                    {"messages": messages},
                )
                clock.current = _at(session.day, 20)
                drain_flush_queue(app, queue)
                # the cascade: the dependents of each home this session retired are marked
                # (a move the flush could not mark is judged by the next consolidation's
                # second look, which re-checks its dependents in the same run)
                for fact in session.facts:
                    if fact.kind != "home" or not fact.supersedes:
                        continue
                    for dep in user.facts.values():
                        if dep.ground == fact.supersedes:
                            waiting.append((fact, dep))
                waiting = _check_waiting(
                    app, user, days, memory, waiting, out, tally, consolidated=False
                )
                if n in (middle, len(user.sessions) - 1):
                    consolidate(rt, forced_job(rt, harness_user))
                    last = n == len(user.sessions) - 1
                    waiting = _check_waiting(
                        app, user, days, memory, waiting, out, tally, consolidated=True, final=last
                    )

            # the cascade settled: where each dependent stands after the consolidations
            current, retired = final_truth(user)
            for dep in user.facts.values():
                if dep.kind not in ("commute", "gym"):
                    continue
                ground_retired = dep.ground != current["home"] and dep.ground in retired["home"]
                if not ground_retired:
                    continue
                settled_total += 1
                view = _fact_view(app, user.id, ledger_fact_id(days[dep.key], dep.text))
                expected = "current" if dep.survives else "retired"
                state = None if view is None else view["state"]
                got = "current" if view and state == "current" and not view["recheck"] else (
                    "retired" if state in ("retracted", "superseded") else f"{state} recheck={view and view['recheck']}"
                )  # fmt: skip
                settled_hit += got == expected
                if got != expected:
                    _fail(
                        out,
                        "cascade_settled_share",
                        {"user": user.id, "dependent": dep.key, "expected": expected, "got": got},
                    )

            # the questions, on the question day, after that day's schedule tick: a user a
            # fact of whose expired since is consolidated
            clock.current = _at(user.question_day, 9)
            sweep_expiries(rt)  # the tick's part for expiries; its fan-out is this loop's
            if rt.table.get_user(harness_user).is_due:
                consolidate(rt, forced_job(rt, harness_user))
            gone = retired_by_dataset(user)
            for attribute, question in user.questions.items():
                agent.requests.clear()
                api(
                    app,
                    "POST",
                    f"/v1/sessions/{user.id}-q-{attribute}/messages",
                    user.id,
                    {"message": question},
                )
                lines = call_lines(agent.requests[0])
                want = current.get(attribute)
                if want is not None:
                    now_total += 1
                    seen = shows(lines, user.facts[want].text)
                    now_hit += seen is not None
                    if seen is None:
                        _fail(
                            out,
                            "now_current_share",
                            {
                                "user": user.id,
                                "attribute": attribute,
                                "expected": user.facts[want].text,
                                "retired_shown": [
                                    user.facts[k].text
                                    for k in retired[attribute]
                                    if shows(lines, user.facts[k].text)
                                ],
                            },
                        )
                stale = [
                    k
                    for k in retired.get(attribute, [])
                    if shows(lines, user.facts[k].text) == "current"
                ]
                labelled = [
                    k
                    for k in retired.get(attribute, [])
                    if shows(lines, user.facts[k].text) == "outdated"
                ]
                now_stale += bool(stale)
                now_labelled += bool(labelled)
                if stale:
                    _fail(out, "now_retired_shown", {
                        "user": user.id, "attribute": attribute, "shown": [user.facts[k].text for k in stale],
                        "where": [ln[:160] for ln in lines if any(user.facts[k].text.casefold() in ln.casefold() for k in stale)][:3],
                        "ledger_state": [_state(app, user.id, ledger_fact_id(days[k], user.facts[k].text)) for k in stale],
                    })  # fmt: skip
                msg_recalled += any(user.facts[k].message in ln for k in gone for ln in lines)
            purge(app, queue)  # the questions' own post-turn jobs are not part of the data

            # as_of: each version on its own day, and on its successor's
            for fact in user.facts.values():
                if not fact.supersedes and not fact.retracts and not fact.until:
                    continue
                checks: list[tuple[str, Fact | None, Fact | None]] = []
                if fact.until:
                    checks.append((days[fact.key], fact, None))
                    if fact.until < user.question_day:
                        checks.append((user.question_day, None, fact))
                else:
                    old = user.facts[fact.supersedes or fact.retracts or ""]
                    checks.append((days[old.key], old, None if fact.retracts else fact))
                    checks.append((days[fact.key], None if fact.retracts else fact, old))
                for day, present, absent in checks:
                    texts = [f.text for f in (present, absent) if f is not None]
                    query = " ".join(
                        sorted({w for t in texts for w in re.findall(r"[A-Za-z0-9]+", t)} - _COMMON)
                    )
                    hits = api(
                        app,
                        "POST",
                        "/v1/memory/search",
                        user.id,
                        {"query": query, "match_mode": "any", "limit": 200, "as_of": day},
                    )["hits"]
                    found = [h["text"] for h in hits]
                    ok = (present is None or any(present.text in t for t in found)) and (
                        absent is None or not any(absent.text in t for t in found)
                    )
                    as_total += 1
                    as_hit += ok
                    if not ok:
                        _fail(
                            out,
                            "as_of_share",
                            {
                                "user": user.id,
                                "as_of": day,
                                "expected": present and present.text,
                                "not": absent and absent.text,
                                "hits": [
                                    t[:120]
                                    for t in found
                                    if (present and present.text in t)
                                    or (absent and absent.text in t)
                                ],
                            },
                        )

            # MEMORY.md: lines restating a fact retired (by the dataset; and by the ledgers)
            doc = rt.store.get(harness_user, MEMORY_FILE)
            text = doc.content if doc else ""
            for key in gone:
                if user.facts[key].text.casefold() in text.casefold():
                    memory_stale += 1
                    _fail(
                        out,
                        "memory_md_retired_lines",
                        {"user": user.id, "fact": key, "text": user.facts[key].text},
                    )
            ledgers = {
                d["day"]: api(app, "GET", f"/v1/memory/ledger/{d['day']}", user.id)["content"]
                for d in api(app, "GET", "/v1/memory/ledger", user.id)["days"]
            }
            life = lifecycle_of(ledgers, user.question_day)
            memory_stale_system += len(Truth(life).stale(text))
            expected_dependents = {
                ledger_fact_id(days[d.key], d.text) for d in user.facts.values() if d.ground
            }
            spurious += sum(1 for f in life.facts.values() if f.marks.confirms)
            spurious -= sum(
                1
                for f in life.facts.values()
                if f.marks.confirms and any(c in expected_dependents for c in f.marks.confirms)
            )
    conflicts = memory.conflicts
    shown = sum(c["shown"] for c in conflicts)
    for c in conflicts:
        if not c["shown"]:
            _fail(out, "conflicts_shown_share", c)
    by_wording: dict[str, list[int]] = {}
    for c in conflicts:
        row = by_wording.setdefault(f"{c['kind']}: {c['wording']}", [0, 0])
        row[0] += c["shown"]
        row[1] += 1
    out["figures"] = {
        "now_current_share": _share(now_hit, now_total),
        "now_retired_shown": now_stale,
        "as_of_share": _share(as_hit, as_total),
        "cascade_marked_share": _share(tally["hit"], tally["total"]),
        "cascade_settled_share": _share(settled_hit, settled_total),
        "memory_md_retired_lines": memory_stale,
        "conflicts_shown_share": _share(shown, len(conflicts)),
    }
    out["counts"] = {
        "now_questions": now_total,
        "now_questions_all": sum(len(u.questions) for u in users),
        "now_retired_labelled_outdated": now_labelled,
        "now_questions_recalling_a_retired_versions_message": msg_recalled,
        "as_of_checks": as_total,
        "cascade_marked": tally["total"],
        "cascade_marked_only_by_the_consolidation": tally["by_consolidation"],
        "cascade_settled": settled_total,
        "cascade_marked_when_the_home_was_retired": f"{tally['given_hit']} of {tally['given']}",
        "memory_md_retired_lines_by_ledgers": memory_stale_system,
        "conflicts": len(conflicts),
        "explicit_depends": len(memory.depends),
        "explicit_depends_ground_shown": sum(d["shown"] for d in memory.depends),
        "rechecks_confirmed_not_dependents": spurious,
        "model_calls": memory.calls,
    }
    out["conflicts_by_wording"] = {
        k: {"shown": v[0], "of": v[1]} for k, v in sorted(by_wording.items())
    }
    out["passed"] = {k: _passes(k, v) for k, v in out["figures"].items()}
    out["targets"] = {k: f"{op} {v}" for k, (op, v) in TARGETS.items()}
    return out


_COMMON = {
    "The",
    "the",
    "user",
    "User",
    "a",
    "in",
    "to",
    "at",
    "as",
    "for",
    "of",
    "their",
    "is",
    "s",
}


def _fact_view(app: ModuleType, user: str, fact_id: str) -> dict[str, Any] | None:
    try:
        return dict(api(app, "GET", f"/v1/memory/facts/{fact_id}", user))
    except RuntimeError:
        return None


def _state(app: ModuleType, user: str, fact_id: str) -> str | None:
    view = _fact_view(app, user, fact_id)
    return None if view is None else str(view["state"])


def _short(view: dict[str, Any] | None) -> Any:
    return None if view is None else {k: view.get(k) for k in ("id", "state", "recheck", "depends")}


def _check_waiting(
    app: ModuleType,
    user: User,
    days: dict[str, str],
    memory: ScriptedMemory,
    waiting: list[tuple[Fact, Fact]],
    out: dict[str, Any],
    tally: dict[str, int],
    *,
    consolidated: bool,
    final: bool = False,
) -> list[tuple[Fact, Fact]]:
    """Count each waiting (move, dependent) marked or settled, and return the rest. After
    a flush, one not yet marked waits for the next consolidation (its move not marked, or
    its depends mark lost: the home was not shown to the flush that wrote it, and it
    shares no word with it); after a consolidation it fails, unless the ledger has not
    retired the move yet and a later consolidation remains."""
    still = []
    for fact, dep in waiting:
        ok, home, row = _marked(app, user, days, memory, fact, dep)
        if not ok and (not consolidated or (home == "current" and not final)):
            still.append((fact, dep))
            continue
        tally["total"] += 1
        tally["hit"] += ok
        tally["by_consolidation"] += ok and consolidated
        if home in ("superseded", "retracted"):
            tally["given"] += 1
            tally["given_hit"] += ok
        if not ok:
            _fail(out, "cascade_marked_share", row)
    return still


def _marked(
    app: ModuleType, user: User, days: dict[str, str], memory: ScriptedMemory, fact: Fact, dep: Fact
) -> tuple[bool, str | None, dict[str, Any]]:
    """Is ``dep`` marked for the re-check of the move ``fact``, or settled (by the same
    change: the move session stated a new commute; or by the re-check that already ran)?
    Also the old home's state, and the failure's row."""
    old = user.facts[fact.supersedes or ""]
    home = _state(app, user.id, ledger_fact_id(days[old.key], old.text))
    view = _fact_view(app, user.id, ledger_fact_id(days[dep.key], dep.text))
    state = None if view is None else view["state"]
    ok = state in ("superseded", "retracted") or (
        state == "current"
        and view is not None
        and (bool(view["recheck"]) or (dep.survives and home != "current"))
    )
    # an explicit dependent's mark is written only if its home was shown
    written = dep.kind != "gym" or any(d["fact"] == dep.key and d["shown"] for d in memory.depends)
    row = {
        "user": user.id, "dependent": dep.key, "kind": dep.kind, "text": dep.text,
        "home_retired": fact.supersedes, "view": _short(view), "home_state": home,
        "depends_written": written,
    }  # fmt: skip
    return ok, home, row


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in calls.items())


def _fail(out: dict[str, Any], figure: str, row: dict[str, Any]) -> None:
    rows = out["failures"][figure]
    if len(rows) < KEEP_FAILURES:
        rows.append(row)
    out.setdefault("failure_counts", {})[figure] = out.get("failure_counts", {}).get(figure, 0) + 1


def _share(hit: int, total: int) -> float | None:
    return round(hit / total, 4) if total else None


def _passes(key: str, value: float | None) -> bool:
    op, target = TARGETS[key]
    if value is None:
        return False
    return value >= target if op == ">=" else value == target


# -- the report -------------------------------------------------------------------------


def report(result: dict[str, Any]) -> str:
    lines = [
        f"stays true: {result['users']} users, {result['sessions']} sessions, "
        f"{result['facts']} facts (at most {result['facts_per_user_max']} a user)"
    ]
    for key, value in result["figures"].items():
        verdict = "ok" if result["passed"][key] else "FAIL"
        lines.append(
            f"  {LABELS[key][:70]:<72} {value}  (target {result['targets'][key]}) {verdict}"
        )
    for key, value in result["counts"].items():
        lines.append(f"  {key}: {value}")
    for key, rows in result["failures"].items():
        if rows:
            lines.append(
                f"  failures of {key} ({result['failure_counts'][key]}), first: {json.dumps(rows[0])[:400]}"
            )
    return "\n".join(lines)


def _words_alone_text(result: dict[str, Any]) -> list[str]:
    alone = result.get("words_alone")
    if not alone:
        return []
    failing = [k for k, ok in alone["passed"].items() if not ok]
    figures = ", ".join(f"{k} {v}" for k, v in alone["figures"].items())
    return [
        "",
        f"With words alone: {figures}"
        + (f"; below target: {', '.join(failing)}." if failing else "; every target met."),
    ]


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    rows = ["| figure | value | target | |", "|---|---:|---|---|"]
    for key, value in result["figures"].items():
        verdict = "ok" if result["passed"][key] else "**fails**"
        rows.append(f"| {LABELS[key]} | {value} | {result['targets'][key]} | {verdict} |")
    counts = result["counts"]
    alone = result.get("words_alone", {}).get("conflicts_by_wording", {})
    wording = [
        "| conflict: kind, wording | old fact shown | words alone | of |",
        "|---|---:|---:|---:|",
    ]
    for key, row in result["conflicts_by_wording"].items():
        other = alone.get(key, {}).get("shown", "–")
        wording.append(f"| {key} | {row['shown']} | {other} | {row['of']} |")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(result["kinds"].items()))
    failing = [k for k, ok in result["passed"].items() if not ok]
    notes = []
    for key in failing:
        rows_ = result["failures"].get(key) or []
        if rows_:
            notes.append(
                f"- `{key}` ({result['failure_counts'][key]}), e.g. `{json.dumps(rows_[0])[:300]}`"
            )
    return "\n".join(
        [
            f"{result['users']} generated users, {result['sessions']} sessions over several "
            f"simulated weeks, {result['facts']} facts ({kinds}; at most "
            f"{result['facts_per_user_max']} a user), imported through `POST "
            "/v1/sessions/{id}/import` on the real AgentCall handler (moto in-process, its "
            "clock on the session's day) and flushed by the real post-turn job. The memory "
            "model is scripted: it answers the dataset's correct judgements in the flush's "
            "lifecycle contract, naming an old fact only when its id is among the "
            "`<current_facts>` it was shown; it merges consolidations leaving out the "
            "`<retired_facts>` lines and the lines a new entry changes, re-checks with the "
            "dataset's truth, and in the consolidation's second look retracts a left-out "
            "fact the dataset says a shown new fact ended. Questions are the first message "
            "of a new session; their first model call is inspected. Recall by meaning is on "
            f"(`HARNESS_EMBEDDING_MODEL={result.get('embedding_model', 'off')}`); the same "
            "users run again with words alone for the last table. A change worded `unlike` "
            'its old fact shares no word with it ("We finally unpacked the last boxes at our '
            'new flat in Malmo." against "The user lives in Lisbon."): only meaning finds '
            "the old fact among the user's others.",
            "",
            *rows,
            "",
            f"{counts['now_questions']} questions with a current fact (of "
            f"{counts['now_questions_all']}); {counts['now_retired_labelled_outdated']} showed a "
            "retired version labelled possibly outdated; "
            f"{counts['now_questions_recalling_a_retired_versions_message']} recalled a past "
            "message stating a retired version (dated, as a message). "
            f"{counts['as_of_checks']} `as_of` checks, {counts['cascade_marked']} dependents "
            f"of retired homes, {counts['conflicts']} true conflicts; explicit `depends` "
            f"written for {counts['explicit_depends_ground_shown']} of "
            f"{counts['explicit_depends']} (the home must be shown); "
            f"{counts['cascade_marked_only_by_the_consolidation']} dependents settled only by "
            "the consolidation after the flush (a move or a `depends` the flush could not "
            f"mark). Memory model calls: {_calls(counts['model_calls'])}.",
            "",
            *wording,
            *_words_alone_text(result),
            *(["", "Failing:", *notes] if notes else []),
        ]
    )
