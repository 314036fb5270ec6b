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
