"""Crashes and restarts: the database is the only state, so a new server carries on."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from agentloom.stitch.db import Database
from agentloom.stitch.engine import Engine
from agentloom.stitch.flows import Flows
from agentloom.stitch.models import Graph
from tests.conftest import PYTHON
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def test_a_restart_mid_run_resumes_it(database_url: str, tmp_path: Path, worker: Worker) -> None:
    first = StitchServer(database_url, tmp_path).start()
    b = Builder(worker.url)
    b.chain(
        b.node("Worker", "slow", mode="never"),
        b.node("Splitter", "s", arrayPath=""),
        b.node("Worker", "w"),
        b.node("Collector", "c"),
    )
    flow_id = first.http.post("/flows", json={"name": "f", "graph": b.graph()}).json()["id"]
    run_id = first.http.post(f"/flows/{flow_id}/runs", json={"input": 1}).json()["id"]
    while not worker.received:
        time.sleep(0.05)
    first.kill()  # no goodbye: the process dies with the run in flight
    second = StitchServer(database_url, tmp_path, port=first.port).start()
    try:
        answer = httpx.post(worker.received[0]["callbackUrl"], json={"status": "completed", "output": [1, 2, 3]})
        assert answer.status_code == 200
        run = second.wait_for(run_id)
        assert run["status"] == "completed" and run["node_states"]["c"]["output"] == [1, 2, 3]
    finally:
        second.stop()


def test_a_crash_between_commit_and_dispatch_is_sent_by_the_reconciler(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    # A process commits a run and dies before sending its webhook.
    engine = Engine(Database(database_url), "http://127.0.0.1:1", lease_seconds=0.5)
    b = Builder(worker.url)
    b.chain(b.node("Worker", "a"), b.node("Worker", "b"))
    flow = Flows(engine.db).create("f", Graph.model_validate(b.graph()))
    run, unsent = engine.start_run(flow["id"], {"n": 1})
    assert [s.key for s in unsent] == ["a"] and not worker.received
    engine.db.dispose()
    server = StitchServer(database_url, tmp_path).start()
    try:
        # The webhook carries the callback URL of the process that committed it, so answer through this server.
        deadline = time.monotonic() + 20
        while not worker.received:
            assert time.monotonic() < deadline, "the reconciler never sent the webhook"
            time.sleep(0.05)
        payload = worker.received[0]
        path = payload["callbackUrl"].split("/api/stitch/", 1)[1]
        httpx.post(f"{server.base}/api/stitch/{path}", json={"status": "completed", "output": {"n": 2}})
        final = server.wait_for(run["id"])
        assert final["status"] == "completed" and final["node_states"]["b"]["input"] == {"n": 2}
        assert [p["nodeId"] for p in worker.received].count("a") == 1
    finally:
        server.stop()


def test_the_server_refuses_to_start_without_what_it_needs(tmp_path: Path) -> None:
    def serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        base = {"PATH": "/usr/bin:/bin", "AGENTLOOM_DATA_DIR": str(tmp_path / "data")}
        return subprocess.run(
            [PYTHON, "-m", "agentloom", "stitch", "serve", *args],
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    missing = serve({"STITCH_API_KEY": "k" * 24}, "--host", "0.0.0.0", "--port", "9000")  # on loopback it defaults
    assert (
        missing.returncode == 2
        and "STITCH_BASE_URL is not set" in missing.stderr
        and "http://HOST:9000" in missing.stderr
    )
    bad = serve({"STITCH_BASE_URL": "localhost:8000"})
    assert bad.returncode == 2 and "not an http(s) URL" in bad.stderr
    exposed = serve({"STITCH_BASE_URL": "http://10.0.0.5:8000"}, "--host", "0.0.0.0")
    assert exposed.returncode == 2 and "STITCH_API_KEY" in exposed.stderr
    legacy = StitchServer(f"sqlite:///{tmp_path / 'legacy.db'}", tmp_path)
    legacy.env["NEXT_PUBLIC_BASE_URL"] = legacy.env.pop("STITCH_BASE_URL")
    legacy.start().stop()  # NEXT_PUBLIC_BASE_URL is accepted too


def test_management_needs_the_api_key_when_one_is_set(tmp_path: Path, worker: Worker) -> None:
    server = StitchServer(f"sqlite:///{tmp_path / 's.db'}", tmp_path, api_key="s3cret-s3cret-s3cret").start()
    try:
        anonymous = httpx.Client(base_url=server.base + "/api/stitch")
        assert anonymous.get("/flows").status_code == 401
        assert anonymous.post("/flows", json={"name": "x", "graph": {"nodes": []}}).status_code == 401
        assert anonymous.get("/flows", headers={"X-API-Key": "s3cret-s3cret-s3cret"}).status_code == 200
        b = Builder(worker.url)
        b.node("Worker", "w")
        flow_id = server.http.post("/flows", json={"name": "f", "graph": b.graph()}).json()["id"]
        run_id = server.http.post(f"/flows/{flow_id}/runs", json={}).json()["id"]
        assert server.wait_for(run_id)["status"] == "completed"  # callbacks need no key, only their signature
    finally:
        server.stop()
