"""The configuration of one remote tool server (an entry of ``HARNESS_MCP_SERVERS``) and
the rule on where a deployed stack may read its header credentials from."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "McpServerConfig",
    "check_deployed_credentials",
    "credential_prefixes",
]

_CREDENTIAL_HEADER = re.compile(r"auth|token|secret|key|password|cookie|credential", re.I)
_SERVER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}")


class McpServerConfig(BaseModel):
    """One remote tool server of ``HARNESS_MCP_SERVERS`` (Streamable HTTP). Its tools are
    offered to the model as ``<name>__<tool>``; credentials in headers come from
    ``headers_secret`` (Secrets Manager) or ``headers_parameter`` (SSM SecureString), each a
    JSON object of header names and values, read on first use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    headers_secret: str | None = None
    headers_parameter: str | None = None
    #: only these tools of the server are offered (None: all of them)
    tools: tuple[str, ...] | None = None
    timeout_seconds: float = Field(default=20.0, gt=0, le=300)
    #: send the caller's user id to the server (X-Harness-User-Id) on tools/call
    forward_user: bool = False
    #: how long a container keeps the server's tool list
    cache_seconds: float = Field(default=300.0, ge=0, le=86_400)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _SERVER_NAME.fullmatch(value):
            raise ValueError(
                f"server name {value!r} must be 1-32 letters, digits, '-' or single '_', "
                "starting with a letter or digit"
            )
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value):
            raise ValueError(f"server url {value!r} must be an http(s) URL")
        return value

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
                raise ValueError(f"{name!r} is not an HTTP header name")
        return value


def credential_prefixes(stack_name: str) -> tuple[str, str]:
    """The Secrets Manager and SSM name prefixes a deployed stack's functions may read
    header credentials from (their IAM policy says so): the stack's own, so one stack of
    an account never reads another's (a dev stack, production's)."""
    stack = f"{stack_name}/" if stack_name else ""
    return f"agent-harness/{stack}mcp/", f"/agent-harness/{stack}mcp/"


def check_deployed_credentials(server: McpServerConfig, stack_name: str = "") -> None:
    """In a deployed stack credentials come from Secrets Manager or SSM, under the names
    the functions may read; a plain header that looks like one is refused."""
    for header in server.headers:
        if _CREDENTIAL_HEADER.search(header):
            raise ValueError(
                f"header {header!r} of server {server.name!r} looks like a credential; put it "
                "in headers_secret (Secrets Manager) or headers_parameter (SSM), never in a "
                "plain parameter"
            )
    secret_prefix, parameter_prefix = credential_prefixes(stack_name)
    if server.headers_secret and not server.headers_secret.startswith(secret_prefix):
        raise ValueError(
            f"headers_secret of server {server.name!r} must be named {secret_prefix}...: "
            "the functions may read only those secrets"
        )
    parameter = server.headers_parameter
    if parameter and not parameter.startswith(parameter_prefix):
        raise ValueError(
            f"headers_parameter of server {server.name!r} must be named "
            f"{parameter_prefix}...: the functions may read only those parameters"
        )
