"""stdio transport that answers every malformed line with a JSON-RPC error instead of ignoring it.

The SDK's stdio reader drops a line it cannot parse, and reads a request whose ``id`` is
``null``, an object or an array as a notification: either way the client waits forever
for an answer. JSON-RPC 2.0 wants ``-32700 Parse error`` for invalid JSON and
``-32600 Invalid Request`` for JSON that is not a valid request, carrying the request's
id whenever it can be read.

So each line is checked before the SDK parses it (:mod:`agentloom.server.protocol_envelope`);
a rejected line is answered here and never reaches the server. What still fails the
SDK's own parsing (a malformed response to one of our requests) is answered with
``id: null`` as before.

fd 0 is taken the way ``stdio_server()`` takes it when it reads stdin itself
(:func:`~agentloom.server.sdk_compat.claimed_stdin`), and the SDK's low-level server is run
exactly as ``MCPServer.run_stdio_async`` runs it, minus the error replies.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from mcp_types.jsonrpc import INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from agentloom.server.protocol_envelope import check_envelope, decode
from agentloom.server.sdk_compat import claimed_stdin, create_context_streams, lowlevel_server

log = logging.getLogger(__name__)


def error_for(exc: Exception) -> JSONRPCError:
    """The answer to a line the SDK itself could not parse (one that passed :func:`check_envelope`)."""
    invalid_json = isinstance(exc, ValidationError) and any(e["type"] == "json_invalid" for e in exc.errors())
    if invalid_json:
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message")
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)


class ScreenedLines:
    """The lines of stdin, minus those :func:`check_envelope` rejects (their answers go to ``rejected``)."""

    def __init__(self, lines: Any, rejected: MemoryObjectSendStream[JSONRPCError]) -> None:
        self._lines = lines
        self._rejected = rejected

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._rejected:
            async for line in self._lines:
                message, reply = decode(line)
                reply = reply or check_envelope(message)
                if reply is None:
                    yield line
                else:
                    await self._rejected.send(reply)
        client_gone()


EXIT_AFTER = 1.5  # seconds from the end of stdin to the end of the process, whatever still runs


def client_gone() -> None:
    """stdin ended: the client closed it or died. The SDK now cancels the running calls (each
    stops and undoes its work, see server/work.py) and the server returns; should anything keep
    the process alive past ``EXIT_AFTER`` (a call that cannot stop, a library's thread), it ends
    anyway, so a client that restarts its server never leaves one behind burning a core."""
    log.info("stdin closed (the client has gone): cancelling running calls; exiting within %.1f s", EXIT_AFTER)

    def leave() -> None:
        log.warning("still running %.1f s after stdin closed: exiting now", EXIT_AFTER)
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(EXIT_AFTER, leave)
    timer.daemon = True
    timer.start()


async def run_stdio(server: MCPServer) -> None:
    lowlevel = lowlevel_server(server)
    stdin, release = claimed_stdin()
    rejected_send, rejected = anyio.create_memory_object_stream[JSONRPCError](0)
    try:
        async with stdio_server(stdin=cast(Any, ScreenedLines(stdin, rejected_send))) as (read_stream, write_stream):
            # the stream type the SDK's own transports use
            forward, messages = create_context_streams[SessionMessage | Exception](0)

            async def answer_rejected() -> None:
                async with rejected:
                    async for reply in rejected:
                        log.warning("rejected a malformed message: %s", reply.error.message)
                        await write_stream.send(SessionMessage(reply))

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
                tg.start_soon(answer_rejected)
                tg.start_soon(answer_malformed)
                await lowlevel.run(messages, write_stream, lowlevel.create_initialization_options())
                tg.cancel_scope.cancel()
    finally:
        if release is not None:
            release()
