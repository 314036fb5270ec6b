"""OpenAI's Conversations API over sessions, against the local stack: the plain ``openai``
SDK (create, retrieve, update, delete; items list, create, retrieve, delete;
``conversation`` on ``responses.create``) and the OpenAI Agents SDK's
``OpenAIConversationsSession`` (items added by its runs, read back, popped, cleared).
What a conversation holds is remembered like any session: its turns are flushed into the
ledger under the conversation's id. The stack runs every role on the offline model."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from local_stack.process import LocalStackProcess
from tests.e2e.conftest import wait_for
from tests.e2e.test_openai_sdk import client


def ledger_names(stack: LocalStackProcess, user: str, text: str, session: str) -> bool:
    """Whether a ledger of ``user`` holds ``text`` from ``session``."""
    with stack.client(user) as http:
        for day in http.get("/v1/memory/ledger").json()["days"]:
            content = http.get(f"/v1/memory/ledger/{day['day']}").json()["content"]
            if text in content and f"session={session}" in content:
                return True
    return False


def texts(items: Any) -> list[tuple[str, str]]:
    return [(i.role, i.content[0].text) for i in items if i.type == "message"]


def test_a_conversation_through_the_openai_sdk(offline_stack: LocalStackProcess) -> None:
    sdk = client(offline_stack, "conv-amy")
    created = sdk.conversations.create(
        items=[{"role": "user", "content": "I love oolong tea every morning."}],
        metadata={"topic": "tea"},
    )
    assert created.id.startswith("conv_") and created.metadata == {"topic": "tea"}
    assert sdk.conversations.retrieve(created.id).created_at == created.created_at
    updated = sdk.conversations.update(created.id, metadata={"topic": "drinks"})
    assert updated.metadata == {"topic": "drinks"}

    added = sdk.conversations.items.create(
        created.id,
        items=[
            {"role": "assistant", "content": "Noted: oolong in the morning."},
            {"role": "user", "content": "My sister Ana lives in Porto."},
        ],
    )
    assert [i.type for i in added.data] == ["message", "message"]
    answered = sdk.responses.create(
        model="agent-harness", input="Where does my sister live?", conversation=created.id
    )
    assert answered.output_text and answered.conversation.id == created.id

    listed = sdk.conversations.items.list(created.id, order="asc")
    said = texts(listed.data)
    assert said[:3] == [
        ("user", "I love oolong tea every morning."),
        ("assistant", "Noted: oolong in the morning."),
        ("user", "My sister Ana lives in Porto."),
    ]
    assert said[3] == ("user", "Where does my sister live?")
    assert said[4] == ("assistant", answered.output_text)
    newest = sdk.conversations.items.list(created.id, limit=2)  # desc by default
    assert [i.id for i in newest.data] == [listed.data[-1].id, listed.data[-2].id]
    assert newest.has_more is True
    paged = sdk.conversations.items.list(created.id, order="asc", after=listed.data[1].id)
    assert [i.id for i in paged.data] == [i.id for i in listed.data[2:]]

    one = sdk.conversations.items.retrieve(listed.data[0].id, conversation_id=created.id)
    assert one.id == listed.data[0].id
    sdk.conversations.items.delete(listed.data[0].id, conversation_id=created.id)
    left = sdk.conversations.items.list(created.id, order="asc").data
    assert listed.data[0].id not in [i.id for i in left] and len(left) == len(listed.data) - 1

    # remembered like any session: its turns are flushed under the conversation's id
    wait_for(lambda: ledger_names(offline_stack, "conv-amy", "oolong", created.id))

    deleted = sdk.conversations.delete(created.id)
    assert deleted.deleted is True and deleted.id == created.id
    with pytest.raises(openai.NotFoundError):
        sdk.conversations.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        sdk.conversations.items.list(created.id)


def test_a_conversation_is_its_users_alone_and_bad_items_are_refused(
    offline_stack: LocalStackProcess,
) -> None:
    mine = client(offline_stack, "conv-ben").conversations.create()
    other = client(offline_stack, "conv-cat")
    with pytest.raises(openai.NotFoundError):
        other.conversations.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model="agent-harness", input="hi", conversation=mine.id)
    sdk = client(offline_stack, "conv-ben")
    with pytest.raises(openai.UnprocessableEntityError):
        sdk.conversations.items.create(
            mine.id, items=[{"role": "system", "content": "You are a pirate."}]
        )
    with pytest.raises(openai.UnprocessableEntityError):
        sdk.conversations.items.create(mine.id, items=[])
    assert sdk.conversations.items.list(mine.id).data == []


def test_the_agents_sdk_conversations_session_adds_reads_pops_and_clears(
    offline_stack: LocalStackProcess,
) -> None:
    from agents import (
        Agent,
        OpenAIConversationsSession,
        OpenAIResponsesModel,
        Runner,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    sdk = AsyncOpenAI(
        base_url=f"{offline_stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers={"X-User-Id": "conv-dan"},
        max_retries=0,
    )
    model = OpenAIResponsesModel(model="agent-harness", openai_client=sdk)
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    session = OpenAIConversationsSession(openai_client=sdk)

    async def scenario() -> dict[str, Any]:
        first = await Runner.run(agent, "I live in Lisbon.", session=session)
        second = await Runner.run(agent, "Where do I live?", session=session)
        items = await session.get_items()
        popped = await session.pop_item()
        after_pop = await session.get_items()
        conversation_id = session.session_id
        await session.clear_session()
        return {
            "outputs": [first.final_output, second.final_output],
            "items": items,
            "popped": popped,
            "after_pop": after_pop,
            "id": conversation_id,
        }

    done = asyncio.run(scenario())

    roles = [i.get("role") for i in done["items"] if i.get("type", "message") == "message"]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert done["items"][0]["content"][0]["text"] == "I live in Lisbon."
    assert done["popped"]["id"] == done["items"][-1]["id"]
    assert len(done["after_pop"]) == len(done["items"]) - 1
    wait_for(lambda: ledger_names(offline_stack, "conv-dan", "Lisbon", done["id"]))
    with pytest.raises(openai.NotFoundError):
        client(offline_stack, "conv-dan").conversations.retrieve(done["id"])
