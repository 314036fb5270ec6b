"""The write -> retrieve -> inject -> act chain: why did the agent believe that?

turn_memory   GET /v1/sessions/{s}/turns/{n}/memory: what memory reached one turn's
              model and why: the MEMORY.md version injected, each recalled line with
              its fact id, authority, score and day, what the budget, the floor and
              the checks cut, and the memory tools the turn ran with what they
              returned. All from the turn object the turn writes anyway: recording
              the chain costs no request.
fact_reach    a fact (its text or id) back to where it was written (the ledger
              sections that hold it) and on to every turn it reached: recalled by
              id, shown in the MEMORY.md version a turn injected, or returned by a
              memory tool a turn ran. An operator's question: it reads every turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_harness.errors import NotFoundError
from agent_harness.ids import validate_session_id
from agent_harness.memory import MEMORY_TOOLS
from agent_harness.memory.facts.authority import fact_id, parse_fact
from agent_harness.memory.facts.ledger import SOURCE_PREFIX, source_fields
from agent_harness.paths import MEMORY_FILE, turn_path
from agent_harness.records import TurnRecord

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["MAX_REACH_TURNS", "Reach", "fact_reach", "memory_tools_of", "turn_memory"]

#: a tool result kept in the record view (the thread log has it whole)
RESULT_CHARS = 2000
#: fact_reach reads at most this many turns, newest sessions first
MAX_REACH_TURNS = 5000


def memory_tools_of(record: TurnRecord) -> list[dict[str, Any]]:
    """The memory tools the turn ran, in order, with their arguments and results."""
    results = {m.tool_call_id: m.content for m in record.messages if m.role == "tool"}
    ran = []
    for message in record.messages:
        for call in message.tool_calls:
            if call.name in MEMORY_TOOLS:
                result = results.get(call.id)
                ran.append(
                    {
                        "name": call.name,
                        "call_id": call.id,
                        "arguments": call.arguments,
                        "result": None if result is None else result[:RESULT_CHARS],
                    }
                )
    return ran


def turn_memory(rt: Runtime, user: User, session_id: str, turn: int) -> dict[str, Any]:
    """One turn's memory record (404 when the turn does not exist)."""
    validate_session_id(session_id, rt.settings.max_session_id_chars)
    stored = rt.store.get(user, turn_path(session_id, turn)) if turn >= 1 else None
    record = TurnRecord.parse_or_none(stored.content) if stored else None
    if record is None:
        raise NotFoundError(f"session {session_id} has no turn {turn}")
    memory = record.memory
    return {
        "session_id": session_id,
        "turn": turn,
        "created_at": record.created_at,
        "model": record.model,
        "memory_md": {
            "path": MEMORY_FILE,
            "etag": memory.etag,
            "version_id": memory.version_id,
            "injected": memory.tokens > 0,
            "tokens": memory.tokens,
            "original_tokens": memory.original_tokens,
            "truncated": memory.truncated,
        },
        "recall": {
            "tokens": memory.recall_tokens,
            "lines": [line.model_dump() for line in memory.lines],
            "sources": memory.recalled,
            "cut": memory.cut.model_dump(),
        },
        "scopes": [s.model_dump() for s in memory.scopes],
        "tools": memory_tools_of(record),
        "total_tokens": memory.total_tokens,
    }


@dataclass
class Reach:
    """Where a fact was written and which turns it reached."""

    fact_id: str
    #: lines holding it (ledgers, archive, MEMORY.md): path, line, text, its section's
    #: source
    written: list[dict[str, Any]] = field(default_factory=list)
    #: turns it reached: session, turn, how ("recalled", "memory_md", a tool's name)
    reached: list[dict[str, Any]] = field(default_factory=list)
    #: turns read (at most MAX_REACH_TURNS)
    turns_read: int = 0


def fact_reach(rt: Runtime, user: User, fact: str) -> Reach:
    """``fact`` (a line's text, or a fact id from a turn's record) from where it was
    written (every ledger line and MEMORY.md line with its id) to every turn it reached."""
    from agent_harness.memory.engine.corpus import load_memory_files

    is_id = len(fact) == 16 and fact.startswith("f") and fact[1:].isalnum()
    wanted = fact if is_id else fact_id(fact)
    reach = Reach(wanted)
    for path, index in load_memory_files(rt, user, rt.search_cache):
        source = None
        for number, line in enumerate(index.lines):
            if line.startswith(SOURCE_PREFIX):
                source = source_fields(line)
            elif line.startswith("#"):
                source = None
            elif parse_fact(line) and fact_id(line) == wanted:
                written = {"path": path, "line": number + 1, "text": line, "source": source}
                reach.written.append(written)
    versions: dict[str, set[str]] = {}  # the fact ids of MEMORY.md versions, by version id
    listed = sorted((i.path for i in rt.store.list(user, "sessions/")), reverse=True)
    turns = [p for p in listed if "/turns/" in p and p.endswith(".json")][:MAX_REACH_TURNS]
    for obj in rt.store.get_many(user, turns).values():
        record = TurnRecord.parse_or_none(obj.content)
        if record is None:
            continue
        reach.turns_read += 1
        for how in _how(rt, user, record, wanted, versions):
            reach.reached.append({"session_id": record.session_id, "turn": record.turn, "how": how})
    reach.reached.sort(key=lambda r: (r["session_id"], r["turn"]))
    return reach


def _how(
    rt: Runtime, user: User, record: TurnRecord, wanted: str, versions: dict[str, set[str]]
) -> list[str]:
    found = []
    if any(line.fact_id == wanted for line in record.memory.lines):
        found.append("recalled")
    version = record.memory.version_id
    if version and record.memory.tokens:
        if version not in versions:
            old = rt.store.get_version(user, MEMORY_FILE, version)
            lines = old.content.splitlines() if old else []
            versions[version] = {fact_id(line) for line in lines if parse_fact(line)}
        if wanted in versions[version]:
            found.append("memory_md")
    for tool in memory_tools_of(record):
        result = tool["result"] or ""
        if any(fact_id(_hit_text(row)) == wanted for row in result.splitlines()):
            found.append(tool["name"])
    return found


def _hit_text(row: str) -> str:
    """A memory tool's result row as the fact it shows (``Source: path#n: text``, or
    ``N|text`` of memory_get)."""
    if row.startswith("Source: "):
        return row.split(": ", 2)[-1]
    number, bar, text = row.partition("|")
    return text if bar and number.isdigit() else row
