"""Reads are answered while a backlog of callbacks is handled, and a callback refused for a full
queue (503 + Retry-After) is applied exactly once when posted again. How fast the reads are under
load is a benchmark figure: during this burst, BENCHMARKS.md "Stitch: reads during a callback burst"
(p95 <= 150 ms); under steady load, "Stitch soak" (p95 <= 50 ms)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)
RUNS = 300
CHAIN = 10


def chain_flow(server: StitchServer, webhook: str) -> str:
    nodes = [
        {"id": f"s{i}", "type": "Worker", "data": {"webhookUrl": webhook, "last": i == CHAIN - 1}} for i in range(CHAIN)
    ]
    edges = [{"id": f"e{i}", "source": f"s{i}", "target": f"s{i + 1}"} for i in range(CHAIN - 1)]
    reply = server.http.post("/flows", json={"name": "burst", "graph": {"nodes": nodes, "edges": edges}})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def test_reads_are_answered_under_a_backlog_of_callbacks(database_url: str, tmp_path: Path, echo_worker: str) -> None:
    server = StitchServer(database_url, tmp_path, workers=2).start()
    try:
        flow_id = chain_flow(server, f"{echo_worker}/work")
        with ThreadPoolExecutor(16) as pool:  # a burst: RUNS runs in flight at once
            started = list(
                pool.map(
                    lambda i: server.http.post(f"/flows/{flow_id}/runs", json={"input": i}).status_code, range(RUNS)
                )
            )
        assert started == [201] * RUNS
        reads: dict[str, int] = {"first page": 0, "run": 0, "health": 0}
        first = server.http.get("/runs", params={"flow_id": flow_id, "limit": 1}).json()["runs"][0]["id"]
        with httpx.Client(base_url=server.base + "/api/stitch", timeout=30) as client:
            while True:
                progress = httpx.get(f"{echo_worker}/counts").json()["callbacks"]
                if progress >= RUNS * CHAIN * 0.9:  # the backlog is all but gone: stop timing
                    break
                for name, path, params in (
                    ("first page", "/runs", {"flow_id": flow_id, "limit": 50}),
                    ("run", f"/runs/{first}", {}),
                    ("health", "/health", {}),
                ):
                    assert client.get(path, params=params).status_code == 200
                    reads[name] += 1
                time.sleep(0.02)
        deadline = time.monotonic() + 60
        while httpx.get(f"{echo_worker}/counts").json()["callbacks"] < RUNS * CHAIN:
            assert time.monotonic() < deadline, httpx.get(f"{echo_worker}/counts").json()
            time.sleep(0.2)
        counts = httpx.get(f"{echo_worker}/counts").json()
        assert counts["errors"] == 0, counts
        assert all(count >= 1 for count in reads.values()), reads  # read while the backlog lasted
    finally:
        server.stop()


def test_a_callback_refused_for_a_full_queue_is_applied_once_when_posted_again(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    server = StitchServer(database_url, tmp_path)
    # One callback at a time and none waiting: every callback that arrives while one is handled is refused.
    server.env.update(STITCH_CALLBACK_CONCURRENCY="1", STITCH_CALLBACK_QUEUE="0", STITCH_CALLBACK_RETRY_AFTER="1")
    server.start()
    try:
        b = Builder(worker.url)
        b.chain(b.node("Worker", "w", mode="never"))
        flow_id = server.http.post("/flows", json={"name": "gate", "graph": b.graph()}).json()["id"]
        runs = [server.http.post(f"/flows/{flow_id}/runs", json={"input": i}).json()["id"] for i in range(40)]
        deadline = time.monotonic() + 30
        while len(worker.received) < len(runs):
            assert time.monotonic() < deadline, len(worker.received)
            time.sleep(0.05)
        urls = {payload["runId"]: payload["callbackUrl"] for payload in worker.received}
        answers = asyncio.run(post_until_accepted(urls))
        refused = [reply for replies in answers.values() for reply in replies if reply.status_code == 503]
        assert refused, "no callback was refused: the gate let them all through at once"
        for reply in refused:
            assert reply.headers["Retry-After"] == "1"
            assert "STITCH_CALLBACK_QUEUE" in reply.json()["detail"]
        for run_id, replies in answers.items():
            accepted = [r.json() for r in replies if r.status_code == 200]
            assert accepted == [{"ok": True, "detail": accepted[0]["detail"], "duplicate": False}], (run_id, accepted)
            run = server.wait_for(run_id)
            assert run["status"] == "completed"
            events = [(e["node_key"], e["status"]) for e in server.http.get(f"/runs/{run_id}/events").json()]
            assert events.count(("w", "completed")) == 1, events
        metrics = httpx.get(f"{server.base}/metrics").text
        assert f"stitch_callbacks_refused_total {float(len(refused))}" in metrics
        assert "stitch_callbacks_waiting 0.0" in metrics
    finally:
        server.stop()


async def post_until_accepted(urls: dict[str, str]) -> dict[str, list[httpx.Response]]:
    """Every callback at once; each refused one again after its Retry-After, as a worker should."""
    answers: dict[str, list[httpx.Response]] = {run_id: [] for run_id in urls}
    body: dict[str, Any] = {"status": "completed", "output": "done"}
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as client:

        async def post(run_id: str) -> None:
            for _ in range(30):
                reply = await client.post(urls[run_id], json=body)
                answers[run_id].append(reply)
                if reply.status_code != 503:
                    return
                await asyncio.sleep(float(reply.headers["Retry-After"]))

        await asyncio.gather(*(post(run_id) for run_id in urls))
    return answers
