"""The memory answers' formats: what the flush and the consolidation ask a model to
answer, and how an answer is read back into the text the rest of the pipeline checks.

    json     (HARNESS_MEMORY_ANSWER_FORMAT=auto on a real provider, or json_schema) the
             request carries a JSON schema (``response_format``: OpenAI-compatible
             servers pass it on, llama.cpp and vLLM constrain decoding to it; Anthropic
             and Bedrock get it as a forced answer tool: models.structured). The flush's
             schema lists the ids the call was shown as the only values a mark may
             take, so a grammar-constrained model cannot invent or mangle one
    text     (the offline stand-in, or HARNESS_MEMORY_ANSWER_FORMAT=text) the bullet
             list and Markdown document the prompts describe

Either way the answer is turned into the text format (``flush_text``,
``memory_text``) and read by the same checks (memory.jobs.extract.read_answer,
prompts.clean_memory_document): a model that ignores the schema and answers text is
read as text; JSON of the wrong shape is a ModelOutputError (one corrective call).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_harness.errors import ModelOutputError
from agent_harness.memory.jobs.calls import bounded
from agent_harness.models.base import Message, ResponseFormat

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.models.base import ChatRequest
    from agent_harness.runtime import Runtime

__all__ = [
    "consolidation_format",
    "consolidation_request",
    "flush_format",
    "flush_request",
    "flush_text",
    "memory_text",
    "structured",
]

#: what a flush answer is, as a corrective call restates it
FLUSH_FORMAT = (
    'a Markdown list of the new facts, one "- " line each (marks such as '
    "(supersedes <id>) only with ids from the current facts block), or NO_REPLY"
)
#: what a consolidation answer is, as a corrective call restates it
CONSOLIDATION_FORMAT = (
    'only the merged MEMORY.md: Markdown headings and "- " fact lines, each fact once'
)
#: what the prompt adds in the json format (the schema says the same, for the decoder)
FLUSH_JSON = (
    'Answer with one JSON object: {"facts": [{"text": "<the fact>", "supersedes": '
    '["<id>"], "depends": ["<id>"], "until": "YYYY-MM-DD"}], "retracts": [{"id": "<id>", '
    '"why": "<why>"}]}. Marks go in their fields, never in the text; leave out a field '
    'that does not apply. Nothing worth keeping: {"facts": []}.'
)
CONSOLIDATION_JSON = (
    'Answer with one JSON object: {"title": "Memory", "sections": [{"heading": '
    '"<section>", "facts": ["[<tag>] <fact>"]}]}: the complete new MEMORY.md, each fact '
    "once, with its tag."
)
_DAY = r"^\d{4}-\d{2}-\d{2}$"


def structured(rt: Runtime) -> bool:
    """Do memory calls ask for JSON (``HARNESS_MEMORY_ANSWER_FORMAT``)? ``auto``: yes,
    except for the offline stand-in, which answers the text format."""
    chosen = rt.settings.memory_answer_format
    if chosen == "auto":
        return rt.settings.model_for("memory").provider != "offline"
    return chosen == "json_schema"


def flush_format(ids: Sequence[str]) -> ResponseFormat:
    """The flush answer's schema; a mark may name only ``ids`` (none: no marks)."""
    # the fields in the order the prompt shows them (a decoder held to the schema writes
    # them in this order: a mark after ``until`` is one a small model rarely reaches)
    fact: dict[str, Any] = {"text": {"type": "string", "minLength": 1, "maxLength": 600}}
    properties: dict[str, Any] = {}
    if ids:
        named = {"type": "array", "items": {"type": "string", "enum": list(ids)}}
        fact |= {"supersedes": named, "depends": named}
        retraction = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "enum": list(ids)},
                "why": {"type": "string", "maxLength": 300},
            },
            "required": ["id", "why"],
            "additionalProperties": False,
        }
        properties["retracts"] = {"type": "array", "items": retraction}
    fact["until"] = {"type": "string", "pattern": _DAY}
    properties["facts"] = {
        "type": "array",
        "maxItems": 50,
        "items": {
            "type": "object",
            "properties": fact,
            "required": ["text"],
            "additionalProperties": False,
        },
    }
    schema = {
        "type": "object",
        "properties": properties,
        "required": ["facts"],
        "additionalProperties": False,
    }
    return ResponseFormat(type="json_schema", name="memory_facts", json_schema=schema)


def consolidation_format() -> ResponseFormat:
    """The consolidation answer's schema: MEMORY.md as a title and sections of facts."""
    section = {
        "type": "object",
        "properties": {
            "heading": {"type": "string", "maxLength": 200},
            "facts": {"type": "array", "items": {"type": "string", "maxLength": 600}},
        },
        "required": ["heading", "facts"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 200},
            "sections": {"type": "array", "items": section},
        },
        "required": ["sections"],
        "additionalProperties": False,
    }
    return ResponseFormat(type="json_schema", name="memory_document", json_schema=schema)


def _json(content: str) -> Any:
    """``content`` as JSON when it is a JSON object (a fenced one too), else None."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    if not text.startswith("{"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelOutputError(f"the answer is not valid JSON ({exc.msg})") from exc


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ModelOutputError(f"{where} must be a list of strings")
    return [" ".join(v.split()) for v in value if v.strip()]


def flush_text(content: str) -> str:
    """A flush answer in the text format: JSON as bullets with their marks, anything
    else as it is (a model that ignored the schema)."""
    data = _json(content)
    if data is None:
        return content
    if not isinstance(data, dict) or not isinstance(data.get("facts", []), list):
        raise ModelOutputError('the answer is not {"facts": [...]}')
    lines: list[str] = []
    for n, fact in enumerate(data.get("facts") or []):
        if isinstance(fact, str):
            fact = {"text": fact}
        if not isinstance(fact, dict) or not isinstance(fact.get("text"), str):
            raise ModelOutputError(f"facts[{n}] has no text")
        text = " ".join(fact["text"].split())
        if not text:
            continue
        for mark in ("supersedes", "depends"):
            ids = _strings(fact.get(mark), f"facts[{n}].{mark}")
            text += f" ({mark} {', '.join(ids)})" if ids else ""
        until = fact.get("until")
        if isinstance(until, str) and until.strip():
            text += f" (until {until.strip()})"
        lines.append(f"- {text}")
    for n, record in enumerate(data.get("retracts") or []):
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise ModelOutputError(f"retracts[{n}] has no id")
        why = " ".join(str(record.get("why") or "no longer true").split())
        lines.append(f"- (retracts {record['id'].strip()}) {why}")
    return "\n".join(lines) if lines else "NO_REPLY"


def memory_text(content: str) -> str:
    """A consolidation answer as Markdown: JSON as a title, headings and fact lines,
    anything else as it is."""
    data = _json(content)
    if data is None:
        return content
    sections = data.get("sections") if isinstance(data, dict) else None
    if not isinstance(sections, list):
        raise ModelOutputError('the answer is not {"sections": [...]}')
    title = " ".join(str(data.get("title") or "Memory").split())
    out = [f"# {title}"]
    for n, section in enumerate(sections):
        if not isinstance(section, dict):
            raise ModelOutputError(f"sections[{n}] is not an object")
        facts = _strings(section.get("facts"), f"sections[{n}].facts")
        heading = " ".join(str(section.get("heading") or "").split()).lstrip("#").strip()
        if heading and heading != title:
            out += ["", f"## {heading}"]
        out += [f"- {fact.removeprefix('- ')}" for fact in facts]
    return "\n".join(out) + "\n"


def flush_request(
    rt: Runtime, messages: list[Message], ids: Sequence[str]
) -> tuple[ChatRequest, str]:
    """A flush call's request in the format the settings choose (marks naming only
    ``ids`` in the json one), and what its answer must be, in words (for a corrective
    call)."""
    cap = rt.settings.flush_max_tokens
    if not structured(rt):
        return bounded(rt, messages, "flush", cap), FLUSH_FORMAT
    json_messages = _with_instruction(messages, FLUSH_JSON)
    return bounded(rt, json_messages, "flush", cap, flush_format(ids)), _AS_SCHEMA


def consolidation_request(
    rt: Runtime, messages: list[Message], max_tokens: int
) -> tuple[ChatRequest, str]:
    """A consolidation call's request in the format the settings choose, and what its
    answer must be, in words."""
    if not structured(rt):
        return bounded(rt, messages, "consolidate", max_tokens), CONSOLIDATION_FORMAT
    json_messages = _with_instruction(messages, CONSOLIDATION_JSON)
    fmt = consolidation_format()
    return bounded(rt, json_messages, "consolidate", max_tokens, fmt), _AS_SCHEMA


_AS_SCHEMA = "one JSON object as the schema says"


def _with_instruction(messages: list[Message], instruction: str) -> list[Message]:
    """``messages`` with ``instruction`` added to the system prompt (a custom prompt
    too): the json format's words beside its schema."""
    first, *rest = messages
    if first.role != "system":
        return [Message(role="system", content=instruction), *messages]
    return [first.model_copy(update={"content": f"{first.content}\n\n{instruction}"}), *rest]
