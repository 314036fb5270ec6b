"""The memory loop over HTTP against `python -m local_stack` (what `make dev` runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import httpx

from agent_harness import markup
from tests.conftest import ROOT
from tests.e2e.conftest import FakeLLM, LocalStackProcess, start_stack, stop_stack, wait_for

FACT = "I prefer window seats on long flights."


def test_the_memory_loop_crosses_sessions(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    alice = local_stack.client("e2e-alice")

    # 1. a turn: reply with the fields of docs/api.md#http-api-v1
    first = alice.post(
        "/v1/sessions/trip/messages", json={"message": f"Please remember that {FACT}"}
    )
    assert first.status_code == 200, first.text
    reply = first.json()
    assert reply["session_id"] == "trip" and reply["turn"] == 1
    assert reply["reply"] == f"ack: Please remember that {FACT}"
    assert reply["usage"] == {
        "input_tokens": 42,  # the fake provider's own counts, not an estimate
        "output_tokens": 7,
        "memory_tokens": 0,
        "by_role": {
            "agent": {"input_tokens": 42, "output_tokens": 7},
            "compaction": {"input_tokens": 0, "output_tokens": 0},
        },
    }
    assert reply["compacted"] is False and reply["flush"] == "queued"
    assert fake_llm.requests[-1]["_authorization"] == "Bearer sk-e2e"

    # 2. the turn's thread-log object exists
    s3 = local_stack.s3()
    key = "users/e2e-alice/sessions/trip/turns/00000001.json"
    logged = s3.get_object(Bucket="agent-harness-local-workspace", Key=key)["Body"].read()
    assert FACT.encode() in logged

    # 3. the post-turn job puts the fact in today's ledger
    days = wait_for(lambda: alice.get("/v1/memory/ledger").json()["days"])
    ledger = alice.get(f"/v1/memory/ledger/{days[0]['day']}").json()["content"]
    assert f"- [user] User said: {FACT}" in ledger
    assert "> source: session=trip turns=1" in ledger

    # 4. after consolidation MEMORY.md has it
    assert alice.post("/v1/memory/consolidate").status_code == 202
    memory = wait_for(
        lambda: FACT in alice.get("/v1/memory").json()["content"] and alice.get("/v1/memory").json()
    )
    assert memory["etag"]

    # 5. a new session's model input carries it as reference data, not as the system prompt
    question = "Which seat should you book for me?"
    second = alice.post("/v1/sessions/next-trip/messages", json={"message": question})
    assert second.status_code == 200 and second.json()["usage"]["memory_tokens"] > 0
    [request] = fake_llm.requests_for(question)
    system, reference, asked = request["messages"]
    assert system["role"] == "system" and FACT not in system["content"]
    assert reference["role"] == "user"
    assert (
        'source="MEMORY.md"' in reference["content"]
        and 'kind="reference-data"' in reference["content"]
    )
    assert FACT in markup.extract(reference["content"], markup.MEMORY)
    assert asked == {"role": "user", "content": question}


def test_a_second_concurrent_call_gets_409_and_writes_nothing(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    bob = local_stack.client("e2e-bob")
    results: dict[str, httpx.Response] = {}
    slow = threading.Thread(
        target=lambda: results.update(
            first=bob.post("/v1/sessions/busy/messages", json={"message": "[slow] hello"})
        )
    )
    slow.start()
    assert fake_llm.slow_entered.wait(30)

    second = bob.post("/v1/sessions/busy/messages", json={"message": "am I interleaved?"})
    fake_llm.release.set()
    slow.join(30)

    assert second.status_code == 409
    assert second.json()["error"]["code"] == "session_busy"
    assert 1 <= int(second.headers["retry-after"]) <= 60
    assert results["first"].status_code == 200
    assert fake_llm.requests_for("am I interleaved?") == []
    turns = bob.get("/v1/sessions/busy/messages").json()["turns"]
    assert [t["turn"] for t in turns] == [1]
    listed = local_stack.s3().list_objects_v2(
        Bucket="agent-harness-local-workspace", Prefix="users/e2e-bob/sessions/busy/turns/"
    )
    assert len(listed["Contents"]) == 1


def test_identity_and_bad_input_over_http(local_stack: LocalStackProcess) -> None:
    anonymous = local_stack.client(None)
    assert anonymous.get("/health").json() == {"status": "ok"}
    assert anonymous.get("/v1/memory").status_code == 401

    carol = local_stack.client("e2e-carol")
    bad = carol.post(
        "/v1/sessions/s/messages",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    assert carol.post("/v1/sessions/s/messages", json={"msg": "x"}).status_code == 422
    assert carol.get("/v1/sessions/s/messages").json()["turns"] == []
    assert carol.get("/v1/memory").json() == {"content": "", "etag": None}


def test_the_operator_cli_drives_the_running_local_stack(
    offline_stack: LocalStackProcess, tmp_path
) -> None:
    """`make cli` as an operator runs it: a separate process, the env file of `make dev`
    (pointed at this stack's moto port), the real S3/DynamoDB/SQS of the stack."""
    env_file = tmp_path / "sam-env.json"
    shipped = (ROOT / "local_stack" / "sam-env.json").read_text()
    env_file.write_text(shipped.replace("http://127.0.0.1:5001", offline_stack.aws_endpoint))

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agent_harness.cli", "--env-file", str(env_file), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "layers" / "agent_harness")},
            check=False,
        )

    with offline_stack.client("cli-user") as http:
        reply = http.post("/v1/sessions/s1/messages", json={"message": "Remember that I use vim."})
        assert reply.status_code == 200
        wait_for(lambda: http.get("/v1/memory/ledger").json()["days"])

    def consolidated() -> bool:
        done = cli("consolidate-now", "cli-user")
        assert done.returncode == 0, done.stderr
        # the stack's own schedule (every 2 s) may be merging the ledger at this moment
        # ("busy": ask again) or have merged it first; either way MEMORY.md holds it after
        status = json.loads(done.stdout)["status"]
        assert status in ("consolidated", "nothing_new", "busy"), status
        return status != "busy"

    wait_for(consolidated)
    shown = cli("show", "cli-user")
    assert "I use vim" in shown.stdout
    traced = cli("trace", "cli-user", "I use vim")
    assert "session=s1 turns=1 model=offline" in traced.stdout

    gone = cli("forget", "cli-user", "--yes")
    assert gone.returncode == 0, gone.stderr
    listed = offline_stack.s3().list_object_versions(
        Bucket="agent-harness-local-workspace", Prefix="users/cli-user/"
    )
    assert not listed.get("Versions") and not listed.get("DeleteMarkers")


def test_usage_over_http_counts_the_callers_turns_and_memory_calls(
    offline_stack: LocalStackProcess,
) -> None:
    with offline_stack.client("usage-ann") as http:
        assert (
            http.post("/v1/sessions/u1/messages", json={"message": "I like tea."}).status_code
            == 200
        )
        wait_for(lambda: http.get("/v1/memory/ledger").json()["days"])  # the flush ran
        report = http.get("/v1/usage", params={"days": 2}).json()
        assert len(report["days"]) == 2 and report["totals"]["turns"] == 1
        assert report["totals"]["by_role"]["memory"]["model_calls"] >= 1
        assert http.get("/v1/usage", params={"days": 91}).status_code == 422
    with offline_stack.client("usage-bob") as other:
        assert other.get("/v1/usage").json()["totals"]["turns"] == 0


def test_a_user_over_budget_gets_429_while_another_user_still_works() -> None:
    stack = start_stack({"HARNESS_MODEL": "offline", "HARNESS_USER_DAILY_TURNS": "2"})
    try:
        with stack.client("budget-ann") as ann, stack.client("budget-bob") as bob:
            for n in (1, 2):
                sent = ann.post("/v1/sessions/b1/messages", json={"message": f"turn {n}"})
                assert sent.status_code == 200
            refused = ann.post("/v1/sessions/b2/messages", json={"message": "one too many"})
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "budget_exhausted"
            assert 0 < int(refused.headers["retry-after"]) <= 86_400
            assert ann.get("/v1/sessions/b2/messages").json()["turns"] == []
            assert bob.post("/v1/sessions/b1/messages", json={"message": "hi"}).status_code == 200
            assert ann.get("/v1/usage", params={"days": 1}).json()["totals"]["turns"] == 2
    finally:
        stop_stack(stack)
