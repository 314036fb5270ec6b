"""All configuration in one place.

Every environment variable the package reads is named in ``ENV`` (``setting_names``) and nowhere
else; library code receives a validated ``Settings`` object and never reads
``os.environ``. ``Settings.from_env()`` is cheap (no I/O) and raises ``ConfigError``
naming the variable at cold start, so a bad deployment fails loudly and early.
"""

from __future__ import annotations

import json
import os
import re
from functools import cached_property
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_harness.errors import ConfigError
from agent_harness.mcp_config import McpServerConfig, check_deployed_credentials
from agent_harness.setting_names import ENV
from agent_harness.setting_values import (
    PROVIDERS,
    FlushTrigger,
    ModelSpec,
    parse_duration,
    parse_flush_trigger,
    parse_model_spec,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

#: how memory reaches the agent model (agent.context.framed)
Framing = Literal["message", "tool_result"]
_OPENAI_HOSTED = "https://api.openai.com/v1"

__all__ = [
    "ENV",
    "PROVIDERS",
    "FlushTrigger",
    "Framing",
    "McpServerConfig",
    "ModelSpec",
    "Settings",
    "parse_duration",
    "parse_flush_trigger",
    "parse_model_spec",
]


#: the ``{name}`` placeholders of a prompt template
def _placeholders(template: str) -> list[str]:
    return re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)


class Settings(BaseModel):
    """Validated configuration. Build with ``Settings.from_env()`` or directly in tests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # resources
    bucket: str = ""
    table: str = ""
    flush_queue_url: str = ""
    consolidation_queue_url: str = ""
    #: the dead-letter queues (the forget function's: a user's failed jobs go with them)
    flush_dlq_url: str = ""
    consolidation_dlq_url: str = ""

    # identity: "jwt" reads the authorizer's `sub` claim; "dev" trusts the X-User-Id header
    auth_mode: Literal["jwt", "dev"] = "jwt"
    #: web origins of browser-based clients /mcp and the local stack accept, exact
    #: (``https://app.example``); a request with another Origin is a 403 (api.origins)
    allowed_origins: tuple[str, ...] = ()
    #: the JWT issuer and accepted audiences (the template's JwtIssuer and JwtAudience):
    #: what /mcp checks a bearer token against itself, and the authorization server its
    #: OAuth protected resource metadata names (api.oauth, api.bearer)
    jwt_issuer: str = ""
    jwt_audience: tuple[str, ...] = ()
    #: the scopes an MCP client is told to ask for when it signs in
    oauth_scopes: tuple[str, ...] = ("openid",)
    #: the stack's public URL (a custom domain); unset: the request's own
    public_url: str | None = None

    # models (docs/design.md#models): unset roles fall back to the agent model
    agent_model: str = "offline"
    memory_model: str | None = None
    compaction_model: str | None = None
    model_timeout_seconds: float = Field(default=25.0, gt=0, le=900)
    model_max_output_tokens: int | None = Field(default=None, gt=0)
    #: attempts per model call (429, 5xx, connection errors and timeouts are retried)
    model_max_attempts: int = Field(default=3, ge=1, le=10)
    #: model work stops this long before the function's deadline (time to save and
    #: release the lease)
    deadline_margin_seconds: float = Field(default=3.0, ge=0, le=60)
    openai_api_key: SecretStr | None = None
    openai_base_url: str = _OPENAI_HOSTED
    openai_api_key_parameter: str | None = None  # SSM SecureString name
    openai_api_key_secret: str | None = None  # Secrets Manager secret name
    #: "authorization" (Bearer; OpenAI and most servers) or "api-key" (Azure, APIM)
    openai_auth_header: Literal["authorization", "api-key"] = "authorization"
    ollama_base_url: str = "http://127.0.0.1:11434/v1"
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key_parameter: str | None = None
    anthropic_api_key_secret: str | None = None

    # embeddings (docs/models.md#embedding-models): vectors for recall by meaning
    #: off | stand-in | local:<model> | openai:<model> | ollama:<model> | bedrock:<model>
    embedding_model: str = "off"
    #: an OpenAI-compatible embeddings endpoint other than the chat one (default:
    #: OPENAI_BASE_URL, or OLLAMA_BASE_URL for ollama:)
    embedding_base_url: str | None = None
    #: the vectors' size where the model lets one choose (OpenAI text-embedding-3, Titan V2)
    embedding_dimensions: int | None = Field(default=None, gt=0, le=8192)
    embedding_timeout_seconds: float = Field(default=3.0, gt=0, le=60)
    embedding_batch: int = Field(default=64, ge=1, le=2048)
    embedding_max_chars: int = Field(default=2000, ge=100, le=50_000)
    #: the cosine below which a line's meaning is no evidence (unset: the model's own,
    #: memory.engine.fusion.FLOORS)
    embedding_min_score: float | None = Field(default=None, ge=-1, le=1)

    # memory
    timezone: str = "UTC"
    consolidation_max_tokens: int = Field(default=4000, gt=0)
    #: memory calls' sampling, a flush answer's cap, the answers' format (memory.jobs)
    memory_answer_format: Literal["auto", "json_schema", "text"] = "auto"
    memory_temperature: float = Field(default=0.0, ge=0, le=2)
    memory_seed: int | None = Field(default=7, ge=0)
    flush_max_tokens: int = Field(default=1500, gt=0, le=32_000)
    #: automatic recall: ledger lines for the new message, injected before the first model
    #: call (0 turns it off; so does disable_memory_hooks)
    recall_max_tokens: int = Field(default=1000, ge=0, le=32_000)
    #: the share of the message's words (weighted by rarity) a line must hold to be
    #: recalled (abstention: no memory beats a wrong one)
    recall_min_score: float = Field(default=0.15, ge=0, le=1)
    #: how long a container reuses a user's last LIST of ledgers for recall (0: every turn)
    recall_listing_seconds: float = Field(default=30.0, ge=0, le=3600)
    #: automatic recall also ranks the user's past messages (other sessions), alternating
    #: them with memory lines (most evidence is in what was said); one LIST for both
    recall_messages: bool = True
    #: whose past messages recall shows: a comma list of user, assistant, tool. The
    #: user's own by default: the agent's replies and tool results are not the user's
    #: word, and replaying them is how a poisoned page would come back
    recall_message_roles: str = "user"
    #: how MEMORY.md and recall reach the agent model: user-role reference messages
    #: ("message"), the result of a synthetic memory_read call ("tool_result"), or
    #: "auto": tool_result on the hosted APIs where it was measured, message elsewhere
    memory_framing: Literal["auto", "message", "tool_result"] = "auto"
    #: each user's memory-model tokens per day (flush and consolidation), in
    #: ``timezone``; past it their jobs wait for the next day (0: unlimited; unset:
    #: ``usage.DEFAULT_MEMORY_TOKENS`` whenever another daily limit is set)
    user_daily_memory_tokens: int | None = Field(default=None, ge=0)
    #: each user's imported turns per day (imports, chat history, memory saves); unset:
    #: ``usage.DEFAULT_IMPORTED_TURNS`` whenever another daily limit is set (0: unlimited)
    user_daily_imported_turns: int | None = Field(default=None, ge=0)
    #: each user's agent and compaction tokens per day, and turns per day (0: unlimited);
    #: a turn over either is refused before any model call (429 budget_exhausted)
    user_daily_tokens: int = Field(default=0, ge=0)
    user_daily_turns: int = Field(default=0, ge=0)
    consolidation_min_gap_seconds: int = Field(default=1800, ge=0)
    consolidation_lease_seconds: int = Field(default=900, gt=0)
    consolidation_max_input_bytes: int = Field(default=200_000, ge=1_000)
    #: always | never | on_compact | throttled:<duration> (see FlushTrigger)
    flush_trigger: str = "always"
    #: custom flush system prompt (no placeholders; must name the NO_REPLY sentinel)
    flush_prompt: str | None = None
    #: the user's current facts most related to a flush's turns shown to the memory
    #: model with their ids, so it may supersede or retract them (0: none shown)
    flush_related_facts: int = Field(default=30, ge=0, le=200)
    #: custom consolidation prompt: exactly one {max_tokens} and one {max_chars}
    consolidation_prompt: str | None = None
    #: PII removed from flushed facts: "none" or a comma list of "email", "phone"
    redact_pii: str = "none"
    #: a fact that reads as an injected command (memory.facts.gate), from the user, an
    #: import or a person: held for a person's "review", "drop"ped, or kept and "mark"ed;
    #: from anyone else it is always held for review
    instruction_facts: Literal["review", "drop", "mark"] = "review"
    #: ledgers older than this move to memory/archive/ (still searchable)
    daily_file_retention_days: int = Field(default=90, gt=0)

    # agent call
    session_lease_seconds: int = Field(default=60, gt=0)
    max_message_chars: int = Field(default=100_000, gt=0)
    #: a PUT of MEMORY.md or a memory_save body larger than this is a 413
    max_memory_chars: int = Field(default=512_000, gt=0)
    #: id caps; they can only be lowered: at most, with the user id encoded, every
    #: workspace key stays under S3's 1,024 bytes
    max_session_id_chars: int = Field(default=128, ge=1, le=128)
    max_user_id_chars: int = Field(default=256, ge=1, le=256)
    max_model_calls: int = Field(default=8, gt=0, le=64)
    #: a busy session: wait this long for the lease before answering 409 (turns of one
    #: session queue up briefly instead of each client sleeping out a Retry-After)
    session_wait_seconds: float = Field(default=5.0, ge=0, le=20)
    #: the agent model's context window in tokens; 0 = unknown (fixed fallbacks apply)
    model_context_window: int = Field(default=0, ge=0)

    # compaction (on by default; docs/architecture.md#compaction-at-turn-start)
    compaction_enabled: bool = True
    compaction_trigger_messages: int = Field(default=50, ge=0)  # 0 = off
    compaction_trigger_tokens: int = Field(default=0, ge=0)  # 0 = window - reserve
    compaction_reserve_tokens: int = Field(default=20_000, ge=0)
    compaction_keep_messages: int = Field(default=20, ge=1)
    compaction_keep_tokens: int = Field(default=-1, ge=-1)  # -1 dynamic, 0 use messages
    compaction_flush_before: bool = True
    compaction_summary_prompt: str | None = None  # must contain {messages}
    compaction_max_arg_length: int = Field(default=2000, ge=20)

    # tool-result eviction (on by default; 0 = off)
    eviction_max_chars: int = Field(default=80_000, ge=0)
    eviction_preview_chars: int = Field(default=2000, ge=0)
    #: no memory_search / memory_get / memory_save for the agent
    disable_memory_tools: bool = False
    #: no post-turn flush jobs (and so no consolidation marks); with both, no MEMORY.md
    disable_memory_hooks: bool = False

    # tools of the caller and of remote servers
    #: a turn paused for client tool results is closed by the next message after this
    tool_result_timeout_seconds: int = Field(default=3600, gt=0, le=7 * 86_400)
    #: a client tool result longer than this is a 413 (results over the eviction size
    #: are stored in tool-results/ with a preview in context)
    max_tool_result_chars: int = Field(default=1_000_000, gt=0)
    #: false in a deployed stack (the template): credential headers must come from
    #: Secrets Manager or SSM, never from a plain parameter (declared before mcp_servers,
    #: whose check reads it)
    allow_plain_secrets: bool = True
    #: true in a deployed stack outside dev mode (the template): every model and tool
    #: server endpoint in use must be https:// (declared before mcp_servers)
    require_https: bool = False
    #: the stack's name: deployed, MCP credentials live under agent-harness/<stack>/mcp/
    stack_name: str = Field(default="", pattern=r"^[A-Za-z0-9-]{0,128}$")
    mcp_servers: tuple[McpServerConfig, ...] = ()
    #: the function that forgets a user (deployed: the agent function holds no erasure
    #: rights and invokes it); empty: forget in this process
    forget_function: str = ""

    # fan-out and tokens
    due_shards: int = Field(default=16, gt=0, le=1024)
    token_encoding: str = "cl100k_base"
    tiktoken_cache_dir: str | None = None

    @field_validator("agent_model")
    @classmethod
    def _check_agent_model(cls, value: str) -> str:
        parse_model_spec(value)
        return value.strip()

    @field_validator("memory_model", "compaction_model")
    @classmethod
    def _check_role_model(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parse_model_spec(value)
        return value.strip()

    @field_validator("embedding_model")
    @classmethod
    def _check_embedding_model(cls, value: str) -> str:
        from agent_harness.setting_values import parse_embedding_spec

        return str(parse_embedding_spec(value))

    @field_validator("compaction_summary_prompt")
    @classmethod
    def _check_summary_prompt(cls, value: str | None) -> str | None:
        if value is not None and "{messages}" not in value:
            raise ValueError("the compaction summary prompt must contain {messages}")
        return value or None

    @field_validator("flush_trigger")
    @classmethod
    def _check_flush_trigger(cls, value: str) -> str:
        return str(parse_flush_trigger(value))

    @field_validator("flush_prompt")
    @classmethod
    def _check_flush_prompt(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if "NO_REPLY" not in value:
            raise ValueError("a custom flush prompt must tell the model to answer NO_REPLY")
        return value

    @field_validator("consolidation_prompt")
    @classmethod
    def _check_consolidation_prompt(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        found = _placeholders(value)
        if sorted(found) != ["max_chars", "max_tokens"]:
            shown = ", ".join("{" + name + "}" for name in found) or "none"
            raise ValueError(
                "a custom consolidation prompt needs exactly one {max_tokens} and one "
                f"{{max_chars}} placeholder (found: {shown})"
            )
        return value

    @field_validator("redact_pii")
    @classmethod
    def _check_redact_pii(cls, value: str) -> str:
        kinds = sorted({part.strip().lower() for part in value.split(",") if part.strip()})
        if kinds in ([], ["none"]):
            return "none"
        unknown = [k for k in kinds if k not in ("email", "phone")]
        if unknown:
            raise ValueError(f"unknown PII kind {unknown[0]!r}; use none, email, phone")
        return ",".join(kinds)

    @field_validator("recall_message_roles")
    @classmethod
    def _check_recall_roles(cls, value: str) -> str:
        roles = sorted({part.strip().lower() for part in value.split(",") if part.strip()})
        unknown = [r for r in roles if r not in ("user", "assistant", "tool")]
        if unknown or not roles:
            shown = repr(unknown[0]) if unknown else "nothing"
            raise ValueError(f"unknown role {shown}; use a comma list of user, assistant, tool")
        return ",".join(roles)

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @field_validator("allowed_origins", "jwt_audience", "oauth_scopes", mode="before")
    @classmethod
    def _parse_lists(cls, value: object) -> object:
        if isinstance(value, str):  # comma- or space-separated
            value = tuple(part for part in re.split(r"[,\s]+", value) if part)
        return value

    @field_validator("jwt_issuer", "public_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value and not re.fullmatch(r"https?://[^\s?#]+", value):
            raise ValueError(f"{value!r} is no URL (scheme://host[/path])")
        return value.rstrip("/") if value else value

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if not re.fullmatch(r"https?://[^/?#\s]+", origin):
                raise ValueError(f"{origin!r} is no origin (scheme://host[:port], no path)")
        return tuple(origin.lower() for origin in value)

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _parse_mcp_servers(cls, value: object) -> object:
        if isinstance(value, str):
            if not value.strip():
                return ()
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not valid JSON: {exc}") from exc
            if not isinstance(value, list):
                raise ValueError("must be a JSON list of server objects")
        return value

    @field_validator("mcp_servers")
    @classmethod
    def _check_mcp_servers(
        cls, value: tuple[McpServerConfig, ...], info: ValidationInfo
    ) -> tuple[McpServerConfig, ...]:
        names = [server.name for server in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"server name {duplicates[0]!r} is used twice")
        if not info.data.get("allow_plain_secrets", True):
            for server in value:
                check_deployed_credentials(server, info.data.get("stack_name", ""))
        if info.data.get("require_https"):
            plain = [s.name for s in value if not s.url.lower().startswith("https://")]
            if plain:
                raise ValueError(f"server {plain[0]!r} must be an https:// URL")
        return value

    @model_validator(mode="after")
    def _check_https(self) -> Settings:
        """Deployed outside dev mode, the endpoint of every model in use is https://."""
        if not self.require_https:
            return self
        urls = {
            "openai": ("OPENAI_BASE_URL", self.openai_base_url),
            "ollama": ("OLLAMA_BASE_URL", self.ollama_base_url),
            "anthropic": ("ANTHROPIC_BASE_URL", self.anthropic_base_url),
        }
        for role in ("agent", "memory", "compaction"):
            name, url = urls.get(self.model_for(role).provider, ("", "https://"))
            if not url.lower().startswith("https://"):
                raise ValueError(f"{name} must be an https:// URL outside dev mode")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every ``ENV`` variable that is set and non-empty; validate the lot."""
        env = os.environ if environ is None else environ
        values = {field: env[var] for field, var in ENV.items() if env.get(var, "").strip()}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            if not first["loc"]:  # a rule across variables: its message names them
                raise ConfigError(f"invalid configuration: {first['msg']}") from exc
            field = str(first["loc"][0])
            var = ENV.get(field, field)
            var += f" ({where})" if (where := ".".join(map(str, first["loc"][1:]))) else ""
            raise ConfigError(f"invalid configuration {var}: {first['msg']}") from exc

    @cached_property  # derived, cached on the frozen instance
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @cached_property
    def trigger(self) -> FlushTrigger:
        return parse_flush_trigger(self.flush_trigger)

    @cached_property
    def recall_roles(self) -> frozenset[str]:
        return frozenset(self.recall_message_roles.split(","))

    @cached_property
    def pii_kinds(self) -> frozenset[str]:
        return frozenset() if self.redact_pii == "none" else frozenset(self.redact_pii.split(","))

    @cached_property
    def framing(self) -> Framing:
        """How memory reaches the agent model. ``auto``: a tool result on hosted APIs
        (docs/architecture.md#memory-framing); messages for local servers and offline,
        whose chat templates may refuse a tool message."""
        if self.memory_framing != "auto":
            return self.memory_framing
        provider = self.model_for("agent").provider
        hosted = provider in ("anthropic", "bedrock") or (
            provider == "openai" and self.openai_base_url.rstrip("/") == _OPENAI_HOSTED
        )
        return "tool_result" if hosted else "message"

    def model_for(self, role: Literal["agent", "memory", "compaction"]) -> ModelSpec:
        """The model of a role, falling back to the agent model when unset."""
        chosen = {"memory": self.memory_model, "compaction": self.compaction_model}.get(role)
        return parse_model_spec(chosen or self.agent_model)
