"""The erasure port: forgetting a user, and what it removed (``ports`` re-exports every
name, so services import ``ports`` only; the forgetting itself is
``memory.jobs.forget``'s).

    Eraser      where forgetting runs when not in the caller's process: deployed, the
                forget function, which alone holds the erasure rights
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = ["Eraser", "ForgetOutcome", "Scrubbed"]


@dataclass
class Scrubbed:
    """What forgetting a user did to the shared scopes they wrote into (counts)."""

    scopes: int = 0
    #: current versions rewritten without them, older versions deleted, proposals dropped
    anonymised: int = 0
    versions: int = 0
    proposals: int = 0


@dataclass(frozen=True)
class ForgetOutcome:
    """What forgetting a user removed (``memory.jobs.forget``), in counts."""

    object_versions: int
    items: int
    scopes: Scrubbed = field(default_factory=Scrubbed)
    #: failed jobs naming the user, deleted from the dead-letter queues
    dead_letters: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "object_versions": self.object_versions,
            "items": self.items,
            "scopes": vars(self.scopes).copy(),
            "dead_letters": self.dead_letters,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ForgetOutcome:
        scopes = data.get("scopes") or {}
        return cls(
            int(data["object_versions"]),
            int(data["items"]),
            Scrubbed(**{k: int(scopes.get(k, 0)) for k in vars(Scrubbed())}),
            int(data.get("dead_letters", 0)),
        )


class Eraser(Protocol):
    """Where forgetting a user runs when it is not in the caller's process: the forget
    function (``aws.eraser.LambdaEraser``)."""

    def forget(self, user: User) -> ForgetOutcome: ...
