"""Live updates: the run and run-list event streams (server-sent events) over real HTTP, across
server processes, and the feed's handling of events committed out of id order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import insert, text

from agentloom.stitch import live
from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import flows, runs
from tests.stitch.conftest import StitchServer, drop_pg_database, fresh_pg_database
from tests.stitch.sse import SseReader
from tests.stitch.worker import Worker


def chain(worker: Worker, delay: float = 0.0) -> dict[str, Any]:
    first = {"webhookUrl": worker.url, "mode": "late", "delay": delay} if delay else {"webhookUrl": worker.url}
    return {
        "nodes": [
            {"id": "a", "type": "Worker", "data": first},
            {"id": "b", "type": "Worker", "data": {"webhookUrl": worker.url}},
        ],
        "edges": [{"id": "e", "source": "a", "target": "b"}],
    }


def new_flow(stitch: StitchServer, graph: dict[str, Any], name: str = "live") -> str:
    reply = stitch.http.post("/flows", json={"name": name, "graph": graph})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def start(stitch: StitchServer, flow_id: str, value: Any = 1) -> str:
    reply = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": value})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def steps(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["data"]["node_key"], m["data"]["status"]) for m in messages]


@pytest.mark.slow
def test_a_run_stream_sends_the_past_then_live_events(stitch: StitchServer, worker: Worker) -> None:
    run_id = start(stitch, new_flow(stitch, chain(worker, delay=1.0)))
    with SseReader(f"{stitch.base}/api/stitch/runs/{run_id}/stream") as reader:
        assert reader.status == 200 and reader.content_type.startswith("text/event-stream")
        messages = reader.until(lambda m: (m["data"]["node_key"], m["data"]["status"]) == ("b", "completed"))
    assert steps(messages) == [("a", "running"), ("a", "completed"), ("b", "running"), ("b", "completed")]
    ids = [int(m["id"]) for m in messages]
    assert ids == sorted(set(ids)) and [m["data"]["id"] for m in messages] == ids
    assert all(m["event"] == "node" and m["data"]["run_id"] == run_id for m in messages)
    assert messages[-1]["data"]["run_status"] == "completed"
    assert messages[1]["data"]["summary"] == "1"  # a's output, bounded
    log = stitch.http.get(f"/runs/{run_id}/events").json()
    assert [e["id"] for e in log] == ids  # the same events the log holds, nothing more


@pytest.mark.slow
def test_reconnecting_with_the_last_id_loses_and_repeats_nothing(stitch: StitchServer, worker: Worker) -> None:
    run_id = start(stitch, new_flow(stitch, chain(worker)))
    stitch.wait_for(run_id)
    ids = [e["id"] for e in stitch.http.get(f"/runs/{run_id}/events").json()]
    url = f"{stitch.base}/api/stitch/runs/{run_id}/stream"
    with SseReader(url, headers={"Last-Event-ID": str(ids[1])}) as reader:
        assert [int(m["id"]) for m in reader.take(len(ids) - 2)] == ids[2:]
        assert reader.until_keepalive() == []
    with SseReader(url, params={"after": ids[-1]}, headers={"Last-Event-ID": str(ids[0])}) as reader:
        assert reader.until_keepalive() == []  # ``after`` wins over the header: nothing after the last event


@pytest.mark.slow
def test_stream_requests_that_cannot_be_served_are_refused_before_streaming(stitch: StitchServer) -> None:
    assert stitch.http.get(f"/runs/{uuid.uuid4()}/stream").status_code == 404
    assert stitch.http.get("/runs/not-a-run/stream").status_code == 404
    bad = stitch.http.get(f"/runs/{uuid.uuid4()}/stream", params={"after": -1})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "after"]
    unknown = stitch.http.get("/runs/stream", params={"flow": "x"})
    assert unknown.status_code == 422 and "takes flow_id" in unknown.json()["detail"][0]["msg"]
    wrong = stitch.http.get("/runs/stream", params={"flow_id": "nope"})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["query", "flow_id"]


@pytest.mark.slow
def test_the_run_list_stream_reports_runs_of_its_flow_as_they_start_and_change(
    stitch: StitchServer, worker: Worker
) -> None:
    watched, other = new_flow(stitch, chain(worker)), new_flow(stitch, chain(worker), name="other")
    with SseReader(f"{stitch.base}/api/stitch/runs/stream", params={"flow_id": watched.upper()}) as reader:
        start(stitch, other)
        run_id = start(stitch, watched)
        messages = reader.until(lambda m: m["data"]["status"] == "completed")
        assert {m["data"]["id"] for m in messages} == {run_id}  # the other flow's run never shows
        assert all(m["event"] == "run" and m["data"]["flow_id"] == watched for m in messages)
        assert set(messages[-1]["data"]) == {"id", "flow_id", "flow_version", "status", "created_at", "updated_at"}
    with SseReader(f"{stitch.base}/api/stitch/runs/stream") as everything:
        run_id = start(stitch, other)
        assert everything.until(lambda m: m["data"]["id"] == run_id and m["data"]["status"] == "completed")


@pytest.mark.slow
def test_an_event_committed_by_one_process_reaches_a_stream_on_another(
    postgres: str, tmp_path: Path, worker: Worker
) -> None:
    url = fresh_pg_database(postgres)
    one, two = StitchServer(url, tmp_path).start(), StitchServer(url, tmp_path).start()
    try:
        flow_id = new_flow(one, chain(worker, delay=0.5))
        with SseReader(f"{two.base}/api/stitch/runs/stream") as listing:  # it replays nothing: open it first
            run_id = start(one, flow_id)
            with SseReader(f"{two.base}/api/stitch/runs/{run_id}/stream") as reader:
                messages = reader.until(lambda m: (m["data"]["node_key"], m["data"]["status"]) == ("b", "completed"))
            assert ("a", "completed") in steps(messages)
            assert listing.until(lambda m: m["data"]["id"] == run_id and m["data"]["status"] == "completed")
        assert {r["callbackUrl"].split("/api/")[0] for r in worker.received} == {one.base}  # the run lives on one
    finally:
        one.stop()
        two.stop()
        drop_pg_database(postgres, url)


def test_the_feed_delivers_an_event_committed_after_a_later_one(postgres: str) -> None:
    url = fresh_pg_database(postgres)
    db = Database(url)
    try:
        stamp = datetime.now(UTC)
        flow_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
        with db.transaction() as conn:
            conn.execute(
                insert(flows).values(id=flow_id, name="f", graph={}, version=1, created_at=stamp, updated_at=stamp)
            )
            conn.execute(
                insert(runs).values(
                    id=run_id,
                    flow_id=flow_id,
                    flow_version=1,
                    graph={},
                    node_states={},
                    status="running",
                    created_at=stamp,
                    updated_at=stamp,
                )
            )
        feed = live.EventFeed(db)
        assert feed.poll(now=0.0) == [] and feed.highest == 0
        event = text(
            "INSERT INTO stitch_events (run_id, node_key, status, attempt, at) VALUES (:r, :k, 'running', 1, now())"
        )
        slow = db.engine.connect()
        slow_tx = slow.begin()
        slow.execute(event, {"r": run_id, "k": "slow"})  # takes the lower id, commits last
        with db.transaction() as conn:
            conn.execute(event, {"r": run_id, "k": "fast"})
        assert [r["node_key"] for r in feed.poll(now=1.0)] == ["fast"]
        assert len(feed.gaps) == 1
        slow_tx.commit()
        slow.close()
        late = feed.poll(now=2.0)
        assert [r["node_key"] for r in late] == ["slow"] and feed.gaps == {}
        assert feed.poll(now=3.0) == []  # once only
        feed.gaps = {feed.highest + 5: 3.0}  # an id a rolled-back transaction took never arrives:
        feed.poll(now=3.0 + live.GAP_GRACE)
        assert feed.gaps == {}  # looked for during the grace period only
    finally:
        db.dispose()
        drop_pg_database(postgres, url)


def test_a_subscriber_that_falls_behind_is_dropped_and_the_others_are_served(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 's.db'}")
    feed = live.EventFeed(db)
    slow, fast = feed.subscribe(run_id="r"), feed.subscribe(run_id="r")
    row = {
        "id": 1,
        "run_id": "r",
        "node_key": "a",
        "status": "running",
        "attempt": 1,
        "at": datetime.now(UTC),
        "error": None,
        "summary": None,
        "run_status": "running",
        "flow_id": "f",
        "flow_version": 1,
        "created_at": datetime.now(UTC),
        "updated_at": datetime.now(UTC),
    }
    feed.deliver([{**row, "id": i} for i in range(1, live.BUFFER + 1)])
    for _ in range(live.BUFFER):
        fast.receive.receive_nowait()
    feed.deliver([{**row, "id": live.BUFFER + 1}])  # slow's buffer is full: dropped; fast still served
    assert feed.subscriptions == {fast}
    assert fast.receive.receive_nowait().id == live.BUFFER + 1
    with pytest.raises((anyio.EndOfStream, anyio.ClosedResourceError)):
        slow.receive.receive_nowait()
    db.dispose()


@pytest.mark.slow
def test_streams_need_the_api_key_and_the_console_page_does_not(tmp_path: Path) -> None:
    key = "k" * 24
    server = StitchServer(f"sqlite:///{tmp_path / 's.db'}", tmp_path, api_key=key).start()
    try:
        assert httpx.get(f"{server.base}/api/stitch/runs/stream").status_code == 401
        with SseReader(f"{server.base}/api/stitch/runs/stream", headers={"Authorization": f"Bearer {key}"}) as reader:
            assert reader.status == 200
        for page in ("/", "/runs", f"/runs/{uuid.uuid4()}", f"/flows/{uuid.uuid4()}"):
            reply = httpx.get(server.base + page)
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html"), page
        assert httpx.get(f"{server.base}/openapi.json").status_code == 401
        assert httpx.post(f"{server.base}/runs").status_code == 401  # only reading the page is open
    finally:
        server.stop()


@pytest.mark.slow
def test_the_api_describes_the_streams_as_event_streams(stitch: StitchServer) -> None:
    paths = httpx.get(stitch.base + "/openapi.json").json()["paths"]
    for path in ("/api/stitch/runs/stream", "/api/stitch/runs/{run_id}/stream"):
        assert "text/event-stream" in paths[path]["get"]["responses"]["200"]["content"], path


@pytest.mark.slow
def test_the_flow_list_names_node_counts_and_the_newest_run(stitch: StitchServer, worker: Worker) -> None:
    flow_id = new_flow(stitch, chain(worker))
    assert stitch.http.get("/flows").json()[0]["last_run"] is None
    start(stitch, flow_id)
    newest = start(stitch, flow_id)
    listed = stitch.http.get("/flows").json()[0]
    assert listed["node_count"] == 2
    assert listed["last_run"]["id"] == newest and listed["last_run"]["created_at"].endswith("Z")


@pytest.mark.slow
def test_a_server_with_open_streams_stops_promptly(tmp_path: Path) -> None:
    server = StitchServer(f"sqlite:///{tmp_path / 's.db'}", tmp_path).start()
    assert server.proc is not None
    with SseReader(f"{server.base}/api/stitch/runs/stream") as reader:
        assert reader.status == 200
        server.proc.terminate()  # a stream never ends by itself: shutdown must not wait for it
        # A deadline for a hang: a shutdown waiting on the stream never ends (how soon: BENCHMARKS.md, "console").
        server.proc.wait(timeout=60)
    server.stop()
