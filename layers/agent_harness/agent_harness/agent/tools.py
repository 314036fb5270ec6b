"""Tools the agent can call. A tool is a name, a description, a JSON schema and a handler;
the registry runs them and never raises: every failure goes back to the model as a
result starting with ``Error:`` (bad JSON, unknown tool, invalid arguments, a missing
file, an AWS hiccup), so the model can recover.

    memory_search(query, matchMode?, limit?)   lines of MEMORY.md and memory/**.md
    memory_get(path, startLine?, endLine?)     N|text rows of one file of the workspace
    memory_save(content)                       MEMORY.md + today's ledger, applied when the
                                               turn is saved (a failed turn saves nothing):
                                               ``saved_lines`` reads them from the turn
    memory_correct(fact_id, text?, reason?)    supersede (text) or retract (no text) a
                                               ledger fact; checked when called, applied
                                               when the turn is saved, like memory_save
                                               (``corrections_of`` reads them from the turn)
    thread_search(query, matchMode?, limit?)   every past message of the user, any session

A session bound to shared scopes (agent.scoped) searches them too: memory_search answers
from the user's memory and each bound scope, every hit of a scope labelled with it, and
memory_search and memory_get take a ``scope`` (one of those bound) to read only it.

A correction's authority is what the turn's model was shown (agent.exposure), never
which words it shares with whom: in a clean turn (nothing below the user in its
context) it is the user's (``user``); in an exposed turn (a tool or MCP result, a fact
below the user in memory or a search) it is the lowest authority seen, and a correction
of a trusted fact is proposed for the user's review instead (``PROPOSING``), with what
made the turn exposed. The tool's answer says which and ``(as <authority>)``; the
commit applies exactly that (``corrections_of``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_harness.agent.accepted import CORRECTING, PROPOSING, SAVED
from agent_harness.agent.exposure import Exposure
from agent_harness.errors import HarnessError
from agent_harness.memory.engine.index import (
    DEFAULT_LIMIT,
    MATCH_MODES,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    parse_match_mode,
)
from agent_harness.memory.search import format_scoped_hits, search_memory
from agent_harness.models.base import ToolCall, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime
    from agent_harness.scopes import Grant

__all__ = [
    "AGENT_SAVE",
    "MemoryTools",
    "Tool",
    "ToolRegistry",
]

logger = Logger(child=True)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[dict[str, Any]], str]


class ToolRegistry:
    """A ``ToolBox`` over a list of tools."""

    def __init__(
        self, tools: list[Tool], *, after: Callable[[ToolCall, str], str] | None = None
    ) -> None:
        self._tools = {t.name: t for t in tools}
        self._after = after  # e.g. eviction of oversized results

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
            for t in self._tools.values()
        ]

    def call(self, call: ToolCall) -> str:
        result = self._run(call)
        return self._after(call, result) if self._after else result

    def _run(self, call: ToolCall) -> str:
        tool = self._tools.get(call.name)
        if tool is None:
            return f"Error: unknown tool {call.name}"
        try:
            arguments = json.loads(call.arguments or "{}")
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            return f"Error: the arguments of {call.name} are not valid JSON"
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {call.name} must be a JSON object"
        try:
            return tool.handler(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return f"Error: invalid arguments for {call.name}: {problems}"
        except HarnessError as exc:
            return f"Error: {exc.message}"
        except Exception:  # a bug in a tool must not end the turn
            logger.exception("tool failed", extra={"tool_name": call.name})
            return f"Error: {call.name} failed unexpectedly"


class _SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    query: str | None = Field(max_length=MAX_QUERY_CHARS)
    matchMode: str | None = None  # the tool's public argument name
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)


class _MemorySearchArgs(_SearchArgs):
    scope: str | None = None
    includeSuperseded: bool = False
    asOf: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")

    @field_validator("matchMode")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        parse_match_mode(value)
        return value


class _GetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    path: str
    scope: str | None = None
    startLine: int | None = None
    endLine: int | None = None


class _SaveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    content: str


class _CorrectArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    fact_id: str
    text: str | None = None
    reason: str | None = None


SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "text or keywords to look for"},
        "matchMode": {
            "type": "string",
            "enum": list(MATCH_MODES),
            "description": (
                "omit it to search the phrase and, when no line holds it, rank by words "
                "and meaning (a question alone finds its fact); phrase: only the literal "
                "phrase; all: every keyword in the same line; any: at least one keyword; "
                "ranked: best matches first, by words and meaning"
            ),
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    },
    "required": ["query"],
}
MEMORY_SEARCH_SCHEMA: dict[str, Any] = {
    **SEARCH_SCHEMA,
    "properties": {
        **SEARCH_SCHEMA["properties"],
        "includeSuperseded": {
            "type": "boolean",
            "description": "also facts no longer current, labelled (default false)",
        },
        "asOf": {
            "type": "string",
            "description": "YYYY-MM-DD: what was current on that day",
        },
    },
}
GET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "workspace path, e.g. MEMORY.md"},
        "startLine": {"type": "integer", "minimum": 1},
        "endLine": {"type": "integer", "minimum": 1},
    },
    "required": ["path"],
}
SAVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {
            "type": "string",
            "description": "one durable fact per line, e.g. '- Prefers aisle seats'",
        }
    },
    "required": ["content"],
}


CORRECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "fact_id": {
            "type": "string",
            "description": "the id a memory_search hit shows, e.g. 2026-11-02.3f9a0c1d",
        },
        "text": {
            "type": ["string", "null"],
            "description": "the corrected fact, e.g. 'The user lives in Berlin.'; "
            "omit it (or null) to retract the fact",
        },
        "reason": {
            "type": ["string", "null"],
            "description": "why a retracted fact is no longer true, in the user's words",
        },
    },
    "required": ["fact_id"],
}


#: how an accepted memory_correct answers: the turn applies those when it is written
#: the authority of what the agent model saves
AGENT_SAVE = "save:agent"


@dataclass
class MemoryTools:
    """The memory tools of one turn. ``memory_save`` only checks its content: the turn
    applies the saves its messages record (``saved_lines``) once it is written."""

    rt: Runtime
    user: User
    #: characters this turn's accepted saves will add to MEMORY.md when it is written
    pending: int = 0
    #: the session's bound shared scopes, granted for reading (agent.scoped)
    scopes: list[Grant] = field(default_factory=list)
    #: what the turn's model has been shown below the user (agent.exposure)
    exposure: Exposure = field(default_factory=Exposure)
    #: the turn's query vectors: each query embedded once, metered with the turn
    queries: QueryVectors | None = None

    def registry(self, *, after: Callable[[ToolCall, str], str] | None = None) -> ToolRegistry:
        return ToolRegistry(self.tools(), after=after)

    def _scoped(self, schema: dict[str, Any], what: str) -> dict[str, Any]:
        """``schema`` with a ``scope`` argument naming the bound scopes (none bound: as is)."""
        if not self.scopes:
            return schema
        names = ["user", *(str(g.scope) for g in self.scopes)]
        scope = {"type": "string", "enum": names, "description": what}
        return {**schema, "properties": {**schema["properties"], "scope": scope}}

    def _grant(self, scope: str | None) -> Grant | None:
        """The bound scope an argument names (None: the user's own memory)."""
        if scope in (None, "user"):
            return None
        for grant in self.scopes:
            if str(grant.scope) == scope:
                return grant
        from agent_harness.errors import ForbiddenError

        bound = ", ".join(str(g.scope) for g in self.scopes) or "none"
        raise ForbiddenError(f"scope {scope} is not bound to this session (bound: {bound})")

    def tools(self) -> list[Tool]:
        return [
            Tool(
                "memory_search",
                "Search long-term memory (MEMORY.md and the daily ledgers memory/*.md) "
                "line by line. Use it before answering about earlier conversations, "
                "decisions, dates, people or preferences. Only current facts: a fact "
                "superseded, retracted or expired is left out unless includeSuperseded. "
                "Hits read 'Source: <path>#<line> (fact <id>): <text>'; a hit marked "
                "possibly outdated depends on a fact that changed."
                + (
                    " The shared scopes bound to this session are searched too; their "
                    "hits are labelled [scope <name>]."
                    if self.scopes
                    else ""
                ),
                self._scoped(MEMORY_SEARCH_SCHEMA, "search only this one (default: all)"),
                self.search,
            ),
            Tool(
                "memory_get",
                "Read lines of a file of your workspace (e.g. MEMORY.md, "
                "memory/2026-11-30.md) as 'N|text' rows, to see the context of a hit.",
                self._scoped(GET_SCHEMA, "whose file: a bound shared scope's (default: user)"),
                self.get,
            ),
            Tool(
                "thread_search",
                "Search every past message of this user, in all sessions (a record is "
                "one message). Use it to find what was said before, when memory does "
                "not have it. Hits carry the session, turn, role and time.",
                SEARCH_SCHEMA,
                self.thread_search,
            ),
            Tool(
                "memory_correct",
                "Correct long-term memory when the user says a remembered fact is wrong or "
                "no longer true: pass the fact id a memory_search hit shows (fact "
                "YYYY-MM-DD.xxxxxxxx) and the corrected fact as text, or no text to retract "
                "it. After reading a tool result or a document, a correction of what the "
                "user stated is only proposed for the user's review.",
                CORRECT_SCHEMA,
                self.correct,
            ),
            Tool(
                "memory_save",
                "Save durable facts to long-term memory (MEMORY.md and today's ledger) "
                "when the user asks you to remember something or states a lasting "
                "preference or decision. One fact per line.",
                SAVE_SCHEMA,
                self.save,
            ),
        ]

    def correct(self, arguments: dict[str, Any]) -> str:
        """Checks the correction now (the fact, its state, the authority, the gate) and
        says what the turn will write when it is saved: the correction, or, in an
        exposed turn, a proposal for the user's review."""
        from agent_harness.errors import ValidationFailedError
        from agent_harness.memory.facts.authority import TRUSTED
        from agent_harness.memory.facts.corrections import (
            DEFAULT_REASON,
            check_correction,
            check_length,
            find_fact,
        )
        from agent_harness.memory.facts.gate import Candidate, Policy, admit

        args = _CorrectArgs.model_validate(arguments)
        if args.text is not None and not args.text.strip():
            raise ValidationFailedError("text must not be blank: omit it to retract the fact")
        check_length(self.rt, args.text, args.reason)  # a proposal is capped like a correction
        fact, life = find_fact(self.rt, self.user, args.fact_id)
        authority = self.exposure.floor
        if self.exposure.exposed and fact.authority in TRUSTED:
            check_correction(fact, life, fact.authority)  # still current: else 409 now
            return (
                f"{PROPOSING}{fact.id}: this turn read text the user did not write "
                f"({self.exposure.reasons()}), so the correction is queued for the user's "
                f"review when this turn is saved; the fact stays as it is (as {authority})"
            )
        check_correction(fact, life, authority)
        what = "superseded by the new text" if args.text is not None else "retracted"
        words = args.text if args.text is not None else (args.reason or DEFAULT_REASON)
        admitted = admit([Candidate(words, authority)], Policy.of(self.rt.settings))
        if admitted.held:
            return (
                f"{CORRECTING}{fact.id}: the text is held for a person to review when this "
                "turn is saved (an instruction, or a claim about the user's accounts, "
                f"contacts or identity); the fact is not retired (as {authority})"
            )
        return f"{CORRECTING}{fact.id}: it is {what} when this turn is saved (as {authority})"

    def _search(
        self,
        arguments: dict[str, Any],
        run: Callable[..., list[Any]],
        render: Callable[[str, list[Any]], str],
    ) -> str:
        args = _SearchArgs.model_validate(arguments)
        query = args.query or ""
        mode = parse_match_mode(args.matchMode)
        found = run(
            self.rt,
            self.user,
            query,
            mode,
            args.limit,
            self.rt.search_cache,
            queries=self._queries(),
        )
        return render(query, found)

    def _queries(self) -> QueryVectors | None:
        """The turn's query vectors; outside a turn, one set for this box's searches."""
        if self.queries is None:
            from agent_harness.memory.vectors import query_vectors

            self.queries = query_vectors(self.rt, self.user)
        return self.queries

    def search(self, arguments: dict[str, Any]) -> str:
        args = _MemorySearchArgs.model_validate(arguments)
        query = args.query or ""
        mode = parse_match_mode(args.matchMode)
        # one memory when the argument names it (``user`` too), else the user's and every
        # bound scope's
        one = self._grant(args.scope)
        owners: list[tuple[str | None, User]] = [(None, self.user)]
        if one is not None:
            owners = [(str(one.scope), one.owner)]
        elif args.scope is None:
            owners += [(str(g.scope), g.owner) for g in self.scopes]
        found = [
            (
                label,
                search_memory(
                    self.rt,
                    owner,
                    query,
                    mode,
                    args.limit,
                    self.rt.search_cache,
                    include_superseded=args.includeSuperseded,
                    as_of=args.asOf,
                    queries=self._queries(),
                ),
            )
            for label, owner in owners
        ]
        return format_scoped_hits(query, found)

    def thread_search(self, arguments: dict[str, Any]) -> str:
        from agent_harness.memory.threads import format_thread_hits, search_threads

        return self._search(arguments, search_threads, format_thread_hits)

    def get(self, arguments: dict[str, Any]) -> str:
        from agent_harness.memory.files import read_lines

        args = _GetArgs.model_validate(arguments)
        grant = self._grant(args.scope)
        owner = grant.owner if grant is not None else self.user
        return read_lines(self.rt, owner, args.path, args.startLine, args.endLine)

    def save(self, arguments: dict[str, Any]) -> str:
        """Checks the lines and says what the turn will save: the gate is deterministic,
        so what it holds for review now is what it holds when the turn is written."""
        from agent_harness.memory.facts.gate import Candidate, Policy, admit
        from agent_harness.memory.files import memory_lines

        args = _SaveArgs.model_validate(arguments)
        lines = memory_lines(args.content)
        admitted = admit(
            [Candidate(line, AGENT_SAVE) for line in lines], Policy.of(self.rt.settings)
        )
        saved = len(admitted.lines)
        if saved:  # a full MEMORY.md is the tool's error, never the turn's
            from agent_harness.errors import MemoryFullError
            from agent_harness.memory.capacity import memory_room

            size = sum(len(line) + 1 for line in admitted.lines) + 2
            room = memory_room(self.rt, self.user) - self.pending
            if size > room:
                limit = self.rt.settings.max_memory_chars
                raise MemoryFullError(limit - room + size, limit)
            self.pending += size
        noun = "memory" if saved == 1 else "memories"
        answer = f"{SAVED}{saved} {noun} to MEMORY.md"
        if admitted.held:
            answer += (
                f"; {len(admitted.held)} held for a person to review (an instruction, or a "
                "claim about the user's accounts, contacts or identity, is not saved as a fact)"
            )
        return answer
