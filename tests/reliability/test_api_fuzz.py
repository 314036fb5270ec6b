"""docs/design.md#bad-input-4xx against the running API: schemathesis reads the OpenAPI
document the API serves (GET /v1/openapi.json) and generates requests, valid and invalid,
for every operation, sent over HTTP to the local stack (real handlers, moto). No 5xx; every
refusal is a JSON error. (Schemathesis' strategies driven by hypothesis directly: its pytest
plugin does not run on this pytest.)"""

from __future__ import annotations

from collections import Counter

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.e2e.conftest import LocalStackProcess

EXAMPLES = 25


def test_the_running_api_never_answers_5xx(local_stack: LocalStackProcess, record) -> None:
    schema = schemathesis.openapi.from_url(f"{local_stack.url}/v1/openapi.json")
    seen: Counter[str] = Counter()
    #: requests sent per generation mode, and those of them the API refused (4xx)
    sent: Counter[GenerationMode] = Counter()
    refused: Counter[GenerationMode] = Counter()
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]

    def fuzz(operation, mode: GenerationMode) -> None:
        """Up to EXAMPLES requests to ``operation``, generated in ``mode``."""

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def run(case) -> None:
            response = case.call(headers={"X-User-Id": "fuzz-user"}, timeout=30)
            seen["requests"] += 1
            sent[mode] += 1
            if response.status_code >= 500:
                seen["5xx"] += 1
                failures.append(f"{case.method} {case.formatted_path}: {response.text[:200]}")
            elif response.status_code >= 400:
                seen["refused"] += 1
                refused[mode] += 1
                error = response.json().get("error", {}) if response.content else {}
                # the MCP server answers JSON-RPC errors, whose codes are numbers
                rpc = case.method == "POST" and case.formatted_path == "/mcp"
                code_type = int if rpc else str
                if not (isinstance(error.get("code"), code_type) and error.get("message")):
                    seen["unclear"] += 1
                    failures.append(f"{case.method} {case.formatted_path}: {response.text}")

        try:
            run()
        except Unsatisfiable:  # an operation without inputs has no invalid form
            seen["no_negative_form"] += 1

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode)

    record(
        "bad-input-4xx",
        f"schemathesis from the served OpenAPI document ({len(operations)} operations, "
        f"valid and invalid): {seen['requests']} requests, 5xx",
        seen["5xx"],
        "0",
        seen["requests"] > 0 and not seen["5xx"],
    )
    record(
        "bad-input-4xx",
        f"  ... refused ({seen['refused']}) without a clear JSON error",
        seen["unclear"],
        "0",
        seen["unclear"] == 0,
    )
    record(
        "bad-input-4xx",
        "  ... requests sent valid / invalid (invalid ones refused)",
        f"{sent[GenerationMode.POSITIVE]} / {sent[GenerationMode.NEGATIVE]} "
        f"({refused[GenerationMode.NEGATIVE]})",
        "> 0 / > 0 (> 0)",
        sent[GenerationMode.POSITIVE] > 0
        and sent[GenerationMode.NEGATIVE] > 0
        and refused[GenerationMode.NEGATIVE] > 0,
    )
    assert not failures, failures[:5]
    # both generators ran: a run that stops producing one mode proves nothing about it
    assert sent[GenerationMode.POSITIVE] > 0, sent
    assert sent[GenerationMode.NEGATIVE] > 0, sent
    # and the invalid ones were invalid: the API refused some of them
    assert refused[GenerationMode.NEGATIVE] > 0, refused
