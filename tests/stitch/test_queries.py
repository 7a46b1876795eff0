"""The read side over HTTP, on SQLite and PostgreSQL: the run list (pages, filters, 422s, a
flow with 10,000 runs), runs waiting for a person, attempt history, the run view (prompts,
fan-out summaries), cancel, and unknown query parameters on every endpoint."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import create_engine, insert

from agentloom.stitch.db import normalise_url
from agentloom.stitch.db.schema import runs
from agentloom.stitch.queries import runs_query
from tests.conftest import TIMESTAMP
from tests.stitch.conftest import StitchServer, drop_pg_database, fresh_pg_database
from tests.stitch.graphs import Builder
from tests.stitch.test_api import create, start, wait_until
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StitchServer]:
    """One server per database for the module (each test makes its own flows)."""
    tmp = tmp_path_factory.mktemp(request.param)
    admin = request.getfixturevalue("postgres") if request.param == "postgresql" else None
    url = fresh_pg_database(admin) if admin else f"sqlite:///{tmp / 'stitch.db'}"
    stitch = StitchServer(url, tmp).start()
    yield stitch
    stitch.stop()
    if admin:
        drop_pg_database(admin, url)


def problems(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    return str(response.json()["detail"])


def gated_flow(server: StitchServer, prompt: object = "Approve the draft?") -> str:
    b = Builder()
    b.chain(b.node("UX", "review", **({"prompt": prompt} if prompt is not None else {})), b.node("UX", "after"))
    return create(server, b.graph(), "gated")


@pytest.mark.slow
def test_runs_page_newest_first_and_filter_by_flow_and_status(server: StitchServer) -> None:
    flow, other = gated_flow(server), gated_flow(server)
    mine = [start(server, flow, i) for i in range(7)]
    start(server, other)
    assert server.http.post(f"/complete/{mine[2]}/review", json={}).status_code == 200  # now waiting at 'after'
    assert server.http.post(f"/runs/{mine[4]}/cancel").status_code == 200

    seen, cursor, pages = [], None, 0
    while True:
        page = server.http.get(
            "/runs", params={"flow_id": flow, "limit": 3, **({"cursor": cursor} if cursor else {})}
        ).json()
        assert set(page) == {"runs", "next_cursor", "retention"} and len(page["runs"]) <= 3
        assert all("node_states" not in r and TIMESTAMP.fullmatch(r["created_at"]) for r in page["runs"])
        seen += [r["id"] for r in page["runs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == mine[::-1] and pages == 3  # 3 + 3 + 1, newest first, each once
    cancelled = server.http.get("/runs", params={"flow_id": flow, "status": "cancelled"}).json()
    assert [r["id"] for r in cancelled["runs"]] == [mine[4]] and cancelled["next_cursor"] is None
    waiting = server.http.get("/runs", params={"flow_id": flow.upper(), "status": "waiting_for_user"}).json()["runs"]
    assert {r["id"] for r in waiting} == set(mine) - {mine[4]}
    assert server.http.get("/runs", params={"flow_id": flow, "status": "completed"}).json()["runs"] == []
    everything = server.http.get("/runs", params={"limit": 1000}).json()["runs"]
    assert {r["flow_id"] for r in everything} >= {flow, other}


@pytest.mark.slow
def test_the_run_list_refuses_what_it_cannot_use(server: StitchServer) -> None:
    message = problems(server.http.get("/runs", params={"status": "done"}))
    assert "status" in message and "'running'" in message and "'cancelled'" in message
    assert "unknown query parameter 'state'" in problems(server.http.get("/runs", params={"state": "running"}))
    message = problems(server.http.get("/runs", params={"flow": "x", "status": "running"}))
    assert "'flow'" in message and "cursor, flow_id, limit, status" in message
    assert "next_cursor" in problems(server.http.get("/runs", params={"cursor": "not-a-cursor"}))
    assert "is not a cursor" in problems(server.http.get("/runs", params={"cursor": "MjAyNnxub3QtYS11dWlk"}))
    assert "flow ids are UUIDs" in problems(server.http.get("/runs", params={"flow_id": "flow-1"}))
    for limit in (0, 1001):
        assert "limit" in problems(server.http.get("/runs", params={"limit": limit}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        "/flows",
        "/flows/00000000-0000-0000-0000-000000000000",
        "/runs/waiting",
        "/runs/00000000-0000-0000-0000-000000000000",
        "/health",
    ],
)
def test_every_endpoint_refuses_unknown_query_parameters(server: StitchServer, path: str) -> None:
    response = server.http.get(path, params={"verbose": "1"})
    assert "unknown query parameter 'verbose'" in problems(response)
    assert server.http.post("/retry/00000000-0000-0000-0000-000000000000/n", params={"force": "1"}).status_code == 422


@pytest.mark.slow
def test_a_flow_with_10000_runs_pages_through_every_run_once(server: StitchServer) -> None:
    flow = gated_flow(server)
    base = datetime.now(UTC) - timedelta(days=1)  # recent: within the default retention, never pruned here
    # Written straight into the database (starting 10,000 runs over HTTP would take minutes):
    # groups of 3 share a created_at, so the id must break ties for no run to be skipped or repeated.
    rows = [
        {
            "id": str(uuid.uuid4()),
            "flow_id": flow,
            "flow_version": 1,
            "graph": {"nodes": [], "edges": []},
            "input": None,
            "node_states": {"big": {"output": "x" * 2000}},
            "status": ("completed", "failed")[i % 2],
            "created_at": base + timedelta(seconds=i // 3),
            "updated_at": base,
        }
        for i in range(10_000)
    ]
    engine = create_engine(normalise_url(server.database_url))
    with engine.begin() as conn:
        conn.execute(insert(runs), rows)
    expected = [r["id"] for r in sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=True)]

    seen: list[str] = []
    cursor = None
    while True:
        page = server.http.get(
            "/runs", params={"flow_id": flow, "limit": 500, **({"cursor": cursor} if cursor else {})}
        ).json()
        seen += [r["id"] for r in page["runs"]]
        if not (cursor := page["next_cursor"]):
            break
    assert seen == expected  # every run once, newest first (how fast a page is: BENCHMARKS.md, "console")
    failed = server.http.get("/runs", params={"flow_id": flow, "status": "failed", "limit": 1000}).json()
    assert len(failed["runs"]) == 1000 and {r["status"] for r in failed["runs"]} == {"failed"}
    second = server.http.get(
        "/runs", params={"flow_id": flow, "status": "failed", "cursor": failed["next_cursor"]}
    ).json()
    assert (
        second["runs"][0]["id"]
        == [i for i in expected if i in {r["id"] for r in rows if r["status"] == "failed"}][1000]
    )

    if server.database_url.startswith("sqlite"):  # the plan: an index, no sort, no scan of the table
        for status in (None, "failed"):
            query = runs_query(status=status, cursor=failed["next_cursor"], limit=100)
            compiled = query.compile(engine)
            values = tuple(
                str(v) if isinstance(v := compiled.params[k], datetime) else v for k in compiled.positiontup or ()
            )
            with engine.connect() as conn:
                plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", values))
            assert "ix_stitch_runs_" in plan and "TEMP B-TREE" not in plan, plan
    engine.dispose()


def test_runs_waiting_for_a_person_name_the_gate_and_its_prompt(server: StitchServer, worker: Worker) -> None:
    flow = gated_flow(server, prompt="Approve the draft?")
    first = start(server, flow)
    silent = start(server, gated_flow(server, prompt=None))
    b = Builder(worker.url)
    split = b.node("Splitter", "s")
    b.chain(split, b.node("UX", "check", prompt={"ask": "ok?"}), b.node("Collector", "c"))
    fanned = start(server, create(server, b.graph()), {"items": [1, 2]})
    gates = server.http.get("/runs/waiting").json()
    mine = [g for g in gates if g["run_id"] in (first, silent, fanned)]
    assert [(g["run_id"], g["node_id"], g["prompt"]) for g in mine] == [
        (first, "review", "Approve the draft?"),
        (silent, "review", None),
        (fanned, "check_0", '{"ask": "ok?"}'),
        (fanned, "check_1", '{"ask": "ok?"}'),
    ]
    assert all(TIMESTAMP.fullmatch(g["since"]) and g["flow_id"] for g in mine)
    assert [g["run_id"] for g in server.http.get("/runs/waiting", params={"flow_id": flow}).json()] == [first]

    assert server.http.post(f"/complete/{first}/review", json={}).status_code == 200
    after = [g for g in server.http.get("/runs/waiting", params={"flow_id": flow}).json()]
    assert [(g["node_id"], g["prompt"]) for g in after] == [("after", None)]
    view = server.http.get(f"/runs/{fanned}").json()["node_states"]
    assert view["check_0"]["prompt"] == '{"ask": "ok?"}' and view["check"]["prompt"] is None
    assert view["check"]["status"] == "waiting_for_user" and view["check"]["paths"] == {"waiting_for_user": 2}
    assert server.http.get(f"/runs/{silent}").json()["node_states"]["after"]["prompt"] is None  # pending: no prompt


def test_attempt_history_of_a_node_path(server: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "ok"), b.node("Worker", "flaky", mode="flaky"))
    run_id = start(server, create(server, b.graph()), 5)
    server.wait_for(run_id)
    assert server.http.post(f"/retry/{run_id}/flaky").status_code == 200
    server.wait_for(run_id, ("completed",))
    history = server.http.get(f"/runs/{run_id}/nodes/flaky/attempts").json()
    assert [(a["attempt"], a["status"], a["error"]) for a in history] == [
        (1, "failed", "the worker was told to fail"),
        (2, "completed", None),
    ]
    assert [a["input"] for a in history] == [5, 5] and history[1]["output"] == 5 and history[0]["node_key"] == "flaky"
    assert all(TIMESTAMP.fullmatch(a["started_at"]) and TIMESTAMP.fullmatch(a["finished_at"]) for a in history)
    assert history[0]["started_at"] <= history[1]["started_at"]
    assert server.http.get(f"/runs/{run_id}/nodes/nope/attempts").status_code == 404
    assert server.http.get("/runs/00000000-0000-0000-0000-000000000000/nodes/ok/attempts").status_code == 404
    assert server.http.get("/runs/not-a-run/events").status_code == 404


def test_cancel_during_a_fan_out_and_the_template_summary(server: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Splitter", "s"), b.node("Worker", "hang", mode="never"), b.node("Collector", "c"))
    run_id = start(server, create(server, b.graph()), {"items": [1, 2, 3]})
    wait_until(lambda: len([p for p in worker.received if p["runId"] == run_id]) == 3)
    view = server.http.get(f"/runs/{run_id}").json()["node_states"]
    assert (
        view["hang"]["status"] == "running" and view["hang"]["paths"] == {"running": 3} and view["hang"]["path"] is None
    )

    cancelled = server.http.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json() == {
        "ok": True,
        "detail": cancelled.json()["detail"],
        "duplicate": False,
    }
    run = server.http.get(f"/runs/{run_id}").json()
    assert run["status"] == "cancelled"
    assert {run["node_states"][f"hang_{i}"]["status"] for i in range(3)} == {"cancelled"}
    assert (
        run["node_states"]["hang"]["paths"] == {"cancelled": 3} and run["node_states"]["hang"]["status"] == "cancelled"
    )
    again = server.http.post(f"/runs/{run_id}/cancel")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    url = next(p["callbackUrl"] for p in worker.received if p["runId"] == run_id)
    assert httpx.post(url, json={"status": "completed", "output": 1}).status_code == 409  # late: the run is cancelled
    assert server.http.post("/runs/00000000-0000-0000-0000-000000000000/cancel").status_code == 404

    done = Builder()
    done.node("UX", "only")
    finished = start(server, create(server, done.graph()))
    assert server.http.post(f"/complete/{finished}/only", json={}).status_code == 200
    refused = server.http.post(f"/runs/{finished}/cancel")
    assert refused.status_code == 409 and "completed" in refused.json()["detail"]


def test_a_completed_fan_out_shows_its_template_as_a_summary_and_retry_on_it_retries_the_failed_paths(
    server: StitchServer,
    worker: Worker,
) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Splitter", "sq"), b.node("Worker", "w", mode="flaky"), b.node("Collector", "c"))
    run_id = start(server, create(server, b.graph()), {"items": [1, 2]})
    run = server.wait_for(run_id)
    assert run["status"] == "failed"
    assert run["node_states"]["w"]["status"] == "failed" and run["node_states"]["w"]["paths"] == {"failed": 2}
    assert server.http.post(f"/retry/{run_id}/w").status_code == 200
    run = server.wait_for(run_id, ("completed",))
    assert run["node_states"]["w"] == {
        **run["node_states"]["w"],
        "status": "completed",
        "paths": {"completed": 2},
        "path": None,
    }
    history = server.http.get(f"/runs/{run_id}/nodes/w/attempts").json()
    assert sorted((a["node_key"], a["attempt"], a["status"]) for a in history) == [
        ("w_0", 1, "failed"),
        ("w_0", 2, "completed"),
        ("w_1", 1, "failed"),
        ("w_1", 2, "completed"),
    ]
    attempts = [
        parse_qs(urlsplit(p["callbackUrl"]).query)["attempt"][0] for p in worker.received if p["runId"] == run_id
    ]
    assert sorted(attempts) == ["1", "1", "2", "2"]
