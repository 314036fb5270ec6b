"""API Gateway's JWT authorizer, as the local stack plays it when its functions run with
``HARNESS_AUTH_MODE=jwt`` and an issuer (``HARNESS_JWT_ISSUER``, exported before
``make dev``): a route the template gives the authorizer needs a bearer token that passes
the authorizer's rules (agent_harness.api.bearer: RS256 over the issuer's JWKS, issuer,
``exp``, an audience of ``HARNESS_JWT_AUDIENCE``), else it is answered 401
``{"message": "Unauthorized"}`` as API Gateway answers, before any function runs. A token
that passes reaches the function as the gateway's claims
(``requestContext.authorizer.jwt``). A route with ``Auth: {Authorizer: NONE}`` (``/health``,
the OpenAPI document, the OAuth metadata, ``/mcp``, which checks its token itself)
passes untouched, as does a path no route names (the function answers its 404).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from agent_harness.api.bearer import IssuerKeys, IssuerUnavailableError, verify
from agent_harness.errors import UnauthorizedError

__all__ = ["Authorizer", "routes"]

#: API Gateway's answer to a request its JWT authorizer refuses
REFUSED = {"statusCode": 401, "body": '{"message":"Unauthorized"}'}


def routes(template: dict[str, Any], function_id: str) -> list[tuple[str, re.Pattern[str], bool]]:
    """Each HTTP route of ``function_id``: (method, path pattern, whether the gateway's
    authorizer guards it)."""
    events = template["Resources"][function_id]["Properties"].get("Events", {})
    found = []
    for event in events.values():
        if event.get("Type") != "HttpApi":
            continue
        props = event["Properties"]
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(props["Path"]))
        guarded = (props.get("Auth") or {}).get("Authorizer") != "NONE"
        found.append((props["Method"].upper(), re.compile(f"^{pattern}$"), guarded))
    return found


@dataclass
class Authorizer:
    issuer: str
    audiences: tuple[str, ...]
    table: list[tuple[str, re.Pattern[str], bool]]

    def __post_init__(self) -> None:
        self.keys = IssuerKeys(self.issuer)

    def guards(self, method: str, path: str) -> bool:
        for verb, pattern, guarded in self.table:
            if verb == method.upper() and pattern.match(path):
                return guarded
        return False

    def check(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the authorizer's context for the event, or None) and (the gateway's refusal,
        or None)."""
        if not self.guards(method, path):
            return None, None
        lowered = {k.lower(): v for k, v in headers.items()}
        scheme, _, token = lowered.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None, REFUSED
        try:
            claims = verify(
                token.strip(),
                issuer=self.issuer,
                audiences=self.audiences,
                now=time.time(),
                keys=self.keys,
            )
        except (UnauthorizedError, IssuerUnavailableError):
            return None, REFUSED
        scopes = str(claims.get("scope", "")).split()
        shown = {k: _shown(v) for k, v in claims.items()}
        return {"jwt": {"claims": shown, "scopes": scopes}}, None


def _shown(value: Any) -> str:
    """A claim as API Gateway passes it to the function: a string (a list as ``[a b]``)."""
    if isinstance(value, list):
        return "[" + " ".join(str(v) for v in value) + "]"
    return str(value)
