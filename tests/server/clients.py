"""Real MCP clients for the tests: the SDK client over stdio and HTTP, and raw JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, Any

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import PYTHON


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool call that must succeed: its structured reply."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


async def error(client: Client, tool: str, **args: Any) -> str:
    """A tool call that must fail: its message."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


def serve_args(*extra: str) -> list[str]:
    return ["-m", "agentloom", "serve", *extra]


@asynccontextmanager
async def stdio_client_session(
    env: dict[str, str], *extra: str, mode: str = "auto", errlog: IO[str] | None = None
) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=PYTHON, args=serve_args(*extra), env=env)
    async with Client(stdio_client(params, errlog=errlog or sys.stderr), mode=mode) as client:  # type: ignore[arg-type]
        yield client


class RawStdio:
    """Speaks newline-delimited JSON-RPC to a server process, byte for byte."""

    def __init__(self, env: dict[str, str], *extra: str, stderr: IO[str] | int = subprocess.PIPE) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, *serve_args(*extra)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            text=True,
        )

    def send_line(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps(message))

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"server closed stdout; stderr:\n{self.stderr()}"
        return json.loads(line)  # every stdout line must be JSON-RPC

    def request(self, id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}})
        return self.receive()

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def stderr(self) -> str:
        self.close()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
