"""Auth (docs/design.md#user-isolation): deployed, the user is the JWT authorizer's ``sub``
and nothing in the request can choose another; dev mode (X-User-Id) exists only when the
template's DevMode parameter says so; no identity is a 401. The real agent_call handler on
moto."""

from __future__ import annotations

import json

from local_stack.resources import function_environment
from tests.conftest import load_event
from tests.integration.conftest import Stack

FN = "AgentCallFunction"


def save(stack: Stack, app, claims: dict | None, headers: dict, content: str, **extra: str) -> int:
    event = load_event("agent_call_memory_save.json")
    event["headers"] = {**event["headers"], **headers}
    if claims is None:
        event["requestContext"].pop("authorizer", None)
    else:
        event["requestContext"]["authorizer"]["jwt"]["claims"] = claims
    event["isBase64Encoded"] = False
    event["body"] = json.dumps({"content": content, **extra})
    return int(stack.invoke(app, event, FN)["statusCode"])


def test_the_user_comes_from_the_jwt_sub_and_nothing_else(stack: Stack, record) -> None:
    deployed = stack.handler(FN, HARNESS_AUTH_MODE="jwt")
    spoofed = save(stack, deployed, {"sub": "alice"}, {"x-user-id": "bob"}, "fact of alice")
    in_body = save(stack, deployed, {"sub": "alice"}, {}, "fact of bob", user_id="bob")
    anonymous = save(stack, deployed, None, {"x-user-id": "bob"}, "fact of nobody")
    keys = stack.object_keys()
    bob_written = [k for k in keys if k.startswith("users/bob/")]
    dev = stack.handler(FN, HARNESS_AUTH_MODE="dev")
    dev_ok = save(stack, dev, None, {"x-user-id": "carol"}, "fact of carol")
    dev_missing = save(stack, dev, None, {}, "fact of nobody")

    # the template with its default parameters (DevMode "false")
    default_mode = function_environment(stack.resolver, FN)["HARNESS_AUTH_MODE"]

    record(
        "user-isolation",
        "jwt mode, sub=alice with X-User-Id: bob: objects written for bob",
        len(bob_written),
        "0",
        spoofed == 200 and not bob_written,
    )
    record(
        "user-isolation",
        "  ... a user_id in the body",
        in_body,
        "422, nothing written",
        in_body == 422,
    )
    record("user-isolation", "  ... no identity", anonymous, "401", anonymous == 401)
    record(
        "user-isolation",
        "  ... the template's auth mode with default parameters",
        default_mode,
        "jwt",
        default_mode == "jwt",
    )
    record(
        "user-isolation",
        "dev mode (DevMode=true only): X-User-Id used / missing",
        f"{dev_ok} / {dev_missing}",
        "200 / 401",
        dev_ok == 200 and dev_missing == 401,
    )

    assert spoofed == 200 and any(k.startswith("users/alice/") for k in keys)
    assert not bob_written and anonymous == 401 and in_body == 422
    assert "fact of bob" not in "".join(stack.text(k) or "" for k in keys)
    assert default_mode == "jwt"
    assert dev_ok == 200 and dev_missing == 401
    assert any(k.startswith("users/carol/") for k in stack.object_keys())
