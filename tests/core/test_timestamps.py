"""The one timestamp format (core.timestamps), and where the core shows it: breakers in `health`, log lines."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from mcp.client import Client
from pydantic import BaseModel

from agentloom.core.logs import _Formatter
from agentloom.core.settings import Settings
from agentloom.core.timestamps import Timestamp, iso, parse
from agentloom.server.host import Host, discover_packs
from tests.conftest import TIMESTAMP

MOMENT = datetime(2026, 11, 23, 11, 32, 0, 123456, tzinfo=UTC)


def test_iso_is_utc_with_milliseconds_and_z() -> None:
    assert iso(MOMENT) == "2026-11-23T11:32:00.123Z"  # microseconds cut, never rounded up
    assert iso(MOMENT.replace(tzinfo=None)) == "2026-11-23T11:32:00.123Z"  # naive means UTC
    assert iso(MOMENT.astimezone(timezone(timedelta(hours=9)))) == "2026-11-23T11:32:00.123Z"
    assert iso(MOMENT.timestamp()) == "2026-11-23T11:32:00.123Z"  # epoch seconds
    assert iso(MOMENT.replace(microsecond=0)) == "2026-11-23T11:32:00.000Z"  # always three digits
    before = time.time()
    now = iso()
    assert TIMESTAMP.fullmatch(now) and before - 1 <= parse(now).timestamp() <= time.time() + 1


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-23T11:32:00.123Z",
        "2026-11-23T11:32:00.123+00:00",
        "2026-11-23T11:32:00.123456+00:00",  # what isoformat() wrote before
        "2026-11-23T20:32:00.123+09:00",
        "2026-11-23T06:32:00.123-05:00",
        "2026-11-23 11:32:00.123",  # naive: UTC
    ],
)
def test_parse_takes_other_iso_forms(text: str) -> None:
    moment = parse(text)
    assert moment.tzinfo is not None and iso(moment) == "2026-11-23T11:32:00.123Z"


def test_parse_round_trips_and_refuses_what_is_no_time() -> None:
    assert parse(iso(MOMENT)) == MOMENT.replace(microsecond=123000)
    assert parse("2026-11-23") == datetime(2026, 11, 23, tzinfo=UTC)
    for bad in ("", "yesterday", "2026-13-01T00:00:00Z", "1700000000"):
        with pytest.raises(ValueError):
            parse(bad)


def test_the_pydantic_type_serialises_in_the_one_format_and_accepts_any_iso_form() -> None:
    class Row(BaseModel):
        at: Timestamp
        maybe: Timestamp | None = None

    row = Row.model_validate({"at": "2026-11-23T20:32:00.123456+09:00"})
    assert row.model_dump(mode="json") == {"at": "2026-11-23T11:32:00.123Z", "maybe": None}
    assert Row(at=MOMENT).model_dump_json() == '{"at":"2026-11-23T11:32:00.123Z","maybe":null}'
    assert Row.model_json_schema()["properties"]["at"]["type"] == "string"


def test_log_lines_carry_the_one_format() -> None:
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "hello", None, None)
    record.created = MOMENT.timestamp()
    line = _Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s").format(record)
    assert line == "2026-11-23T11:32:00.123Z WARNING x: hello"


async def test_an_open_breaker_says_when_it_opened_in_health(tmp_path: Path) -> None:
    host = Host(Settings(data_dir=tmp_path), [e for e in discover_packs() if e.name == "core"])
    breaker = host.breakers.get("remote")
    before = time.time()
    for _ in range(breaker.failure_threshold):
        breaker.record_failure("connection refused")
    async with Client(host.server) as client:
        report = (await client.call_tool("health", {"check_model": False})).structured_content
        (shown,) = report["breakers"]
        assert shown["state"] == "open" and TIMESTAMP.fullmatch(shown["opened_at"])
        # When it opened, by the clock: between the first failure and the report (to the millisecond shown).
        assert before - 0.001 <= parse(shown["opened_at"]).timestamp() <= time.time()
        reset = (await client.call_tool("breaker_reset", {"name": "remote"})).structured_content
    assert reset["state"] == "closed" and reset["opened_at"] is None
