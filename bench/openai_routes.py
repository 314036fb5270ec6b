"""The OpenAI routes: AWS requests of a chat completion and of a response, against the
budget of a turn (at most 8, the LIST of automatic recall included).

The real AgentCall handler on moto in-process, default settings, one container that has
served the user before (its listing window not passed, as a warm container); its agent
model answers ``ok`` or, for a message that asks about an order, calls the caller's
``lookup_order`` and then answers from its result. Requests counted with botocore hooks
on the handler's own clients, for each way a stateless client continues a conversation:
a new one, one sent whole (its place found: one GetItem), one pinned by X-Session-Id or
by ``previous_response_id``, a call of the caller's tool (a pause) and its result (the
resume). The place a request leaves is put by the transaction that ends its turn, so it
costs no request of its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from bench.hot_path import FN, USER, AwsMeter, embedded_stack, post
from local_stack.lambdas import context_for, http_event, import_handler
from tests.fakes import ORDER_TOOL

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

TITLE = "OpenAI routes: AWS requests of a chat completion and of a response"
BUDGET = 8
CHAT_TOOL = {"type": "function", "function": ORDER_TOOL}
#: not a turn's budget: a new session whose history is imported, as POST /import would
BRANCH = "chat: a branch (an earlier message edited): a new session, its history imported"
RESPONSE_TOOL = {"type": "function", **ORDER_TOOL}


class Clerk:
    """Calls ``lookup_order`` when the last user message asks about an order and no result
    came yet; else answers plainly."""

    name = "bench:clerk"

    def complete(self, request: ChatRequest) -> ChatResponse:
        last = request.messages[-1]
        if last.role == "user" and "order" in last.content:
            call = ToolCall(id="call-42", name="lookup_order", arguments='{"order_id": 42}')
            message = Message(role="assistant", tool_calls=[call])
        elif last.role == "tool":
            message = Message(role="assistant", content=f"Order status: {last.content}")
        else:
            message = Message(role="assistant", content=f"ok: {last.content[:40]}")
        return ChatResponse(message=message, usage=Usage(input_tokens=1), model=self.name)


def call(
    app: ModuleType, path: str, payload: dict[str, Any], session: str | None = None
) -> tuple[dict[str, Any], str]:
    """POST to an OpenAI route; the answer (which must be a 200) and its session."""
    headers = {"x-user-id": USER, "content-type": "application/json"}
    if session is not None:
        headers["x-session-id"] = session
    event = http_event("POST", path, headers=headers, body=json.dumps(payload).encode())
    response = app.lambda_handler(event, context_for(FN))
    if response["statusCode"] != 200:
        raise RuntimeError(f"request failed: {response}")
    return json.loads(response["body"]), response["headers"]["X-Session-Id"]


def count_requests(resolver: Any, env: dict[str, str]) -> dict[str, Any]:
    app = import_handler(resolver, FN, env)
    app.runtime.models = ModelRegistry(app.runtime.settings, overrides={"agent": Clerk()})
    post(app, "warm-up", "I prefer green tea.")  # the container has served the user
    meter = AwsMeter().attach(app.runtime.clients)
    rows: dict[str, Any] = {}

    def measured(label: str, path: str, payload: dict[str, Any], session: str | None = None):
        meter.reset()
        answer, named = call(app, path, payload, session)
        rows[label] = {"requests": len(meter.operations), "operations": sorted(meter.operations)}
        return answer, named

    chat = "/v1/chat/completions"
    hello = [{"role": "user", "content": "hello"}]
    first, _ = measured("chat: a new conversation", chat, {"messages": hello})
    reply = first["choices"][0]["message"]
    going = [*hello, reply, {"role": "user", "content": "and tea?"}]
    second, session = measured("chat: the conversation sent whole", chat, {"messages": going})
    pinned = [*going, second["choices"][0]["message"], {"role": "user", "content": "thanks"}]
    third, _ = measured("chat: pinned by X-Session-Id", chat, {"messages": pinned}, session)
    ask = [*pinned, third["choices"][0]["message"], {"role": "user", "content": "my order?"}]
    paused, _ = measured(
        "chat: a call of the app's tool (pause)", chat, {"messages": ask, "tools": [CHAT_TOOL]}
    )
    called = paused["choices"][0]["message"]
    result = {"role": "tool", "tool_call_id": called["tool_calls"][0]["id"], "content": "shipped"}
    measured(
        "chat: its tool message (resume)",
        chat,
        {"messages": [*ask, called, result], "tools": [CHAT_TOOL]},
    )

    edited = [*hello, reply, {"role": "user", "content": "and coffee?"}]
    measured(BRANCH, chat, {"messages": edited})

    responses = "/v1/responses"
    opened, _ = measured("responses: a new conversation", responses, {"input": "hello"})
    after = {"previous_response_id": opened["id"]}
    later, _ = measured(
        "responses: previous_response_id", responses, {"input": "and tea?", **after}
    )
    paused, _ = measured(
        "responses: a function_call (pause)",
        responses,
        {
            "input": "my order?",
            "previous_response_id": later["id"],
            "tools": [RESPONSE_TOOL],
        },
    )
    (fc,) = paused["output"]
    output = {"type": "function_call_output", "call_id": fc["call_id"], "output": "shipped"}
    measured(
        "responses: its function_call_output (resume)",
        responses,
        {"input": [output], "previous_response_id": paused["id"], "tools": [RESPONSE_TOOL]},
    )
    whole = [
        {"role": "user", "content": "hi there"},
        *measured("responses: a new conversation, as items", responses, {"input": "hi there"})[0][
            "output"
        ],
        {"role": "user", "content": "and coffee?"},
    ]
    measured("responses: the conversation sent whole", responses, {"input": whole})
    return rows


def run(quick: bool = False) -> dict[str, Any]:
    with embedded_stack() as (resolver, env):
        requests = count_requests(resolver, env)
    over = [k for k, row in requests.items() if row["requests"] > BUDGET and k != BRANCH]
    return {"budget": BUDGET, "requests": requests, "within_budget": not over}


def report(result: dict[str, Any]) -> str:
    out = ["AWS requests per OpenAI-route request (warm container):"]
    for label, row in result["requests"].items():
        out.append(f"  {label:<46} {row['requests']}   {', '.join(row['operations'])}")
    out.append(f"  budget: <= {result['budget']} each (a turn's)")
    return "\n".join(out)


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    rows = ["| request | AWS requests | operations | budget |", "|---|---:|---|---|"]
    for label, row in result["requests"].items():
        verdict = "ok" if row["requests"] <= result["budget"] else "**over**"
        verdict = "an import, not a turn" if label == BRANCH else f"≤ {result['budget']}: {verdict}"
        ops = ", ".join(row["operations"])
        rows.append(f"| {label} | {row['requests']} | {ops} | {verdict} |")
    return "\n".join(
        [
            f"**AWS requests** (target ≤ {result['budget']} each, a turn's budget): the real "
            "AgentCall handler on moto in-process, default settings, a container that has "
            "served the user before; its agent model answers plainly or calls the caller's "
            "`lookup_order`.",
            "",
            *rows,
            "",
            "A conversation sent whole costs one `GetItem` (its place) over a turn, and so "
            "does `previous_response_id` (the stored response is a place too); "
            "`X-Session-Id` costs nothing. The place a request leaves, and a stored "
            "response, are items of the `TransactWriteItems` that ends the turn: no request "
            "of their own. A branch "
            "(the conversation's session has moved past its last assistant message) starts "
            "a session of its own and imports the history into it, once: the LIST of its "
            "turn numbers and the writes of the imported turns.",
        ]
    )
