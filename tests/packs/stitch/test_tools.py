"""The stitch pack's MCP tools against a real Stitch server and worker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.client import Client

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from tests.conftest import TIMESTAMP, free_port
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


async def test_start_follow_complete_and_retry(server: StitchServer, worker: Worker, tmp_path: Path) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "draft"), b.node("UX", "review"), b.node("Worker", "publish", mode="flaky"))
    flow_id = server.http.post("/flows", json={"name": "review", "graph": b.graph()}).json()["id"]
    async with Client(stitch_host(tmp_path, server.base).server) as client:
        flows = (await client.call_tool("stitch_list_flows", {})).structured_content
        assert flows == {"flows": [{"id": flow_id, "name": "review", "version": 1, "nodes": 3, "updated_at": flows["flows"][0]["updated_at"]}]}  # type: ignore[index]
        assert TIMESTAMP.fullmatch(flows["flows"][0]["updated_at"])  # type: ignore[index]
        started = (await client.call_tool("stitch_start_run", {"flow_id": flow_id, "input": {"text": "hi"}})).structured_content
        run_id = started["run_id"]  # type: ignore[index]
        status = await _until(client, run_id, "waiting_for_user")
        assert status["nodes"]["review"] == {"status": "waiting_for_user"}
        done = await client.call_tool("stitch_complete", {"run_id": run_id, "node_id": "review", "output": {"ok": True}})
        assert not done.is_error and done.structured_content["node_id"] == "review"  # type: ignore[index]
        again = await client.call_tool("stitch_complete", {"run_id": run_id, "node_id": "review", "output": {}})
        assert again.is_error and "not waiting_for_user" in again.content[0].text  # type: ignore[union-attr]  # a refusal is an error
        failed = await _until(client, run_id, "failed")
        assert failed["nodes"]["publish"]["error"] == "the worker was told to fail"
        retried = await client.call_tool("stitch_retry", {"run_id": run_id, "node_id": "publish"})
        assert not retried.is_error, retried.content
        again = await client.call_tool("stitch_retry", {"run_id": run_id, "node_id": "draft"})
        assert again.is_error and "Stitch refused" in again.content[0].text  # type: ignore[union-attr]
        final = await _until(client, run_id, "completed", include_outputs=True)
        assert final["nodes"]["publish"]["output"] == {"ok": True}
        missing = await client.call_tool("stitch_run_status", {"run_id": "00000000-0000-0000-0000-000000000000"})
        assert missing.is_error and "no run 00000000-0000-0000-0000-000000000000" in missing.content[0].text
        malformed = await client.call_tool("stitch_run_status", {"run_id": "nope"})
        assert malformed.is_error and "run_id: 'nope' is not a run id" in malformed.content[0].text


async def test_an_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with Client(stitch_host(tmp_path, url).server) as client:
        result = await client.call_tool("stitch_list_flows", {})
    assert result.is_error and f"Stitch server at {url} is unreachable" in result.content[0].text
    check = next(c for c in stitch_host(tmp_path, url).health(check_model=False)["checks"] if c["name"] == "stitch server")  # type: ignore[union-attr]
    assert not check["ok"] and not check["required"]  # asked for, not there: degraded


def test_no_server_at_the_default_url_is_not_a_fault(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", packs=["stitch"])
    host = Host(settings, [ep for ep in discover_packs() if ep.name == "stitch"])
    check = next(c for c in host.health(check_model=False)["checks"] if c["name"] == "stitch server")  # type: ignore[union-attr]
    assert check["ok"]


async def _until(client: Client, run_id: str, status: str, include_outputs: bool = False) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + 20
    while True:
        result = await client.call_tool("stitch_run_status", {"run_id": run_id, "include_outputs": include_outputs})
        body = result.structured_content or json.loads(result.content[0].text)
        if body["status"] == status:
            return body  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, body
        await anyio.sleep(0.05)
