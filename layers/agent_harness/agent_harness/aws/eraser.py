"""``Eraser`` on AWS Lambda: forgetting a user runs in the forget function, which alone
holds the erasure rights (permanent deletion of object versions, the table's batch
deletes); the agent function only invokes it, synchronously, within its own deadline."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import StoreError
from agent_harness.ports import ForgetOutcome

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User

__all__ = ["LambdaEraser"]


class LambdaEraser:
    """Invokes ``function`` with ``{"user_id"}``; its answer is a ``ForgetOutcome``.
    ``client`` makes the Lambda client on first use (a handler's init builds none)."""

    def __init__(self, function: str, client: Callable[[], Any]) -> None:
        self._function = function
        self._make_client = client
        self._client: Any = None

    def forget(self, user: User) -> ForgetOutcome:
        if self._client is None:
            self._client = self._make_client()
        try:
            answer = self._client.invoke(
                FunctionName=self._function,
                InvocationType="RequestResponse",
                Payload=json.dumps({"user_id": user.id}).encode(),
            )
            payload = json.loads(answer["Payload"].read() or b"null")
        except (ClientError, BotoCoreError, ValueError) as exc:
            raise StoreError("forgetting the user failed: the forget function") from exc
        if answer.get("FunctionError") or not isinstance(payload, dict):
            # a forget that fails part-way is run again by the next request, and completes
            raise StoreError("forgetting the user failed part-way; send the request again")
        try:
            return ForgetOutcome.from_json(payload)
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError("the forget function answered something unexpected") from exc
