"""The one timestamp format of every reply, file and log line agentloom writes.

RFC 3339 in UTC with milliseconds and a ``Z``: ``2026-11-23T11:32:00.123Z``. It is what
JavaScript's ``Date.prototype.toISOString`` writes, so MCP and web clients parse and
produce the same text, it sorts as text, and every filter that takes a date accepts it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import PlainSerializer


def iso(value: float | datetime | None = None) -> str:
    """A moment (epoch seconds, an aware or UTC-naive datetime, or now) in the one format."""
    if value is None:
        moment = datetime.now(UTC)
    elif isinstance(value, datetime):
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(value, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse(text: str) -> datetime:
    """The inverse of :func:`iso`; also takes any ISO 8601 date or time (naive means UTC)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


# A datetime field of a pydantic model that serialises in the one format.
Timestamp = Annotated[datetime, PlainSerializer(iso, return_type=str)]
