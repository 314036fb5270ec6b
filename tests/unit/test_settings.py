from __future__ import annotations

import pytest

from agent_harness.errors import ConfigError
from agent_harness.settings import (
    ENV,
    FlushTrigger,
    Settings,
    parse_duration,
    parse_flush_trigger,
    parse_model_spec,
)


def test_defaults_need_no_environment() -> None:
    settings = Settings.from_env({})
    assert settings.agent_model == "offline"
    assert settings.auth_mode == "jwt"
    assert settings.consolidation_max_tokens == 4000
    assert settings.consolidation_min_gap_seconds == 1800
    assert settings.flush_trigger == "always"
    assert settings.timezone == "UTC"


def test_environment_values_are_parsed_and_validated() -> None:
    settings = Settings.from_env(
        {
            "HARNESS_MODEL": "openai:gpt-4.1-mini",
            "HARNESS_MEMORY_MODEL": "ollama:llama3.1",
            "HARNESS_CONSOLIDATION_MAX_TOKENS": "1234",
            "HARNESS_TIMEZONE": "Europe/Lisbon",
            "OPENAI_API_KEY": "sk-test",
            "HARNESS_COMPACTION_MODEL": "   ",
        }
    )
    assert settings.consolidation_max_tokens == 1234
    assert settings.zone.key == "Europe/Lisbon"
    assert settings.openai_api_key is not None
    assert "sk-test" not in repr(settings)  # secrets never print


def test_roles_fall_back_to_the_agent_model() -> None:
    settings = Settings(agent_model="openai:gpt-4.1", memory_model="openai:gpt-4.1-mini")
    assert str(settings.model_for("agent")) == "openai:gpt-4.1"
    assert str(settings.model_for("memory")) == "openai:gpt-4.1-mini"
    assert str(settings.model_for("compaction")) == "openai:gpt-4.1"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HARNESS_MODEL", "gpt-4"),
        ("HARNESS_MODEL", "acme:model"),
        ("HARNESS_MEMORY_MODEL", "openai:"),
        ("HARNESS_CONSOLIDATION_MAX_TOKENS", "0"),
        ("HARNESS_CONSOLIDATION_MIN_GAP_SECONDS", "-1"),
        ("HARNESS_TIMEZONE", "Mars/Olympus"),
        ("HARNESS_AUTH_MODE", "none"),
        ("HARNESS_FLUSH_TRIGGER", "sometimes"),
        ("HARNESS_FLUSH_TRIGGER", "throttled"),
        ("HARNESS_FLUSH_TRIGGER", "throttled:-1s"),
        ("HARNESS_FLUSH_TRIGGER", "throttled:soon"),
        ("HARNESS_FLUSH_PROMPT", "Extract facts as bullets."),
        ("HARNESS_CONSOLIDATION_PROMPT", "Merge within %d tokens and %d chars."),
        ("HARNESS_CONSOLIDATION_PROMPT", "Merge within {max_tokens} tokens."),
        ("HARNESS_CONSOLIDATION_PROMPT", "{max_tokens} {max_chars} {max_tokens}"),
        ("HARNESS_CONSOLIDATION_PROMPT", "{max_tokens} {max_chars} for {user}"),
        ("HARNESS_REDACT_PII", "email,ssn"),
        ("HARNESS_INSTRUCTION_FACTS", "keep"),
        ("HARNESS_DAILY_FILE_RETENTION_DAYS", "0"),
        ("HARNESS_ALLOWED_ORIGINS", "https://app.example/path"),
        ("HARNESS_ALLOWED_ORIGINS", "app.example"),
    ],
)
def test_bad_configuration_names_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


def test_allowed_origins_are_a_comma_list_of_exact_origins() -> None:
    raw = " https://App.example, http://127.0.0.1:5173 ,"
    settings = Settings.from_env({"HARNESS_ALLOWED_ORIGINS": raw})
    assert settings.allowed_origins == ("https://app.example", "http://127.0.0.1:5173")
    assert Settings().allowed_origins == ()


def test_every_setting_has_an_environment_variable() -> None:
    assert set(ENV) == set(Settings.model_fields)


def test_model_strings() -> None:
    assert parse_model_spec("offline").provider == "offline"
    spec = parse_model_spec("openai:org/model:v2")
    assert (spec.provider, spec.name) == ("openai", "org/model:v2")


def test_a_deployment_without_its_resources_fails_at_cold_start() -> None:
    from agent_harness.runtime import Runtime

    with pytest.raises(ConfigError, match="HARNESS_BUCKET, HARNESS_TABLE"):
        Runtime.from_settings(Settings(flush_queue_url="q", consolidation_queue_url="q"))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300", 300), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), ("1d", 86400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "trigger"),
    [
        ("always", FlushTrigger("always")),
        ("NEVER", FlushTrigger("never")),
        ("on_compact", FlushTrigger("on_compact")),
        ("throttled:10m", FlushTrigger("throttled", 600)),
        ("throttled:0s", FlushTrigger("always")),  # a zero gap is always
    ],
)
def test_flush_triggers(text: str, trigger: FlushTrigger) -> None:
    assert parse_flush_trigger(text) == trigger
    assert Settings(flush_trigger=text).trigger == trigger


def test_a_custom_consolidation_prompt_with_stray_percent_and_braces_renders() -> None:
    """Validated when settings load, so rendering can never fail at run time
    (docs/design.md#format-string-prompts)."""
    from agent_harness.memory.jobs.prompts import consolidation_messages

    prompt = 'Keep 100% of facts {"style": "terse"} within {max_tokens} tokens / {max_chars} chars.'
    settings = Settings.from_env({"HARNESS_CONSOLIDATION_PROMPT": prompt})
    system = consolidation_messages(
        "", "- x", max_tokens=10, since=None, prompt=settings.consolidation_prompt
    )[0]
    assert system.content == ('Keep 100% of facts {"style": "terse"} within 10 tokens / 40 chars.')


def test_tool_servers_are_parsed_from_json_with_their_defaults() -> None:
    settings = Settings.from_env(
        {
            "HARNESS_MCP_SERVERS": (
                '[{"name": "crm", "url": "https://crm.example.com/mcp", "tools": ["lookup"],'
                ' "forward_user": true}, {"name": "docs", "url": "http://127.0.0.1:8765/mcp"}]'
            )
        }
    )
    crm, docs = settings.mcp_servers
    assert (crm.name, crm.tools, crm.forward_user, crm.timeout_seconds) == (
        "crm",
        ("lookup",),
        True,
        20.0,
    )
    assert docs.forward_user is False and docs.cache_seconds == 300
    assert Settings.from_env({"HARNESS_MCP_SERVERS": " "}).mcp_servers == ()


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("not json", "not valid JSON"),
        ('{"name": "crm"}', "a JSON list"),
        ('[{"url": "https://x/mcp"}]', "(0.name): Field required"),
        ('[{"name": "c__rm", "url": "https://x/mcp"}]', "(0.name)"),
        ('[{"name": "crm", "url": "ftp://x/mcp"}]', "http(s) URL"),
        ('[{"name": "crm", "url": "https://x/mcp", "timeout_seconds": 0}]', "timeout_seconds"),
        ('[{"name": "crm", "url": "https://x/mcp", "surprise": 1}]', "surprise"),
        (
            '[{"name": "a", "url": "https://x/mcp"}, {"name": "a", "url": "https://y/mcp"}]',
            "used twice",
        ),
    ],
)
def test_bad_tool_server_configuration_fails_at_cold_start_naming_the_variable(
    value: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"HARNESS_MCP_SERVERS": value})
    assert "HARNESS_MCP_SERVERS" in caught.value.message and fragment in caught.value.message


@pytest.mark.parametrize(
    ("server", "fragment"),
    [
        ({"headers": {"Authorization": "Bearer sk-123"}}, "looks like a credential"),
        ({"headers": {"X-Api-Key": "k"}}, "looks like a credential"),
        ({"headers_secret": "prod/crm"}, "agent-harness/mcp/"),
        ({"headers_parameter": "/prod/crm"}, "/agent-harness/mcp/"),
    ],
)
def test_a_deployed_stack_takes_tool_server_credentials_only_from_secrets(
    server: dict, fragment: str
) -> None:
    import json

    entry = json.dumps([{"name": "crm", "url": "https://crm.example.com/mcp", **server}])
    with pytest.raises(ConfigError, match="HARNESS_MCP_SERVERS") as caught:
        Settings.from_env({"HARNESS_MCP_SERVERS": entry, "HARNESS_ALLOW_PLAIN_SECRETS": "false"})
    assert fragment in caught.value.message
    assert Settings.from_env({"HARNESS_MCP_SERVERS": entry}).mcp_servers  # local: allowed
    fine = [
        {
            "name": "crm",
            "url": "https://crm.example.com/mcp",
            "headers": {"Accept-Language": "en"},
            "headers_secret": "agent-harness/mcp/crm",
            "headers_parameter": "/agent-harness/mcp/crm",
        }
    ]
    deployed = {"HARNESS_MCP_SERVERS": json.dumps(fine), "HARNESS_ALLOW_PLAIN_SECRETS": "false"}
    assert Settings.from_env(deployed).mcp_servers[0].headers_secret == "agent-harness/mcp/crm"


def test_a_stacks_tool_server_credentials_live_under_its_own_prefix() -> None:
    """One stack of an account never reads another's credentials (a dev stack,
    production's): deployed, the names carry the stack's name, as its IAM policy does."""
    import json

    def servers(secret: str, parameter: str) -> str:
        entry = {"name": "crm", "url": "https://crm.example.com/mcp"}
        return json.dumps([{**entry, "headers_secret": secret, "headers_parameter": parameter}])

    deployed = {"HARNESS_ALLOW_PLAIN_SECRETS": "false", "HARNESS_STACK_NAME": "prod"}
    own = servers("agent-harness/prod/mcp/crm", "/agent-harness/prod/mcp/crm")
    assert Settings.from_env({**deployed, "HARNESS_MCP_SERVERS": own}).mcp_servers
    for secret, parameter, fragment in (
        ("agent-harness/dev/mcp/crm", "/agent-harness/prod/mcp/crm", "agent-harness/prod/mcp/"),
        ("agent-harness/prod/mcp/crm", "/agent-harness/mcp/crm", "/agent-harness/prod/mcp/"),
    ):
        with pytest.raises(ConfigError) as caught:
            Settings.from_env({**deployed, "HARNESS_MCP_SERVERS": servers(secret, parameter)})
        assert fragment in caught.value.message


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        (
            {"HARNESS_MODEL": "openai:gpt-4.1-mini", "OPENAI_BASE_URL": "http://gw.example/v1"},
            "OPENAI_BASE_URL",
        ),
        (
            {
                "HARNESS_MEMORY_MODEL": "ollama:qwen2.5",
                "OLLAMA_BASE_URL": "http://10.0.0.5:11434/v1",
            },
            "OLLAMA_BASE_URL",
        ),
        (
            {
                "HARNESS_COMPACTION_MODEL": "anthropic:claude-haiku",
                "ANTHROPIC_BASE_URL": "http://a.example",
            },
            "ANTHROPIC_BASE_URL",
        ),
    ],
)
def test_outside_dev_mode_every_model_endpoint_in_use_is_https(env: dict, variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({**env, "HARNESS_REQUIRE_HTTPS": "true"})
    assert variable in caught.value.message and "https://" in caught.value.message
    assert Settings.from_env(env)  # dev mode and the local stack: a plain local server is fine


def test_outside_dev_mode_an_unused_providers_plain_url_and_https_servers_pass() -> None:
    import json

    strict = {"HARNESS_REQUIRE_HTTPS": "true", "HARNESS_MODEL": "offline"}
    assert Settings.from_env({**strict, "OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"})
    plain = [{"name": "crm", "url": "http://crm.example.com/mcp"}]
    with pytest.raises(ConfigError, match="HARNESS_MCP_SERVERS") as caught:
        Settings.from_env({**strict, "HARNESS_MCP_SERVERS": json.dumps(plain)})
    assert "https://" in caught.value.message
    secure = [{"name": "crm", "url": "https://crm.example.com/mcp"}]
    assert Settings.from_env({**strict, "HARNESS_MCP_SERVERS": json.dumps(secure)}).mcp_servers
