"""The stitch pack in the real server process, over stdio, as an MCP client launches it:
its tools and their hints, and a refusal arriving as ``isError: true``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packs.stitch.test_tools import _until, server, worker  # noqa: F401 - fixtures
from tests.server.clients import call, error, stdio_client_session
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


async def test_stitch_over_stdio(
    server: StitchServer, worker: Worker, server_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**server_env, "AGENTLOOM_STITCH__URL": server.base}
    b = Builder(worker.url)
    b.chain(b.node("Worker", "draft"), b.node("UX", "review"))
    async with stdio_client_session(env, "--packs", "stitch") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {
            "stitch_list_flows",
            "stitch_create_flow",
            "stitch_start_run",
            "stitch_list_runs",
            "stitch_run_status",
            "stitch_list_waiting",
            "stitch_complete",
            "stitch_retry",
            "stitch_cancel_run",
        } <= set(tools)
        assert tools["stitch_list_runs"].annotations.read_only_hint is True
        assert tools["stitch_list_waiting"].annotations.read_only_hint is True
        assert tools["stitch_cancel_run"].annotations.destructive_hint is True
        assert tools["stitch_create_flow"].annotations.read_only_hint in (False, None)  # absent means false (MCP)
        assert tools["stitch_create_flow"].annotations.open_world_hint is True
        assert tools["stitch_list_runs"].input_schema["properties"]["limit"]["maximum"] == 100
        assert all(t.output_schema for name, t in tools.items() if name.startswith("stitch_"))

        flow = await call(client, "stitch_create_flow", name="gate", graph=b.graph())
        refused = await client.call_tool(
            "stitch_create_flow", {"name": "bad", "graph": {"nodes": [{"id": "w", "type": "Worker"}]}}
        )
        assert refused.is_error and refused.structured_content is None and "webhookUrl" in refused.content[0].text
        run_id = (await call(client, "stitch_start_run", flow_id=flow["id"], input={}))["run_id"]
        await _until(client, run_id, "waiting_for_user")
        assert "only UX nodes are completed by hand" in await error(
            client, "stitch_complete", run_id=run_id, node_id="draft", output={}
        )
        assert "only failed nodes can be retried" in await error(
            client, "stitch_retry", run_id=run_id, node_id="review"
        )
