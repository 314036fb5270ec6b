"""Sign-in by discovery, for MCP clients: the MCP authorization spec's OAuth 2.0
protected resource metadata (RFC 9728), which names the authorization server whose own
metadata (RFC 8414, or OpenID discovery) the client reads next.

    GET /.well-known/oauth-protected-resource       the stack as a resource
    GET /.well-known/oauth-protected-resource/mcp   the MCP endpoint as a resource
        {"resource", "authorization_servers", "scopes_supported",
         "bearer_methods_supported": ["header"], "resource_name"}
    every 401 of /mcp
        WWW-Authenticate: Bearer resource_metadata="<stack>/.well-known/oauth-protected-
        resource/mcp", scope="<scopes>" (and error="invalid_token" for a token refused)

The authorization server is the stack's JWT issuer (``HARNESS_JWT_ISSUER``, the
template's ``JwtIssuer``: a Cognito user pool, which serves its OpenID metadata at the
issuer URL). The stack's URL is ``HARNESS_PUBLIC_URL`` when set (a custom domain), else
the request's own: its scheme (``X-Forwarded-Proto``, https behind API Gateway), its
domain name, and its stage when that is not ``$default``. These routes need no
identity (API Gateway routes them with no authorizer): they hold no user data. Without
an issuer configured (dev mode) they are 404: there is nothing to sign in to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_harness.settings import Settings

__all__ = ["METADATA_PATH", "challenge", "metadata_url", "resource_metadata", "stack_url"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
#: the MCP endpoint's path, the resource the 401s of /mcp point to
MCP_PATH = "/mcp"


def stack_url(settings: Settings, event: dict[str, Any]) -> str:
    """The stack's public URL, without a trailing slash (see the module)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    context = event.get("requestContext") or {}
    scheme = headers.get("x-forwarded-proto", "https").split(",")[0].strip() or "https"
    host = str(context.get("domainName") or headers.get("host") or "localhost")
    stage = str(context.get("stage") or "$default")
    return f"{scheme}://{host}" + ("" if stage == "$default" else f"/{stage}")


def metadata_url(base: str, resource_path: str = MCP_PATH) -> str:
    """Where the metadata of the resource at ``resource_path`` is served (RFC 9728 3.1:
    the well-known path, then the resource's path)."""
    return f"{base}{METADATA_PATH}{resource_path}"


def resource_metadata(settings: Settings, base: str, resource_path: str) -> dict[str, Any]:
    """The protected resource metadata of ``base`` + ``resource_path`` ("" or "/mcp")."""
    return {
        "resource": f"{base}{resource_path}",
        "authorization_servers": [settings.jwt_issuer.rstrip("/")],
        "scopes_supported": list(settings.oauth_scopes),
        "bearer_methods_supported": ["header"],
        "resource_name": "agent-harness memory" + (" (MCP)" if resource_path else ""),
    }


def challenge(settings: Settings, base: str, *, refused: str | None = None) -> str:
    """The ``WWW-Authenticate`` value of a 401 of /mcp: where to sign in, the scopes to
    ask for, and for a token that was sent and refused, why (RFC 6750 3)."""
    parts = [f'resource_metadata="{metadata_url(base)}"']
    if settings.oauth_scopes:
        parts.append(f'scope="{" ".join(settings.oauth_scopes)}"')
    if refused is not None:
        reason = refused.replace('"', "'").replace("\\", "/")
        parts += ['error="invalid_token"', f'error_description="{reason}"']
    return "Bearer " + ", ".join(parts)
