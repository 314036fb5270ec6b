"""``WorkspaceStore`` over S3 (docs/design.md#workspace-layout), with conditional writes.

    users/<user key>/MEMORY.md                      whole-file rewrite, If-Match
    users/<user key>/memory/YYYY-MM-DD.md           append = GET + PUT If-Match, retry on 412
    users/<user key>/sessions/<s>/turns/<n>.json    create-only (If-None-Match: *)
    users/<user key>/sessions/<s>/context.json      CAS (If-Match / If-None-Match)

Every method takes a ``User`` and a workspace-relative path that is validated here,
so no caller can build a key outside the user's prefix. S3 errors become
``PreconditionFailedError`` (412), ``None`` for a missing object, or ``StoreError``.
A version's writer is its user metadata ``writer``, percent-encoded (metadata is ASCII).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import InvalidRequestError, PreconditionFailedError, StoreError
from agent_harness.ids import validate_relative_path
from agent_harness.paths import USER_ROOT, user_root
from agent_harness.ports import ObjectInfo, StoredObject, VersionInfo, cas_append, writer_label

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable
    from datetime import datetime

    from agent_harness.ids import User
    from agent_harness.ports import AppendBuilder

__all__ = ["S3WorkspaceStore"]

_PRECONDITION_CODES = {"PreconditionFailed", "412"}
_RETRY_CONFLICT_CODES = {"ConditionalRequestConflict", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
#: the user-metadata key of a version's writer (the header x-amz-meta-writer)
_WRITER = "writer"
#: left readable in the stored metadata; everything else (space, %, non-ASCII) is %XX
_WRITER_SAFE = "!#$&'()*+,-./:;=?@[]_~"


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _info(base: str, item: dict[str, Any]) -> ObjectInfo:
    """A ListObjectsV2 entry under the user's prefix ``base``."""
    return ObjectInfo(
        path=item["Key"][len(base) :],
        size=int(item["Size"]),
        etag=item.get("ETag", ""),
        last_modified=item.get("LastModified"),
    )


def _content_type(path: str) -> str:
    if path.endswith(".json"):
        return "application/json"
    if path.endswith(".md"):
        return "text/markdown; charset=utf-8"
    return "text/plain; charset=utf-8"


class S3WorkspaceStore:
    """``WorkspaceStore`` on one S3 bucket; the boto3 client is injected."""

    def __init__(
        self,
        s3_client: Any,
        bucket: str,
        *,
        append_attempts: int = 8,
        max_workers: int = 8,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._s3 = s3_client
        self._bucket = bucket
        self._append_attempts = append_attempts
        self._max_workers = max_workers
        self._sleep = sleep

    # keys -----------------------------------------------------------------
    @staticmethod
    def prefix(user: User) -> str:
        """The user's root, or a shared scope's (``paths.user_root``)."""
        return user_root(user.key)

    def _key(self, user: User, path: str) -> str:
        return self.prefix(user) + validate_relative_path(path)

    # reads ----------------------------------------------------------------
    def get(self, user: User, path: str) -> StoredObject | None:
        return self._get(user, path, {})

    def get_from(self, user: User, path: str, offset: int) -> StoredObject | None:
        """The object's text from byte ``offset`` on; ``size`` is the whole object's size."""
        if offset <= 0:
            return self.get(user, path)
        try:
            return self._get(user, path, {"Range": f"bytes={offset}-"})
        except StoreError as exc:
            if isinstance(exc.__cause__, ClientError) and _error_code(exc.__cause__) in {
                "InvalidRange",
                "416",
            }:
                head = self._get(user, path, {"Range": "bytes=0-0"})
                if head is None:
                    return None
                return StoredObject(path, "", head.etag, head.size, head.last_modified)
            raise

    def _get(self, user: User, path: str, extra: dict[str, Any]) -> StoredObject | None:
        key = self._key(user, path)
        try:
            resp = self._s3.get_object(Bucket=self._bucket, Key=key, **extra)
            body = resp["Body"].read()
        except ClientError as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None
            raise StoreError(f"reading {path} failed") from exc
        except BotoCoreError as exc:
            raise StoreError(f"reading {path} failed") from exc
        stored_writer = (resp.get("Metadata") or {}).get(_WRITER)
        size = int(resp.get("ContentLength", len(body)))
        content_range = resp.get("ContentRange")  # "bytes 10-99/100"
        if content_range and "/" in content_range:
            size = int(content_range.rsplit("/", 1)[1])
        return StoredObject(
            path=path,
            content=body.decode("utf-8", errors="replace"),
            etag=resp["ETag"],
            size=size,
            last_modified=resp.get("LastModified"),
            version_id=resp.get("VersionId"),
            writer=unquote(stored_writer) if stored_writer else None,
        )

    def get_many(self, user: User, paths: list[str]) -> dict[str, StoredObject]:
        """GET several objects concurrently; missing ones are left out."""
        if not paths:
            return {}
        with ThreadPoolExecutor(max_workers=min(self._max_workers, len(paths))) as pool:
            results = list(pool.map(lambda p: self.get(user, p), paths))
        return {p: obj for p, obj in zip(paths, results, strict=True) if obj is not None}

    def list(self, user: User, prefix: str, *, recursive: bool = True) -> list[ObjectInfo]:
        base = self.prefix(user)
        full_prefix = base + (validate_relative_path(prefix.rstrip("/")) + "/" if prefix else "")
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": full_prefix}
        if not recursive:
            kwargs["Delimiter"] = "/"
        return self._listed(base, kwargs, prefix or "/")

    def _listed(self, base: str, kwargs: dict[str, Any], what: str) -> builtins.list[ObjectInfo]:
        """Every page of a ListObjectsV2 call, as ``ObjectInfo`` relative to ``base``."""
        out: builtins.list[ObjectInfo] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(**kwargs):
                out.extend(_info(base, item) for item in page.get("Contents", []))
        except (ClientError, BotoCoreError) as exc:
            raise StoreError(f"listing {what} failed") from exc
        return out

    def list_together(
        self, user: User, folders: tuple[str, ...], *, expect: int
    ) -> dict[str, builtins.list[ObjectInfo]]:
        # S3 has no key range: one page of the user's keys from the first folder on
        # (StartAfter), MaxKeys what the caller expects to find there plus what sorts
        # after; if more was there, the rest of each folder on its own, from where the
        # page ended (each key's ListObjectsV2 entry costs parsing: no page is oversized)
        base = self.prefix(user)
        dirs = dict(sorted((validate_relative_path(f.rstrip("/")) + "/", f) for f in folders))
        out: dict[str, builtins.list[ObjectInfo]] = {f: [] for f in folders}
        last = ""
        try:
            page = self._s3.list_objects_v2(
                Bucket=self._bucket,
                Prefix=base,
                StartAfter=base + min(dirs),
                MaxKeys=max(1, min(expect, 1000)),
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError(f"listing {', '.join(folders)} failed") from exc
        for item in page.get("Contents", []):
            last = item["Key"][len(base) :]
            folder = next((d for d in dirs if last.startswith(d)), None)
            if folder is not None:
                out[dirs[folder]].append(_info(base, item))
            elif last > max(dirs):
                return out  # past the last folder: each is whole
        if not page.get("IsTruncated"):
            return out
        for folder, name in dirs.items():
            if last.startswith(folder):  # the page ended inside it
                kwargs = {
                    "Bucket": self._bucket,
                    "Prefix": base + folder,
                    "StartAfter": base + last,
                }
            elif last < folder:  # the page ended before it
                kwargs = {"Bucket": self._bucket, "Prefix": base + folder}
            else:
                continue
            out[name].extend(self._listed(base, kwargs, name))
        return out

    # builtins.list: the method above shadows list in the rest of the class body
    def list_versions(self, user: User, path: str) -> builtins.list[VersionInfo]:
        key = self._key(user, path)
        out: list[VersionInfo] = []
        try:
            pages = self._s3.get_paginator("list_object_versions").paginate(
                Bucket=self._bucket, Prefix=key
            )
            for page in pages:
                out += [_version(item) for item in page.get("Versions", []) if item["Key"] == key]
        except (ClientError, BotoCoreError) as exc:
            raise StoreError(f"listing versions of {path} failed") from exc
        out.sort(key=lambda v: (v.last_modified is not None, v.last_modified), reverse=True)
        return out

    def list_versions_page(
        self, user: User, path: str, *, limit: int, after: str | None = None
    ) -> tuple[builtins.list[VersionInfo], str | None]:
        # S3 lists a key's versions newest first; one more than a page says whether
        # older ones remain. Keys that only start with ``key`` sort after it: stop there.
        key = self._key(user, path)
        params: dict[str, Any] = {"Bucket": self._bucket, "Prefix": key}
        if after:
            params |= {"KeyMarker": key, "VersionIdMarker": after}
        out: list[VersionInfo] = []
        try:
            while len(out) <= limit:
                page = self._s3.list_object_versions(**params, MaxKeys=min(limit + 1, 1000))
                out += [_version(item) for item in page.get("Versions", []) if item["Key"] == key]
                if not page.get("IsTruncated") or page.get("NextKeyMarker") != key:
                    break
                params |= {
                    "KeyMarker": key,
                    "VersionIdMarker": page.get("NextVersionIdMarker", ""),
                }
        except ClientError as exc:
            if after and exc.response.get("Error", {}).get("Code") == "InvalidArgument":
                return [], None  # a cursor S3 cannot read names no version
            raise StoreError(f"listing versions of {path} failed") from exc
        except BotoCoreError as exc:
            raise StoreError(f"listing versions of {path} failed") from exc
        page_versions = out[:limit]
        more = len(out) > limit and page_versions
        return page_versions, page_versions[-1].version_id if more else None

    def list_users(self, prefix: str = "", *, limit: int = 100) -> builtins.list[str]:
        """The keys of users with at least one object, sorted, starting with ``prefix``
        (already encoded): the common prefixes ``users/<key>/``, at most ``limit``."""
        if "/" in prefix:
            raise InvalidRequestError("a user key prefix must not contain '/'")
        if limit < 1:
            raise InvalidRequestError("limit must be at least 1")
        root = USER_ROOT + prefix
        keys: list[str] = []
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket,
                Prefix=root,
                Delimiter="/",
                PaginationConfig={"PageSize": min(limit, 1000)},
            )
            for page in pages:
                for item in page.get("CommonPrefixes", []):
                    keys.append(item["Prefix"][len(USER_ROOT) :].rstrip("/"))
                if len(keys) >= limit:
                    break
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("listing users failed") from exc
        return sorted(keys)[:limit]

    def get_version(self, user: User, path: str, version_id: str) -> StoredObject | None:
        try:
            return self._get(user, path, {"VersionId": version_id})
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and _error_code(cause) in {
                "NoSuchVersion",
                "InvalidArgument",
                "400",
            }:
                return None
            raise

    # writes ---------------------------------------------------------------
    def put(
        self,
        user: User,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        create_only: bool = False,
        writer: str | None = None,
    ) -> str:
        """Write ``content``; with ``if_match`` only over that ETag, with ``create_only``
        only when absent. Raises ``PreconditionFailedError`` when the condition fails.
        ``writer`` (who writes: at most ``MAX_WRITER_CHARS``) is kept with the version."""
        if if_match and create_only:
            raise ValueError("if_match and create_only are exclusive")
        key = self._key(user, path)
        kwargs: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": key,
            "Body": content.encode("utf-8"),
            "ContentType": _content_type(path),
        }
        if if_match:
            kwargs["IfMatch"] = if_match
        if create_only:
            kwargs["IfNoneMatch"] = "*"
        label = writer_label(writer)
        if label:
            kwargs["Metadata"] = {_WRITER: quote(label, safe=_WRITER_SAFE)}
        for attempt in range(4):
            try:
                return str(self._s3.put_object(**kwargs)["ETag"])
            except ClientError as exc:
                code = _error_code(exc)
                if code in _PRECONDITION_CODES:
                    raise PreconditionFailedError(f"{path} changed or already exists") from exc
                if if_match and code in _MISSING_CODES:
                    raise PreconditionFailedError(f"{path} no longer exists") from exc
                if code in _RETRY_CONFLICT_CODES and attempt < 3:
                    self._sleep(0.05 * (attempt + 1))
                    continue
                raise StoreError(f"writing {path} failed") from exc
            except BotoCoreError as exc:
                raise StoreError(f"writing {path} failed") from exc
        raise StoreError(f"writing {path} failed: conflicting writes")  # pragma: no cover

    def delete(self, user: User, path: str, *, if_match: str | None = None) -> None:
        """Delete the current version (versioning keeps it as a noncurrent one). With
        ``if_match`` only if it is still that ETag: ``PreconditionFailedError`` otherwise."""
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._key(user, path)}
        if if_match:
            kwargs["IfMatch"] = if_match
        try:
            self._s3.delete_object(**kwargs)
        except ClientError as exc:
            if _error_code(exc) in _PRECONDITION_CODES:
                raise PreconditionFailedError(f"{path} changed") from exc
            if _error_code(exc) in _MISSING_CODES:
                return
            raise StoreError(f"deleting {path} failed") from exc
        except BotoCoreError as exc:
            raise StoreError(f"deleting {path} failed") from exc

    def changed_since(self, user: User, since: datetime) -> builtins.list[str]:
        prefix = self.prefix(user)
        found: set[str] = set()
        try:
            pages = self._s3.get_paginator("list_object_versions").paginate(
                Bucket=self._bucket, Prefix=prefix
            )
            for page in pages:
                for item in page.get("Versions", []):
                    modified = item.get("LastModified")
                    if modified is None or modified >= since:
                        found.add(item["Key"][len(prefix) :])
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("listing the workspace's versions failed") from exc
        return sorted(found)

    def delete_versions(self, user: User, path: str, version_ids: builtins.list[str]) -> int:
        key = self._key(user, path)
        try:
            for start in range(0, len(version_ids), 1000):  # DeleteObjects takes 1,000
                batch = [{"Key": key, "VersionId": v} for v in version_ids[start : start + 1000]]
                resp = self._s3.delete_objects(
                    Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True}
                )
                if resp.get("Errors"):
                    first = resp["Errors"][0]
                    raise StoreError(
                        f"deleting {len(resp['Errors'])} versions of {path} failed "
                        f"({first.get('Code')})"
                    )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError(f"deleting versions of {path} failed") from exc
        return len(version_ids)

    def purge(self, user: User) -> int:
        """Delete every version and delete marker under the user's prefix (forget-user).
        Returns how many were deleted. Only this user's prefix is ever listed."""
        prefix = self.prefix(user)
        doomed: list[dict[str, str]] = []
        try:
            pages = self._s3.get_paginator("list_object_versions").paginate(
                Bucket=self._bucket, Prefix=prefix
            )
            for page in pages:
                for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                    if item["Key"].startswith(prefix):
                        doomed.append({"Key": item["Key"], "VersionId": item["VersionId"]})
            for start in range(0, len(doomed), 1000):  # DeleteObjects takes 1,000
                resp = self._s3.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": doomed[start : start + 1000], "Quiet": True},
                )
                if resp.get("Errors"):
                    first = resp["Errors"][0]
                    raise StoreError(
                        f"deleting {len(resp['Errors'])} objects failed ({first.get('Code')})"
                    )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("deleting the user's workspace failed") from exc
        return len(doomed)

    def append(
        self, user: User, path: str, build: AppendBuilder, *, writer: str | None = None
    ) -> str | None:
        return cas_append(
            self,
            user,
            path,
            build,
            attempts=self._append_attempts,
            sleep=self._sleep,
            writer=writer,
        )


def _version(item: dict[str, Any]) -> VersionInfo:
    """A version as ListObjectVersions reports it."""
    return VersionInfo(
        version_id=item["VersionId"],
        last_modified=item.get("LastModified"),
        etag=item.get("ETag", ""),
        size=int(item.get("Size", 0)),
        is_latest=bool(item.get("IsLatest")),
    )
