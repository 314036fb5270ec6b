"""The memory tools of the MCP server (``mcp/server.py``): the caller's own workspace, with
the argument names, limits and errors of the HTTP routes that do the same thing.

    memory_search        POST /v1/memory/search          search_memory (``scope``: a
                         shared scope the user is a member of, through scopes.resolve)
    memory_get           the agent's memory_get           files.read_lines (``scope`` too)
    memory_read          GET /v1/memory                   files.get_memory (``scope`` too)
    memory_save          POST /v1/memory/save             files.save_facts (the route's rules;
                         ``scope``: a shared scope the user maintains)
    memory_promote       POST /v1/memory/promote          promotion.propose (a member's go to
                         the scope's review queue, a maintainer's are written)
    memory_correct       POST /v1/memory/facts/{id}/supersede, as ``save:mcp``: an MCP
                         client is an agent, so it never retires the user's or an
                         operator's fact (corrections.correct_fact)
    thread_search        POST /v1/sessions/search         search_threads
    record_conversation  POST /v1/sessions/{id}/import    import_history (then flush, index)

Arguments are validated by the routes' own pydantic models (``SearchBody``,
``MemorySaveBody``, ``ImportBody``), and each ``inputSchema`` is generated from the model
that validates it, with descriptions added, so schema and rules cannot drift apart.
``call_tool`` raises only ``UnknownToolError``: invalid arguments and 4xx HarnessErrors
come back as ``isError`` results with their message, 5xx ones (store, model) with their
code only, and nothing is written before every check has passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, create_model

from agent_harness.api.schemas import MemorySaveBody, MemorySearchBody, PromoteBody, SearchBody
from agent_harness.errors import HarnessError, ValidationFailedError
from agent_harness.ids import SESSION_ID_PATTERN, validate_session_id
from agent_harness.memory import files
from agent_harness.memory.engine.index import (
    MATCH_MODES,
    Hit,
    Mode,
    answered_mode,
    parse_match_mode,
)
from agent_harness.memory.facts.ledger import day_of
from agent_harness.scopes import Access, Grant, parse_scope, resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pydantic import TypeAdapter

    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "Caller",
    "UnknownToolError",
    "call_tool",
    "list_tools",
]

logger = Logger(child=True)
_SESSION_PATTERN = SESSION_ID_PATTERN


class UnknownToolError(LookupError):
    """tools/call named a tool this server does not have (a protocol error, -32602)."""


# -- arguments and results --------------------------------------------------------------
class MemoryGetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    path: StrictStr = Field(description="a workspace path, as a search hit names it")
    start_line: int | None = Field(default=None, ge=1, description="first line (default 1)")
    end_line: int | None = Field(default=None, ge=1, description="last line (default: the end)")
    scope: StrictStr | None = Field(
        default=None,
        max_length=80,
        description="whose memory: 'user' (default) or a shared scope the user is a member of",
    )


class CorrectArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    fact_id: StrictStr
    text: StrictStr | None = None
    reason: StrictStr | None = None


class ReadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    scope: StrictStr | None = Field(
        default=None,
        max_length=80,
        description="whose memory: 'user' (default) or a shared scope the user is a member of",
    )


Output = tuple[str, Any]
#: what record_conversation says happens next, by the import's flush status
_AFTER_RECORDING = {
    "queued": "their facts reach memory shortly",
    "skipped": "facts are not extracted here: save them with memory_save",
}


@dataclass(frozen=True)
class Caller:
    """Who calls a tool: the signed-in user and their JWT groups (roles on shared scopes)."""

    user: User
    groups: tuple[str, ...] = ()


def _grant(rt: Runtime, caller: Caller, scope: str | None, access: Access) -> Grant:
    """The caller's grant on ``scope`` (None: their own memory) for ``access``: the choke
    point, ``scopes.resolve`` (memberships and JWT groups; a refusal is the tool's error
    and nothing is written)."""
    return resolve(rt, caller.user, parse_scope(scope or "user"), access, caller.groups)


def _owner(rt: Runtime, caller: Caller, scope: str | None, access: Access) -> User:
    """Whose memory a tool works on: the caller's, or a shared scope's they may use."""
    return _grant(rt, caller, scope, access).owner


# -- handlers: each one's name and docstring (title, description) are its tool's ----------
def _memory_search(rt: Runtime, caller: Caller, args: MemorySearchBody) -> Output:
    """Search memory

    Search the user's long-term memory (MEMORY.md and the daily ledgers
    memory/YYYY-MM-DD.md) line by line. Use it before answering about earlier
    conversations, preferences, decisions, people or dates. Only current facts, unless
    include_superseded. Each hit is one line, 'Source: <path>#<line> (fact <id>): <text>';
    read around it with memory_get, correct a wrong fact by its id with memory_correct."""
    from agent_harness.memory.search import format_hits, search_memory
    from agent_harness.memory.vectors import query_vectors

    owner = _owner(rt, caller, args.scope, "read")
    # null: the phrase, else ranked (the answer's match_mode says which)
    query, mode = args.query or "", parse_match_mode(args.match_mode)
    hits = search_memory(
        rt,
        owner,
        query,
        mode,
        args.limit,
        rt.search_cache,
        include_superseded=args.include_superseded,
        as_of=args.as_of,
        queries=query_vectors(rt, caller.user),  # the caller's spend, not a scope's
    )
    return format_hits(query, hits), {"hits": hits, "match_mode": answered_mode(mode, hits)}


def _thread_search(rt: Runtime, caller: Caller, args: SearchBody) -> Output:
    """Search past messages

    Search every past message of the user, in all sessions (one message per record).
    Use it to find what was said before when memory does not have it. Hits name the
    session, turn, role and time."""
    from agent_harness.memory.threads import format_thread_hits, search_threads

    query, mode = args.query or "", parse_match_mode(args.match_mode)
    hits = search_threads(rt, caller.user, query, mode, args.limit, rt.search_cache)
    return format_thread_hits(query, hits), {"hits": hits, "match_mode": answered_mode(mode, hits)}


def _memory_get(rt: Runtime, caller: Caller, args: MemoryGetArgs) -> Output:
    """Read memory lines

    Read lines of one file of the user's memory workspace (e.g. MEMORY.md,
    memory/2026-11-30.md) as 'N|text' rows, to see the context of a search hit."""
    owner = _owner(rt, caller, args.scope, "read")
    return files.read_lines(rt, owner, args.path, args.start_line, args.end_line), None


def _memory_read(rt: Runtime, caller: Caller, args: ReadArgs) -> Output:
    """Read MEMORY.md

    Read the user's consolidated long-term memory, MEMORY.md, whole, with its version."""
    doc = files.get_memory(rt, _owner(rt, caller, args.scope, "read"))
    text = doc.content if doc.content.strip() else "MEMORY.md is empty: nothing saved yet."
    return text, {"content": doc.content, "etag": doc.etag}


def _memory_save(rt: Runtime, caller: Caller, args: MemorySaveBody) -> Output:
    """Save to memory

    Save durable facts to the user's long-term memory (MEMORY.md and the ledger of the
    day) when the user asks you to remember something or states a lasting preference or
    decision. One fact per line."""
    owner = _owner(rt, caller, args.scope, "write")
    if owner.is_scope and args.source:
        raise ValidationFailedError(
            "source names turns of your own sessions; a save into a shared scope takes none"
        )
    source = (args.source.session_id, args.source.turns) if args.source else None
    saved = files.save_facts(
        rt,
        owner,
        args.content,
        timestamp=args.timestamp,
        source=source,
        origin="mcp",
        by=caller.user if owner.is_scope else None,
    )
    noun = "memory" if saved.count == 1 else "memories"
    day = day_of(saved.at, rt.settings.zone)
    text = f"Saved {saved.count} {noun} to MEMORY.md and the ledger of {day}"
    if saved.held:
        text += (
            f"; {saved.held} held for a person to review (an instruction, or a claim about "
            "the user's accounts, contacts or identity, is not saved as a fact)"
        )
    return text, {"saved": saved.count, "held": saved.held}


def _memory_promote(rt: Runtime, caller: Caller, args: PromoteBody) -> Output:
    """Promote to a shared scope

    Propose facts of the user's for a shared scope the user is a member of (a project's,
    an agent's, the organisation's), one fact per line: they wait in the scope's review
    queue for a maintainer, or, when the user maintains the scope, are written at once.
    The user and the turns they came from are kept as their provenance."""
    from agent_harness.memory.facts.promotion import propose

    source = args.source
    done = propose(
        rt,
        caller.user,
        _grant(rt, caller, args.scope, "read"),
        args.content,
        origin="mcp",
        session_id=source.session_id if source else None,
        turns=source.turns if source else None,
    )
    if done.status == "queued":
        text = f"Proposed {done.queued} for review by the maintainers of {done.scope}"
    else:
        text = f"Promoted {done.promoted} into {done.scope}"
        if done.queued:
            text += f"; {done.queued} held for review"
    return text, done.view()


def _memory_correct(rt: Runtime, caller: Caller, args: CorrectArgs) -> Output:
    """Correct a memory

    When the user says a remembered fact is wrong or no longer true: supersede the fact
    (its id, as a memory_search hit shows it: fact YYYY-MM-DD.xxxxxxxx) with the
    corrected text, or retract it (no text). A client's correction retires only facts a
    tool or an agent wrote; a fact the user stated is corrected by the user's app
    (POST /v1/memory/facts/{id}/supersede)."""
    from agent_harness.import_budget import imports_admitted
    from agent_harness.memory.facts.corrections import correct_fact

    with imports_admitted(rt, caller.user, 1, "memory correction"):  # as a save is
        done = correct_fact(
            rt,
            caller.user,
            args.fact_id,
            args.text,
            authority="save:mcp",
            writer="mcp",
            via="memory_correct",
            reason=args.reason,
        )
    text = f"{done.retired} is {done.state}; the record is {done.id} in the ledger of {done.day}"
    return text, {"id": done.id, "retired": done.retired, "state": done.state}


def _record_conversation(rt: Runtime, caller: Caller, args: Any) -> Output:
    """Record a conversation

    Hand a conversation you had with the user to long-term memory: its messages become
    turns of the session, searchable with thread_search, and the facts the user stated
    are extracted into memory in the background."""
    from agent_harness.agent.importer import import_history

    done = import_history(
        rt,
        caller.user,
        validate_session_id(args.session_id, rt.settings.max_session_id_chars),
        args.messages,
    )
    turns, then = f"{done.first_turn}-{done.last_turn}", _AFTER_RECORDING[done.flush]
    return f"Recorded {done.messages} messages as turns {turns} of {done.session_id}; {then}", done


# -- definitions ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tool:
    args: type[BaseModel]
    run: Callable[[Runtime, Caller, Any], Output]
    output: Any  # a type pydantic can adapt, or None: text only
    writes: bool
    #: per argument: schema keywords added to the model's (descriptions, the enum of modes)
    hints: dict[str, dict[str, Any]]

    @property
    def name(self) -> str:
        return self.run.__name__.removeprefix("_")

    @property
    def title(self) -> str:
        return (self.run.__doc__ or "").split("\n\n", 1)[0].strip()

    @property
    def description(self) -> str:
        return " ".join((self.run.__doc__ or "").split("\n\n", 1)[-1].split())


_SEARCH: dict[str, dict[str, Any]] = {
    "query": {"description": "text or keywords to look for"},
    "match_mode": {
        # absent or null: the phrase, else ranked; the default is null, which a client
        # that fills defaults in sends as such (phrase would stay literal)
        "type": ["string", "null"],
        "enum": [*MATCH_MODES, None],
        "default": None,
        "description": "omit it (most callers should): the query as a literal phrase and, "
        "when no line holds it, the best matches by words and meaning, each hit marked "
        "match_mode ranked, so a question alone finds its fact; phrase: only the literal, "
        "case-insensitive phrase; all: every keyword in the same line; any: at least one "
        "keyword; ranked: best matches first by words and meaning, with a score per hit",
    },
    "limit": {"description": "the most hits to return"},
}
#: memory_search's own: the fact lifecycle
_MEMORY_SEARCH: dict[str, dict[str, Any]] = {
    **_SEARCH,
    "include_superseded": {
        "description": "also return facts no longer current (superseded, retracted, "
        "expired), each labelled with when and by what"
    },
    "as_of": {"description": "a day, YYYY-MM-DD: what memory held as current on that day"},
    "scope": {
        "description": "whose memory: 'user' (default, the user's own) or a shared scope "
        "the user is a member of, e.g. 'project:apollo', 'agent:support', 'org'"
    },
}
_SAVE: dict[str, dict[str, Any]] = {
    "content": {"description": "one fact per line, e.g. '- Prefers aisle seats'"},
    "timestamp": {"description": "when they were learned, with a UTC offset (default: now)"},
    "source": {"description": "the turns of one of the user's sessions they came from"},
    "scope": {
        "description": "whose memory: 'user' (default) or a shared scope the user "
        "maintains, e.g. 'project:apollo'"
    },
}
_PROMOTE: dict[str, dict[str, Any]] = {
    "scope": {"description": "the shared scope, e.g. 'project:apollo', 'agent:support', 'org'"},
    "content": {
        "description": "one fact per line, e.g. '- Refunds over 500 EUR need a second approver'"
    },
    "source": {"description": "the turns of one of the user's sessions they came from"},
}
_CORRECT: dict[str, dict[str, Any]] = {
    "fact_id": {"description": "the fact's id, e.g. 2026-11-02.3f9a0c1d"},
    "text": {"description": "the corrected fact; absent or null: retract the fact"},
    "reason": {"description": "why a retracted fact is no longer true"},
}
_RECORD: dict[str, dict[str, Any]] = {
    "session_id": {"pattern": _SESSION_PATTERN, "description": "your id for the conversation"},
    "messages": {"description": "the messages in order, up to 2,000"},
}


@cache
def tools() -> dict[str, _Tool]:
    """The tools by name, built on first use: the import route's models come with the turn
    machinery, which the shared save rule above must not load. Results are described by
    the library's own types (Hit, ThreadHit, ImportResult), so outputSchema cannot drift
    from what the tools return."""
    from agent_harness.agent.importer import ImportBody, ImportResult
    from agent_harness.memory.threads import ThreadHit

    record_args = create_model("RecordArgs", __base__=ImportBody, session_id=(StrictStr, ...))
    memory_hits = create_model("MemoryHits", hits=(list[Hit], ...), match_mode=(Mode, ...))
    thread_hits = create_model("ThreadHits", hits=(list[ThreadHit], ...), match_mode=(Mode, ...))
    document = create_model(
        "MemoryDocument",
        content=(str, ...),
        etag=(str | None, Field(None, description="absent while MEMORY.md does not exist")),
    )
    saved = create_model("SaveResult", saved=(int, ...), held=(int, 0))
    corrected = create_model("CorrectResult", id=(str, ...), retired=(str, ...), state=(str, ...))
    promoted = create_model(
        "PromoteResult",
        scope=(str, ...),
        status=(str, ...),
        promoted=(int, ...),
        queued=(int, ...),
        items=(list[str], ...),
    )
    return {
        tool.name: tool
        for tool in (
            _Tool(MemorySearchBody, _memory_search, memory_hits, False, _MEMORY_SEARCH),
            _Tool(MemoryGetArgs, _memory_get, None, False, {}),
            _Tool(ReadArgs, _memory_read, document, False, {}),
            _Tool(MemorySaveBody, _memory_save, saved, True, _SAVE),
            _Tool(PromoteBody, _memory_promote, promoted, True, _PROMOTE),
            _Tool(CorrectArgs, _memory_correct, corrected, True, _CORRECT),
            _Tool(SearchBody, _thread_search, thread_hits, False, _SEARCH),
            _Tool(record_args, _record_conversation, ImportResult, True, _RECORD),
        )
    }


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


def _schema(model: Any, hints: dict[str, dict[str, Any]]) -> dict[str, Any]:
    schema = _adapter(model).json_schema()
    schema.pop("title", None)  # the model's class name tells a client nothing
    schema.setdefault("properties", {})
    for name, extra in hints.items():
        schema["properties"][name].update(extra)  # KeyError: a hint for a field not there
    return schema


@cache
def list_tools() -> tuple[dict[str, Any], ...]:
    """The tool objects of tools/list (built once per container)."""
    listed = []
    for tool in tools().values():
        entry: dict[str, Any] = {
            "name": tool.name,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": _schema(tool.args, tool.hints),
            "annotations": {
                "title": tool.title,
                "readOnlyHint": not tool.writes,
                # saves and recordings only ever add; a correction retires a fact
                "destructiveHint": tool.name == "memory_correct",
                "idempotentHint": not tool.writes,  # a second save appends a second copy
                "openWorldHint": False,  # the user's own memory, nothing beyond it
            },
        }
        if tool.output is not None:
            entry["outputSchema"] = _schema(tool.output, {})
        listed.append(entry)
    return tuple(listed)


def call_tool(
    rt: Runtime, user: User, name: str, arguments: dict[str, Any], groups: Iterable[str] = ()
) -> dict[str, Any]:
    """One tools/call by ``user`` (``groups``: their JWT groups) as its result object:
    ``content`` (text), ``structuredContent`` when the tool declares an output schema,
    ``isError``. Raises only UnknownToolError."""
    tool = tools().get(name)
    if tool is None:
        raise UnknownToolError(name)
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return _failed(f"invalid arguments for {name}: {problems}")
    try:
        text, structured = tool.run(rt, Caller(user, tuple(groups)), args)
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if structured is not None:  # checked against the schema the tool declares, then sent
            value = _adapter(tool.output).validate_python(structured)
            result["structuredContent"] = _adapter(tool.output).dump_python(
                value, mode="json", exclude_none=True
            )
    except HarnessError as exc:
        if exc.status < 500:  # the caller's to fix; the message says how
            return _failed(exc.message)
        # a store or model failure: its code only, as the API's logs keep the rest
        logger.warning("MCP tool failed", extra={"tool_name": name, "code": exc.code})
        retry = " (temporary; try again)" if exc.retryable else ""
        return _failed(f"{name} failed: {exc.code}{retry}")
    except Exception:  # a bug must not become a 5xx or show internals
        logger.exception("MCP tool failed unexpectedly", extra={"tool_name": name})
        return _failed(f"{name} failed unexpectedly")
    return result


def _failed(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"Error: {message}"}], "isError": True}
