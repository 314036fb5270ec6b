"""The shared stack's guards in template.yaml: dev mode only on a declared test stack,
the agent's reserved concurrency and the users' budgets on by default, the queues'
maximum concurrency and the API throttle as parameters, erasure rights in the forget
function only, memory kept through a stack delete, logs and old versions that age out,
alarms. Checked with the resolver the local stack deploys the template with (every AWS
call against each role: tests/e2e/test_iam.py)."""

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


def test_the_agents_reserved_concurrency_is_bounded_by_default_and_a_parameter() -> None:
    reserved = RESOURCES["AgentCallFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert Resolver(TEMPLATE).resolve(reserved) == "50"
    assert (
        Resolver(TEMPLATE, parameters={"AgentReservedConcurrency": "20"}).resolve(reserved) == "20"
    )
    assert (
        Resolver(TEMPLATE, parameters={"AgentReservedConcurrency": "-1"}).resolve(reserved) is None
    )


@pytest.mark.parametrize(("value", "on"), [(None, True), ("true", True), ("false", False)])
def test_the_agent_function_runs_with_snapstart_by_default_on_its_alias(value, on) -> None:
    props = RESOURCES["AgentCallFunction"]["Properties"]
    resolver = Resolver(TEMPLATE, parameters={} if value is None else {"SnapStart": value})
    assert props["AutoPublishAlias"] == "live"  # SnapStart snapshots published versions
    snapstart = resolver.resolve(props["SnapStart"])
    assert (snapstart == {"ApplyOn": "PublishedVersions"}) is on
    # the functions of queued jobs wait on no one: no snapshot billed for them
    for logical in ("MemoryFlushFunction", "MemoryConsolidateFunction", "MemoryForgetFunction"):
        assert "SnapStart" not in RESOURCES[logical]["Properties"]


def test_every_user_has_daily_budgets_by_default() -> None:
    from local_stack.resources import function_environment
    from local_stack.sam_env import local_resolver

    env = function_environment(local_resolver(TEMPLATE, parameters={}), "AgentCallFunction")
    assert int(env["HARNESS_USER_DAILY_TOKENS"]) > 0 and int(env["HARNESS_USER_DAILY_TURNS"]) > 0


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
    # turns (lease, admission check, places), budgets, memberships, usage
    "AgentCallFunction": {
        "GetItem", "UpdateItem", "PutItem", "DeleteItem", "ConditionCheckItem", "Query",
    },
    # cursors, gates and due marks; the memory budget; the idempotency records
    "MemoryFlushFunction": {"GetItem", "UpdateItem", "PutItem", "DeleteItem", "Query"},
    # the lease and watermark; the next expiry's mark; an abandoned user item; the budget
    "MemoryConsolidateFunction": {"GetItem", "UpdateItem", "PutItem", "DeleteItem", "Query"},
    # forget-user: the user's partition, read and deleted in batches
    "MemoryForgetFunction": {"Query", "BatchWriteItem"},
}  # fmt: skip
#: every DynamoDB call of the adapters, and the IAM action it needs
CALLS = {
    "get_item": "GetItem", "put_item": "PutItem", "update_item": "UpdateItem",
    "delete_item": "DeleteItem", "query": "Query", "batch_write_item": "BatchWriteItem",
    "scan": "Scan", '{"Put"': "PutItem", '{"Update"': "UpdateItem", '{"Delete"': "DeleteItem",
    '{"ConditionCheck"': "ConditionCheckItem", "transact_write_items": None,
}  # fmt: skip


def _table_actions(function: str) -> set[str]:
    from tests.iam import deployed, function_policies

    resolver = deployed(TEMPLATE)
    table = resolver.attrs[("StateTable", "Arn")]
    actions: set[str] = set()
    for policy in function_policies(resolver, function):
        for statement in policy["policy"]["Statement"]:
            resources = statement["Resource"]
            if table in ([resources] if isinstance(resources, str) else resources):
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


def test_only_the_forget_function_may_erase_for_good() -> None:
    """Permanent erasure (object versions, batch deletes of the table) is the forget
    function's alone; the internet-facing agent function holds none of it."""
    from tests.iam import deployed, function_policies, granted_actions

    resolver = deployed(TEMPLATE)
    erasure = {"s3:DeleteObjectVersion", "dynamodb:BatchWriteItem"}
    for function in ("AgentCallFunction", "MemoryFlushFunction", "MemoryConsolidateFunction"):
        assert not erasure & granted_actions(function_policies(resolver, function)), function
    assert erasure <= granted_actions(function_policies(resolver, "MemoryForgetFunction"))


@pytest.mark.parametrize("logical", ["WorkspaceBucket", "StateTable"])
def test_a_stack_delete_or_replacement_keeps_every_users_memory(logical) -> None:
    resource = RESOURCES[logical]
    assert resource["DeletionPolicy"] == "Retain" and resource["UpdateReplacePolicy"] == "Retain"
    if logical == "StateTable":
        assert resource["Properties"]["DeletionProtectionEnabled"] is True
        assert resource["Properties"]["PointInTimeRecoverySpecification"] == {
            "PointInTimeRecoveryEnabled": True
        }


def test_no_old_version_of_any_key_outlives_a_year() -> None:
    rules = RESOURCES["WorkspaceBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    unbounded = [
        r
        for r in rules
        if "NewerNoncurrentVersions" not in r.get("NoncurrentVersionExpiration", {})
    ]
    assert any(
        r["NoncurrentVersionExpiration"]["NoncurrentDays"] <= 365
        for r in unbounded
        if "NoncurrentVersionExpiration" in r
    )


def test_every_function_logs_to_a_log_group_with_a_retention() -> None:
    for function in [k for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::Function"]:
        group = RESOURCES[function]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert RESOURCES[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_both_dead_letter_queues_and_failing_consolidations_raise_an_alarm() -> None:
    alarms = [v["Properties"] for v in RESOURCES.values() if v["Type"] == "AWS::CloudWatch::Alarm"]
    watched = {
        str(d["Value"]) for a in alarms for d in a.get("Dimensions", []) if d["Name"] == "QueueName"
    }
    assert "{'Fn::GetAtt': ['FlushDLQ', 'QueueName']}" in watched
    assert "{'Fn::GetAtt': ['ConsolidationDLQ', 'QueueName']}" in watched
    assert any(a["MetricName"] == "ConsolidationFailures" for a in alarms)
