"""Each function reaches only the models and provider keys of the roles it runs, and only
its own stack's tool-server credentials: template.yaml's roles, resolved for a stack's
parameters and decided by the IAM evaluator (tests/iam.py). The calls themselves are
recorded and checked end to end in tests/e2e/test_iam.py; models are not called there."""

from __future__ import annotations

import pytest

from local_stack.resources import ACCOUNT, PREFIX, REGION, load_template
from tests.iam import Request, deployed, evaluate, function_policies

TEMPLATE = load_template()
AGENT, FLUSH, CONSOLIDATE, FORGET = (
    "AgentCallFunction",
    "MemoryFlushFunction",
    "MemoryConsolidateFunction",
    "MemoryForgetFunction",
)
PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"


def profile_arn(profile: str = PROFILE) -> str:
    return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{profile}"


def model_arn(model: str = MODEL, region: str = REGION) -> str:
    return f"arn:aws:bedrock:{region}::foundation-model/{model}"


def ssm(name: str) -> str:
    return f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{name}"


def secret(name: str) -> str:
    return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf"


def decisions(parameters: dict[str, str], asked: list[tuple[str, Request]]) -> list[str]:
    """Each (function, request)'s decision under the stack's ``parameters``."""
    resolver = deployed(TEMPLATE, parameters)
    cases = [
        request.case(str(n), function_policies(resolver, function))
        for n, (function, request) in enumerate(asked)
    ]
    decided = evaluate(cases)
    errors = {k: v for k, v in decided.items() if v["decision"] == "Error"}
    assert not errors, errors
    return [decided[str(n)]["decision"] for n in range(len(asked))]


def test_bedrock_agent_and_openai_memory_each_reach_only_their_own() -> None:
    parameters = {
        "AgentModel": f"bedrock:{PROFILE}",
        "MemoryModel": "openai:gpt-4.1-mini",
        "OpenAIApiKeyParameter": "/agent-harness/openai",
        "AnthropicApiKeySecret": "agent-harness/anthropic",
    }
    invoke = "bedrock:InvokeModel"
    through_profile = (("bedrock:InferenceProfileArn", profile_arn()),)
    allowed = [
        (AGENT, Request(invoke, profile_arn())),
        (AGENT, Request(invoke, model_arn(region="us-west-2"), through_profile)),
        (FLUSH, Request("ssm:GetParameter", ssm("/agent-harness/openai"))),
        (CONSOLIDATE, Request("ssm:GetParameter", ssm("/agent-harness/openai"))),
    ]
    denied = [
        (AGENT, Request(invoke, model_arn(region="us-west-2"))),  # not through the profile
        (AGENT, Request(invoke, model_arn("amazon.nova-pro-v1:0"))),
        (AGENT, Request(invoke, profile_arn("eu.anthropic.claude-opus-4-1-20250805-v1:0"))),
        (AGENT, Request("ssm:GetParameter", ssm("/agent-harness/openai"))),
        (AGENT, Request("secretsmanager:GetSecretValue", secret("agent-harness/anthropic"))),
        (FLUSH, Request(invoke, profile_arn())),
        (FLUSH, Request("secretsmanager:GetSecretValue", secret("agent-harness/anthropic"))),
        (FORGET, Request("ssm:GetParameter", ssm("/agent-harness/openai"))),
        (FORGET, Request(invoke, profile_arn())),
    ]
    assert decisions(parameters, allowed) == ["Allowed"] * len(allowed)
    assert decisions(parameters, denied) == ["ImplicitlyDenied"] * len(denied)


def test_a_memory_model_left_empty_is_the_agents_and_so_is_its_key() -> None:
    parameters = {"AgentModel": "anthropic:claude-sonnet-4-5", "AnthropicApiKeySecret": "ak"}
    asked = [(f, Request("secretsmanager:GetSecretValue", secret("ak"))) for f in (AGENT, FLUSH)]
    asked.append((CONSOLIDATE, Request("secretsmanager:GetSecretValue", secret("ak"))))
    assert decisions(parameters, asked) == ["Allowed"] * 3
    on_bedrock = {"AgentModel": f"bedrock:{MODEL}"}
    asked = [(f, Request("bedrock:InvokeModel", model_arn())) for f in (AGENT, FLUSH, FORGET)]
    assert decisions(on_bedrock, asked) == ["Allowed", "Allowed", "ImplicitlyDenied"]


def test_the_offline_model_needs_no_model_access_at_all() -> None:
    resolver = deployed(TEMPLATE, {"AgentModel": "offline"})
    for function in (AGENT, FLUSH, CONSOLIDATE):
        names = {p["name"] for p in function_policies(resolver, function)}
        assert not {"AgentModelAccessPolicy", "MemoryModelAccessPolicy"} & names, names


def test_the_embedding_model_is_reached_by_the_functions_that_embed_and_only_it() -> None:
    """Recall (agent_call) embeds queries, flush and consolidation embed memory lines."""
    titan = "amazon.titan-embed-text-v2:0"
    on_bedrock = {"AgentModel": "offline", "EmbeddingModel": f"bedrock:{titan}"}
    invoke = "bedrock:InvokeModel"
    allowed = [(f, Request(invoke, model_arn(titan))) for f in (AGENT, FLUSH, CONSOLIDATE)]
    denied = [
        (FORGET, Request(invoke, model_arn(titan))),
        (AGENT, Request(invoke, model_arn(titan, region="us-west-2"))),
        (AGENT, Request(invoke, model_arn("cohere.embed-multilingual-v3"))),
        (FLUSH, Request(invoke, model_arn())),
    ]
    assert decisions(on_bedrock, allowed) == ["Allowed"] * len(allowed)
    assert decisions(on_bedrock, denied) == ["ImplicitlyDenied"] * len(denied)

    on_openai = {
        "AgentModel": f"bedrock:{MODEL}",
        "EmbeddingModel": "openai:text-embedding-3-small",
        "OpenAIApiKeyParameter": "/agent-harness/openai",
    }
    key = Request("ssm:GetParameter", ssm("/agent-harness/openai"))
    asked = [(f, key) for f in (AGENT, FLUSH, CONSOLIDATE, FORGET)]
    assert decisions(on_openai, asked) == ["Allowed"] * 3 + ["ImplicitlyDenied"]


@pytest.mark.parametrize(
    ("function", "name", "decision"),
    [
        (AGENT, f"agent-harness/{PREFIX}/mcp/crm", "Allowed"),
        (AGENT, "agent-harness/other-stack/mcp/crm", "ImplicitlyDenied"),
        (AGENT, "agent-harness/mcp/crm", "ImplicitlyDenied"),
        (FLUSH, f"agent-harness/{PREFIX}/mcp/crm", "ImplicitlyDenied"),
    ],
)
def test_tool_server_credentials_are_the_stacks_own_and_the_agents_only(
    function: str, name: str, decision: str
) -> None:
    """The stack's own prefix (the local stack's name here stands for AWS::StackName)."""
    servers = '[{"name": "crm", "url": "https://crm.example.com/mcp"}]'
    asked = [(function, Request("secretsmanager:GetSecretValue", secret(name)))]
    assert decisions({"McpServers": servers}, asked) == [decision]
