"""Times the skills pack shows: in the one timestamp format (agentloom.core.timestamps)."""

from __future__ import annotations

from datetime import date, datetime

from agentloom.packs.skills.store import _jsonable


def test_times_in_front_matter_are_shown_in_the_one_format() -> None:
    # YAML reads `updated: 2026-11-23 11:32:00.123456` as a naive datetime (UTC) and `released: 2026-11-23` as a date
    front = {"updated": datetime(2026, 11, 23, 11, 32, 0, 123456), "released": date(2026, 11, 23), "n": 1, "s": {1, 2}}
    assert _jsonable(front) == {"updated": "2026-11-23T11:32:00.123Z", "released": "2026-11-23", "n": 1, "s": "{1, 2}"}
