"""The typed client (clients/python) against the local stack over HTTP, every role on
the offline model: the sync and the async client each run a turn, save, search, read
and edit MEMORY.md with its ETag (a stale one is a PreconditionFailedError), correct a
fact, and hold a conversation; errors come back as the exceptions of their status."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent_harness_client import (
    AgentHarness,
    AsyncAgentHarness,
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
    UnprocessableEntityError,
)
from local_stack.process import LocalStackProcess
from tests.e2e.conftest import wait_for


def fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def test_the_sync_client_against_the_stack(offline_stack: LocalStackProcess) -> None:
    with AgentHarness(offline_stack.url, user_id=fresh("client-amy")) as client:
        assert client.health().status == "ok"
        assert client.openapi()["openapi"].startswith("3.1")

        answer = client.sessions.send("s1", "Remember that I prefer green tea.")
        assert (answer.session_id, answer.turn, answer.status) == ("s1", 1, "completed")
        assert answer.reply and answer.reply.startswith("[offline model]")
        assert answer.model == "offline" and answer.usage.input_tokens > 0
        log = client.sessions.messages("s1")
        assert [m.role for m in log.turns[0].messages] == ["user", "assistant"]
        assert client.sessions.turn_memory("s1", 1).turn == 1
        # the flush writes the turn's fact into today's ledger, after the reply
        day = wait_for(lambda: next(iter(client.memory.ledger().days), None)).day
        wait_for(lambda: "green tea" in client.memory.ledger_day(day).content)
        hits = wait_for(lambda: client.sessions.search("green tea").hits)
        assert hits[0].session_id == "s1"

        saved = client.memory.save("My sister Ana lives in Porto.")
        assert (saved.saved, saved.held) == (1, 0)
        found = client.memory.search("sister Porto", match_mode="ranked")
        assert found.match_mode == "ranked"
        assert any("Ana lives in Porto" in h.text for h in found.hits)
        phrase = client.memory.search("Ana lives in Porto", match_mode="phrase").hits
        fact_id = next(h.fact_id for h in phrase if h.fact_id)
        assert client.memory.fact(fact_id).state == "current"
        corrected = client.memory.supersede(fact_id, by="My sister Ana lives in Braga.")
        assert corrected.retired == fact_id and corrected.fact.state == "superseded"
        with pytest.raises(ConflictError) as twice:  # already retired: never retried
            client.memory.supersede(fact_id, by="My sister Ana lives in Faro.")
        assert twice.value.code == "fact_not_current"

        document = client.memory.get()
        assert "Ana" in document.content and document.etag
        written = client.memory.put(document.content + "- I cycle to work.\n", etag=document.etag)
        assert "I cycle to work." in written.content and written.etag != document.etag
        with pytest.raises(PreconditionFailedError) as stale:
            client.memory.put("- overwritten\n", etag=document.etag)
        assert stale.value.status == 412 and stale.value.code == "precondition_failed"
        assert client.memory.get().content == written.content

        conversation = client.conversations.create(metadata={"topic": "tea"})
        client.conversations.items.create(
            conversation.id,
            [
                {"role": "user", "content": "I drink oolong now."},
                {"role": "assistant", "content": "Noted."},
            ],
        )
        items = client.conversations.items.list(conversation.id, order="asc").data
        assert [i.type for i in items] == ["message", "message"]
        one = client.conversations.items.retrieve(conversation.id, items[0].id)
        assert one.id == items[0].id and one.type == "message"
        assert one.content[0].text == "I drink oolong now."
        client.conversations.items.delete(conversation.id, items[0].id)
        assert len(client.conversations.items.list(conversation.id).data) == 1
        assert client.conversations.delete(conversation.id).deleted is True
        with pytest.raises(NotFoundError) as gone:
            client.conversations.retrieve(conversation.id)
        assert gone.value.code == "conversation_not_found"

        with pytest.raises(NotFoundError) as missing:
            client.memory.fact("2020-01-01.00000000")
        assert (missing.value.status, missing.value.code) == (404, "fact_not_found")
        with pytest.raises(UnprocessableEntityError):
            client.memory.search("x", match_mode="nonsense")  # type: ignore[arg-type]
        assert client.usage(days=1).totals.turns >= 1
        client.memory.forget()
        assert client.memory.get().content == ""


def test_the_async_client_against_the_stack(offline_stack: LocalStackProcess) -> None:
    user = fresh("client-ben")

    async def scenario() -> None:
        async with AsyncAgentHarness(offline_stack.url, user_id=user) as client:
            answers = await asyncio.gather(
                client.sessions.send("a1", "I live in Lisbon."),
                client.sessions.send("a2", "My cat is called Miso."),
            )
            assert [a.status for a in answers] == ["completed", "completed"]
            saved = await client.memory.save("I play the cello on Sundays.")
            assert saved.saved == 1
            found = await client.memory.search("cello", match_mode="ranked")
            assert any("cello" in h.text for h in found.hits)

            document = await client.memory.get()
            written = await client.memory.put(
                document.content + "- I like figs.\n", etag=document.etag
            )
            assert written.etag
            with pytest.raises(PreconditionFailedError):
                await client.memory.put("- lost\n", etag=document.etag)

            conversation = await client.conversations.create(
                items=[{"role": "user", "content": "Hello there."}]
            )
            listed = await client.conversations.items.list(conversation.id)
            assert [i.type for i in listed.data] == ["message"]
            await client.conversations.update(conversation.id, metadata={"k": "v"})
            assert (await client.conversations.retrieve(conversation.id)).metadata == {"k": "v"}
            await client.conversations.delete(conversation.id)
            with pytest.raises(NotFoundError):
                await client.conversations.items.list(conversation.id)

    asyncio.run(scenario())
    with AgentHarness(offline_stack.url, user_id=user) as client:
        sessions = {h.session_id for h in wait_for(lambda: client.sessions.search("Miso").hits)}
        assert sessions == {"a2"}
