"""stdio transport that answers malformed lines with a JSON-RPC error instead of ignoring them.

The SDK's stdio reader drops a line it cannot parse (the client then waits forever for
an answer). JSON-RPC 2.0 wants ``-32700 Parse error`` for invalid JSON and
``-32600 Invalid Request`` for JSON that is not a request, with ``"id": null``.
"""

from __future__ import annotations

import logging

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import (
    create_context_streams,  # same stream type the SDK's transports use
)
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from mcp_types.jsonrpc import INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

log = logging.getLogger(__name__)


def error_for(exc: Exception) -> JSONRPCError:
    invalid_json = isinstance(exc, ValidationError) and any(e["type"] == "json_invalid" for e in exc.errors())
    if invalid_json:
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message")
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)


async def run_stdio(server: MCPServer) -> None:
    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async does exactly this, minus the error replies
    async with stdio_server() as (read_stream, write_stream):
        forward, messages = create_context_streams[SessionMessage | Exception](0)

        async def answer_malformed() -> None:
            async with forward:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        reply = error_for(item)
                        log.warning("rejected a malformed message: %s", reply.error.message)
                        await write_stream.send(SessionMessage(reply))
                    else:
                        await forward.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_malformed)
            await lowlevel.run(messages, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()
