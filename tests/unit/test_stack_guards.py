"""The shared stack's guards in template.yaml: dev mode only on a declared test stack,
the agent's reserved concurrency, the queues' maximum concurrency and the API throttle
as parameters. Checked with the resolver the local stack deploys the template with."""

from __future__ import annotations

import pytest

from local_stack.resources import Resolver, load_template

TEMPLATE = load_template()
RESOURCES = TEMPLATE["Resources"]


@pytest.mark.parametrize(
    ("parameters", "refused"),
    [
        ({}, False),
        ({"DevMode": "true"}, True),
        ({"DevMode": "true", "DevModeTestStack": "false"}, True),
        ({"DevMode": "true", "DevModeTestStack": "true"}, False),
        ({"DevModeTestStack": "true"}, False),
    ],
)
def test_dev_mode_deploys_only_on_a_stack_declared_a_test_stack(parameters, refused) -> None:
    broken = Resolver(TEMPLATE, parameters=parameters).broken_rules()
    assert bool(broken) == refused
    if refused:
        assert "any valid token act as any user" in broken[0]


def test_the_agents_reserved_concurrency_is_a_parameter_none_by_default() -> None:
    reserved = RESOURCES["AgentCallFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert Resolver(TEMPLATE).resolve(reserved) is None  # -1: nothing reserved
    assert (
        Resolver(TEMPLATE, parameters={"AgentReservedConcurrency": "20"}).resolve(reserved) == "20"
    )


def test_each_queue_consumer_has_a_maximum_concurrency_parameter() -> None:
    expected = {
        "MemoryFlushFunction": ("FlushMaxConcurrency", "10"),
        "MemoryConsolidateFunction": ("ConsolidationMaxConcurrency", "5"),
    }
    for function, (parameter, default) in expected.items():
        events = RESOURCES[function]["Properties"]["Events"].values()
        (sqs,) = [e for e in events if e["Type"] == "SQS"]
        limit = sqs["Properties"]["ScalingConfig"]["MaximumConcurrency"]
        assert limit == {"Ref": parameter}
        assert Resolver(TEMPLATE).resolve(limit) == default
        assert TEMPLATE["Parameters"][parameter]["MinValue"] == 2  # SQS's own floor


def test_the_api_throttle_is_set_by_parameters() -> None:
    settings = RESOURCES["HttpApi"]["Properties"]["DefaultRouteSettings"]
    resolved = Resolver(TEMPLATE).resolve(settings)
    assert resolved == {"ThrottlingBurstLimit": "200", "ThrottlingRateLimit": "100"}
    assert settings["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}


#: the state table's IAM actions each function's code issues (a transaction's Put,
#: Delete and ConditionCheck need their own actions, as the calls do)
STATE_TABLE_ACTIONS = {
    # turns (lease, admission check, places), budgets, memberships, usage, forget-user
    "AgentCallFunction": {
        "GetItem", "UpdateItem", "PutItem", "DeleteItem", "ConditionCheckItem", "Query",
        "BatchWriteItem",
    },
    # cursors, gates and due marks; the idempotency records
    "MemoryFlushFunction": {"GetItem", "UpdateItem", "PutItem", "DeleteItem"},
    # the lease and watermark; the next expiry's mark; an abandoned user item
    "MemoryConsolidateFunction": {"GetItem", "UpdateItem", "PutItem", "DeleteItem"},
}  # fmt: skip
#: every DynamoDB call of the adapters, and the IAM action it needs
CALLS = {
    "get_item": "GetItem", "put_item": "PutItem", "update_item": "UpdateItem",
    "delete_item": "DeleteItem", "query": "Query", "batch_write_item": "BatchWriteItem",
    "scan": "Scan", '{"Put"': "PutItem", '{"Update"': "UpdateItem", '{"Delete"': "DeleteItem",
    '{"ConditionCheck"': "ConditionCheckItem", "transact_write_items": None,
}  # fmt: skip


def _table_actions(function: str) -> set[str]:
    statements = RESOURCES[function]["Properties"]["Policies"][0]["Statement"]
    actions: set[str] = set()
    for statement in statements:
        resource = statement["Resource"]
        if resource == {"Fn::GetAtt": ["StateTable", "Arn"]}:
            listed = statement["Action"]
            listed = [listed] if isinstance(listed, str) else listed
            actions |= {a.removeprefix("dynamodb:") for a in listed}
    return actions


def test_each_function_may_make_the_state_table_calls_its_code_makes() -> None:
    for function, needed in STATE_TABLE_ACTIONS.items():
        assert needed <= _table_actions(function), (function, needed - _table_actions(function))


def test_every_dynamodb_call_of_the_adapters_is_one_the_table_above_knows() -> None:
    import re
    from pathlib import Path

    import agent_harness.aws as aws

    source = "\n".join(p.read_text() for p in Path(aws.__file__).parent.glob("*.py"))
    calls = set(re.findall(r"_ddb\.(\w+)\(", source)) - {"get_paginator"}
    calls |= set(re.findall(r'_ddb\.get_paginator\("(\w+)"\)', source))
    calls |= {
        f'{{"{kind}"' for kind in re.findall(r'\{"(Put|Update|Delete|ConditionCheck)"', source)
    }
    assert calls <= set(CALLS), calls - set(CALLS)
    granted = set().union(*STATE_TABLE_ACTIONS.values())
    # Scan is the operators' (the CLI's top users, with their own credentials)
    assert {CALLS[c] for c in calls} - {None, "Scan"} <= granted


def test_the_agent_function_may_delete_a_scopes_versions_but_never_its_objects() -> None:
    statements = RESOURCES["AgentCallFunction"]["Properties"]["Policies"][0]["Statement"]
    (scopes,) = [
        s for s in statements if s["Resource"] == {"Fn::Sub": "${WorkspaceBucket.Arn}/scopes/*"}
    ]
    # forgetting a user deletes the versions that name them (memory.jobs.forget)
    assert "s3:DeleteObjectVersion" in scopes["Action"]
    assert "s3:DeleteObject" not in scopes["Action"]
