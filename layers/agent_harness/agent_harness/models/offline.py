"""The ``offline`` model: a deterministic stand-in for local runs and tests. Not an LLM.

It reads the same prompts a real model gets and behaves by purpose:

    agent        calls the tool ``tool_choice`` forces (named, or required: the best
                 fitting acting tool); else calls an offered acting tool (the caller's or a
                 remote one) whose name shares a word with the message, its required
                 arguments filled from the message (numbers, the text), and answers with
                 what the tool returned; otherwise answers from the memory it was given,
                 by keyword overlap; asked a question that memory does not answer, it
                 calls memory_search (when offered) with the question's keywords and
                 answers from the hits
    flush        extracts first-person durable statements ("I prefer…", "remember…",
                 "we decided…", "我喜欢…", "记住…") of the user's messages as
                 ``- User said: …`` bullets, and of tool results as ``- A tool result
                 (<name>) said: …`` (a naive reader: the gate judges them), or NO_REPLY;
                 never one of the current facts it is shown; on the user's explicit
                 cues ("I moved to …", "I no longer …", "forget that …") it answers
                 lifecycle marks naming them (models.offline_marks)
    consolidate  merges new ledger bullets into MEMORY.md by normalised de-duplication
    compact      summarises extractively (the first sentence of each message, after the
                 points of the previous summary; the newest 40 points)

Every answer it writes to the user starts with ``[offline model]`` so nobody mistakes it
for a real model, but an answer in a ``response_format``: a minimal instance of the
schema whose strings are that answer, or ``{"answer": ...}`` for a JSON object. Tool call
ids are unique in the conversation (``offline-call-<n>``, n one more than its calls so
far). Sampling options and images: it ignores the former; the API refuses the latter.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from agent_harness import markup
from agent_harness.memory import MEMORY_TOOLS
from agent_harness.memory.facts.authority import parse_fact, strip_tags
from agent_harness.models.base import (
    ChatRequest,
    ChatResponse,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
    forced_tool,
)
from agent_harness.models.instance import minimal_instance
from agent_harness.models.offline_marks import (
    lifecycle_bullets,
    recheck_answer,
    second_look_answer,
    shown_facts,
)
from agent_harness.text import WORD, fold, tokens

if TYPE_CHECKING:
    from agent_harness.tokens import TokenCounter

__all__ = ["LABEL", "OfflineChatModel", "extract_facts", "normalise"]

LABEL = "[offline model]"
NO_REPLY = "NO_REPLY"

_DURABLE = re.compile(
    r"""
    \b(?:i|we)\s+(?:really\s+|usually\s+|always\s+|never\s+|don't\s+|do\s+not\s+)?
        (?:prefer|like|love|hate|dislike|enjoy|avoid|use|work|live|own|have\s+a|am|'m)\b
    | \bi'm\b | \bmy\s+\w+(?:\s+\w+)?\s+(?:is|are|was)\b | \bmy\s+name\b | \bcall\s+me\b
    | \bremember\b | \b(?:we|i)\s+(?:have\s+)?(?:decided|agreed|chose|picked|settled)\b
    | \ballergic\b | \bdeadline\b
    | 我(?:很|不|最)?(?:喜欢|爱|讨厌|住在|在|是|叫|用|有) | 记住 | 我们(?:决定|同意|选择) | 我的
    """,
    re.IGNORECASE | re.VERBOSE,
)
_REMEMBER_PREFIX = re.compile(
    r"^(?:(?:hi|hello|hey|ok|okay|so|also|and|but|btw)\b[!,.\s]*)*"
    r"(?:(?:please\s+)?(?:remember|note|keep\s+in\s+mind)(?:\s+that)?[:,]?\s+|记住[:：，,]?)?",
    re.IGNORECASE,
)
#: a sentence ends at ".", "!" or "?" before a space (never inside "attacker.example" or
#: "3.5"), at the CJK stops, or at a newline
_END = re.compile(r"[.!?]+(?=\s|$)|[。！？]+|\n")
_ABBREVIATIONS = frozenset("dr mr mrs ms st prof jr sr vs etc e.g i.e no approx".split())
_CLAUSE = re.compile(r",?\s+(?:and|also)\s+that\s+|[,;]\s+and\s+(?=(?:i|we|my)\b)", re.IGNORECASE)
#: words that carry no meaning for matching a question to a remembered fact
_IGNORED = frozenset(
    (
        "please tell know remember again any some there here just very much many more "
        "most say said user 我 的 是 了 吗 什么 "
    ).split()
)
_SOURCE_HIT = re.compile(r"^Source: (\S+#\d+)(?: \([^)]*\))?: (.*)$", re.MULTILINE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_QUESTION = re.compile(
    r"\?|？|^\s*(?:what|which|who|when|where|why|how|do|does|did|is|are|am|can|could)\b",
    re.IGNORECASE,
)


def _reply(text: str) -> Message:
    return Message(role="assistant", content=f"{LABEL} {text}")


def normalise(text: str) -> str:
    """Lower-case, NFKC, punctuation and extra spaces removed: the de-duplication key."""
    text = strip_tags(re.sub(r"^[-*\s]+", "", fold(text)))
    text = re.sub(r"^(?:user|a tool result \([^)]*\)) said:\s*", "", text)
    return " ".join(WORD.findall(text))


def _keywords(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in _IGNORED}


def _sentences(text: str) -> list[str]:
    """Split at sentence ends, but not after "Dr.", "e.g." or a single initial."""
    out: list[str] = []
    start = 0
    for match in _END.finditer(text):
        before = text[start : match.start()].split()
        word = before[-1].casefold().rstrip(".") if before else ""
        if match.group() == "." and (word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())):
            continue
        sentence = text[start : match.end()].strip()
        if sentence:
            out.append(sentence)
        start = match.end()
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _conversation_turns(text: str) -> list[tuple[str, str, str]]:
    """The transcript's message blocks as (role, tool name, text): the structure the
    flush and the compaction render (``markup.message``), so nothing inside a block can
    speak as another role."""
    return [
        (attrs.get("role", ""), attrs.get("name", ""), body)
        for attrs, body in markup.read_messages(text)
    ]


def extract_facts(conversation: str, known: str = "") -> list[str]:
    """Durable first-person statements of the user and of tool results (said as the
    tool's), minus those already ``known``."""
    seen = {normalise(line) for line in known.splitlines() if line.strip()}
    facts: list[str] = []
    for role, name, body in _conversation_turns(conversation):
        if role == "user":
            said = "User said"
        elif role == "tool" and name not in MEMORY_TOOLS:
            said = f"A tool result ({name or 'tool'}) said"
        else:
            continue
        clauses = (c for s in _sentences(body) for c in _CLAUSE.split(s))
        for raw in clauses:
            sentence = _REMEMBER_PREFIX.sub("", raw.strip()).strip().rstrip(",;")
            if len(sentence) < 4 or not _DURABLE.search(raw):
                continue
            sentence = sentence[0].upper() + sentence[1:]
            if sentence[-1] not in ".!?。！？":
                sentence += "."
            key = normalise(sentence)
            if key and key not in seen:
                seen.add(key)
                facts.append(f"- {said}: {sentence}")
    return facts


def _memory_lines(messages: list[Message]) -> list[str]:
    """The lines of the injected MEMORY.md: a user-role reference message, or the result
    of the synthetic memory_read call (the tool_result framing)."""
    for message in messages:
        block = markup.extract(message.content, markup.MEMORY)
        framed = message.role == "user" or (
            message.role == "tool" and message.name == "memory_read"
        )
        if framed and markup.HARNESS_CONTEXT in message.content and block:
            lines = []
            for line in block.splitlines():
                fact = parse_fact(line)
                if fact is not None:
                    lines.append(fact.text)
                elif line.strip() and not line.lstrip().startswith(("#", ">", "[")):
                    lines.append(line.strip())
            return lines
    return []


def _call_id(kind: str, messages: list[Message]) -> str:
    """Unique in the conversation the model sees (a framework matches results by id):
    one more than the calls in it so far."""
    return f"offline-{kind}-{1 + sum(len(m.tool_calls) for m in messages)}"


def _forced_call(request: ChatRequest, question: str, wanted: set[str]) -> ToolCall | None:
    """The call ``tool_choice`` asks for: the named tool, or (required) the acting tool
    that fits the question best, else the first offered one; arguments filled from the
    question, else a minimal instance of the schema."""
    name = forced_tool(request.tool_choice)
    acting = [t for t in request.tools if t.name not in MEMORY_TOOLS]
    if name is None and request.tool_choice != "required":
        return None
    if name is None:
        best = _acting_call(acting, question, wanted, request.messages)
        if best is not None or not acting:
            return best
        name = acting[0].name
    tool = next((t for t in request.tools if t.name == name), None)
    if tool is None:
        return None
    arguments = _fill(tool.parameters, question)
    if arguments is None:
        arguments = minimal_instance(tool.parameters, question.strip())
    return ToolCall(
        id=_call_id("call", request.messages), name=tool.name, arguments=json.dumps(arguments)
    )


def _formatted(request: ChatRequest, message: Message) -> Message:
    """A text answer in the asked format: a minimal instance of the schema (its strings
    the answer's text), or ``{"answer": text}``."""
    fmt = request.response_format
    if fmt is None or message.tool_calls:
        return message
    if fmt.type == "json_schema" and fmt.json_schema is not None:
        value = minimal_instance(fmt.json_schema, message.content)
    else:
        value = {"answer": message.content}
    return Message(role="assistant", content=json.dumps(value, ensure_ascii=False))


def _acting_call(
    tools: list[ToolSpec], question: str, wanted: set[str], messages: list[Message]
) -> ToolCall | None:
    """A call of the acting tool whose name shares the most words with the question and
    whose required arguments the question can fill; on a tie the one offered last (the
    caller's own tools come after the server's)."""
    best: tuple[int, ToolCall] | None = None
    for tool in tools:
        if tool.name in MEMORY_TOOLS:
            continue
        shared = len(_keywords(tool.name.rsplit("__", 1)[-1].replace("_", " ")) & wanted)
        arguments = _fill(tool.parameters, question) if shared else None
        if arguments is not None and (best is None or shared >= best[0]):
            call = ToolCall(
                id=_call_id("call", messages), name=tool.name, arguments=json.dumps(arguments)
            )
            best = (shared, call)
    return best[1] if best else None


def _fill(schema: dict[str, object], question: str) -> dict[str, object] | None:
    """Required arguments from the question: numbers for numbers, the text for strings,
    the first choice of an enum; None when one cannot be filled."""
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, dict) or not isinstance(required, list):
        return {}
    number = _NUMBER.search(question)
    filled: dict[str, object] = {}
    for name in required:
        spec = properties.get(name)
        kind = spec.get("type") if isinstance(spec, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("enum"), list) and spec["enum"]:
            filled[name] = spec["enum"][0]
        elif kind == "integer" and number and "." not in number.group():
            filled[name] = int(number.group())
        elif kind == "number" and number:
            filled[name] = float(number.group())
        elif kind == "string":
            filled[name] = question.strip()
        elif kind == "boolean":
            filled[name] = True
        else:
            return None
    return filled


class OfflineChatModel:
    """Deterministic, dependency-free. ``counter`` reports token usage like a provider."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter

    @property
    def name(self) -> str:
        return "offline"

    def complete(self, request: ChatRequest) -> ChatResponse:
        if request.purpose == "agent":
            message = _formatted(request, self._answer(request))
        else:
            handler = {
                "flush": self._flush,
                "consolidate": self._consolidate,
                "compact": self._compact,
            }[request.purpose]
            message = Message(role="assistant", content=handler(request.messages))
        usage = Usage()
        if self._counter is not None:
            usage = Usage(
                input_tokens=sum(self._counter.count(m.content) for m in request.messages),
                output_tokens=self._counter.count(message.content or message.model_dump_json()),
            )
        return ChatResponse(
            message=message,
            usage=usage,
            model="offline",
            finish_reason="stop",
        )

    # purposes -------------------------------------------------------------
    @staticmethod
    def _best(wanted: set[str], lines: list[str]) -> list[str]:
        scored = [(len(wanted & _keywords(line)), i, line) for i, line in enumerate(lines)]
        best = max((score for score, _, _ in scored), default=0)
        return [line for score, _, line in scored if score == best and best > 0][:3]

    def _answer(self, request: ChatRequest) -> Message:
        messages = request.messages
        asked = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
        question = messages[asked].content
        wanted = _keywords(question)
        forced = _forced_call(request, question, wanted)
        if forced is not None:
            return Message(role="assistant", tool_calls=[forced])
        acted = [
            m for m in messages[asked + 1 :] if m.role == "tool" and m.name not in MEMORY_TOOLS
        ]
        if acted:
            said = " | ".join(f"{m.name} returned: {m.content[:300]}" for m in acted)
            return _reply(said)
        call = _acting_call(request.tools, question, wanted, messages)
        if call is not None:
            return Message(role="assistant", tool_calls=[call])
        found = self._best(wanted, _memory_lines(messages))
        if found:
            return _reply("From memory: " + " | ".join(found))
        results = [m for m in messages[asked + 1 :] if m.role == "tool"]
        if results:  # the search ran: answer from its hits
            hits = [
                m.group(2) + f" ({m.group(1)})"
                for r in results
                for m in _SOURCE_HIT.finditer(r.content)
            ]
            found = self._best(wanted, hits)
            if found:
                return _reply("From memory_search: " + " | ".join(found))
            return _reply("I searched my memory and found nothing about that.")
        offered = {tool.name for tool in request.tools}
        if "memory_search" in offered and wanted and _QUESTION.search(question):
            arguments = json.dumps({"query": " ".join(sorted(wanted)), "matchMode": "any"})
            return Message(
                role="assistant",
                tool_calls=[
                    ToolCall(
                        id=_call_id("search", messages), name="memory_search", arguments=arguments
                    )
                ],
            )
        return _reply("I have nothing in memory about that yet.")

    @staticmethod
    def _flush(messages: list[Message]) -> str:
        prompt = "\n".join(m.content for m in messages if m.role == "user")
        conversation = markup.extract(prompt, markup.CONVERSATION) or ""
        known = "\n".join(
            block
            for block in (
                markup.extract(prompt, markup.MEMORY_MD),
                markup.extract(prompt, markup.LEDGER_TODAY),
            )
            if block
        )
        shown = shown_facts(prompt)
        known += "".join(f"\n{text}" for _, text in shown)  # never restated
        cues = lifecycle_bullets(conversation, shown)
        cued = {normalise(sentence) for sentence, _ in cues}
        facts = [f for f in extract_facts(conversation, known) if normalise(f) not in cued]
        facts += [bullet for _, lines in cues for bullet in lines]
        return "\n".join(facts) if facts else NO_REPLY

    @staticmethod
    def _consolidate(messages: list[Message]) -> str:
        prompt = "\n".join(m.content for m in messages if m.role == "user")
        rechecked = recheck_answer(prompt)
        if rechecked is None:
            rechecked = second_look_answer(prompt)
        if rechecked is not None:
            return rechecked
        current = (markup.extract(prompt, markup.CURRENT_MEMORY) or "").strip()
        if current == "(empty)":
            current = ""
        entries = markup.extract(prompt, markup.NEW_ENTRIES) or ""
        seen = {normalise(line) for line in current.splitlines() if line.strip()}
        added: list[str] = []
        for line in entries.splitlines():
            stripped = line.strip()
            if not stripped.startswith(("- ", "* ")):
                continue
            key = normalise(stripped)
            if key and key not in seen:
                seen.add(key)
                added.append("- " + stripped[2:].strip())
        body = current or "# Memory"
        return f"{body.rstrip()}\n" + ("\n" + "\n".join(added) + "\n" if added else "")

    @staticmethod
    def _compact(messages: list[Message]) -> str:
        prompt = "\n".join(m.content for m in messages if m.role == "user")
        source = markup.extract(prompt, markup.MESSAGES) or prompt
        previous = markup.extract(source, "previous_summary") or ""
        points = [line for line in previous.splitlines() if line.startswith("- ")]
        for role, _, body in _conversation_turns(source):
            first = (_sentences(body) or [""])[0]
            if first:
                points.append(f"- {role}: {first[:200]}")
        return "## SUMMARY (offline, extractive)\n" + ("\n".join(points[-40:]) or "None")
