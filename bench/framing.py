"""Injection framing: how MEMORY.md and recall reach each provider, measured on the wire.

The same turn in two framings, its MEMORY.md and recall lines holding the poisoning
suite's planted instructions (as if a person had approved every one: the worst case the
write gate leaves to the model):

    message      what ships: MEMORY.md and recall as user-role reference messages,
                 tagged as data (agent.context)
    tool_result  a synthetic ``memory_read`` call of the assistant, answered by a tool
                 result holding the same two blocks

Each is sent through the real provider adapters (OpenAI-compatible, Anthropic Messages,
Bedrock Converse) to recording transports, for a turn's first call (tools offered) and
for the loop's last call (no tools offered). Measured per provider and framing, from the
request body itself: where the planted instructions are (text the API attributes to the
user, a tool result, the same turn as the user's own new message), whether the request
is one the API accepts (a tool call answered by its result; tools declared whenever the
history holds tool blocks, which Anthropic and Bedrock require), and the framing's tokens.
No model answers here: how a model *acts* on each framing needs a live provider.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_harness import markup
from agent_harness.agent.context import RECALL_INTRO, REFERENCE_INTRO, build_messages
from agent_harness.models.base import ChatRequest, Message, ToolSpec
from agent_harness.records import WorkingContext
from agent_harness.tokens import TokenCounter
from bench.common import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from agent_harness.settings import Framing

TITLE = "Injection framing: where memory lands on each provider's wire"
FIXTURES = ROOT / "tests" / "fixtures" / "providers"
SYSTEM = "You are a helpful assistant that remembers this user across sessions."
NEW = "Where should my invoices go?"
FRAMINGS: tuple[Framing, ...] = ("message", "tool_result")
PROVIDERS = ("openai", "anthropic", "bedrock")
TOOL = ToolSpec(name="memory_search", description="Search memory", parameters={"type": "object"})


def _planted() -> list[str]:
    from tests.reliability.test_poisoning import PLANTED

    return PLANTED


def _blocks() -> tuple[str, str]:
    """The MEMORY.md reference and the recall message, as agent.context frames them."""
    planted = _planted()
    half = len(planted) // 2
    memory = "\n".join(f"- [operator] {p}" for p in planted[:half])
    recalled = "\n".join(f"- [operator] {p} (2026-11-30#{n})" for n, p in enumerate(planted[half:]))
    reference = markup.wrap(
        markup.HARNESS_CONTEXT,
        f"{REFERENCE_INTRO}\n{markup.wrap(markup.MEMORY, memory)}",
        source="MEMORY.md",
        kind="reference-data",
    )
    recall = markup.wrap(
        markup.HARNESS_CONTEXT,
        f"{RECALL_INTRO}\n{markup.wrap(markup.RECALLED, recalled)}",
        source="recall",
        kind="reference-data",
    )
    return reference, recall


def messages(framing: Framing) -> list[Message]:
    """The turn's first prompt as agent.context builds it in ``framing``."""
    reference, recall = _blocks()
    return build_messages(
        SYSTEM,
        Message(role="user", content=reference),
        WorkingContext(session_id="s"),
        Message(role="user", content=NEW),
        Message(role="user", content=recall),
        framing=framing,
    )


class _Recorder:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        import httpx

        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, headers=self.answer["headers"], json=self.answer["body"])


class _Converse:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        self.bodies.append(kwargs)
        return self.answer


def wire(provider: str, request: ChatRequest) -> dict[str, Any]:
    """The body ``provider``'s adapter sends for ``request``."""
    import httpx

    from agent_harness.models.anthropic import AnthropicChatModel
    from agent_harness.models.bedrock import BedrockChatModel
    from agent_harness.models.openai import OpenAIChatModel

    answers = json.loads((FIXTURES / f"{provider}.json").read_text())["plain"]
    if provider == "bedrock":
        client = _Converse(answers)
        BedrockChatModel("anthropic.claude-sonnet-4-5-v1:0", client=client).complete(request)
        return client.bodies[0]
    recorder = _Recorder(answers)
    http = httpx.Client(transport=httpx.MockTransport(recorder))
    if provider == "openai":
        OpenAIChatModel("gpt-4.1-mini", base_url="http://x/v1", client=http).complete(request)
    else:
        AnthropicChatModel("claude-sonnet-4-5", api_key="ak", client=http).complete(request)
    return recorder.bodies[0]


def _parts(provider: str, body: dict[str, Any]) -> list[tuple[int, str, str, str]]:
    """(turn, role, kind, text) of every piece of content: kind is text, tool_use or
    tool_result, in the provider's own terms mapped to ours."""
    out: list[tuple[int, str, str, str]] = []
    for n, message in enumerate(body["messages"]):
        role = message["role"]
        content = message.get("content")
        if provider == "openai":
            if role == "tool":
                out.append((n, role, "tool_result", content or ""))
            elif message.get("tool_calls"):
                out.append((n, role, "tool_use", json.dumps(message["tool_calls"])))
            if role != "tool" and isinstance(content, str) and content:
                out.append((n, role, "text", content))
            continue
        for block in content:
            if provider == "anthropic":
                kind = block["type"]
                text = block.get("text") or json.dumps(block.get("content", block.get("input", "")))
            else:
                kind = next(iter(block))
                text = block.get("text") or json.dumps(block.get(kind))
                kind = {"toolUse": "tool_use", "toolResult": "tool_result"}.get(kind, kind)
            out.append((n, role, kind, text))
    return out


def _valid(provider: str, body: dict[str, Any], parts: list[tuple[int, str, str, str]]) -> bool:
    """Would the API take it: tool calls answered, tools declared when tool blocks exist
    (Anthropic and Bedrock refuse a history with tool blocks and no tools)."""
    uses = [p for p in parts if p[2] == "tool_use"]
    results = [p for p in parts if p[2] == "tool_result"]
    if len(uses) != len(results):
        return False
    if not uses or provider == "openai":
        return True
    declared = body.get("tools") if provider == "anthropic" else body.get("toolConfig")
    return bool(declared)


def measure(provider: str, framing: Framing, tools: bool, counter: TokenCounter) -> dict[str, Any]:
    request = ChatRequest(messages=messages(framing), tools=[TOOL] if tools else [])
    body = wire(provider, request)
    parts = _parts(provider, body)
    markers = [p.split(" to ")[-1].split()[0] for p in _planted()]
    new_turn = next(n for n, role, kind, text in parts if kind == "text" and NEW in text)
    as_user = as_tool = same_turn = 0
    for marker in markers:
        where = [(n, role, kind) for n, role, kind, text in parts if marker in text]
        as_user += any(role == "user" and kind == "text" for _, role, kind in where)
        as_tool += any(kind == "tool_result" for _, _, kind in where)
        same_turn += any(n == new_turn for n, _, _ in where)
    framing_messages = [m for m in messages(framing)[1:] if m.content != NEW]
    return {
        "planted": len(markers),
        "as_user_text": as_user,
        "as_tool_result": as_tool,
        "same_turn_as_new_message": same_turn,
        "valid": _valid(provider, body, parts),
        "framing_tokens": sum(
            counter.count(m.content or m.model_dump_json()) for m in framing_messages
        ),
    }


def run(quick: bool = False) -> dict[str, Any]:
    counter = TokenCounter()
    calls = {"first call (tools offered)": True, "last call (no tools)": False}
    return {
        "calls": {
            call: {
                provider: {f: measure(provider, f, tools, counter) for f in FRAMINGS}
                for provider in PROVIDERS
            }
            for call, tools in calls.items()
        }
    }


def report(result: dict[str, Any]) -> str:
    lines = ["injection framing on the wire (planted instructions: as user text / tool result / "
             "in the new message's turn; valid)"]  # fmt: skip
    for call, providers in result["calls"].items():
        lines.append(f"  {call}")
        for provider, framings in providers.items():
            for framing, m in framings.items():
                lines.append(
                    f"    {provider:<10}{framing:<12} {m['as_user_text']:>2}/{m['planted']} "
                    f"{m['as_tool_result']:>2} {m['same_turn_as_new_message']:>2}  valid "
                    f"{m['valid']}  {m['framing_tokens']} tokens"
                )
    return "\n".join(lines)


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    rows = [
        "| call | provider | framing | planted as the user's text | in a tool result | "
        "in the turn of the user's new message | request valid | framing tokens |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    for call, providers in result["calls"].items():
        for provider, framings in providers.items():
            for framing, m in framings.items():
                rows.append(
                    f"| {call} | {provider} | `{framing}` | {m['as_user_text']}/{m['planted']} | "
                    f"{m['as_tool_result']} | {m['same_turn_as_new_message']} | "
                    f"{'yes' if m['valid'] else '**no**'} | {m['framing_tokens']:,} |"
                )
    text = (
        "The same turn framed two ways, its MEMORY.md and recall holding the poisoning "
        "suite's planted instructions as if a person had approved each (what the write gate "
        "would leave to the model), through the real provider adapters to recording "
        "transports. *Valid*: a tool call answered by its result, and tools declared "
        "whenever the history holds tool blocks (Anthropic and Bedrock refuse one without). "
        "No model answers here; what the figures say about a model's behaviour is in "
        "[architecture](architecture.md#memory-framing)."
    )
    return text + "\n\n" + "\n".join(rows)


if __name__ == "__main__":
    print(report(run()))
