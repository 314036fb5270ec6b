"""What every route shares: reading the request (identity, path ids, the JSON body,
query numbers) and writing the JSON answer. Routes parse with ``Http`` and answer with
``json_response``; rules live in the services they call."""

from __future__ import annotations

import binascii
import json
from typing import TYPE_CHECKING, Any, TypeVar, cast

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ValidationError

from agent_harness.errors import (
    ForbiddenError,
    InvalidRequestError,
    UnauthorizedError,
    ValidationFailedError,
)
from agent_harness.ids import User, validate_session_id
from agent_harness.scopes import Access, Grant, parse_scope, resolve
from agent_harness.utf8 import require_encodable

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.event_handler.api_gateway import Router
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

    from agent_harness.api.schemas import SearchBody
    from agent_harness.runtime import Runtime

#: what makes a caller an operator: the OAuth scope, or the Cognito group
ADMIN_SCOPE = "agent-harness/admin"
ADMIN_GROUP = "agent-harness-admins"

__all__ = ["ADMIN_GROUP", "ADMIN_SCOPE", "Http", "json_response", "text_response"]

metrics = Metrics()
B = TypeVar("B", bound=BaseModel)


def text_response(
    status: int, content_type: str, text: str, headers: dict[str, str] | None = None
) -> Response[str]:
    """An answer with its status counted (``Responses2xx`` ... ``Responses5xx``)."""
    metrics.add_metric(f"Responses{status // 100}xx", MetricUnit.Count, 1)
    return Response(status_code=status, content_type=content_type, body=text, headers=headers or {})


#: hit fields shown only when set: a ranked score, a ledger fact's id and lifecycle
_OPTIONAL = ("score", "fact_id", "state", "by", "at", "recheck", "matched", "match_mode")


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    text = json.dumps(body, ensure_ascii=False)
    return text_response(status, content_types.APPLICATION_JSON, text, headers)


class Http:
    """The request a router is handling, read with the runtime's limits."""

    def __init__(self, router: Router, rt: Runtime) -> None:
        self._router = router
        self._rt = rt
        #: the request id, token and claims of the last token checked here
        self._verified: tuple[str, str, dict[str, Any]] | None = None

    def header(self, name: str) -> str | None:
        value = self._router.current_event.headers.get(name)  # case-insensitive in v3
        return value or None

    def headers(self) -> dict[str, str]:
        return dict(self._router.current_event.headers)

    def user(self) -> User:
        """The caller: the authorizer's ``sub`` claim, or ``X-User-Id`` in dev mode;
        never the body."""
        settings = self._rt.settings
        if settings.auth_mode == "dev":
            user_id = self.header("x-user-id")
            if not user_id:
                raise UnauthorizedError("dev mode: send the user id in the X-User-Id header")
        else:
            claims = self._claims()
            if not claims and self.bearer_token() is None:
                raise UnauthorizedError("send a JWT as Authorization: Bearer <token>")
            user_id = claims.get("sub")
            if not user_id:
                raise UnauthorizedError("no authenticated user (the JWT has no 'sub' claim)")
        if len(str(user_id)) > settings.max_user_id_chars:
            raise UnauthorizedError(
                f"unusable user id: longer than {settings.max_user_id_chars} characters"
            )
        try:
            return User.from_id(str(user_id))
        except InvalidRequestError as exc:
            raise UnauthorizedError(f"unusable user id: {exc.message}") from exc

    def _claims(self) -> dict[str, Any]:
        """The JWT authorizer's claims (the routers serve HTTP API events, v2); on a
        route API Gateway does not authorize (``/mcp``, whose 401 must say where to sign
        in), the bearer token checked here by the authorizer's rules (api.bearer)."""
        event = cast("APIGatewayProxyEventV2", self._router.current_event)
        authorizer = (event.raw_event.get("requestContext") or {}).get("authorizer") or {}
        claims = (authorizer.get("jwt") or {}).get("claims")
        if claims:
            return dict(claims)
        token = self.bearer_token()
        if token is None or not self._rt.settings.jwt_issuer:
            return {}
        request = str(event.request_context.request_id)
        if self._verified is None or self._verified[:2] != (request, token):
            self._verified = (request, token, self._verify(token))
        return self._verified[2]

    def bearer_token(self) -> str | None:
        """The ``Authorization: Bearer`` token of the request, if it sends one."""
        scheme, _, token = (self.header("authorization") or "").partition(" ")
        return token.strip() or None if scheme.lower() == "bearer" else None

    def stack_url(self) -> str:
        """The stack's public URL (api.oauth)."""
        from agent_harness.api.oauth import stack_url

        return stack_url(self._rt.settings, self._router.current_event.raw_event)

    def _verify(self, token: str) -> dict[str, Any]:
        from agent_harness.api.bearer import issuer_keys, verify
        from agent_harness.api.oauth import MCP_PATH

        settings = self._rt.settings
        base = self.stack_url()  # a token issued for this resource (RFC 8707) is for us
        audiences = {*settings.jwt_audience, base, f"{base}{MCP_PATH}"}
        keys = issuer_keys(settings.jwt_issuer)
        now = self._rt.clock.now().timestamp()
        try:
            return verify(
                token, issuer=settings.jwt_issuer, audiences=audiences, now=now, keys=keys
            )
        except UnauthorizedError:
            metrics.add_metric("BearerTokensRefused", MetricUnit.Count, 1)
            raise

    def groups(self) -> list[str]:
        """The caller's groups: the JWT's ``cognito:groups`` (in dev mode, the
        ``X-Groups`` header, comma- or space-separated, as the user id is a header
        there)."""
        if self._rt.settings.auth_mode == "dev":
            raw = self.header("x-groups") or ""
        else:
            raw = str(self._claims().get("cognito:groups", "")).strip("[]")
        return raw.replace(",", " ").split()

    def grant(self, scope: str | None, access: Access) -> Grant:
        """The caller's grant on ``scope`` (None: their own memory): the choke point,
        ``scopes.resolve`` (422 for a bad scope, 403 for a scope they may not use)."""
        user = self.user()
        return resolve(self._rt, user, parse_scope(scope or "user"), access, self.groups())

    def is_operator(self) -> bool:
        """Whether the caller is an operator: a JWT whose ``scope`` holds ``ADMIN_SCOPE``
        or whose ``cognito:groups`` holds ``ADMIN_GROUP`` (in dev mode, the
        ``X-Admin: true`` header, as the user id is a header there)."""
        self.user()  # 401 first, as every route
        if self._rt.settings.auth_mode == "dev":
            return (self.header("x-admin") or "").lower() == "true"
        claims = self._claims()
        scopes = str(claims.get("scope", "")).split()
        groups = str(claims.get("cognito:groups", "")).strip("[]").replace(",", " ").split()
        return ADMIN_SCOPE in scopes or ADMIN_GROUP in groups

    def operator(self) -> None:
        """403 unless the caller is an operator (``is_operator``)."""
        if not self.is_operator():
            raise ForbiddenError("only an operator may do this")

    def editor(self, shared: bool) -> str:
        """The authority a person's own edit is written with: ``operator`` for an
        operator, and for a shared scope's maintainer (who vouches for the scope's
        memory); ``user`` for a user editing their own memory, whose credential must not
        outrank what they said (docs/design.md#authority)."""
        return "operator" if shared or self.is_operator() else "user"

    def session(self, session_id: str) -> str:
        """A session id from the path: the id rules, and the configured length cap."""
        return validate_session_id(session_id, self._rt.settings.max_session_id_chars)

    def raw_body(self) -> str:
        try:
            return self._router.current_event.decoded_body or ""
        except (UnicodeDecodeError, binascii.Error) as exc:
            raise InvalidRequestError("the body is not valid UTF-8 text") from exc

    def body(self, model: type[B]) -> B:
        raw = self.raw_body()
        if not raw:
            raise InvalidRequestError("a JSON body is required")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise InvalidRequestError("the body is not valid JSON") from exc
        require_encodable(data, raw)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            details = [
                {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()
            ]
            raise ValidationFailedError("the body failed validation", details=details) from exc

    def int_query(self, name: str, default: int, low: int, high: int) -> int:
        raw = self._router.current_event.get_query_string_value(name)
        if raw is None:
            return default
        # isdigit alone takes "²", which int() refuses: ASCII digits only
        if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
            raise ValidationFailedError(f"query parameter {name} must be an integer {low}-{high}")
        return int(raw)

    def token_query(self, name: str, max_chars: int = 1024) -> str | None:
        """An opaque token (a cursor): printable ASCII without spaces, or absent."""
        raw = self._router.current_event.get_query_string_value(name)
        if raw is None:
            return None
        if not 0 < len(raw) <= max_chars or not all("!" <= ch <= "~" for ch in raw):
            raise ValidationFailedError(
                f"query parameter {name} must be 1-{max_chars} printable characters, as a "
                "previous answer gave it"
            )
        return raw

    def search(
        self,
        run: Callable[..., list[Any]],
        fields: tuple[str, ...],
        body: type[SearchBody] | None = None,
        **extra: str,
    ) -> Response[str]:
        """A search route (memory or threads): blank queries say so; hits carry
        ``fields`` (and the score when ranked, the others when set); ``extra`` names the
        arguments of ``run`` that are fields of ``body`` (default: ``SearchBody``)."""
        from agent_harness.api.schemas import SearchBody

        caller = self.user()
        request = self.body(body or SearchBody)
        grant = self.grant(getattr(request, "scope", None), "read")
        user = grant.owner
        query = request.query or ""
        if not query.strip():
            return json_response(200, {"hits": [], "message": "no query provided"})
        given = {arg: getattr(request, name) for arg, name in extra.items()}
        limit, cache = request.limit, self._rt.search_cache
        from agent_harness.memory.vectors import query_vectors

        # a query embedded for a scope's search is the caller's spend, not the scope's
        given["queries"] = query_vectors(self._rt, caller)
        hits = run(self._rt, user, query, request.match_mode, limit, cache, **given)
        rows = [
            {f: getattr(h, f) for f in fields}
            | {f: v for f in _OPTIONAL if (v := getattr(h, f, None)) not in (None, ())}
            for h in hits
        ]
        from agent_harness.memory.engine.index import answered_mode

        mode = answered_mode(request.match_mode, hits)
        body_out: dict[str, Any] = {"hits": rows, "match_mode": mode}
        if grant.scope.shared:
            body_out["scope"] = str(grant.scope)
        return json_response(200, body_out)
