from __future__ import annotations

from agent_harness.tokens import DEFAULT_CACHE_DIR, TokenCounter
from local_stack import tiktoken_cache


def test_shipped_encoding_file_matches_tiktokens_pinned_hash() -> None:
    assert tiktoken_cache.check("cl100k_base", DEFAULT_CACHE_DIR)


def test_tokens_are_counted_offline_with_the_shipped_encoding() -> None:
    # the unit conftest refuses every socket: a download attempt would fail this test
    counter = TokenCounter("cl100k_base")
    assert counter._enc.encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert counter.count("") == 0


def test_text_within_budget_is_untouched() -> None:
    fitted = TokenCounter().head_tail("short memory", 100, "[{kept}/{total}]")
    assert fitted.text == "short memory" and not fitted.truncated


def test_truncation_keeps_head_and_tail_on_line_boundaries_with_a_notice() -> None:
    counter = TokenCounter()
    lines = [f"- fact number {i} about the user" for i in range(400)]
    fitted = counter.head_tail("\n".join(lines), 300, "[truncated: {kept} of {total} tokens]")
    assert fitted.truncated and fitted.tokens <= 300
    assert fitted.original_tokens > 300
    assert fitted.text.startswith(lines[0]) and fitted.text.endswith(lines[-1])
    assert "[truncated: " in fitted.text and f"of {fitted.original_tokens} tokens]" in fitted.text
    kept = [line for line in fitted.text.splitlines() if line.startswith("- ")]
    assert all(line in lines for line in kept)  # no half-kept fact
