"""stitch_list_runs and stitch_cancel_run against a real Stitch server on SQLite and
PostgreSQL, with a real worker: pages, filters, argument checks, cancel and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client import Client

from tests.conftest import TIMESTAMP
from tests.packs.stitch.test_tools import _until, stitch_host
from tests.server.clients import call, error
from tests.stitch.conftest import (  # noqa: F401 - fixtures: a database per test, a server on it, a worker
    StitchServer,
    database_url,
    postgres,
    stitch,
    worker,
)
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def _flows(stitch: StitchServer, worker: Worker) -> tuple[str, str]:
    gated, plain = Builder(worker.url), Builder(worker.url)
    gated.chain(gated.node("Worker", "draft"), gated.node("UX", "review", prompt="Ship it?"))
    plain.node("Worker", "only")
    return (
        stitch.http.post("/flows", json={"name": "gated", "graph": gated.graph()}).json()["id"],
        stitch.http.post("/flows", json={"name": "plain", "graph": plain.graph()}).json()["id"],
    )


async def test_list_runs_pages_and_filters(stitch: StitchServer, worker: Worker, tmp_path: Path) -> None:
    gated, plain = _flows(stitch, worker)
    async with Client(stitch_host(tmp_path, stitch.base).server) as client:
        waiting = [(await call(client, "stitch_start_run", flow_id=gated, input={"n": i}))["run_id"] for i in range(3)]
        done = [(await call(client, "stitch_start_run", flow_id=plain, input={"n": i}))["run_id"] for i in range(2)]
        for run_id in waiting:
            await _until(client, run_id, "waiting_for_user")
        for run_id in done:
            await _until(client, run_id, "completed")

        seen: list[str] = []
        cursor = None
        for _ in range(5):
            page = await call(client, "stitch_list_runs", limit=2, **({"cursor": cursor} if cursor else {}))
            assert len(page["runs"]) <= 2
            seen += [r["run_id"] for r in page["runs"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(waiting + done) and len(seen) == 5  # every run once, in pages of 2
        first = (await call(client, "stitch_list_runs"))["runs"]
        assert set(first[0]) == {"run_id", "flow_id", "status", "created_at"}  # compact: no node states
        assert all(TIMESTAMP.fullmatch(r["created_at"]) for r in first)

        of_flow = await call(client, "stitch_list_runs", flow_id=gated.upper())
        assert sorted(r["run_id"] for r in of_flow["runs"]) == sorted(waiting) and of_flow["next_cursor"] is None
        people = await call(client, "stitch_list_runs", status="waiting_for_user")
        assert sorted(r["run_id"] for r in people["runs"]) == sorted(waiting)
        assert {r["status"] for r in people["runs"]} == {"waiting_for_user"}
        finished = await call(client, "stitch_list_runs", status="completed", flow_id=plain)
        assert sorted(r["run_id"] for r in finished["runs"]) == sorted(done)
        assert (await call(client, "stitch_list_runs", status="completed", flow_id=gated))["runs"] == []


async def test_list_runs_checks_its_arguments(stitch: StitchServer, tmp_path: Path) -> None:
    async with Client(stitch_host(tmp_path, stitch.base).server) as client:
        message = await error(client, "stitch_list_runs", status="done")
        assert (
            "`status`" in message and "'waiting_for_user'" in message and "'cancelled'" in message
        )  # names the accepted set
        for limit in (0, 101):
            message = await error(client, "stitch_list_runs", limit=limit)
            assert "`limit`" in message and ("1" in message if limit == 0 else "100" in message)
        assert (await error(client, "stitch_list_runs", flow_id="flow-1")).startswith(
            "flow_id: 'flow-1' is not a flow id"
        )
        assert (await error(client, "stitch_list_runs", cursor="a\nb")).startswith("cursor: ")
        assert "does not take `state`" in await error(client, "stitch_list_runs", state="running")
        assert (await error(client, "stitch_list_runs", cursor="not-a-cursor")).startswith("Stitch refused")


async def test_cancel_a_waiting_run(stitch: StitchServer, worker: Worker, tmp_path: Path) -> None:
    gated, plain = _flows(stitch, worker)
    async with Client(stitch_host(tmp_path, stitch.base).server) as client:
        run_id = (await call(client, "stitch_start_run", flow_id=gated, input={}))["run_id"]
        await _until(client, run_id, "waiting_for_user")
        cancelled = await call(client, "stitch_cancel_run", run_id=run_id)
        assert cancelled["run_id"] == run_id and "cancelled" in cancelled["detail"] and "duplicate" not in cancelled
        status = await call(client, "stitch_run_status", run_id=run_id)
        assert status["status"] == "cancelled" and status["nodes"]["review"]["status"] == "cancelled"
        assert status["nodes"]["draft"]["status"] == "completed"  # finished work stays as it was
        again = await call(client, "stitch_cancel_run", run_id=run_id)
        assert again["duplicate"] is True  # a repeat changes nothing and says so
        gate = await error(client, "stitch_complete", run_id=run_id, node_id="review", output={})
        assert gate.startswith("Stitch refused") and "cancelled" in gate  # a refusal is an error, not ok: false
        assert (await call(client, "stitch_list_runs", status="cancelled"))["runs"][0]["run_id"] == run_id

        finished = (await call(client, "stitch_start_run", flow_id=plain, input={}))["run_id"]
        await _until(client, finished, "completed")
        refused = await error(client, "stitch_cancel_run", run_id=finished)
        assert refused.startswith("Stitch refused") and "completed" in refused
        assert "run_id: 'x' is not a run id" in await error(client, "stitch_cancel_run", run_id="x")
        assert "no run" in await error(client, "stitch_cancel_run", run_id="00000000-0000-0000-0000-000000000000")
