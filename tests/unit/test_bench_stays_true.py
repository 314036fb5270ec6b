"""bench.stays_true: the generator and the scripted memory model's contract output."""

from __future__ import annotations

from agent_harness import markup
from agent_harness.memory.facts.authority import attribute
from agent_harness.memory.facts.lifecycle import split_marks
from agent_harness.models.base import ChatRequest, Message
from bench.stays_true import ScriptedMemory, final_truth
from bench.stays_true_data import ACK, generate

KINDS = {"stable", "home", "job", "tool", "pref", "trip", "plan", "cancel", "commute", "gym"}


def test_the_generator_is_deterministic_with_every_kind_and_at_least_40_users() -> None:
    users = generate()
    assert len(users) >= 40
    assert [u.facts for u in users] == [u.facts for u in generate()]
    kinds = {f.kind for u in users for f in u.facts.values()}
    assert kinds >= KINDS
    assert max(len(u.facts) for u in users) >= 60  # related facts have competition
    assert all(4 <= len(u.sessions) <= 8 for u in users)
    assert all(any(f.supersedes for f in u.facts.values() if f.kind == "home") for u in users)
    for user in users:  # every fact is the user's own words (the import's authority)
        for fact in user.facts.values():
            assert attribute(fact.text, {"import": fact.message, "assistant": ACK}) == "import"
        current, _ = final_truth(user)
        assert current["sibling"] is not None


def _flush_prompt(shown: list[tuple[str, str]], said: list[str]) -> str:
    rows = "\n".join(f"[{i}] {t}" for i, t in shown)
    conversation = "\n".join(markup.message(m, role="user", turn=n) for n, m in enumerate(said))
    return (
        markup.wrap(markup.CURRENT_FACTS, rows)
        + "\n"
        + markup.wrap(markup.CONVERSATION, conversation)
    )


def _answer(model: ScriptedMemory, prompt: str) -> list[str]:
    request = ChatRequest(messages=[Message(role="user", content=prompt)], purpose="flush")
    return model.complete(request).message.content.splitlines()


def test_the_scripted_model_names_only_ids_it_was_shown() -> None:
    users = generate(quick=True)
    user = users[0]
    model = ScriptedMemory(users)
    model.active = user.id
    move = next(f for f in user.facts.values() if f.kind == "home" and f.supersedes)
    old = user.facts[move.supersedes or ""]

    hidden = _answer(model, _flush_prompt([("2026-01-01.0000abcd", "unrelated")], [move.message]))
    assert hidden == [f"- {move.text}"]  # the old home was not shown: no mark
    shown = _answer(model, _flush_prompt([("2026-01-05.1234abcd", old.text)], [move.message]))
    text, marks = split_marks(shown[0].removeprefix("- "))
    assert text == move.text and marks.supersedes == ("2026-01-05.1234abcd",)
    assert [c["shown"] for c in model.conflicts] == [False, True]

    cancel = next((f for u in users for f in u.facts.values() if f.kind == "cancel"), None)
    assert cancel is not None
    model.active = cancel.key.split(".")[0]
    plan = model.facts[cancel.retracts or ""]
    got = _answer(model, _flush_prompt([("2026-01-09.feedbeef", plan.text)], [cancel.message]))
    assert got == [f"- (retracts 2026-01-09.feedbeef) {cancel.text}"]
