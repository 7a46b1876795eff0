"""Flows: the operations over the database (stitch.flows) and their HTTP endpoints, soft delete
with its refusal while runs are under way and ``?force=true``, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentloom.stitch.db import Database
from agentloom.stitch.engine import Engine
from agentloom.stitch.flows import FlowBusy, Flows
from agentloom.stitch.graph import GraphError
from agentloom.stitch.ids import NotFound
from agentloom.stitch.models import Graph
from agentloom.stitch.queries import get_run
from agentloom.stitch.replies import as_reply
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.test_api import create, start
from tests.stitch.worker import Worker


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


def gate_graph() -> Graph:
    b = Builder()
    b.chain(b.node("UX", "review"), b.node("UX", "approve"))
    return Graph.model_validate(b.graph())


def test_flows_are_created_updated_read_and_listed(db: Database) -> None:
    flows = Flows(db)
    first = flows.create("first", gate_graph())
    second = flows.create("second", gate_graph())
    assert as_reply(flows.get(first["id"])) == as_reply(first)  # what create answered is what is stored
    assert flows.get(first["id"].upper())["name"] == "first"
    assert [f["id"] for f in flows.list()] == [first["id"], second["id"]]
    updated = flows.update(first["id"], "renamed", None)
    assert (updated["name"], updated["version"], updated["graph"]) == ("renamed", 2, first["graph"])
    assert flows.get(first["id"])["version"] == 2
    with pytest.raises(GraphError):
        flows.create("bad", Graph.model_validate({"nodes": [{"id": "w", "type": "Worker"}]}))
    with pytest.raises(GraphError):  # nothing written: the flow is unchanged
        flows.update(first["id"], "again", Graph.model_validate({"nodes": [{"id": "w", "type": "Worker"}]}))
    assert flows.get(first["id"])["name"] == "renamed" and len(flows.list()) == 2
    for missing in ("00000000-0000-0000-0000-000000000000", "nope", "\x00"):
        with pytest.raises(NotFound):
            flows.get(missing)
        with pytest.raises(NotFound):
            flows.update(missing, "x", None)
        with pytest.raises(NotFound):
            flows.delete(missing)


def test_a_flow_with_runs_under_way_is_deleted_only_when_forced(db: Database) -> None:
    flows, engine = Flows(db), Engine(db, "http://127.0.0.1:1")
    flow = flows.create("gates", gate_graph())
    waiting = [engine.start_run(flow["id"], i)[0]["id"] for i in range(3)]
    done = engine.start_run(flow["id"], None)[0]["id"]
    for key in ("review", "approve"):
        engine.complete(done, key, {})
    with pytest.raises(FlowBusy, match=r"has 3 run\(s\) running or waiting_for_user.*force=true") as refused:
        flows.delete(flow["id"])
    assert refused.value.count == 3 and flows.get(flow["id"])  # refused: nothing changed
    assert {get_run(engine.db, r)["status"] for r in waiting} == {"waiting_for_user"}

    deleted = flows.delete(flow["id"], force=True, cancel=engine.cancel_run)
    assert deleted["id"] == flow["id"] and deleted["cancelled_runs"] == 3 and deleted["deleted_at"]
    assert {get_run(engine.db, r)["status"] for r in waiting} == {"cancelled"}
    assert get_run(engine.db, done)["status"] == "completed"  # a finished run is left as it was
    with pytest.raises(NotFound):
        flows.get(flow["id"])
    assert flows.list() == []
    with pytest.raises(NotFound):
        flows.delete(flow["id"])  # once


@pytest.mark.slow
def test_deleting_a_flow_over_http(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "w"), b.node("UX", "gate"))
    flow = create(stitch, b.graph(), "to delete")
    keep = create(stitch, b.graph(), "kept")
    runs = [start(stitch, flow, i) for i in range(2)]
    for run_id in runs:
        stitch.wait_for(run_id, ("waiting_for_user",))

    refused = stitch.http.delete(f"/flows/{flow}")
    assert (
        refused.status_code == 409
        and "2 run(s)" in refused.json()["detail"]
        and "force=true" in refused.json()["detail"]
    )
    assert stitch.http.get(f"/flows/{flow}").status_code == 200
    assert (
        stitch.http.delete(f"/flows/{flow}", params={"forse": "true"}).status_code == 422
    )  # a misspelt force does nothing

    deleted = stitch.http.delete(f"/flows/{flow}", params={"force": "true"})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["cancelled_runs"] == 2 and deleted.json()["id"] == flow
    assert stitch.http.get(f"/flows/{flow}").status_code == 404
    assert [f["id"] for f in stitch.http.get("/flows").json()] == [keep]
    assert stitch.http.put(f"/flows/{flow}", json={"name": "back"}).status_code == 404
    assert stitch.http.post(f"/flows/{flow}/runs", json={"input": 1}).status_code == 404  # no new runs
    assert stitch.http.delete(f"/flows/{flow}").status_code == 404

    # Its runs stay readable, each with the graph it ran.
    for run_id in runs:
        run = stitch.http.get(f"/runs/{run_id}").json()
        assert run["status"] == "cancelled" and run["graph"]["nodes"][0]["id"] == "w"
        assert run["node_states"]["gate"]["status"] == "cancelled"
        assert stitch.http.get(f"/runs/{run_id}/events").status_code == 200
    listed = stitch.http.get("/runs", params={"flow_id": flow}).json()["runs"]
    assert {r["id"] for r in listed} == set(runs)

    idle = create(stitch, b.graph(), "idle")  # no runs under way: deleted at once, nothing cancelled
    finished = start(stitch, idle)
    stitch.wait_for(finished, ("waiting_for_user",))
    assert stitch.http.post(f"/complete/{finished}/gate", json={}).status_code == 200
    stitch.wait_for(finished)
    plain = stitch.http.delete(f"/flows/{idle}")
    assert plain.status_code == 200 and plain.json()["cancelled_runs"] == 0
