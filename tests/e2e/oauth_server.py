"""A small OAuth 2.1 authorization server for the tests, on 127.0.0.1: what a Cognito
user pool (or any IdP) is to a deployed stack. It publishes RFC 8414 and OpenID
discovery metadata and a JWKS, registers clients dynamically (RFC 7591), signs every
user in at once (the ``user`` it is told), checks PKCE (S256) at the token endpoint and
mints RS256 access tokens naming the resource the client asked for (RFC 8707) as
``aud`` and the client as ``client_id``. Nothing leaves localhost."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from local_stack.process import free_port

__all__ = ["AuthorizationServer"]


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class AuthorizationServer:
    user: str = "oauth-alice"
    port: int = field(default_factory=free_port)
    key: Any = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    kid: str = "test-key-1"
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: every request: (method, path)
    seen: list[tuple[str, str]] = field(default_factory=list)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "jwks_uri": f"{self.issuer}/jwks.json",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["openid"],
        }

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        jwk = {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256"}
        return {"keys": [jwk | {"n": _b64(numbers.n), "e": _b64(numbers.e)}]}

    def mint(self, *, audience: str, client_id: str, lifetime: int = 3600, **extra: Any) -> str:
        """An access token of ``user`` for ``audience``, as /token issues it."""
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": self.user,
            "aud": audience,
            "client_id": client_id,
            "scope": "openid",
            "iat": now,
            "exp": now + lifetime,
        } | extra
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})

    def start(self) -> ThreadingHTTPServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                server.seen.append(("GET", url.path))
                if url.path in (
                    "/.well-known/oauth-authorization-server",
                    "/.well-known/openid-configuration",
                ):
                    self._send(200, server.metadata())
                elif url.path == "/jwks.json":
                    self._send(200, server.jwks())
                elif url.path == "/authorize":
                    self._authorize({k: v[0] for k, v in parse_qs(url.query).items()})
                else:
                    self._send(404, {"error": "not_found"})

            def _authorize(self, query: dict[str, str]) -> None:
                client = server.clients.get(query.get("client_id", ""))
                redirect = query.get("redirect_uri", "")
                if client is None or redirect not in client["redirect_uris"]:
                    self._send(400, {"error": "invalid_request"})
                    return
                if query.get("code_challenge_method") != "S256":
                    self._send(400, {"error": "invalid_request", "error_description": "PKCE"})
                    return
                code = secrets.token_urlsafe(16)
                server.codes[code] = query
                location = redirect + "?" + urlencode({"code": code, "state": query["state"]})
                self._send(302, None, {"Location": location})

            def do_POST(self) -> None:
                url = urlparse(self.path)
                server.seen.append(("POST", url.path))
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if url.path == "/register":
                    asked = json.loads(raw)
                    client_id = f"dyn-{secrets.token_hex(4)}"
                    server.clients[client_id] = asked | {"client_id": client_id}
                    info = asked | {"client_id": client_id, "token_endpoint_auth_method": "none"}
                    self._send(201, info | {"client_id_issued_at": int(time.time())})
                elif url.path == "/token":
                    self._token({k: v[0] for k, v in parse_qs(raw.decode()).items()})
                else:
                    self._send(404, {"error": "not_found"})

            def _token(self, form: dict[str, str]) -> None:
                asked = server.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "").encode()
                challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest())
                if (
                    form.get("grant_type") != "authorization_code"
                    or asked is None
                    or asked["client_id"] != form.get("client_id")
                    or challenge.rstrip(b"=").decode() != asked["code_challenge"]
                ):
                    self._send(400, {"error": "invalid_grant"})
                    return
                audience = form.get("resource") or asked.get("resource") or asked["client_id"]
                access = server.mint(audience=audience, client_id=asked["client_id"])
                answer = {"access_token": access, "token_type": "Bearer", "expires_in": 3600}
                self._send(200, answer | {"scope": "openid"})

            def log_message(self, *args: Any) -> None:
                pass

        http = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        http.daemon_threads = True
        threading.Thread(target=http.serve_forever, daemon=True).start()
        return http
