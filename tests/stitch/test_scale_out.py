"""Several server processes on one database (PostgreSQL, or one SQLite file), receiving the same callbacks at once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.stitch.conftest import StitchServer, drop_pg_database, fresh_pg_database
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def test_two_servers_share_one_database(postgres: str, tmp_path: Path, worker: Worker) -> None:
    url = fresh_pg_database(postgres)
    # The worker answers from a thread of this test process, which a loaded machine can stall
    # for longer than STITCH_WORKER_TIMEOUT: its webhooks are then sent again, by design (at
    # least once; the worker may have had them). So each node path must be dispatched once (one
    # attempt, one token), and a webhook that arrived twice must be a re-send a dispatcher logged.
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
        keys = [f"w_{i}" for i in items] + ["after"]
        for run_id in runs:
            run = one.wait_for(run_id, timeout=120)
            assert run["status"] == "completed", run["node_states"]
            assert run["node_states"]["c"]["output"] == items
            events = [(e["node_key"], e["status"]) for e in two.http.get(f"/runs/{run_id}/events").json()]
            assert events.count(("c", "completed")) == 1
            assert all(events.count((key, "running")) == 1 for key in keys), events  # one attempt each
        resent = [
            line
            for server in (one, two)
            for line in server.log.read_text().splitlines()
            if "sending again" in line or "re-sending" in line
        ]
        for run_id in runs:
            received = [p for p in worker.received if p["runId"] == run_id]
            tokens: dict[str, set[str]] = {}
            for payload in received:
                tokens.setdefault(payload["nodeId"], set()).add(payload["callbackUrl"])
            assert sorted(tokens) == sorted(keys), (run_id, resent)
            # Each dispatched once: every webhook of a node path carries the one attempt's token.
            assert all(len(urls) == 1 for urls in tokens.values()), (run_id, tokens)
            for key, count in Counter(p["nodeId"] for p in received).items():
                logged = [line for line in resent if f"{run_id}/{key} attempt " in line]
                assert count - 1 <= len(logged), (run_id, key, count, resent)  # a repeat is a logged re-send
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
        # At least once (docs/stitch-operations.md): a slow machine may see a lease run out and a webhook sent
        # again; every path's webhook arrived, and the run above was applied once.
        assert len({(p["runId"], p["nodeId"]) for p in worker.received}) == 90 and len(worker.received) >= 90
    finally:
        server.stop()
