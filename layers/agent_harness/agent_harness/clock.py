"""The clock seam: everything that needs "now" takes a ``Clock`` so tests can set it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "SystemClock", "iso", "parse_iso"]


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware (UTC)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 to the second; UTC renders as ``Z``."""
    text = moment.replace(microsecond=0).isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def parse_iso(text: str) -> datetime:
    """The moment ``iso`` wrote (``Z`` or an offset)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
