"""`agentloom serve --http`: streamable HTTP at /mcp, for clients that connect over the network."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from mcp.client import Client

from tests.conftest import PYTHON, free_port
from tests.server.clients import serve_args

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


@pytest.fixture
def http_url(pack_env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, *serve_args("--http", "--port", str(port))],
        env=pack_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("HTTP server did not start within 30 s")
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    assert out == b"", f"nothing may be printed to stdout, got {out[:200]!r}"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_tools_list_and_call(http_url: str, mode: str) -> None:
    async with Client(http_url, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"text": "hi", "times": 3})
        unknown = await client.call_tool("nope", {})
    assert {"health", "echo"} <= names
    assert result.structured_content == {"text": "hihihi", "times": 3}
    assert unknown.is_error and "nope" in unknown.content[0].text


def test_http_rejects_malformed_json_and_stays_up(http_url: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    bad = httpx.post(http_url, content=b"{not json", headers=headers, timeout=10)
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == -32700
    init = httpx.post(
        http_url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        headers=headers,
        timeout=10,
    )
    assert init.status_code == 200
