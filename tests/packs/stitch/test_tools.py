"""The stitch pack's MCP tools against a real Stitch server and worker: flows, status
(prompts, fan-out summaries), completing gates and retrying, refusals as tool errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from tests.conftest import TIMESTAMP, free_port
from tests.server.clients import call, error
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker


def stitch_host(tmp_path: Path, url: str) -> Host:
    settings = Settings(data_dir=tmp_path / "data", packs=["stitch"], pack_settings={"stitch": {"url": url}})
    return Host(settings, [ep for ep in discover_packs() if ep.name == "stitch"])


@pytest.fixture
def worker() -> Iterator[Worker]:
    with Worker() as w:
        yield w


@pytest.fixture
def server(tmp_path: Path) -> Iterator[StitchServer]:
    s = StitchServer(f"sqlite:///{tmp_path / 'stitch.db'}", tmp_path).start()
    yield s
    s.stop()


@pytest.mark.slow
async def test_start_follow_complete_and_retry(server: StitchServer, worker: Worker, tmp_path: Path) -> None:
    b = Builder(worker.url)
    b.chain(
        b.node("Worker", "draft"),
        b.node("UX", "review", prompt="Approve the draft?"),
        b.node("Worker", "publish", mode="flaky"),
    )
    flow_id = server.http.post("/flows", json={"name": "review", "graph": b.graph()}).json()["id"]
    async with Client(stitch_host(tmp_path, server.base).server) as client:
        flows = await call(client, "stitch_list_flows")
        assert flows == {
            "flows": [
                {
                    "id": flow_id,
                    "name": "review",
                    "version": 1,
                    "nodes": 3,
                    "updated_at": flows["flows"][0]["updated_at"],
                }
            ]
        }
        assert TIMESTAMP.fullmatch(flows["flows"][0]["updated_at"])
        started = await call(client, "stitch_start_run", flow_id=flow_id, input={"text": "hi"})
        run_id = started["run_id"]
        status = await _until(client, run_id, "waiting_for_user")
        assert status["nodes"]["review"] == {"status": "waiting_for_user", "prompt": "Approve the draft?"}
        assert "prompt" not in status["nodes"]["draft"]
        done = await call(client, "stitch_complete", run_id=run_id, node_id="review", output={"ok": True})
        assert done["node_id"] == "review"
        after = await call(client, "stitch_run_status", run_id=run_id)
        assert "prompt" not in after["nodes"]["review"]  # answered: nothing left to ask
        again = await error(client, "stitch_complete", run_id=run_id, node_id="review", output={})
        assert (
            again.startswith("Stitch refused") and "not waiting_for_user" in again
        )  # a refusal is an error, not ok: false
        failed = await _until(client, run_id, "failed")
        assert failed["nodes"]["publish"]["error"] == "the worker was told to fail"
        await call(client, "stitch_retry", run_id=run_id, node_id="publish")
        refused = await error(client, "stitch_retry", run_id=run_id, node_id="draft")
        assert refused.startswith("Stitch refused") and "draft" in refused
        final = await _until(client, run_id, "completed", include_outputs=True)
        assert final["nodes"]["publish"]["output"] == {"ok": True}
        missing = await error(client, "stitch_run_status", run_id="00000000-0000-0000-0000-000000000000")
        assert "no run 00000000-0000-0000-0000-000000000000" in missing
        malformed = await error(client, "stitch_run_status", run_id="nope")
        assert "run_id: 'nope' is not a run id" in malformed


@pytest.mark.slow
async def test_create_flow_and_the_problems_of_a_refused_graph(
    server: StitchServer, worker: Worker, tmp_path: Path
) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "a"), b.node("UX", "gate"), b.node("Worker", "b"))
    async with Client(stitch_host(tmp_path, server.base).server) as client:
        created = await call(client, "stitch_create_flow", name="chain", graph=b.graph())
        assert created == {"id": created["id"], "name": "chain", "version": 1, "nodes": 3}
        assert server.http.get(f"/flows/{created['id']}").json()["graph"]["nodes"][0]["id"] == "a"  # really saved
        run = await call(client, "stitch_start_run", flow_id=created["id"], input={"x": 1})
        await _until(client, run["run_id"], "waiting_for_user")

        bad = {
            "nodes": [{"id": "w", "type": "Worker", "data": {}}, {"id": "x", "type": "Robot"}],
            "edges": [{"id": "e", "source": "w", "target": "nowhere"}],
        }
        message = await error(client, "stitch_create_flow", name="broken", graph=bad)
        assert message.startswith("Stitch refused") and "graph.nodes.1.type" in message  # the place of the problem
        assert "'Worker', 'UX', 'Splitter' or 'Collector'" in message
        graph_problems = {
            "nodes": [{"id": "w", "type": "Worker", "data": {}}],
            "edges": [{"id": "e", "source": "w", "target": "nowhere"}],
        }
        message = await error(client, "stitch_create_flow", name="broken", graph=graph_problems)
        assert "webhookUrl" in message and "nowhere" in message and message.count("graph: ") >= 2  # each problem named
        assert [f["name"] for f in server.http.get("/flows").json()] == ["chain"]  # nothing saved for a refused graph

        assert "`name`" in await error(client, "stitch_create_flow", name="", graph=b.graph())
        assert "`graph`" in await error(client, "stitch_create_flow", name="x", graph=[1, 2])
        assert "does not take `graf`" in await error(client, "stitch_create_flow", name="x", graf={})


@pytest.mark.slow
async def test_a_fan_out_node_reads_as_a_summary_of_its_paths_and_retries_them(
    server: StitchServer, worker: Worker, tmp_path: Path
) -> None:
    b = Builder(worker.url)
    b.chain(
        b.node("Splitter", "s"), b.node("Worker", "w", mode="flaky"), b.node("Collector", "c"), b.node("Worker", "z")
    )
    flow_id = server.http.post("/flows", json={"name": "fan", "graph": b.graph()}).json()["id"]
    async with Client(stitch_host(tmp_path, server.base).server) as client:
        run_id = (await call(client, "stitch_start_run", flow_id=flow_id, input={"items": [1, 2, 3]}))["run_id"]
        failed = await _until(client, run_id, "failed")
        assert failed["nodes"]["w"] == {"status": "failed", "paths": {"failed": 3}}
        assert {failed["nodes"][f"w_{i}"]["status"] for i in range(3)} == {"failed"}
        await call(client, "stitch_retry", run_id=run_id, node_id="w")  # the template: every failed path
        done = await _until(client, run_id, "completed", include_outputs=True)
        assert done["nodes"]["w"] == {"status": "completed", "paths": {"completed": 3}}  # not pending forever
        assert done["nodes"]["c"]["output"] == [1, 2, 3]


@pytest.mark.slow
async def test_a_gate_s_input_schema_is_listed_shown_and_enforced(server: StitchServer, tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "title": "Pay the invoice",
        "properties": {
            "approved": {"type": "boolean", "title": "Approve?", "x-stitch-action": True},
            "amount": {"type": "number", "description": "In euros."},
        },
        "required": ["approved", "amount"],
    }
    compact = {  # what filling it needs: no titles, no console hints
        "type": "object",
        "properties": {"approved": {"type": "boolean"}, "amount": {"type": "number", "description": "In euros."}},
        "required": ["approved", "amount"],
    }
    graph = {
        "nodes": [
            {"id": "pay", "type": "UX", "data": {"prompt": "Pay it?", "inputSchema": schema}},
            {"id": "note", "type": "UX"},
        ]
    }
    flow_id = server.http.post("/flows", json={"name": "pay", "graph": graph}).json()["id"]
    other = server.http.post("/flows", json={"name": "other", "graph": {"nodes": [{"id": "x", "type": "UX"}]}})
    async with Client(stitch_host(tmp_path, server.base).server) as client:
        run_id = (await call(client, "stitch_start_run", flow_id=flow_id, input={}))["run_id"]
        await call(client, "stitch_start_run", flow_id=other.json()["id"])
        await _until(client, run_id, "waiting_for_user")
        gates = (await call(client, "stitch_list_waiting", flow_id=flow_id))["gates"]
        assert sorted(gates, key=lambda g: g["node_id"]) == [
            {"run_id": run_id, "node_id": "note", "prompt": None, "input_schema": None},
            {"run_id": run_id, "node_id": "pay", "prompt": "Pay it?", "input_schema": compact},
        ]
        assert len((await call(client, "stitch_list_waiting", limit=1))["gates"]) == 1
        assert "flow_id: 'nope' is not a flow id" in await error(client, "stitch_list_waiting", flow_id="nope")
        status = await call(client, "stitch_run_status", run_id=run_id)
        assert status["nodes"] == {
            "pay": {"status": "waiting_for_user", "prompt": "Pay it?", "input_schema": compact},
            "note": {"status": "waiting_for_user"},
        }

        wrong = await error(
            client, "stitch_complete", run_id=run_id, node_id="pay", output={"approved": True, "amount": "abc"}
        )
        assert wrong == "Stitch refused: amount: 'abc' is not of type 'number'"
        empty = await error(client, "stitch_complete", run_id=run_id, node_id="pay", output={})
        assert empty == (
            "Stitch refused: approved: missing; this field is required, add it; "
            "amount: missing; this field is required, add it"
        )
        assert (await call(client, "stitch_run_status", run_id=run_id))["nodes"]["pay"]["status"] == "waiting_for_user"
        done = await call(
            client, "stitch_complete", run_id=run_id, node_id="pay", output={"approved": True, "amount": 9}
        )
        assert done == {"run_id": run_id, "node_id": "pay", "detail": "pay completed"}
        assert "input_schema" not in (await call(client, "stitch_run_status", run_id=run_id))["nodes"]["pay"]


async def test_an_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with Client(stitch_host(tmp_path, url).server) as client:
        message = await error(client, "stitch_list_flows")
    assert f"Stitch server at {url} is unreachable" in message
    check = next(
        c for c in stitch_host(tmp_path, url).health(check_model=False)["checks"] if c["name"] == "stitch server"
    )  # type: ignore[union-attr]
    assert not check["ok"] and not check["required"]  # asked for, not there: degraded


def test_no_server_at_the_default_url_is_not_a_fault(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", packs=["stitch"])
    host = Host(settings, [ep for ep in discover_packs() if ep.name == "stitch"])
    check = next(c for c in host.health(check_model=False)["checks"] if c["name"] == "stitch server")  # type: ignore[union-attr]
    assert check["ok"]


async def _until(client: Client, run_id: str, status: str, include_outputs: bool = False) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        result = await client.call_tool("stitch_run_status", {"run_id": run_id, "include_outputs": include_outputs})
        assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
        body = result.structured_content or json.loads(result.content[0].text)  # type: ignore[union-attr]
        if body["status"] == status:
            return body  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, body
        await anyio.sleep(0.05)
