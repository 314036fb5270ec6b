"""Per-user budgets under concurrency, over HTTP against the local stack (a container per
concurrent request): at the edge of a budget, concurrent turns never overspend by more
than one turn, and the turn limit is exact."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import FakeLLM, LocalStackProcess, start_stack, stop_stack
from tests.reliability.test_concurrency import fire

CONCURRENT = 10


def budget_stack(fake_llm: FakeLLM, **limits: str) -> LocalStackProcess:
    return start_stack(
        {
            "HARNESS_MODEL": "openai:fake-e2e",
            "HARNESS_MEMORY_MODEL": "offline",
            "HARNESS_COMPACTION_MODEL": "offline",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{fake_llm.port}/v1",
            "OPENAI_API_KEY": "sk-e2e",
            **limits,
        }
    )


@pytest.fixture
def turns_stack(fake_llm: FakeLLM) -> Iterator[LocalStackProcess]:
    stack = budget_stack(fake_llm, HARNESS_USER_DAILY_TURNS="3")
    yield stack
    stop_stack(stack)


@pytest.fixture
def tokens_stack(fake_llm: FakeLLM) -> Iterator[LocalStackProcess]:
    stack = budget_stack(fake_llm, HARNESS_USER_DAILY_TOKENS="200")
    yield stack
    stop_stack(stack)


def test_concurrent_turns_at_a_turn_limit_get_exactly_that_many(
    turns_stack: LocalStackProcess, record
) -> None:
    targets = [(f"edge-{n}", f"turn at the edge {n}") for n in range(CONCURRENT)]
    results = fire(turns_stack, "rel-fay", targets)
    statuses = Counter(r.status_code for r in results.values())
    refused = [r for r in results.values() if r.status_code == 429]
    with turns_stack.client("rel-fay") as client:
        counted = client.get("/v1/usage", params={"days": 1}).json()["totals"]["turns"]
    record(
        "budget-edge",
        f"{CONCURRENT} concurrent turns, a budget of 3 turns: answered / counted / refused",
        f"{statuses[200]} / {counted} / {statuses[429]}",
        f"3 / 3 / {CONCURRENT - 3}",
        statuses[200] == 3 and counted == 3 and statuses[429] == CONCURRENT - 3,
    )
    assert statuses == Counter({200: 3, 429: CONCURRENT - 3}), statuses
    assert all(r.json()["error"]["code"] == "budget_exhausted" for r in refused)
    assert all(int(r.headers["retry-after"]) > 0 for r in refused)


def test_concurrent_turns_at_a_token_budget_overspend_by_at_most_one_turn(
    tokens_stack: LocalStackProcess, record
) -> None:
    answered: list[dict] = []
    for round_no in range(20):  # bursts until the budget is spent, not merely held
        targets = [(f"tok-{round_no}-{n}", f"burst {round_no} turn {n}") for n in range(CONCURRENT)]
        results = list(fire(tokens_stack, "rel-gil", targets).values())
        answered += [r.json() for r in results if r.status_code == 200]
        if all(r.status_code == 429 and int(r.headers["retry-after"]) > 5 for r in results):
            break
    else:
        raise AssertionError("the token budget was never spent")
    with tokens_stack.client("rel-gil") as client:
        spent = client.get("/v1/usage", params={"days": 1}).json()["totals"]["by_role"]["agent"]
    tokens = spent["input_tokens"] + spent["output_tokens"]
    largest = max(
        t["usage"]["by_role"]["agent"]["input_tokens"]
        + t["usage"]["by_role"]["agent"]["output_tokens"]
        for t in answered
    )
    over = tokens - 200
    record(
        "budget-edge",
        f"bursts of {CONCURRENT} turns, a budget of 200 tokens: spent (largest turn)",
        f"{tokens} ({largest})",
        "<= 200 + one turn",
        over <= largest,
    )
    assert over <= largest, (tokens, largest, len(answered))
