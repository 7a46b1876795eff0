"""`agentic-knowledge-mcp` and `agentloom serve` over stdio, with a real MCP client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from tests.conftest import PYTHON
from tests.packs.docs.conftest import write_config


def _text(result: CallToolResult) -> str:
    """The reply's first content block, which the server sends as text."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


COMMAND = str(Path(PYTHON).with_name("agentic-knowledge-mcp"))


async def test_the_dedicated_command_serves_the_docs_tools_alone(project: Path, server_env: dict[str, str]) -> None:
    write_config(project, "docsets:\n  - name: react\n    version: '18.2'\n")
    cwd = project / "src"
    cwd.mkdir()
    params = StdioServerParameters(command=COMMAND, args=[], env=server_env, cwd=str(cwd))
    async with Client(stdio_client(params, errlog=sys.stderr)) as client:
        assert client.server_info is not None and client.server_info.name == "agentic-knowledge"
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["list_docsets", "search_docs"]
        found = await client.call_tool("search_docs", {"docset": "react", "keywords": ["hooks"]})
        listed = await client.call_tool("list_docsets", {})
        missing = await client.call_tool("no_such_tool", {})
    assert _text(found).startswith(f"Search for 'hooks' in folder {project.as_posix()}/.knowledge/docs/react-18.2/.")
    assert json.loads(_text(listed))[0]["name"] == "react"
    assert missing.is_error and "no_such_tool" in _text(missing)


@pytest.mark.slow
def test_malformed_json_gets_a_parse_error(project: Path, server_env: dict[str, str]) -> None:
    write_config(project, "docsets: []\n")
    proc = subprocess.run(
        [COMMAND], input="{not json\n", capture_output=True, text=True, env=server_env, cwd=project, timeout=60
    )
    reply = json.loads(proc.stdout.splitlines()[0])
    assert reply["error"]["code"] == -32700 and reply["id"] is None


async def test_the_combined_server_has_the_docs_tools(project: Path, server_env: dict[str, str]) -> None:
    write_config(project, "docsets:\n  - name: vue\n    version: '3'\n")
    params = StdioServerParameters(command=PYTHON, args=["-m", "agentloom", "serve"], env=server_env, cwd=str(project))
    async with Client(stdio_client(params, errlog=sys.stderr)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("search_docs", {"docset": "vue", "keywords": ["ref"]})
    assert {"search_docs", "list_docsets", "health"} <= names
    assert "vue-3/" in _text(result)


@pytest.mark.slow
def test_the_standalone_server_prints_help_instead_of_starting() -> None:
    import subprocess

    from tests.conftest import PYTHON

    shown = subprocess.run(
        [PYTHON, "-m", "agentloom.packs.docs.mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert shown.returncode == 0 and "usage: agentic-knowledge-mcp" in shown.stdout and "search_docs" in shown.stdout
    wrong = subprocess.run(
        [PYTHON, "-m", "agentloom.packs.docs.mcp", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert wrong.returncode == 2 and "unrecognized arguments: --port" in wrong.stderr
