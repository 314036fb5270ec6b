from __future__ import annotations

import pytest

from agent_harness.errors import InvalidRequestError, ValidationFailedError
from agent_harness.ids import User, validate_day, validate_relative_path, validate_session_id


@pytest.mark.parametrize(
    "user_id",
    ["alice", "auth0|5f7c8ec7c33c6c004bbafe82", "../bob", "a/b", "用户", "%41", "A", ".", ".."],
)
def test_user_key_is_a_single_safe_segment(user_id: str) -> None:
    key = User.from_id(user_id).key
    assert "/" not in key and "." not in key
    assert key.replace("%", "").replace("_", "").replace("-", "").isalnum()


def test_user_key_encoding_is_injective_and_reversible() -> None:
    ids = ["a|b", "a%7Cb", "a_b", "a-b", "A|B", "../x", "%2E%2E"]
    keys = [User.from_id(i).key for i in ids]
    assert len(set(keys)) == len(ids)
    assert [User.from_key(k).id for k in keys] == ids


@pytest.mark.parametrize(
    "bad", ["", "x" * 257, "tab\tid", "nul\x00", "lone\ud800", "é" * 256, "🙂" * 43, "|" * 169]
)
def test_unusable_user_ids_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidRequestError):
        User.from_id(bad)


def test_a_user_id_is_accepted_up_to_its_encoded_length() -> None:
    from agent_harness.ids import MAX_USER_KEY_CHARS

    assert len(User.from_id("🙂" * 42).key) == 42 * 12 <= MAX_USER_KEY_CHARS
    assert len(User.from_id("x" * 256).key) == 256


def test_non_canonical_user_key_is_rejected() -> None:
    with pytest.raises(InvalidRequestError):
        User.from_key("%61lice")  # decodes to "alice", whose key is "alice"


@pytest.mark.parametrize("good", ["s1", "trip-2026.11", "chat:42", "A" * 128])
def test_valid_session_ids(good: str) -> None:
    assert validate_session_id(good) == good


@pytest.mark.parametrize("bad", ["", "-x", ".hidden", "a/b", "..", "a b", "A" * 129, "ü"])
def test_invalid_session_ids(bad: str) -> None:
    with pytest.raises(ValidationFailedError):
        validate_session_id(bad)


@pytest.mark.parametrize(
    "bad", ["../MEMORY.md", "/etc/passwd", "memory//x.md", "a\\b", "./x", "", "a;b", "x" * 513]
)
def test_workspace_paths_cannot_escape(bad: str) -> None:
    with pytest.raises(InvalidRequestError):
        validate_relative_path(bad)


def test_days_must_be_calendar_days() -> None:
    assert validate_day("2026-02-28") == "2026-02-28"
    for bad in ["2026-02-30", "26-1-1", "2026-13-01", "yesterday"]:
        with pytest.raises(ValidationFailedError):
            validate_day(bad)
