"""Every use of the MCP SDK's private parts, and nothing else.

The SDK (``mcp`` 2.3) may rename or drop any of these in a release without notice. Kept here,
an upgrade is checked by reading this one module (``tests/server/test_sdk_compat.py`` fails
on a private use anywhere else). Each function says what it reaches and what public API would
let it go.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared._context_streams import create_context_streams

__all__ = [
    "catalog_counts",
    "claimed_stdin",
    "connection_of",
    "create_context_streams",
    "lowlevel_server",
    "remove_request_handler",
    "serve_tool_input_schemas",
    "subscriptions_of",
]


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The request-handler registry behind an ``MCPServer`` (``MCPServer._lowlevel_server``).

    Needed to add ``logging/setLevel``, wrap ``prompts/get`` and the lifespan, serve the tool
    input schemas and run our own stdio loop; ``MCPServer`` has no public accessor for it."""
    return server._lowlevel_server


def remove_request_handler(server: MCPServer[Any], method: str) -> None:
    """Unregister a request handler (``Server._request_handlers``): the SDK has ``add_request_handler``
    and no way to remove one, and it derives the advertised capabilities from this registry."""
    lowlevel_server(server)._request_handlers.pop(method, None)


def catalog_counts(server: MCPServer[Any]) -> tuple[int, int]:
    """How many prompts and how many resources (templates included) are registered, without an event loop.

    ``MCPServer.list_prompts`` / ``list_resources`` are async and are called before the server runs;
    this reads ``MCPServer._prompt_manager`` / ``_resource_manager`` instead."""
    resources = server._resource_manager
    return len(server._prompt_manager.list_prompts()), len(resources.list_resources()) + len(resources.list_templates())


def subscriptions_of(server: MCPServer[Any]) -> SubscriptionBus:
    """The server's subscription bus (``MCPServer._subscriptions``), which a ``Context`` built for a
    call made in process (without a request) needs for ``ctx.notify_*``; the SDK passes the private
    attribute itself in ``MCPServer.call_tool``."""
    return server._subscriptions


def connection_of(session: ServerSession) -> Connection | None:
    """The per-client ``Connection`` a request arrived on (``ServerSession._connection``).

    The SDK's own ``Context`` has a public ``connection``, but request handlers and middleware are
    handed a ``ServerRequestContext`` without it (``ServerRunner._make_context``, marked TODO(L54)
    for the context rework). Client logging needs it to keep one level per connection, send on its
    standalone channel and forget it when it closes."""
    connection = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def claimed_stdin() -> tuple[Any, Callable[[], None] | None]:
    """Lines of the real stdin as an async iterable, with fd 0 pointed at /dev/null while serving
    (so a tool or child process reading stdin cannot steal protocol bytes), and the function that
    gives fd 0 back.

    ``stdio_server()`` claims fd 0 this way only when it reads stdin itself; passing our own
    reader (to answer malformed lines) skips it, so its helpers ``_claim_fd``,
    ``_open_stdin_diversion`` and ``_UnownedTextWrapper`` are used directly. Should they move,
    stdin is read in place, without the diversion."""
    try:
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _UnownedTextWrapper
    except ImportError:
        return anyio.wrap_file(sys.stdin), None
    buffer, release = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    return anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8", errors="replace")), release


def serve_tool_input_schemas(server: MCPServer[Any], lookup: Callable[[str], Mapping[str, Any] | None]) -> None:
    """Where the SDK finds a tool's input schema before any handler runs (``Mcp-Param-*`` header
    checks over streamable HTTP): ``MCPServer`` points it at its private tool manager, which our
    tools are not registered in."""
    lowlevel_server(server).get_tool_input_schema = lookup
