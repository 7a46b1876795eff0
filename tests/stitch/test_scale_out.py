"""Several server processes on one database (PostgreSQL, or one SQLite file), receiving the same callbacks at once."""

from __future__ import annotations

from pathlib import Path

from tests.stitch.conftest import StitchServer, drop_pg_database, fresh_pg_database
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker


def test_two_servers_share_one_database(postgres: str, tmp_path: Path, worker: Worker) -> None:
    url = fresh_pg_database(postgres)
    # The worker answers from a thread of this (busy, covered) test process: a webhook it took
    # longer than STITCH_WORKER_TIMEOUT to accept is sent again by design (at least once), which
    # "each dispatched once" below would count as a fault of the shared database. 20 s keeps
    # that out of this test; tests/stitch/test_delivery.py covers the re-send itself.
    one = StitchServer(url, tmp_path, worker_timeout=20).start()
    two = StitchServer(url, tmp_path, worker_timeout=20).start()
    try:
        servers = [one.base, two.base]
        b = Builder(worker.url)
        b.chain(
            b.node("Splitter", "s", arrayPath=""),
            b.node("Worker", "w", mode="spray", servers=servers),  # every callback hits both servers at once
            b.node("Collector", "c"),
            b.node("Worker", "after", mode="spray", servers=servers),
        )
        flow_id = one.http.post("/flows", json={"name": "wide", "graph": b.graph()}).json()["id"]
        items = list(range(40))
        runs = [
            (one if i % 2 else two).http.post(f"/flows/{flow_id}/runs", json={"input": items}).json()["id"]
            for i in range(4)
        ]
        for run_id in runs:
            run = one.wait_for(run_id, timeout=60)
            assert run["status"] == "completed", run["node_states"]
            assert run["node_states"]["c"]["output"] == items
            events = [(e["node_key"], e["status"]) for e in two.http.get(f"/runs/{run_id}/events").json()]
            assert events.count(("c", "completed")) == 1
            assert events.count(("after", "running")) == 1
        per_run = {r: [p["nodeId"] for p in worker.received if p["runId"] == r] for r in runs}
        resent = [
            line
            for server in (one, two)
            for line in server.log.read_text().splitlines()
            if "sending again" in line or "re-sending" in line
        ]
        for run_id, keys in per_run.items():
            assert sorted(keys) == sorted([f"w_{i}" for i in items] + ["after"]), (
                run_id,
                resent,
            )  # each dispatched once
    finally:
        one.stop()
        two.stop()
        drop_pg_database(postgres, url)


def test_several_processes_share_one_sqlite_file(tmp_path: Path, worker: Worker) -> None:
    server = StitchServer(f"sqlite:///{tmp_path / 'stitch.db'}", tmp_path, workers=2).start()
    try:
        b = Builder(worker.url)
        b.chain(
            b.node("Splitter", "s", arrayPath=""),
            b.node("Worker", "w", mode="spray", servers=[server.base, server.base]),  # each callback twice at once
            b.node("Collector", "c"),
        )
        flow_id = server.http.post("/flows", json={"name": "wide", "graph": b.graph()}).json()["id"]
        runs = [
            server.http.post(f"/flows/{flow_id}/runs", json={"input": list(range(30))}).json()["id"] for _ in range(3)
        ]
        for run_id in runs:
            run = server.wait_for(run_id, timeout=60)
            assert run["status"] == "completed" and run["node_states"]["c"]["output"] == list(range(30))
            events = [(e["node_key"], e["status"]) for e in server.http.get(f"/runs/{run_id}/events").json()]
            assert events.count(("c", "completed")) == 1
        assert len(worker.received) == 90 and len({(p["runId"], p["nodeId"]) for p in worker.received}) == 90
    finally:
        server.stop()
