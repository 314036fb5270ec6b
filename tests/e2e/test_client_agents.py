"""``HarnessSession`` with the real OpenAI Agents SDK against the local stack (every role
offline): ``Runner.run`` keeps the session's history in a conversation of the stack, the
agent's model being the stack too (its Responses API); the items are read back, popped,
cleared (a new conversation next), and what was said reaches the user's memory."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from agent_harness_client import AgentHarness, AsyncAgentHarness, NotFoundError
from agent_harness_client.agents import HarnessSession
from local_stack.process import LocalStackProcess
from tests.e2e.conftest import wait_for


def test_runner_runs_keep_their_history_in_a_harness_session(
    offline_stack: LocalStackProcess,
) -> None:
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.memory import Session
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    user = f"agents-{uuid.uuid4().hex[:6]}"
    openai_client = AsyncOpenAI(
        base_url=f"{offline_stack.url}/v1",
        api_key="x",
        default_headers={"X-User-Id": user},
        max_retries=0,
    )
    model = OpenAIResponsesModel(model="agent-harness", openai_client=openai_client)
    agent = Agent(name="assistant", instructions="Be brief.", model=model)

    async def scenario() -> dict[str, Any]:
        session = HarnessSession(AsyncAgentHarness(offline_stack.url, user_id=user))
        with pytest.raises(ValueError, match="no conversation yet"):
            _ = session.session_id  # as the SDK's OpenAIConversationsSession
        first = await Runner.run(agent, "I live in Lisbon.", session=session)
        assert isinstance(session, Session)  # the SDK's protocol
        second = await Runner.run(agent, "Where do I live?", session=session)
        items = await session.get_items()
        latest = await session.get_items(limit=2)
        conversation = session.session_id
        popped = await session.pop_item()
        after_pop = await session.get_items()
        await session.clear_session()
        cleared_id = session._conversation_id
        fresh = await session.get_items()  # a new conversation, empty
        return {
            "outputs": [first.final_output, second.final_output],
            "items": items,
            "latest": latest,
            "conversation": conversation,
            "popped": popped,
            "after_pop": after_pop,
            "cleared_id": cleared_id,
            "fresh": fresh,
            "new": session.session_id,
        }

    done = asyncio.run(scenario())

    assert all(o and o.startswith("[offline model]") for o in done["outputs"])
    messages = [i for i in done["items"] if i.get("type") == "message"]
    assert [i["role"] for i in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"][0]["text"] == "I live in Lisbon."
    assert messages[3]["content"][0]["text"] == done["outputs"][1]
    assert done["latest"] == done["items"][-2:]
    assert done["popped"] == done["items"][-1]
    assert done["after_pop"] == done["items"][:-1]
    assert done["cleared_id"] is None and done["fresh"] == []
    assert done["new"] != done["conversation"]
    with AgentHarness(offline_stack.url, user_id=user) as client:
        with pytest.raises(NotFoundError):
            client.conversations.retrieve(done["conversation"])
        # what the session held was remembered: its turns flushed under its conversation
        wait_for(
            lambda: any(
                "Lisbon" in client.memory.ledger_day(d.day).content
                and f"session={done['conversation']}" in client.memory.ledger_day(d.day).content
                for d in client.memory.ledger().days
            )
        )
