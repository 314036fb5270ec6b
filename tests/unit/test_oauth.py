"""Sign-in by discovery (api.oauth) and the bearer JWT /mcp checks itself (api.bearer):
tokens minted with PyJWT over a key of the test's own issuer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from agent_harness.api import bearer
from agent_harness.api.bearer import IssuerKeys, IssuerUnavailableError, verify
from agent_harness.errors import UnauthorizedError
from agent_harness.settings import Settings
from tests.fakes import make_runtime

ISSUER = "https://idp.example/pool-1"
AUDIENCE = "app-client-1"
#: the fakes' clock (tests.fakes.ManualClock): 2026-11-30 09:00 UTC
NOW = 1_796_029_200
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, str]:
    numbers = key.public_key().public_numbers()
    return {
        "kty": "RSA",
        "kid": kid,
        "use": "sig",
        "alg": "RS256",
        "n": _b64(numbers.n),
        "e": _b64(numbers.e),
    }


class Issuer:
    """The issuer's discovery document and JWKS, and every URL fetched."""

    def __init__(self, *keys: dict[str, str], discovery: bool = True) -> None:
        self.keys = list(keys)
        self.discovery = discovery
        self.fetched: list[str] = []
        self.down = False

    def __call__(self, url: str) -> Any:
        self.fetched.append(url)
        if self.down:
            raise IssuerUnavailableError(f"{url}: ConnectError")
        if url == f"{ISSUER}/.well-known/openid-configuration":
            if not self.discovery:
                raise IssuerUnavailableError(f"{url}: HTTP 404")
            return {"issuer": ISSUER, "jwks_uri": "https://keys.idp.example/jwks"}
        if url in ("https://keys.idp.example/jwks", f"{ISSUER}/.well-known/jwks.json"):
            return {"keys": self.keys}
        raise IssuerUnavailableError(f"{url}: HTTP 404")


def token(key: Any = KEY, kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
    body = {"iss": ISSUER, "sub": "alice", "aud": AUDIENCE, "exp": NOW + 600, "iat": NOW} | claims
    return jwt.encode(
        {k: v for k, v in body.items() if v is not None}, key, algorithm=alg, headers={"kid": kid}
    )


def check(raw: str, issuer: Issuer | None = None, clock: Any = time.monotonic) -> dict[str, Any]:
    keys = IssuerKeys(ISSUER, fetch=issuer or Issuer(jwk(KEY, "k1")), clock=clock)
    return verify(raw, issuer=ISSUER, audiences={AUDIENCE}, now=NOW, keys=keys)


def test_a_token_signed_by_a_key_of_the_issuer_gives_its_claims() -> None:
    assert check(token())["sub"] == "alice"
    # a Cognito access token names its app client as client_id, with no aud
    assert check(token(aud=None, client_id=AUDIENCE, token_use="access"))["sub"] == "alice"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (token(exp=NOW - 61), "expired"),
        (token(nbf=NOW + 61), "not valid yet"),
        (token(iss="https://evil.example"), "another issuer"),
        (token(aud="another-client"), "another audience"),
        (token(exp=None), "expired"),
        (token(key=OTHER_KEY), "signature does not verify"),
        (token(kid="k9"), "key the issuer does not list"),
        ("not.a.jwt", "not a JWT"),
        ("abc", "not a JWT"),
    ],
    ids=[
        "expired",
        "early",
        "issuer",
        "audience",
        "no-exp",
        "forged",
        "unknown-kid",
        "junk",
        "parts",
    ],
)
def test_a_token_breaking_a_rule_is_refused_naming_it(raw: str, says: str) -> None:
    with pytest.raises(UnauthorizedError, match=says):
        check(raw)


def test_neither_none_nor_an_hmac_keyed_with_the_public_key_passes() -> None:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "kid": "k1"}).encode()).rstrip(
        b"="
    )
    claims = base64.urlsafe_b64encode(
        json.dumps({"iss": ISSUER, "sub": "mallory", "aud": AUDIENCE, "exp": NOW + 60}).encode()
    ).rstrip(b"=")
    with pytest.raises(UnauthorizedError, match="RS256"):
        check(f"{header.decode()}.{claims.decode()}.")
    # the classic confusion: an HMAC keyed with the issuer's public key, which anyone has
    from cryptography.hazmat.primitives import serialization

    public = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "kid": "k1"}).encode()).rstrip(b"=")
    signing = head + b"." + claims
    mac = base64.urlsafe_b64encode(hmac.new(public, signing, hashlib.sha256).digest()).rstrip(b"=")
    forged = (signing + b"." + mac).decode()
    with pytest.raises(UnauthorizedError, match="RS256"):
        check(forged)


def test_a_tampered_payload_breaks_the_signature() -> None:
    head, _, signature = token().split(".")
    claims = base64.urlsafe_b64encode(
        json.dumps({"iss": ISSUER, "sub": "mallory", "aud": AUDIENCE, "exp": NOW + 60}).encode()
    ).rstrip(b"=")
    with pytest.raises(UnauthorizedError, match="signature"):
        check(f"{head}.{claims.decode()}.{signature}")


def test_keys_come_by_discovery_and_an_unknown_key_id_refetches_at_most_once_a_minute() -> None:
    issuer = Issuer(jwk(KEY, "k1"))
    now = [0.0]
    keys = IssuerKeys(ISSUER, fetch=issuer, clock=lambda: now[0])
    verify(token(), issuer=ISSUER, audiences={AUDIENCE}, now=NOW, keys=keys)
    assert issuer.fetched == [
        f"{ISSUER}/.well-known/openid-configuration",
        "https://keys.idp.example/jwks",
    ]
    for _ in range(5):  # made-up key ids cost no stream of fetches
        with pytest.raises(UnauthorizedError):
            verify(token(kid="made-up"), issuer=ISSUER, audiences={AUDIENCE}, now=NOW, keys=keys)
    assert len(issuer.fetched) == 2
    issuer.keys.append(jwk(OTHER_KEY, "k2"))  # the issuer rotates in a new key
    now[0] = 61.0
    verify(token(key=OTHER_KEY, kid="k2"), issuer=ISSUER, audiences={AUDIENCE}, now=NOW, keys=keys)
    assert len(issuer.fetched) == 4


def test_without_discovery_the_well_known_jwks_is_read() -> None:
    issuer = Issuer(jwk(KEY, "k1"), discovery=False)
    assert check(token(), issuer)["sub"] == "alice"
    assert issuer.fetched[-1] == f"{ISSUER}/.well-known/jwks.json"


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_a_short_rsa_key_is_not_trusted() -> None:
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(UnauthorizedError, match="does not list"):
        check(token(key=short, kid="s1"), Issuer(jwk(short, "s1")))


def test_an_issuer_that_cannot_be_reached_is_503_never_401() -> None:
    issuer = Issuer(jwk(KEY, "k1"))
    issuer.down = True
    with pytest.raises(IssuerUnavailableError) as caught:
        check(token(), issuer)
    assert caught.value.status == 503 and caught.value.code == "issuer_unavailable"


# -- the routes ------------------------------------------------------------------------
def serve(
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    **settings: Any,
) -> dict[str, Any]:
    from agent_harness.api.routes import build_app
    from local_stack.lambdas import context_for, http_event

    defaults: dict[str, Any] = {
        "auth_mode": "jwt",
        "jwt_issuer": ISSUER,
        "jwt_audience": (AUDIENCE,),
    }
    rt = make_runtime(settings=Settings(**(defaults | settings)))
    event = http_event(method, path, headers=headers or {}, body=body)
    return dict(build_app(rt).resolve(event, context_for("AgentCallFunction")))


@pytest.fixture(autouse=True)
def issuer(monkeypatch: pytest.MonkeyPatch) -> Issuer:
    fake = Issuer(jwk(KEY, "k1"))
    monkeypatch.setattr(bearer, "_http_json", fake)
    monkeypatch.setattr(bearer, "_ISSUERS", {})
    return fake


@pytest.mark.parametrize(
    ("path", "resource"), [("/mcp", "https://127.0.0.1/mcp"), ("", "https://127.0.0.1")]
)
def test_the_protected_resource_metadata_names_the_issuer_with_no_identity(
    path: str, resource: str
) -> None:
    answer = serve("GET", f"/.well-known/oauth-protected-resource{path}")
    assert answer["statusCode"] == 200
    assert json.loads(answer["body"]) == {
        "resource": resource,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["openid"],
        "bearer_methods_supported": ["header"],
        "resource_name": "agent-harness memory" + (" (MCP)" if path else ""),
    }


def test_the_metadata_follows_the_public_url_and_the_scopes_and_is_404_without_an_issuer() -> None:
    answer = serve(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        public_url="https://memory.example.com/",
        oauth_scopes="openid memory",
    )
    document = json.loads(answer["body"])
    assert document["resource"] == "https://memory.example.com/mcp"
    assert document["scopes_supported"] == ["openid", "memory"]
    refused = serve("GET", "/.well-known/oauth-protected-resource", auth_mode="dev", jwt_issuer="")
    assert refused["statusCode"] == 404


PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def test_mcp_checks_the_bearer_token_itself_and_its_401_says_where_to_sign_in() -> None:
    good = serve("POST", "/mcp", MCP_HEADERS | {"authorization": f"Bearer {token()}"}, PING)
    assert good["statusCode"] == 200, good["body"]

    missing = serve("POST", "/mcp", MCP_HEADERS, PING)
    metadata = 'resource_metadata="https://127.0.0.1/.well-known/oauth-protected-resource/mcp"'
    assert missing["statusCode"] == 401
    assert missing["headers"]["WWW-Authenticate"] == f'Bearer {metadata}, scope="openid"'

    expired = serve(
        "POST", "/mcp", MCP_HEADERS | {"authorization": f"Bearer {token(exp=NOW - 3600)}"}, PING
    )
    challenge = expired["headers"]["WWW-Authenticate"]
    assert expired["statusCode"] == 401 and metadata in challenge
    assert 'error="invalid_token"' in challenge and "expired" in challenge
    assert json.loads(expired["body"])["error"]["code"] == -32001


def test_a_token_issued_for_the_mcp_resource_is_accepted() -> None:
    resource = token(aud="https://127.0.0.1/mcp")
    answer = serve("POST", "/mcp", MCP_HEADERS | {"authorization": f"Bearer {resource}"}, PING)
    assert answer["statusCode"] == 200, answer["body"]
