"""A bearer JWT checked in the function, by the rules of API Gateway's JWT authorizer,
for the requests no gateway authorizer checked: ``/mcp`` (its 401 must say where to sign
in, which the gateway's own 401 cannot: api.oauth), and the local stack, which emulates
the authorizer with this module.

    verify(token, issuer, audiences, now, keys)   the token's claims, or UnauthorizedError

The token must be signed RS256 (what Cognito, Auth0, Okta and Entra ID sign access tokens
with; no other algorithm is accepted, so neither ``none`` nor an HMAC keyed with the
public key can pass) by a key of the issuer's JWKS, name the issuer as ``iss``, be within
``exp`` and ``nbf`` (a minute's leeway), and carry one of ``audiences`` as ``aud`` or
``client_id`` (a Cognito access token has no ``aud``). The signature is RSASSA-PKCS1-v1_5
over SHA-256 (RFC 8017 8.2.2), checked with integer arithmetic: no crypto library loads.

``IssuerKeys`` fetches the JWKS through the issuer's OpenID discovery document
(``<issuer>/.well-known/openid-configuration``, then ``<issuer>/.well-known/jwks.json``)
and keeps it for the container; a key id it does not know fetches again, at most once a
minute (a stream of made-up key ids costs no stream of fetches). An issuer that cannot be
reached is a 503 ``issuer_unavailable``, never a 401 the client would answer by signing
in again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import threading
import time
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError, UnauthorizedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["IssuerKeys", "IssuerUnavailableError", "issuer_keys", "verify"]

#: seconds a clock may be off (exp, nbf)
LEEWAY = 60
#: seconds between two fetches of an issuer's keys for an unknown key id
REFETCH_AFTER = 60.0
#: seconds a fetch of the discovery document or the JWKS may take
FETCH_TIMEOUT = 5.0
#: RSA keys shorter than this are refused
MIN_RSA_BITS = 2048
#: a token longer than this is not parsed
MAX_TOKEN_CHARS = 16_384
#: DER of SHA-256's DigestInfo, before the digest (RFC 8017 9.2, note 1)
_SHA256_PREFIX = bytes.fromhex("3031300d060960864801650304020105000420")


class IssuerUnavailableError(HarnessError):
    """The issuer's keys could not be fetched: the sign-in may be fine, so no 401."""

    status = 503
    code = "issuer_unavailable"
    retryable = True


def _b64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError) as exc:
        raise UnauthorizedError("the bearer token is not a JWT") from exc


def _json(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64(part))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnauthorizedError("the bearer token is not a JWT") from exc
    if not isinstance(value, dict):
        raise UnauthorizedError("the bearer token is not a JWT")
    return value


def _integer(value: object) -> int:
    if not isinstance(value, str):
        raise ValueError("not a base64url integer")
    return int.from_bytes(_b64(value), "big")


class IssuerKeys:
    """An issuer's RSA signing keys by key id (see the module). ``fetch``: GET of a URL
    to its JSON (httpx by default; tests pass their own)."""

    def __init__(
        self,
        issuer: str,
        fetch: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self._fetch = fetch or _http_json
        self._clock = clock
        self._keys: dict[str, tuple[int, int]] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()

    def key(self, kid: str) -> tuple[int, int] | None:
        """The key ``kid`` names as (modulus, exponent), or None when the issuer has none
        by that id (after at most one fresh fetch a minute)."""
        with self._lock:
            found = self._keys.get(kid)
            now = self._clock()
            if found is None and (
                self._fetched_at is None or now - self._fetched_at >= REFETCH_AFTER
            ):
                self._keys = self._load()
                self._fetched_at = now
                found = self._keys.get(kid)
            return found

    def _load(self) -> dict[str, tuple[int, int]]:
        try:
            try:
                discovery = self._fetch(f"{self.issuer}/.well-known/openid-configuration")
                uri = discovery.get("jwks_uri") if isinstance(discovery, dict) else None
            except IssuerUnavailableError:
                uri = None
            document = self._fetch(uri if isinstance(uri, str) else self._fallback())
        except IssuerUnavailableError:
            raise
        except Exception as exc:  # an answer of any other shape
            raise IssuerUnavailableError(f"the issuer's keys are unreadable: {exc}") from exc
        keys: dict[str, tuple[int, int]] = {}
        for jwk in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(jwk, dict) or jwk.get("kty") != "RSA":
                continue
            if jwk.get("use", "sig") != "sig" or jwk.get("alg", "RS256") != "RS256":
                continue
            try:
                modulus, exponent = _integer(jwk.get("n")), _integer(jwk.get("e"))
            except (UnauthorizedError, ValueError):
                continue
            if modulus.bit_length() >= MIN_RSA_BITS and isinstance(jwk.get("kid"), str):
                keys[jwk["kid"]] = (modulus, exponent)
        return keys

    def _fallback(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"


_ISSUERS: dict[str, IssuerKeys] = {}
_ISSUERS_LOCK = threading.Lock()


def issuer_keys(issuer: str) -> IssuerKeys:
    """The container's keys of ``issuer``, fetched on first use and kept."""
    with _ISSUERS_LOCK:
        found = _ISSUERS.get(issuer)
        if found is None:
            found = _ISSUERS[issuer] = IssuerKeys(issuer)
        return found


def _http_json(url: str) -> Any:
    import httpx  # loaded with the first token a function checks itself

    try:
        response = httpx.get(url, timeout=FETCH_TIMEOUT, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise IssuerUnavailableError(f"{url}: {type(exc).__name__}") from exc
    if response.status_code != 200:
        raise IssuerUnavailableError(f"{url}: HTTP {response.status_code}")
    return response.json()


def _signed_by(message: bytes, signature: bytes, key: tuple[int, int]) -> bool:
    """RSASSA-PKCS1-v1_5 verification with SHA-256 (RFC 8017 8.2.2)."""
    modulus, exponent = key
    size = (modulus.bit_length() + 7) // 8
    if len(signature) != size:
        return False
    value = int.from_bytes(signature, "big")
    if value >= modulus:
        return False
    encoded = pow(value, exponent, modulus).to_bytes(size, "big")
    digest = _SHA256_PREFIX + hashlib.sha256(message).digest()
    expected = b"\x00\x01" + b"\xff" * (size - len(digest) - 3) + b"\x00" + digest
    return hmac.compare_digest(encoded, expected)


def verify(
    token: str, *, issuer: str, audiences: Iterable[str], now: float, keys: IssuerKeys
) -> dict[str, Any]:
    """The claims of ``token`` when it passes every rule of the module; UnauthorizedError
    naming the first it breaks."""
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
        raise UnauthorizedError("the bearer token is not a JWT")
    head, body, signature = token.split(".")
    header = _json(head)
    if header.get("alg") != "RS256":
        raise UnauthorizedError("the bearer token must be signed RS256")
    kid = header.get("kid")
    key = keys.key(kid) if isinstance(kid, str) else None
    if key is None:
        raise UnauthorizedError("the bearer token is signed by a key the issuer does not list")
    if not _signed_by(f"{head}.{body}".encode(), _b64(signature), key):
        raise UnauthorizedError("the bearer token's signature does not verify")
    claims = _json(body)
    if str(claims.get("iss", "")).rstrip("/") != issuer.rstrip("/"):
        raise UnauthorizedError("the bearer token is from another issuer")
    expires, begins = claims.get("exp"), claims.get("nbf", 0)
    if not isinstance(expires, (int, float)) or expires + LEEWAY < now:
        raise UnauthorizedError("the bearer token has expired")
    if not isinstance(begins, (int, float)) or begins - LEEWAY > now:
        raise UnauthorizedError("the bearer token is not valid yet")
    named = claims.get("aud")
    named = [*(named if isinstance(named, list) else [named]), claims.get("client_id")]
    if not set(audiences) & {str(n) for n in named if n is not None}:
        raise UnauthorizedError("the bearer token is for another audience")
    return claims
