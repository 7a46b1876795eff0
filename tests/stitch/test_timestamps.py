"""Every moment in Stitch's replies is in the one timestamp format (2026-11-23T11:32:00.123Z),
on SQLite (which hands back naive datetimes) and on PostgreSQL in a session zone that is not UTC."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentloom.core.timestamps import parse
from agentloom.stitch.api import as_reply
from tests.conftest import TIMESTAMP
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder


@pytest.fixture
def tokyo_stitch(database_url: str, tmp_path: Path) -> Iterator[StitchServer]:
    server = StitchServer(database_url, tmp_path)
    server.env.update(PGTZ="Asia/Tokyo", TZ="Asia/Tokyo")  # PostgreSQL answers in +09:00; local time is not UTC
    yield server.start()
    server.stop()


def recent(stamp: str) -> bool:
    return bool(TIMESTAMP.fullmatch(stamp)) and abs(parse(stamp).timestamp() - time.time()) < 120


@pytest.mark.slow
def test_flow_run_and_event_replies(tokyo_stitch: StitchServer) -> None:
    stitch = tokyo_stitch
    b = Builder()
    b.chain(b.node("UX", "review"), b.node("UX", "approve"))
    flow = stitch.http.post("/flows", json={"name": "gates", "graph": b.graph()}).json()
    assert recent(flow["created_at"]) and flow["updated_at"] == flow["created_at"]
    updated = stitch.http.put(f"/flows/{flow['id']}", json={"name": "renamed"}).json()
    assert recent(updated["updated_at"]) and updated["created_at"] == flow["created_at"]
    for listed in (stitch.http.get("/flows").json()[0], stitch.http.get(f"/flows/{flow['id']}").json()):
        assert listed["created_at"] == flow["created_at"] and listed["updated_at"] == updated["updated_at"]

    run = stitch.http.post(f"/flows/{flow['id']}/runs", json={"input": {"text": "hi"}}).json()
    assert recent(run["created_at"]) and recent(run["updated_at"])
    assert recent(run["node_states"]["review"]["updated_at"])  # the node that fired at once
    assert stitch.http.post(f"/complete/{run['id']}/review", json={"ok": True}).status_code == 200
    read = stitch.http.get(f"/runs/{run['id']}").json()
    assert (
        read["created_at"] == run["created_at"]
        and recent(read["updated_at"])
        and read["updated_at"] >= run["updated_at"]
    )
    assert all(recent(state["updated_at"]) for state in read["node_states"].values() if state["updated_at"])
    (summary,) = stitch.http.get("/runs", params={"flow_id": flow["id"]}).json()["runs"]
    assert summary["created_at"] == run["created_at"] and summary["updated_at"] == read["updated_at"]
    events = stitch.http.get(f"/runs/{run['id']}/events").json()
    assert len(events) >= 3 and all(recent(event["at"]) for event in events)
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)  # the format sorts as text


def test_rows_and_node_states_of_older_versions_are_shown_in_the_one_format() -> None:
    row = {
        "id": "r",
        "created_at": datetime(2026, 11, 23, 11, 32, 0, 123456),  # SQLite: naive UTC
        "updated_at": datetime(
            2026, 11, 23, 20, 32, 0, 999999, tzinfo=datetime.fromisoformat("2026-01-01T00:00+09:00").tzinfo
        ),
        "node_states": {
            "a": {"status": "completed", "updated_at": "2026-11-23T11:32:00.123456+00:00"},  # isoformat() of before
            "b": {"status": "pending", "updated_at": None},
            "c": {"status": "running", "updated_at": "not a time"},  # shown as it is, never an error
        },
        "input": {"created_at": "2020-01-01T00:00:00+00:00"},  # the user's data is never rewritten
    }
    shown = as_reply(row)
    assert shown["created_at"] == "2026-11-23T11:32:00.123Z" and shown["updated_at"] == "2026-11-23T11:32:00.999Z"
    assert [s["updated_at"] for s in shown["node_states"].values()] == ["2026-11-23T11:32:00.123Z", None, "not a time"]
    assert shown["input"] == row["input"] and row["created_at"].tzinfo is None  # the row itself is left alone
    assert as_reply({"at": datetime(2026, 11, 23, tzinfo=UTC)}) == {"at": "2026-11-23T00:00:00.000Z"}
